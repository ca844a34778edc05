"""The managed server that commands use when no endpoint is configured: found, reused, or started."""

from __future__ import annotations

from pathlib import Path

from veracity.config import Settings
from veracity.errors import ServerError
from veracity.models.registry import CPU_DEFAULT
from veracity.models.defaults import default_model
from veracity.serving.engine_choice import EngineChoice, choose_engine, require_vllm
from veracity.serving import launch
from veracity.serving.engines import get_engine
from veracity.serving.launch import Progress, orphans, say, server_status, stop_server, wait_ready
from veracity.serving.process import free_port, port_in_use
from veracity.serving.replicas import replica_statuses
from veracity.serving.spec import DEFAULT_PORT, ServerSpec
from veracity.serving.state import read_state


def ensure_endpoint(settings: Settings, model: str | None = None, *, progress: Progress | None = None,
                    timeout_s: float = 600.0, notify: Progress | None = None) -> tuple[str, str | None]:
    """The endpoint to use: the configured one, else the managed server (started if needed).

    Returns ``(endpoint_url, model_name_or_None)``. A configured endpoint is returned as is (the client
    checks it); the managed server is reused across invocations until ``veracity serve --stop``.
    """
    if settings.endpoint:
        return settings.endpoint, model or settings.model
    wanted = model or settings.model
    members = replica_statuses(settings)
    if len(members) > 1:  # a managed set (serve --replicas N): every live replica, one comma list
        live = [(s, st) for s, st in members if st in ("running", "starting")]
        if live:
            served = live[0][0].model
            if wanted is not None and wanted != served:
                raise ServerError(f"the managed servers serve {served}, not {wanted}",
                                  hint="stop them with `veracity serve --stop`, or pass --model " + served)
            dead = [s for s, st in members if st not in ("running", "starting")]
            if dead:
                (notify or say)(f"{len(dead)} of the {len(members)} managed replicas had died (ports "
                                 f"{', '.join(str(s.port) for s in dead)}); using the {len(live)} live "
                                 "one(s). `veracity serve --stop` then `serve --replicas N --detach` "
                                 "restarts the set")
            for s, st in live:
                if st == "starting":
                    wait_ready(s, None, timeout_s=timeout_s, progress=progress)
            return ",".join(s.endpoint for s, _ in live), served
        for s, _ in members:  # all dead: clear the set, then start the managed default below
            stop_server(settings, s.name)
    state, status = server_status(settings)
    if state is not None and status in ("running", "starting") and (wanted is None or wanted == state.model):
        if status == "starting":
            wait_ready(state, None, timeout_s=timeout_s, progress=progress)
        return state.endpoint, state.model
    if state is not None and status in ("running", "starting"):
        raise ServerError(
            f"the managed server serves {state.model}, not {wanted}",
            hint="stop it with `veracity serve --stop`, or pass --model " + state.model,
        )
    dead = state
    if dead is not None:  # dead: end what is left of it (engine core, workers hold memory and the port)
        left = orphans(dead)
        stop_server(settings)
    name = wanted or default_model(settings)
    choice = choose_engine(settings, name)
    engine = get_engine(choice.name)
    port = replacement_port(dead.port if dead is not None else None)
    if dead is None:  # which engine and why, before anything slow
        (notify
         or say)(f"starting a managed {engine.label} server for {name} ({choice.why}); `veracity serve "
                 "--stop` "
                        "stops it")
    # a replacement: on the dead one's port when it is free (else the port is named), and only for this run
    else:
        where = (f"on its port {port}" if port == dead.port else
                 f"on port {port} (its port {dead.port} is in use): http://127.0.0.1:{port}/v1")
        (notify or say)(f"the managed server ({dead.model}, pid {dead.pid}, port {dead.port}) had died"
                        + (f"; ended {len(left)} process(es) it left behind" if left else "")
                        + f"; starting a replacement {where} ({choice.line()}), stopped when this command "
                          "ends "
                        "(`veracity serve --detach` starts one that stays)")
    make_ready(settings, choice, name, say=notify or say, progress=progress)
    state = launch.start_server(settings, ServerSpec(model=name, engine=engine.name, port=port,
                                                     engine_why=choice.why),
                                timeout_s=timeout_s, progress=progress)
    if dead is not None:
        stop_with_this_process(settings, state)
    return state.endpoint, state.model


