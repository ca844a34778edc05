"""The Ray backend of a batch (``verify -i ... --backend ray``, ``bench run --backend ray``).

The local backend (:mod:`veracity.pipeline.backends.local`) keeps ``concurrency`` claims in flight in one
process. This one runs the same claims as a Ray Data pipeline, so a batch can use the cores (and nodes) of a
Ray cluster. Both are called by :func:`veracity.pipeline.batch.run_batch`, which has already made every check
that needs no server (method, parameters, label space, evidence, claims file, results file), read the ids
already written (resume) and opened the one results writer (:class:`~veracity.pipeline.results.ResultSink`).

- **Driver** (this process, :func:`run`): the model endpoint first (it must answer and serve the model: the
  resolved model name goes to every actor), then Ray (:func:`connect`: a local instance, ``--ray-address
  auto`` for the running cluster, or ``HOST:PORT``; an address that does not answer is one
  :class:`~veracity.errors.ClusterError` line, before anything is written); then the sink writes the run
  manifest and a dataset of the pending claims is built, one row and one block per claim.
- **Actors** (:class:`ClaimActor`): ``map_batches`` over a fixed pool of ``--ray-actors`` async actors.
  Each builds its :class:`~veracity.pipeline.engine.Engine` once from the run's config (so it opens the
  index once, holds one LLM client on the endpoint the driver resolved, and opens the method's run state
  once) and runs the per-claim path (:meth:`Engine.verify <veracity.pipeline.engine.Engine.verify>`) on
  each claim it is handed, ``--concurrency`` claims in flight per actor. It returns the result line (or why
  the claim failed); it never writes.
- **Results** stream back to the driver in completion order and go through the same sink as the local
  backend's (:func:`collect`): an id already written is never written again, so a task Ray re-ran after a
  worker died cannot duplicate a line. Killing the driver leaves whole lines only; the same command resumes.

As in the local backend, a failed claim is listed and not written (a rerun retries it), and an endpoint
that stops answering (``EndpointError``) or a results file that cannot be written (``OutputError``) stops
the run with ``err.stats`` attached; a pipeline that fails on the cluster's side is a ``ClusterError``,
with what was written kept.

Ray's own output stays out of the user's terminal (no dashboard, worker logs not forwarded, Ray Data's
progress bars and execution banners off); the progress bar and the summary are the local backend's.
Determinism: vLLM's continuous batching is not batch-invariant, so at temperature 0 a claim's replies can
differ with the other requests in flight; the two backends give equal results on equal claims when both
keep one claim in flight (``--concurrency 1 --ray-actors 1``), which is how the integration test compares
them.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import re
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from veracity.errors import ClusterError, EndpointError, OutputError, VeracityError
from veracity.pipeline.config import DEFAULT_RAY_ACTORS, require_ray
from veracity.pipeline.engine import Engine
from veracity.pipeline.results import (ResultSink, RunStats, ServedModel, claim_failure)
from veracity.pipeline.types import Claim

LOCAL_OBJECT_STORE_BYTES = 256 * 1024**2  # claims and results are small; keeps /dev/shm use low
CONNECT_TIMEOUT_S = 5.0
RAY_LOG = "ray-driver.log"  # under $VERACITY_HOME/run: what Ray's own parts print while a batch runs

# what an actor returns per claim (``kind``): a result line, a failed claim, or an endpoint that stopped
OK, FAILED, ENDPOINT = "ok", "failed", "endpoint"


# -- options ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RayOptions:
    """Where and how wide the Ray pipeline runs."""

    address: str | None = None  # None: start a local Ray instance; "auto": the running cluster; HOST:PORT
    actors: int = DEFAULT_RAY_ACTORS  # actors in the pool (each opens the index once)
    num_cpus: int | None = None  # CPUs of a local instance (None: all of this machine's)


# -- the cluster ----------------------------------------------------------------------------------------
def _quiet_data_context(ray: Any) -> None:
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    ctx.enable_operator_progress_bars = False
    ctx.print_on_execution_start = False
    ctx.verbose_stats_logs = False
    for name in ("ray", "ray.data", "ray.serve"):
        logging.getLogger(name).setLevel(logging.ERROR)


def _probe(address: str) -> None:
    """A TCP connect to the head node, so a wrong address fails in seconds (ray.init retries for long)."""
    if address == "auto":
        return
    rest = address.removeprefix("ray://")
    host, sep, port = rest.rpartition(":")
    if not sep:
        host, port = rest, "10001"
    try:
        with socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S):
            pass
    except OSError as exc:
        raise ClusterError(f"cannot reach the Ray cluster at {address} "
                           f"({exc.strerror or type(exc).__name__})",
                           hint="start its head node (`ray start --head`), check --ray-address, or leave it "
                                "out to start a local Ray instance") from None


@contextlib.contextmanager
def ray_output_to(log_path: Path) -> Iterator[None]:
    """Send what is written to file descriptor 2 meanwhile to ``log_path``: Ray's C++ parts write there
    directly (a warning for every actor pool Ray Data creates, a line a second while an address is retried),
    and the processes of a local Ray instance inherit it. Python's ``sys.stderr`` (the progress bar, the
    CLI's messages) keeps writing to the terminal through a copy of the descriptor."""
    import sys

    log_path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(Exception):
        sys.stderr.flush()
    try:
        swap = sys.stderr.fileno() == 2  # not under a capturing stand-in (tests)
    except (AttributeError, OSError, ValueError):
        swap = False
    saved = os.dup(2)
    old = sys.stderr
    if swap:
        sys.stderr = os.fdopen(os.dup(saved), "w", buffering=1, encoding=old.encoding, errors=old.errors)
    with open(log_path, "ab") as log:
        os.dup2(log.fileno(), 2)
    try:
        yield
    finally:
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        if swap:
            with contextlib.suppress(Exception):
                sys.stderr.close()
            sys.stderr = old


