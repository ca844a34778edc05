"""`veracity serve`: start, inspect and stop the local model server (vLLM or llama.cpp)."""

from __future__ import annotations

import time

import click
from rich.table import Table

from veracity.cli._common import console, err_console, fail, print_json
from veracity.config import load_settings
from veracity.errors import ConfigError
from veracity.models.defaults import default_model
from veracity.serving.server import (
    DEFAULT_PORT,
    ServerSpec,
    orphans,
    pid_alive,
    check_replica_ports,
    replica_statuses,
    start_replicas,
    stop_replicas,
)
from veracity.serving.structured import STRUCTURED_BACKENDS


@click.command("serve")
@click.option("--engine", "engine_name", type=click.Choice(["vllm", "llama.cpp"]), default=None,
              help="Serving engine (default: the one set with `veracity engines default` or "
                   "$VERACITY_ENGINE, else "
              "vLLM where a GPU is seen and llama.cpp on a CPU-only machine for a model with a GGUF). "
              "llama.cpp "
              "serves the model's GGUF as it is; `veracity engines install llama.cpp` installs it.")
@click.option("--model", "model", default=None, help="Registry name of a prepared model (default: CPU "
              "smollm2-135m-instruct, GPU qwen2.5-7b-instruct).")
@click.option("--port", type=int, default=DEFAULT_PORT, show_default=True, help="Port to listen on.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind (keep loopback unless you "
              "mean to share the server).")
@click.option("--structured-backend", type=click.Choice(STRUCTURED_BACKENDS), default="xgrammar",
              show_default=True, help="vLLM's JSON-schema constrained-decoding backend.")
@click.option("--max-model-len", type=int, default=None, help="Context length (default: the model's, capped "
              "on CPU at the registry's cap: 8192, 4096 for the Qwen2.5-Coder models).")
@click.option("--gpu-memory-utilization", type=float, default=None, help="Fraction of GPU memory vLLM may "
              "take (GPU only).")
@click.option("--tensor-parallel-size", type=int, default=1, show_default=True,
              help="GPUs per replica (GPU only).")
@click.option("--pipeline-parallel-size", type=int, default=1, show_default=True,
              help="Pipeline stages (GPU only).")
@click.option("--data-parallel-size", type=int, default=1, show_default=True, help="Replicas behind one "
              "endpoint (GPU only).")
@click.option("--quantization", default=None, help="vLLM quantization: awq, fp8, bitsandbytes, gptq, ...")
@click.option("--dtype", default=None, help="Weights dtype (default: the registry's recommendation).")
@click.option("--kv-cache-gib", type=float, default=4.0, show_default=True, help="KV-cache space on CPU "
              "(VLLM_CPU_KVCACHE_SPACE).")
@click.option("--max-num-seqs", type=int, default=None, help="Most sequences the engine runs at once.")
@click.option("--repeatable", is_flag=True, help="The same request gets the same reply every time, sampled "
              "runs (temperature > 0) included: one sequence at a time, every prompt read afresh (no "
              "prompt/prefix cache). Slower; for runs that must repeat word for word.")
@click.option("--replicas", type=int, default=1, show_default=True, help="Servers to start, on ports PORT .. "
              "PORT+N-1 (GPU: one per device group of --tensor-parallel-size GPUs; CPU: the cores split "
              "between "
              "them); every command then uses all of them.")
@click.option("--detach", is_flag=True, help="Keep the server running in the background (state file + log).")
@click.option("--status", "show_status", is_flag=True,
              help="Show the managed server and exit (status 1 when it is dead).")