def replacement_port(dead_port: int | None) -> int:
    """The port of a new managed server: the dead one's (the port the user chose) when it is free, else the
    default port when free, else any free port."""
    for port in (dead_port, DEFAULT_PORT):
        if port and not port_in_use("127.0.0.1", port):
            return port
    return free_port()


def stop_with_this_process(settings: Settings, state) -> None:
    """Stop the server ``state`` names when this process exits (a replacement started by a command is that
    command's, not left running after it), unless the state file by then names another server."""
    def stop() -> None:
        current = read_state(settings, state.name)
        if current is not None and current.pid == state.pid:
            stop_server(settings, state.name)

    at_exit(stop)


def at_exit(fn) -> None:
    """Run ``fn`` when this process exits (atexit; a test replaces this to run it itself)."""
    import atexit

    atexit.register(fn)


def resolve_model_path_or_none(settings: Settings, name: str) -> Path | None:
    from veracity.models.prepare import prepared_path

    return prepared_path(settings, name)


def make_ready(settings: Settings, choice: EngineChoice, name: str, *, say: Progress,
               progress: Progress | None = None) -> None:
    """What ``choice`` needs before it serves ``name``, done now, each step said in one line first.

    llama.cpp: its GGUF (SmolLM2's fetched when nothing is prepared), and llama-server: a build running in
    the background is waited for; one missing is built now when the hardware rule chose llama.cpp (the
    user's own choice of a missing engine stays the one-line error naming the install command). vLLM: the
    safetensors model, converted from the GGUF now when the model was prepared for llama.cpp only."""
    from veracity.models.prepare import check_model_name, fetch_smollm2_gguf, kept_gguf, prepare_model
    from veracity.models.registry import MODELS
    from veracity.serving.engines.llamacpp import binary_missing
    from veracity.serving.engines import llamacpp_install

    check_model_name(settings, name)  # a mistyped name: "unknown model", not an engine's install command
    lines = progress or (lambda s: None)
    bar = bar_to_lines(lines)
    if choice.name == "llama.cpp":
        if (binary_missing(settings) and choice.by != "hardware"
                and not llamacpp_install.install_running(settings)):
            from veracity.serving.engines.llamacpp import LLAMA_CPP

            # the user's choice, missing: one line naming the install, before a download
            LLAMA_CPP.installed(settings)
        if name == CPU_DEFAULT and not kept_gguf(settings, MODELS[name]).is_file():  # no conversion
            say(f"no model is prepared: fetching the GGUF of {name}, the CPU default")
            fetch_smollm2_gguf(settings, lines)
        if binary_missing(settings) and llamacpp_install.install_running(settings):
            say("waiting for the llama-server build running in the background (its log: "
                f"{llamacpp_install.engine_dir(settings) / 'build.log'})")
            llamacpp_install.wait_for_install(settings, timeout_s=3600)
        if binary_missing(settings) and choice.by == "hardware":
            say("llama-server is not installed: building it now, once (a few minutes; `veracity engines "
                "install "
                "llama.cpp` does it ahead, `veracity engines default vllm` uses vLLM instead)")
            llamacpp_install.install_llamacpp(settings, bar=bar, progress=say)
        return
    require_vllm(choice)  # not installed: one line naming the pip command, before a conversion
    if resolve_model_path_or_none(settings, name) is not None:
        return
    if name == CPU_DEFAULT:
        say(f"no model is prepared for vLLM: preparing {name}, the CPU default (`veracity models prepare "
            "NAME` "
            "prepares another)")
    elif name in MODELS and kept_gguf(settings, MODELS[name]) is not None and \
            kept_gguf(settings, MODELS[name]).is_file():
        say(f"{name} is prepared for llama.cpp only (its GGUF): converting it for vLLM now, once "
            f"(`veracity models prepare {name} --engine vllm` does it ahead)")
    else:
        return  # not prepared at all: the engine's own one-line error names the prepare command
    prepare_model(settings, name, engine="vllm", progress=say, bar=bar)


def bar_to_lines(lines: Progress):
    """A progress bar callback that reports through a line callback: each step once, then every tenth."""
    last: dict[str, int] = {}

    def bar(step: str, done: float, total: float | None) -> None:
        tenth = int(10 * done / total) if total else -1
        if last.get(step) == tenth:
            return
        last[step] = tenth
        lines(f"{step}: {done:.0f} of {total:.0f}" if total else step)
    return bar