@contextlib.contextmanager
def ray_messages_to_log() -> Iterator[None]:
    """Ray's driver prints the errors its raylets publish (an actor's traceback, a task retried) on
    ``sys.stdout``, where ``--json`` writes the results; meanwhile they go to descriptor 2 instead (the Ray
    log file under :func:`ray_output_to`). Ray prints them through ``ray._private.worker.print_to_stdstream``,
    looked up at each call; a Ray without it is left alone."""
    try:
        from ray._private import worker as ray_worker
    except ImportError:
        yield
        return
    original = getattr(ray_worker, "print_to_stdstream", None)
    if original is None:
        yield
        return

    def to_log(data: dict[str, Any], ignore_prefix: bool = False) -> None:
        text = "".join(f"({data.get('pid', 'ray')}) {line}\n" for line in data.get("lines") or [])
        with contextlib.suppress(OSError):
            os.write(2, text.encode("utf-8", "replace"))

    ray_worker.print_to_stdstream = to_log
    try:
        yield
    finally:
        ray_worker.print_to_stdstream = original


def connect(options: RayOptions) -> bool:
    """Connect to (or start) Ray; True when this call started it (the caller shuts it down). Ray already
    initialised in this process (e.g. ``ray.init(num_cpus=2)`` by the caller) is used as it is."""
    ray = require_ray()
    _quiet_data_context(ray)
    if ray.is_initialized():
        return False
    kwargs: dict[str, Any] = dict(include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    if options.address is not None:
        _probe(options.address)
        kwargs["address"] = options.address
    else:
        kwargs.update(num_cpus=options.num_cpus, object_store_memory=LOCAL_OBJECT_STORE_BYTES)
    from veracity.indexes.java import jvm_signals_kept

    try:
        if options.address is None:  # a local instance: its head asks no cloud metadata service (offline.py)
            from veracity.config import default_home
            from veracity.offline import local_ray_start

            with local_ray_start(default_home()), jvm_signals_kept():
                ray.init(**kwargs)
        else:
            with jvm_signals_kept():
                ray.init(**kwargs)
    except Exception as exc:  # ConnectionError, RuntimeError, ...: one line whatever Ray raised
        where = ("find a running Ray cluster (--ray-address auto)" if options.address == "auto" else
                 f"join the Ray cluster at {options.address}" if options.address
                 else "start a local Ray instance")
        hint = ("start one with `ray start --head`, or leave --ray-address out to start a local Ray instance"
                if options.address == "auto" else
                "check --ray-address and that the cluster runs the same Ray version" if options.address else
                "see `ray status`; add --debug for Ray's error")
        raise ClusterError(f"cannot {where}: {' '.join(str(exc).split())[:300]}", hint=hint) from exc
    _quiet_data_context(ray)
    return True


def actor_cpus(total_cpus: float, actors: int) -> float:
    """CPUs each actor reserves: one, or an equal share when the cluster has fewer CPUs than actors (the
    actors mostly wait on the model server, so they may share a core)."""
    if total_cpus <= 0:
        raise ClusterError("the Ray cluster has no CPUs to run actors on", hint="check `ray status`")
    return min(1.0, total_cpus / actors)


# -- the actors -----------------------------------------------------------------------------------------
def claim_payload(claim: Claim) -> str:
    return json.dumps(dataclasses.asdict(claim), ensure_ascii=False, default=str)


def claim_of(payload: str) -> Claim:
    d = json.loads(payload)
    return Claim(id=str(d["id"]), text=d["text"], date=d.get("date"), meta=dict(d.get("meta") or {}))


def actor_recipe(engine: Any, endpoint: str | None, model: str | None) -> dict[str, Any]:
    """What an actor builds its engine from (picklable): the run's config with the endpoint string and the
    model the driver resolved and the index directory the driver opened, plus a stand-in LLM (tests) and a
    custom per-claim retriever when the caller gave one."""
    engine = getattr(engine, "engine", engine)  # a Verifier: its engine
    searcher = engine.searcher
    index = getattr(searcher, "index_dir", None) if searcher is not None else None
    config = engine.config.replace(endpoint=endpoint, model=model,
                                   # a stand-in travels as is
                                   index=str(index) if index is not None else searcher)
    custom = engine.evidence not in ("open", "gold", "none")
    return {"config": config, "llm": engine.stand_in,
            "retriever_for": engine.retriever_for if custom else None}


class ClaimActor:
    """One actor of the pool: its :class:`Engine` (index, LLM client, run state) is built once from the run's
    config; ``__call__`` verifies a batch of claims concurrently and returns one row per claim (id, kind,
    record or error)."""

    def __init__(self, recipe: dict[str, Any]):
        self.engine = Engine(recipe["config"], llm=recipe["llm"], retriever_for=recipe["retriever_for"])
        self.state = self.engine.state()  # the method's run state, once per actor
        self._llm: Any = None
        self._stack: contextlib.AsyncExitStack | None = None
        self._lock: asyncio.Lock | None = None

    async def _client(self) -> Any:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._llm is None:
                stack = contextlib.AsyncExitStack()
                self._llm = await stack.enter_async_context(self.engine.client())
                self._stack = stack
        return self._llm

    async def verify_payload(self, payload: str) -> dict[str, str]:
        """One claim (JSON) -> {"id", "kind", "record", "error"}; never raises for the claim's own failure."""
        claim = claim_of(payload)
        try:
            llm = await self._client()
            verdict = await self.engine.verify(claim, llm)
        except EndpointError as exc:
            return {"id": claim.id, "kind": ENDPOINT, "record": "", "error": str(exc), "hint": exc.hint or ""}
        except Exception as exc:  # as the local backend: the claim is listed as failed, the batch goes on
            return {"id": claim.id, "kind": FAILED, "record": "", "error": claim_failure(exc), "hint": ""}
        record = json.dumps(verdict.to_dict(claim), ensure_ascii=False, default=str)
        return {"id": claim.id, "kind": OK, "record": record, "error": "", "hint": ""}

    async def __call__(self, batch: dict[str, Any]) -> dict[str, list[str]]:
        rows = await asyncio.gather(*(self.verify_payload(str(p)) for p in batch["claim"]))
        return {key: [r[key] for r in rows] for key in ("id", "kind", "record", "error", "hint")}

    async def aclose(self) -> None:
        if self._stack is not None:
            await self._stack.aclose()
            self._stack = None
            self._llm = None
        self.engine.close()


# -- the driver -----------------------------------------------------------------------------------------
def collect(rows: Iterable[dict[str, Any]], sink: ResultSink) -> EndpointError | OutputError | None:
    """Hand the rows the actors stream back to the sink, as they come: a result once per id, a failure
    listed. Returns the error that stops the run (the endpoint stopped answering, or the results cannot be
    written), else None when the rows ran out."""
    for row in rows:
        kind = str(row["kind"])
        if kind == ENDPOINT:
            return EndpointError(str(row["error"]), hint=str(row.get("hint") or "") or None)
        if kind != OK:
            sink.reject(str(row["id"]), str(row["error"]))
            continue
        try:
            sink.accept(json.loads(str(row["record"])))
        except OutputError as exc:
            return exc
    return None


def served_model(engine: Engine) -> ServedModel:
    """The endpoint string and model the actors use: the endpoint must answer and serve the model (one
    EndpointError line otherwise, before Ray starts)."""
    s = engine.settings
    if engine.stand_in is not None:
        llm = engine.stand_in
        return ServedModel(getattr(llm, "model", None), None, getattr(llm, "temperature", s.temperature),
                           getattr(llm, "seed", s.seed))
    url, model = engine.resolve_endpoint()

    async def check() -> str | None:
        async with engine.client(1) as llm:
            return getattr(llm, "model", None) or model

    return ServedModel(asyncio.run(check()), url, s.temperature, s.seed)


def _pipeline_rows(ray: Any, claims: list[Claim], recipe: dict[str, Any], options: RayOptions,
                   concurrency: int) -> Iterator[dict[str, Any]]:
    from ray.data import ActorPoolStrategy

    cpus = actor_cpus(float(ray.cluster_resources().get("CPU", 0)), options.actors)
    items = [{"id": c.id, "claim": claim_payload(c)} for c in claims]
    # one block per claim: none waits on another
    ds = ray.data.from_items(items, override_num_blocks=len(items))
    ds = ds.map_batches(
        ClaimActor, fn_constructor_kwargs={"recipe": recipe}, batch_size=1,
        compute=ActorPoolStrategy(size=min(options.actors, len(items)),
                                  max_concurrent_calls_per_actor=concurrency,
                                  max_tasks_in_flight_per_actor=concurrency),
        num_cpus=cpus)
    yield from ds.iter_rows()


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_ACTOR_ERROR = re.compile(r"veracity\.errors\.(\w+): ([^\n]+)")


def _cluster_failure(exc: BaseException, log_path: Path | None = None) -> VeracityError:
    """A failure inside the Ray pipeline as one line: a VeracityError an actor raised (e.g. building its
    Verifier on a node without the index) as that error, anything else as a ClusterError."""
    import veracity.errors as errors

    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, VeracityError):
            return e
        cause = getattr(e, "cause", None)  # Ray's RayTaskError keeps the actor's exception there
        e = cause if isinstance(cause, BaseException) else (e.__cause__ or e.__context__)
    text = _ANSI.sub("", str(exc))
    found = _ACTOR_ERROR.search(text)  # an actor's error that Ray passes on as text only (ActorDiedError)
    kind = getattr(errors, found.group(1), None) if found else None
    if found and isinstance(kind, type) and issubclass(kind, VeracityError):
        return kind(f"on a Ray actor: {found.group(2).strip()}",
                    hint="every node needs veracity, the index at the driver's path and the model endpoint "
                         "within "
                         "reach; then run the same command again to resume")
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return ClusterError(f"the Ray pipeline failed: {type(exc).__name__}: {first[:300]}",
                        hint="run the same command again to resume; add --debug for Ray's traceback"
                             + (f" (Ray's own output: {log_path})" if log_path is not None else ""))


