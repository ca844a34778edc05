"""Start one managed server (any engine), wait until it serves, stop it, tell how it is.

The server runs in its own process session; its output goes to a log file whose path is printed, and a
state file (:mod:`veracity.serving.state`) records it so later commands find and reuse it."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import httpx

from veracity.config import Settings
from veracity.errors import ServerError
from veracity.serving import process
from veracity.serving.engines import check_spec, get_engine
from veracity.serving.engines.base import ServingEngine
from veracity.serving.process import free_port, pid_alive, port_in_use, tail
from veracity.serving.spec import ServerSpec
from veracity.serving.state import DEFAULT_NAME, ServerState, read_state, state_path

Progress = Callable[[str], None]


def health(endpoint: str, timeout: float = 2.0) -> list[str] | None:
    """Model names served at ``endpoint``, or None when it does not answer."""
    base = endpoint.rstrip("/")
    base = base if base.endswith("/v1") else base + "/v1"
    try:
        resp = httpx.get(base + "/models", timeout=timeout)
        if resp.status_code != 200:
            return None
        return [m["id"] for m in resp.json().get("data", [])]
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        return None


# what a start-up failure's telling line means, and what to do about it
_STARTUP_CAUSES = (
    (("address already in use", "errno 98"), "the port is taken: pass another --port"),
    (("out of memory", "outofmemory", "cannot allocate memory", "memoryerror", "not enough memory",
      "no available memory for the cache blocks", "kv cache"),
     "not enough memory: lower --max-model-len or --kv-cache-gib, or serve a smaller model"),
    (("safetensor", "header too large", "invalid load key", "incomplete metadata", "config.json",
      "unrecognized model", "no such file or directory"),
     "the model's weights look broken or incomplete: prepare it again with `veracity models prepare NAME`"),
)


def _startup_advice(line: str, log: Path) -> str:
    text = (line + "\n" + tail(log, 200)).lower()
    for needles, advice in _STARTUP_CAUSES:
        if any(n in line.lower() for n in needles):
            return advice
    for needles, advice in _STARTUP_CAUSES:
        if any(n in text for n in needles):
            return advice
    return "read the log's last lines for the cause"


def say(message: str) -> None:
    print(f"veracity: {message}", file=sys.stderr, flush=True)


def start_server(settings: Settings, spec: ServerSpec, *, name: str = DEFAULT_NAME, timeout_s: float = 600.0,
                 progress: Progress | None = None) -> ServerState:
    """Launch the engine in the background, wait until it serves the model, write the state file."""
    engine = check_spec(spec)
    variant = engine.installed(settings)
    on_gpu = engine.on_gpu()
    state, proc = launch(settings, spec, name, engine, variant, on_gpu, progress)
    try:
        wait_ready(state, proc, timeout_s=timeout_s, progress=progress)
    except BaseException:
        process.terminate(proc.pid)
        state_path(settings, name).unlink(missing_ok=True)
        raise
    return state


def launch(settings: Settings, spec: ServerSpec, name: str, engine: ServingEngine, variant: str, on_gpu: bool,
           progress: Progress | None, *, env_extra: dict[str, str] | None = None, replica: int = 1,
           replicas: int = 1) -> tuple[ServerState, subprocess.Popen]:
    """Start one server process and write its state file (not waiting for it to be ready)."""
    existing = read_state(settings, name)
    if existing and pid_alive(existing.pid):
        raise ServerError(
            f"a managed server ({existing.model}) is already running at {existing.endpoint} (pid "
            f"{existing.pid})",
            hint="use it, or stop it first with `veracity serve --stop`",
        )
    if existing is not None:  # a dead server's state: end what it left behind (it may hold the port)
        left = orphans(existing)
        stop_server(settings, name)
        if left:
            (progress
             or say)(f"ended {len(left)} process(es) left behind by the dead server (pid {existing.pid})")
    model_path = engine.model_path(settings, spec.model)
    if port_in_use(spec.host, spec.port):
        raise ServerError(
            f"port {spec.port} on {spec.host} is in use",
            hint=f"pass another --port (e.g. --port {free_port(spec.host)}) or stop what listens there",
        )
    settings.run_dir.mkdir(parents=True, exist_ok=True)
    log_path = settings.run_dir / f"{name}.log"
    cmd = engine.command(settings, spec, model_path, on_gpu=on_gpu, bind=env_extra)
    env = engine.env(spec, on_gpu=on_gpu)
    env.update(env_extra or {})
    devices = next(iter((env_extra or {}).values()), None)
    with log_path.open("w") as log:
        log.write(f"# veracity: {' '.join(cmd)}\n")
        log.flush()
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                start_new_session=True)
    state = ServerState(name, proc.pid, spec.endpoint, spec.model, str(model_path), spec.port, str(log_path),
                        time.time(), cmd, variant, replica, replicas, devices, engine.name, spec.engine_why)
    state_path(settings, name).write_text(state.to_json())
    return state, proc


def wait_ready(state: ServerState, proc: subprocess.Popen | None, *, timeout_s: float,
               progress: Progress | None = None) -> None:
    t0 = time.time()
    log = Path(state.log_path)
    last_line = ""
    label = get_engine(state.engine).label
    while True:
        models = health(state.endpoint)
        if models is not None and state.model in models:
            return
        dead = proc.poll() is not None if proc is not None else not pid_alive(state.pid)
        if dead:
            line = process.last_error_line(log)
            raise ServerError(f"the {label} server exited during start-up: {line}",
                              hint=f"{_startup_advice(line, log)}; full log: {log}")
        if time.time() - t0 > timeout_s:
            raise ServerError(
                f"the {label} server did not become ready within {timeout_s:.0f}s (last log line: "
                f"{process.last_line(log)})",
                hint=f"a larger model may need --timeout; full log: {log}",
            )
        if progress is not None:
            lines = [ln for ln in tail(log, 3).splitlines() if ln.strip()]
            line = lines[-1][-100:] if lines else ""
            if line != last_line:
                progress(line)
                last_line = line
        time.sleep(1.0)


def stop_server(settings: Settings, name: str = DEFAULT_NAME) -> ServerState | None:
    """Stop the managed server: its whole process group (API server, engine core, workers), also when the
    API server already died and left the others behind; checks that none is left. Returns its state, or
    None when none was recorded."""
    state = read_state(settings, name)
    if state is None:
        return None
    process.terminate(state.pid)  # the group's id is the leader's pid (start_new_session)
    state_path(settings, name).unlink(missing_ok=True)
    # a llama-server's slot files (LLMClient.share_prefix; a prompt's KV cache, ~17 MB for the 1.5B)
    cmd = list(state.command or [])
    if "--slot-save-path" in cmd[:-1]:
        shutil.rmtree(cmd[cmd.index("--slot-save-path") + 1], ignore_errors=True)
    return state


def orphans(state: ServerState) -> list[int]:
    """Processes of a managed server's group that outlive its dead API server (engine core, workers)."""
    return [pid for pid in process.group_members(state.pid) if pid != state.pid]


def server_status(settings: Settings, name: str = DEFAULT_NAME) -> tuple[ServerState | None, str]:
    """(state, 'running' | 'starting' | 'dead' | 'stopped'); a dead server may have :func:`orphans`."""
    state = read_state(settings, name)
    if state is None:
        return None, "stopped"
    if not pid_alive(state.pid):
        return state, "dead"
    models = health(state.endpoint)
    return state, ("running" if models is not None and state.model in models else "starting")
