"""A managed set of replicas (``veracity serve --replicas N``): N servers of one model on ports P .. P+N-1
(state files ``default.json``, ``default-2.json``, ...). On GPU each replica gets its own device group
(``CUDA_VISIBLE_DEVICES``: tensor- x pipeline-parallel-size devices); on CPU each gets an equal share of
the cores (the engine's :meth:`~veracity.serving.engines.base.ServingEngine.bind_cpus`), so that the replicas
do
not fight over the same cores. Every command then uses all of them through one client
(:mod:`veracity.serving.pool`)."""

from __future__ import annotations

import time
from dataclasses import asdict

from veracity.config import Settings
from veracity.errors import ConfigError, ServerError
from veracity.serving import hardware, process
from veracity.serving.engines import check_spec, get_engine
from veracity.serving.engines.base import ServingEngine
from veracity.serving.launch import Progress, launch, server_status, start_server, stop_server, wait_ready
from veracity.serving.process import port_in_use
from veracity.serving.spec import DEFAULT_PORT, ServerSpec
from veracity.serving.state import DEFAULT_NAME, ServerState, state_path


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
                  cpus: list[int] | None = None, engine: ServingEngine | None = None) -> list[dict[str, str]]:
    """The environment that gives each of ``n`` replicas its own devices.

    GPU: ``tensor x pipeline x data-parallel-size`` devices per replica, in order (a ConfigError when the
    machine has too few). CPU: the cores this process may use split into ``n`` equal groups, each bound
    by the engine (vLLM: ``VLLM_CPU_OMP_THREADS_BIND``; fewer cores than replicas: no binding; they share)."""
    engine = engine or get_engine(spec.engine)
    if on_gpu:
        per = spec.tensor_parallel_size * spec.pipeline_parallel_size * spec.data_parallel_size
        count = gpu_count if gpu_count is not None else hardware.gpu_count()
        if n * per > count:
            raise ConfigError(f"{n} replicas x {per} GPU(s) each need {n * per} GPUs; this machine has "
                              f"{count}",
                              hint=f"use --replicas {max(1, count // per)} or a smaller "
                                   "--tensor-parallel-size")
        return [{"CUDA_VISIBLE_DEVICES": ",".join(str(d) for d in range(i * per,
                                                                        (i + 1) * per))} for i in range(n)]
    cores = sorted(cpus if cpus is not None else hardware.usable_cpus())
    if n == 1 or len(cores) < n:
        return [{} for _ in range(n)]
    size = len(cores) // n
    return [engine.bind_cpus(cores[i * size:(i + 1) * size]) for i in range(n)]


def check_replica_ports(spec: ServerSpec, n: int) -> list[int]:
    """Ports ``spec.port`` .. ``+n-1``: all in range and free, else one ConfigError / ServerError."""
    ports = list(range(spec.port, spec.port + n))
    if ports[-1] > 65535:
        raise ConfigError(f"--replicas {n} from --port {spec.port} needs ports up to {ports[-1]}, past 65535",
                          hint=f"pass a lower --port, e.g. --port {DEFAULT_PORT}")
    busy = [p for p in ports if port_in_use(spec.host, p)]
    if busy:
        raise ServerError(f"port{'s' if len(busy) > 1 else ''} {', '.join(map(str, busy))} on {spec.host} "
                          f"{'are' if len(busy) > 1 else 'is'} in use (the {n} replicas take ports "
                          f"{ports[0]}-{ports[-1]})",
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
    check_spec(spec)
    running = [(s, st) for s, st in replica_statuses(settings) if st in ("running", "starting")]
    if running:
        s = running[0][0]
        raise ServerError(f"a managed server ({s.model}) is already running at {s.endpoint} (pid {s.pid})",
                          hint="use it, or stop the managed servers first with `veracity serve --stop`")
    for s, _ in replica_statuses(settings):  # dead ones: end what they left behind
        stop_server(settings, s.name)
    engine = get_engine(spec.engine)
    variant = engine.installed(settings)
    on_gpu = engine.on_gpu()
    groups = device_groups(n, spec, on_gpu=on_gpu, engine=engine)
    ports = check_replica_ports(spec, n)
    engine.model_path(settings, spec.model)
    launched = []
    try:
        for i, (port, env_extra) in enumerate(zip(ports, groups, strict=True), start=1):
            one = ServerSpec(**{**asdict(spec), "port": port})
            launched.append(launch(settings, one, replica_name(i), engine, variant, on_gpu, progress,
                                   env_extra=env_extra, replica=i, replicas=n))
        t0 = time.time()
        for state, proc in launched:
            say = (lambda line, r=state.replica: progress(f"replica {r}/{n}: {line}")) if progress else None
            wait_ready(state, proc, timeout_s=max(1.0, timeout_s - (time.time() - t0)), progress=say)
    except BaseException:
        for state, proc in launched:
            process.terminate_group(proc.pid)
            state_path(settings, state.name).unlink(missing_ok=True)
        raise
    return [state for state, _ in launched]


def stop_replicas(settings: Settings) -> list[ServerState]:
    """Stop every server of the managed set (see :func:`stop_server`); returns their states."""
    return [s for s in (stop_server(settings, name) for name in replica_names(settings)) if s is not None]