def run(engine: Engine, pending: list[Claim], sink: ResultSink, concurrency: int, *,
        rows: Callable[..., Iterable[dict[str, Any]]] | None = None) -> RunStats:
    """The claims as a Ray Data pipeline; ``concurrency`` claims in flight per actor. The endpoint is checked
    first, then Ray (:func:`connect`: a ClusterError before anything is written), then the manifest is
    written and the results stream into the sink. ``rows`` replaces the Ray pipeline (a callable
    ``(claims, recipe, options, concurrency) -> rows``; tests)."""
    config = engine.config
    ex, settings = config.execution, config.settings
    options = RayOptions(address=ex.ray_address, actors=ex.ray_actors or DEFAULT_RAY_ACTORS)
    stats = sink.stats
    if not pending:
        sink.open(ServedModel(config.endpoint.model, config.endpoint.url, settings.temperature,
                              settings.seed))
        return stats
    served = served_model(engine)
    with contextlib.ExitStack() as stack:
        owned = False
        log_path = Path(engine.settings.run_dir) / RAY_LOG
        if rows is None:
            stack.enter_context(ray_output_to(log_path))  # Ray's own output: a file, not the terminal
            stack.enter_context(ray_messages_to_log())  # and not stdout either
            try:
                owned = connect(options)  # a ClusterError before anything is written
            except ClusterError as exc:
                exc.hint = f"{exc.hint} (Ray's own output: {log_path})"
                raise
        stack.callback(_shutdown, owned)
        sink.open(served)
        recipe = actor_recipe(engine, served.endpoint, served.model)
        stream: Iterable[dict[str, Any]] = ()
        stop: VeracityError | None = None
        try:
            if rows is None:
                import ray

                stream = _pipeline_rows(ray, pending, recipe, options, concurrency)
            else:
                stream = rows(pending, recipe, options, concurrency)
            stop = collect(stream, sink)
        except (KeyboardInterrupt, VeracityError):
            raise
        except Exception as exc:  # Ray's errors: one line, what was written is kept
            stop = _cluster_failure(exc, log_path)
        finally:
            close = getattr(stream, "close", None)
            if callable(close):
                with contextlib.suppress(Exception):
                    close()  # stops the pipeline's executor when the run stops early
        if stop is not None:
            raise stop
    return stats


def _shutdown(owned: bool) -> None:
    if owned:
        import ray

        from veracity.indexes.java import jvm_signals_kept

        with contextlib.suppress(Exception), jvm_signals_kept():
            ray.shutdown()


__all__ = ["run", "served_model", "ClaimActor", "RayOptions", "collect", "connect"]