@click.option("--stop", "do_stop", is_flag=True, help="Stop the managed server and exit.")
@click.option("--timeout", type=float, default=600, show_default=True, help="Seconds to wait for start-up.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def serve(engine_name, model, port, host, structured_backend, max_model_len, gpu_memory_utilization,
          tensor_parallel_size,
          pipeline_parallel_size, data_parallel_size, quantization, dtype, kv_cache_gib, max_num_seqs,
          repeatable, replicas,
          detach, show_status, do_stop, timeout, as_json) -> None:
    """Start a model server (vLLM, or llama.cpp's llama-server) on a prepared model and print its endpoint.

    vLLM: package vllm on a GPU and vllm-cpu on a CPU. --engine llama.cpp serves the model's GGUF as it
    is (threads and slots from the cores; `veracity engines install llama.cpp` first). With --detach the
    server keeps running; every
    veracity command then reuses it until `veracity serve --stop`. --replicas N starts N servers of the
    model (ports PORT .. PORT+N-1); commands spread their requests over all of them, --status and --stop
    cover the set. On GPU, vLLM's --data-parallel-size is the one-endpoint alternative (docs/deploy.md).

    \b
    Examples:
      veracity serve --detach                         # CPU default model, background
      veracity serve --engine llama.cpp --detach      # the same model's GGUF on llama.cpp
      veracity serve --model qwen2.5-7b-instruct --gpu-memory-utilization 0.85
      veracity serve --model llama-3.1-70b-instruct --quantization awq --tensor-parallel-size 2
      veracity serve --model qwen2.5-7b-instruct --replicas 4 --detach   # 4 GPUs, 4 endpoints
      veracity serve --status
      veracity serve --stop
    """
    settings = load_settings()
    if show_status:
        _show_status(settings, as_json)
        return
    if do_stop:
        _stop(settings)
        return

    # every flag and the model name are checked before torch is imported (to look for a GPU) or vLLM started
    from veracity.serving.engines import check_spec, get_engine

    from veracity.serving.engine_choice import choose_engine

    spec = ServerSpec(
        model=model or "", engine=engine_name or "vllm", port=port, host=host,
                      structured_backend=structured_backend,
        max_model_len=max_model_len, gpu_memory_utilization=gpu_memory_utilization,
        tensor_parallel_size=tensor_parallel_size, pipeline_parallel_size=pipeline_parallel_size,
        data_parallel_size=data_parallel_size, quantization=quantization, dtype=dtype,
        cpu_kv_cache_gib=kv_cache_gib, max_num_seqs=max_num_seqs, repeatable=repeatable,
    )
    check_spec(spec)
    if replicas < 1:
        raise ConfigError(f"--replicas must be at least 1, got {replicas}", hint="e.g. --replicas 2")
    if replicas > 1:
        check_replica_ports(spec, replicas)  # out of range or taken: before anything starts
    if not timeout > 0:
        raise ConfigError(f"--timeout must be more than 0 seconds, got {timeout:g}",
                          hint="e.g. --timeout 600")
    name = model or default_model(settings)
    choice = choose_engine(settings, name, engine_name, change="`--engine vllm`")
    engine = get_engine(choice.name)
    spec.engine, spec.engine_why = choice.name, choice.why
    err_console.print(choice.line(), highlight=False, markup=False)  # which engine and why: the first line
    from veracity.serving.managed import make_ready

    spec.model = name
    make_ready(settings, choice, name, say=lambda line: err_console.print(line, highlight=False,
                                                                          markup=False),
               progress=lambda line: err_console.print(f"  {line}", highlight=False, markup=False))
    engine.installed(settings)  # missing: one line naming the install command, before anything starts
    engine.model_path(settings, spec.model)  # unknown or not prepared: one line naming what to do
    on_gpu = engine.on_gpu()
    if not on_gpu and (tensor_parallel_size > 1 or gpu_memory_utilization is not None):
        err_console.print("[yellow]note:[/] no GPU found: --tensor-parallel-size / --gpu-memory-utilization "
                          "ignored")
    if engine.name != "vllm" and (quantization or dtype or structured_backend != "xgrammar" or kv_cache_gib
                                  != 4.0):
        err_console.print(f"[yellow]note:[/] {engine.label} serves the GGUF as it is: --quantization / "
                          "--dtype / "
                          "--structured-backend / --kv-cache-gib are vLLM's and ignored")
    what = f"{replicas} {engine.label} servers" if replicas > 1 else engine.label
    with console.status(f"starting {what} ({spec.model}) — takes a minute or two on CPU") as status:
        states = start_replicas(settings, spec, replicas, timeout_s=timeout,
                                progress=lambda line: status.update(
                                    f"starting {what} ({spec.model}): {line}"))
    if as_json:
        print_json(states[0].__dict__ if replicas == 1 else
                   {"endpoint": ",".join(st.endpoint for st in states),
                    "replicas": [st.__dict__ for st in states]})
    else:
        for state in states:
            on = f" on {state.devices}" if state.devices else ""
            console.print(f"[green]ready[/] {state.model} at [bold]{state.endpoint}[/] (pid {state.pid}{on})")
            console.print(f"log: {state.log_path}")
        if replicas > 1:
            console.print(f"endpoints: {','.join(st.endpoint for st in states)} (every command uses all of "
                          "them)",
                          highlight=False)
    if detach:
        if not as_json:
            console.print("running in the background; stop " + ("them" if replicas > 1 else "it")
                          + " with `veracity serve --stop`")
        return
    console.print("serving in the foreground; Ctrl-C stops " + ("them" if replicas > 1 else "it"))
    try:
        while all(pid_alive(state.pid) for state in states):
            time.sleep(1.0)
        gone = next(state for state in states if not pid_alive(state.pid))
        stop_replicas(settings)  # the engine core and workers of the exited API server go with it
        fail(f"the server at {gone.endpoint} exited; see {gone.log_path}",
             "start it again with `veracity serve`")
    except KeyboardInterrupt:
        stop_replicas(settings)
        console.print("stopped")


