"""`veracity serve`: start, inspect and stop the local vLLM server."""

from __future__ import annotations

import time

import click
from rich.table import Table

from veracity.cli._common import console, err_console, fail, print_json
from veracity.config import load_settings
from veracity.errors import ConfigError
from veracity.models.prepare import resolve_model_path
from veracity.serving.server import (
    DEFAULT_PORT,
    ServerSpec,
    cuda_available,
    default_model_for_hardware,
    orphans,
    pid_alive,
    read_state,
    server_status,
    start_server,
    stop_server,
)
from veracity.serving.structured import STRUCTURED_BACKENDS


@click.command("serve")
@click.option("--model", "model", default=None, help="Registry name of a prepared model (default: CPU "
              "smollm2-135m-instruct, GPU qwen2.5-7b-instruct).")
@click.option("--port", type=int, default=DEFAULT_PORT, show_default=True, help="Port to listen on.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind (keep loopback unless you "
              "mean to share the server).")
@click.option("--structured-backend", type=click.Choice(STRUCTURED_BACKENDS), default="xgrammar",
              show_default=True, help="vLLM's JSON-schema constrained-decoding backend.")
@click.option("--max-model-len", type=int, default=None, help="Context length (default: the model's, capped "
              "on CPU at the registry's cap: 8192, 4096 for the Qwen2.5-Coder models).")
@click.option("--gpu-memory-utilization", type=float, default=None, help="Fraction of GPU memory vLLM may "
              "take (GPU only).")
@click.option("--tensor-parallel-size", type=int, default=1, show_default=True, help="GPUs per replica (GPU only).")
@click.option("--pipeline-parallel-size", type=int, default=1, show_default=True, help="Pipeline stages (GPU only).")
@click.option("--data-parallel-size", type=int, default=1, show_default=True, help="Replicas behind one "
              "endpoint (GPU only).")
@click.option("--quantization", default=None, help="vLLM quantization: awq, fp8, bitsandbytes, gptq, ...")
@click.option("--dtype", default=None, help="Weights dtype (default: the registry's recommendation).")
@click.option("--kv-cache-gib", type=float, default=4.0, show_default=True, help="KV-cache space on CPU "
              "(VLLM_CPU_KVCACHE_SPACE).")
@click.option("--max-num-seqs", type=int, default=None, help="Most sequences the engine runs at once.")
@click.option("--detach", is_flag=True, help="Keep the server running in the background (state file + log).")
@click.option("--status", "show_status", is_flag=True, help="Show the managed server and exit.")
@click.option("--stop", "do_stop", is_flag=True, help="Stop the managed server and exit.")
@click.option("--timeout", type=float, default=600, show_default=True, help="Seconds to wait for start-up.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def serve(model, port, host, structured_backend, max_model_len, gpu_memory_utilization, tensor_parallel_size,
          pipeline_parallel_size, data_parallel_size, quantization, dtype, kv_cache_gib, max_num_seqs, detach,
          show_status, do_stop, timeout, as_json) -> None:
    """Start vLLM's OpenAI-compatible server on a prepared model and print its endpoint.

    Uses package vllm on a GPU and vllm-cpu on a CPU. With --detach the server keeps running; every
    veracity command then reuses it until `veracity serve --stop`.

    \b
    Examples:
      veracity serve --detach                         # CPU default model, background
      veracity serve --model qwen2.5-7b-instruct --gpu-memory-utilization 0.85
      veracity serve --model llama-3.1-70b-instruct --quantization awq --tensor-parallel-size 2
      veracity serve --status
      veracity serve --stop
    """
    settings = load_settings()
    if show_status:
        state, status = server_status(settings)
        left = orphans(state) if state is not None and status == "dead" else []
        if as_json:
            print_json({"status": status, **(state.__dict__ if state else {}), "orphans": left})
            return
        if state is None:
            console.print("no managed server (start one with `veracity serve --detach`)")
            return
        table = Table(show_header=False)
        for k, v in [("status", status), ("endpoint", state.endpoint), ("model", state.model),
                     ("pid", state.pid), ("vLLM", state.variant), ("log", state.log_path),
                     ("up for", f"{time.time() - state.started_at:.0f}s")]:
            table.add_row(k, str(v))
        console.print(table)
        if status == "dead" and left:
            err_console.print(f"the API server is gone but {len(left)} of its processes still run (pids "
                              f"{', '.join(map(str, left))}: vLLM's engine core / workers, holding memory); "
                              "`veracity serve --stop` ends them", highlight=False)
        elif status == "dead":
            err_console.print("the server process is gone; `veracity serve --stop` clears its state")
        return
    if do_stop:
        before = read_state(settings)
        left = ([before.pid] if pid_alive(before.pid) else []) + orphans(before) if before else []
        state = stop_server(settings)
        if state is None:
            console.print("no managed server was running")
        elif pid_alive(state.pid) or orphans(state):
            fail(f"processes of {state.model}'s server survived the stop", "end them with `kill -9`")
        else:
            console.print(f"stopped {state.model} at {state.endpoint} ({len(left)} processes ended)"
                          if left else f"cleared the state of the dead server ({state.model}); nothing was left "
                          "running", highlight=False)
        return

    # every flag and the model name are checked before torch is imported (to look for a GPU) or vLLM started
    spec = ServerSpec(
        model=model or "", port=port, host=host, structured_backend=structured_backend,
        max_model_len=max_model_len, gpu_memory_utilization=gpu_memory_utilization,
        tensor_parallel_size=tensor_parallel_size, pipeline_parallel_size=pipeline_parallel_size,
        data_parallel_size=data_parallel_size, quantization=quantization, dtype=dtype,
        cpu_kv_cache_gib=kv_cache_gib, max_num_seqs=max_num_seqs,
    )
    spec.validate()
    if not timeout > 0:
        raise ConfigError(f"--timeout must be more than 0 seconds, got {timeout:g}", hint="e.g. --timeout 600")
    if model:
        resolve_model_path(settings, model)  # unknown or not prepared: one line naming what to do
    on_gpu = cuda_available()
    if not on_gpu and (tensor_parallel_size > 1 or gpu_memory_utilization is not None):
        err_console.print("[yellow]note:[/] no GPU found: --tensor-parallel-size / --gpu-memory-utilization ignored")
    spec.model = model or default_model_for_hardware()
    with console.status(f"starting vLLM ({spec.model}) — takes a minute or two on CPU") as status:
        state = start_server(settings, spec, timeout_s=timeout,
                             progress=lambda line: status.update(f"starting vLLM ({spec.model}): {line}"))
    if as_json:
        print_json(state.__dict__)
    else:
        console.print(f"[green]ready[/] {state.model} at [bold]{state.endpoint}[/] (pid {state.pid})")
        console.print(f"log: {state.log_path}")
    if detach:
        if not as_json:
            console.print("running in the background; stop it with `veracity serve --stop`")
        return
    console.print("serving in the foreground; Ctrl-C stops it")
    try:
        while pid_alive(state.pid):
            time.sleep(1.0)
        stop_server(settings)  # the engine core and workers of the exited API server go with it
        fail(f"the server exited; see {state.log_path}", "start it again with `veracity serve`")
    except KeyboardInterrupt:
        stop_server(settings)
        console.print("stopped")


COMMANDS = [serve]