def _show_status(settings, as_json: bool) -> None:
    """--status: the managed server, or every replica of the managed set; exits 1 when one of them is dead
    (0: running, starting, or none recorded)."""
    members = replica_statuses(settings)
    rows = [(state, status, orphans(state) if status == "dead" else []) for state, status in members]
    if as_json:
        if len(rows) <= 1:
            state, status, left = rows[0] if rows else (None, "stopped", [])
            extra = {}
            if state is None:  # what a start would run, and why
                from veracity.serving.engine_choice import choose_engine

                choice = choose_engine(settings, change="`--engine vllm`")
                extra = {"engine": choice.name, "engine_why": choice.why}
            print_json({"status": status, **(state.__dict__ if state else extra),
                        **({"repeatable": state.repeatable} if state else {}), "orphans": left})
        else:
            print_json({"status": _overall([st for _, st, _ in rows]),
                        "endpoint": ",".join(s.endpoint for s, st, _ in rows if st in ("running",
                                                                                       "starting")),
                        "replicas": [{"status": st, **s.__dict__, "repeatable": s.repeatable, "orphans": left}
                                     for s, st, left in rows]})
        if any(status == "dead" for _, status, _ in rows):
            raise SystemExit(1)
        return
    if not rows:
        from veracity.serving.engine_choice import choose_engine

        choice = choose_engine(settings, change="`--engine vllm`")
        console.print(f"no managed server (start one with `veracity serve --detach`: {choice.line()})",
                      highlight=False, markup=False)
        return
    for state, status, left in rows:
        table = Table(show_header=False,
                      title=(f"replica {state.replica} of {len(rows)}" if len(rows) > 1 else None))
        for k, v in [("status", status), ("endpoint", state.endpoint), ("model", state.model),
                     ("pid", state.pid),
                     ("engine", f"{state.variant}" + (f" ({state.engine_why})" if state.engine_why else "")),
                     ("log", state.log_path),
                     *([("repeatable", "yes: one sequence at a time, no prompt cache")] if state.repeatable
                       else []),
                     ("up for", f"{time.time() - state.started_at:.0f}s")] + (
                         [("devices", state.devices)] if state.devices else []):
            table.add_row(k, str(v))
        console.print(table)
        if status == "dead" and left:
            err_console.print(f"the API server is gone but {len(left)} of its processes still run (pids "
                              f"{', '.join(map(str, left))}: vLLM's engine core / workers, holding memory); "
                              "`veracity serve --stop` ends them", highlight=False)
        elif status == "dead":
            err_console.print("the server process is gone; `veracity serve --stop` clears its state")
    if any(status == "dead" for _, status, _ in rows):
        raise SystemExit(1)  # a script asking whether the server is up gets "no" from the exit status


def _overall(statuses: list[str]) -> str:
    if all(st == "running" for st in statuses):
        return "running"
    if any(st in ("running", "starting") for st in statuses):
        return "degraded" if "dead" in statuses else "starting"
    return "dead"


def _stop(settings) -> None:
    """--stop: every server of the managed set, each with its engine core and workers."""
    before = replica_statuses(settings)
    left = {s.name: ([s.pid] if pid_alive(s.pid) else []) + orphans(s) for s, _ in before}
    stopped = stop_replicas(settings)
    if not stopped:
        console.print("no managed server was running")
        return
    survivors = [s for s in stopped if pid_alive(s.pid) or orphans(s)]
    if survivors:
        fail(f"processes of {survivors[0].model}'s server at {survivors[0].endpoint} survived the stop",
             "end them with `kill -9`")
    for state in stopped:
        n = len(left.get(state.name, []))
        console.print(f"stopped {state.model} at {state.endpoint} ({n} processes ended)"
                      if n else f"cleared the state of the dead server ({state.model}); nothing was left "
                      "running", highlight=False)


COMMANDS = [serve]
