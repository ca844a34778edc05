"""The Ray backend of a batch (``verify -i ... --backend ray``, ``bench run --backend ray``).

The local backend (:func:`veracity.pipeline.runner.run_claims`) keeps ``concurrency`` claims in flight in
one process. This one runs the same claims as a Ray Data pipeline, so a batch can use the cores (and
nodes) of a Ray cluster:

- **Driver** (this process, :func:`verify_many_ray`): every check of the local backend first (method,
  parameters, label space, evidence, claims file, results file: :meth:`Verifier.prepare_many`), then the
  model endpoint (it must answer and serve the model: the resolved model name goes to every actor), then
  Ray (:func:`connect`: a local instance, ``--ray-address auto`` for the running cluster, or
  ``HOST:PORT``; an address that does not answer is one :class:`~veracity.errors.ClusterError` line,
  before anything is written). It reads the ids already in the results file (the local backend's
  :func:`~veracity.pipeline.runner.read_done_ids`, which also cuts a torn last line), writes the run
  manifest, and builds a dataset of the remaining claims, one row and one block per claim.
- **Actors** (:class:`ClaimActor`): ``map_batches`` over a fixed pool of ``--ray-actors`` async actors.
  Each builds its :class:`~veracity.pipeline.api.Verifier` once (so it opens the index once, holds one LLM
  client on the endpoint string the driver was given, and opens the method's run state once) and runs the
  unchanged per-claim method (:func:`~veracity.pipeline.runner.verify_one`) on each claim it is handed,
  ``--concurrency`` claims in flight per actor. It returns the result line (or why the claim failed); it
  never writes.
- **Results** stream back to the driver in completion order and are written there by
  :class:`KeyedResultWriter`: the local backend's :class:`~veracity.pipeline.runner.ResultWriter` (one
  write + fsync per line) keyed by claim id. An id already in the file is never run again (resume) and a
  result whose id was already written (a task Ray re-ran after a worker died) is dropped, so a duplicate
  can never be written. Killing the driver leaves whole lines only; the same command resumes.

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
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from veracity.errors import ClusterError, ConfigError, EndpointError, OutputError, VeracityError
from veracity.pipeline.runner import (ResultWriter, RunStats, _Progress, claim_failure, read_done_ids, verify_one,
                                      write_run_manifest)
from veracity.pipeline.types import Claim

BACKENDS = ("local", "ray")
DEFAULT_ACTORS = 2
RAY_EXTRA = "veracity[ray]"
RAY_HINT = "pip install 'veracity[ray]' (Ray Data 2.60 or newer), or use --backend local"
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
    actors: int = DEFAULT_ACTORS  # actors in the pool (each opens the index once)
    num_cpus: int | None = None  # CPUs of a local instance (None: all of this machine's)


def require_ray() -> Any:
    """The ``ray`` module (with Ray Data), or a one-line ConfigError naming the extra."""
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError as exc:
        raise ConfigError(f"--backend ray needs the optional extra {RAY_EXTRA}, which is not installed "
                          f"({exc.name or exc})", hint=RAY_HINT) from None
    return ray


def check_address(address: str) -> str:
    """``auto``, ``HOST:PORT`` or ``ray://HOST[:PORT]`` as given, else a one-line ConfigError."""
    text = address.strip()
    if text == "auto":
        return text
    rest = text.removeprefix("ray://")
    host, sep, port = rest.rpartition(":")
    if text.startswith("ray://") and not sep:
        host, port = rest, "10001"
    problem = None
    if not host or any(c.isspace() for c in text) or "/" in rest:
        problem = "no host name" if not host else "not HOST:PORT"
    elif not port.isdigit() or not 0 < int(port) < 65536:
        problem = f"port {port!r} is not a number from 1 to 65535"
    if problem:
        raise ConfigError(f"--ray-address {address!r} is not a Ray address: {problem}",
                          hint="use auto (the cluster `ray start` runs on this machine), HOST:PORT of the head "
                               "node (e.g. 10.0.0.5:6379), or leave it out to start a local Ray instance")
    return text


def ray_options(backend: str | None, address: str | None = None, actors: int | None = None,
                num_cpus: int | None = None) -> tuple[str, RayOptions | None]:
    """(backend, its Ray options): ``local`` (None) or ``ray``; a bad combination is one ConfigError line,
    and ``ray`` without the extra installed is one line naming it. Checked before any index or server."""
    name = str(backend or "local").strip().lower()
    if name not in BACKENDS:
        raise ConfigError(f"unknown backend {backend!r}", hint="use --backend local (the default) or --backend ray")
    if name == "local":
        given = [flag for flag, v in (("--ray-address", address), ("--ray-actors", actors)) if v is not None]
        if given:
            raise ConfigError(f"{' and '.join(given)} {'apply' if len(given) > 1 else 'applies'} to --backend ray only",
                              hint="add --backend ray, or drop " + " and ".join(given))
        return name, None
    if actors is not None and (isinstance(actors, bool) or not isinstance(actors, int) or actors < 1):
        raise ConfigError(f"--ray-actors must be an integer of at least 1, got {actors!r}",
                          hint=f"e.g. --ray-actors {DEFAULT_ACTORS}")
    addr = check_address(address) if address is not None and str(address).strip() else None
    require_ray()
    return name, RayOptions(address=addr, actors=actors or DEFAULT_ACTORS, num_cpus=num_cpus)


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
        raise ClusterError(f"cannot reach the Ray cluster at {address} ({exc.strerror or type(exc).__name__})",
                           hint="start its head node (`ray start --head`), check --ray-address, or leave it out "
                                "to start a local Ray instance") from None


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
    try:
        ray.init(**kwargs)
    except Exception as exc:  # ConnectionError, RuntimeError, ...: one line whatever Ray raised
        where = ("find a running Ray cluster (--ray-address auto)" if options.address == "auto" else
                 f"join the Ray cluster at {options.address}" if options.address else "start a local Ray instance")
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


def actor_recipe(verifier: Any, endpoint: str | None, model: str | None) -> dict[str, Any]:
    """What an actor needs to build the driver's Verifier again (picklable): the same method, parameters,
    label space, evidence setting, index directory, state directory, settings and endpoint string."""
    searcher = verifier.searcher
    index = getattr(searcher, "index_dir", None) if searcher is not None else None
    custom = verifier.evidence not in ("open", "gold", "none")
    return {
        "method": verifier.spec.name,
        "params": dict(verifier.param_overrides),
        "index": str(index) if index is not None else searcher,  # a stand-in searcher travels as is
        "endpoint": endpoint,
        "model": model,
        "settings": verifier.settings,
        "llm": verifier._llm,  # a stand-in LLM (tests); None: a client on the endpoint
        "llm_concurrency": verifier.llm_concurrency,
        "cache": verifier.cache,
        "exclude_titles": tuple(verifier.exclude_titles),
        "search_mode": verifier.search_mode,
        "state_dir": str(verifier.state_dir),
        "labels": verifier.label_space.name,
        "evidence": verifier.evidence,
        "retriever_for": verifier.retriever_for if custom else None,
    }


class ClaimActor:
    """One actor of the pool: its Verifier (index, LLM client, run state) is built once; ``__call__``
    verifies a batch of claims concurrently and returns one row per claim (id, kind, record or error)."""

    def __init__(self, recipe: dict[str, Any]):
        from veracity.pipeline.api import Verifier

        self.verifier = Verifier(
            method=recipe["method"], index=recipe["index"], endpoint=recipe["endpoint"], model=recipe["model"],
            settings=recipe["settings"], llm=recipe["llm"], llm_concurrency=recipe["llm_concurrency"],
            cache=recipe["cache"], exclude_titles=recipe["exclude_titles"], search_mode=recipe["search_mode"],
            state_dir=recipe["state_dir"], labels=recipe["labels"], evidence=recipe["evidence"],
            retriever_for=recipe["retriever_for"], params=recipe["params"])
        self.state = self.verifier.state()  # the method's run state, once per actor
        self._llm: Any = None
        self._stack: contextlib.AsyncExitStack | None = None
        self._lock: asyncio.Lock | None = None

    async def _client(self) -> Any:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._llm is None:
                stack = contextlib.AsyncExitStack()
                self._llm = await stack.enter_async_context(self.verifier.client())
                self._stack = stack
        return self._llm

    async def verify_payload(self, payload: str) -> dict[str, str]:
        """One claim (JSON) -> {"id", "kind", "record", "error"}; never raises for the claim's own failure."""
        claim = claim_of(payload)
        v = self.verifier
        try:
            llm = await self._client()
            verdict = await verify_one(claim, v.spec, llm, v.searcher, v.params, self.state,
                                       exclude_titles=v.exclude_titles, search_mode=v.search_mode,
                                       label_space=v.label_space, retriever_for=v.retriever_for)
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
        self.verifier.close()


# -- the driver -----------------------------------------------------------------------------------------
class KeyedResultWriter:
    """The local backend's :class:`ResultWriter`, keyed by claim id: :meth:`write` appends a result only when
    its id is not in the file yet (``done_ids``: what :func:`read_done_ids` found, then every id written)."""

    def __init__(self, path: Path | str, done_ids: Iterable[str] = ()):
        self.writer = ResultWriter(path)
        self.ids: set[str] = {str(i) for i in done_ids}

    def write(self, record: dict[str, Any]) -> bool:
        cid = str(record["id"])
        if cid in self.ids:
            return False
        self.writer.append(record)
        self.ids.add(cid)
        return True

    def close(self) -> None:
        self.writer.close()


def collect(rows: Iterable[dict[str, Any]], writer: KeyedResultWriter, stats: RunStats, *,
            bar: Any = None, on_result: Callable[[dict[str, Any]], None] | None = None,
            t0: float | None = None) -> EndpointError | OutputError | None:
    """Write the rows the actors stream back, as they come: a result once per id, a failure listed in
    ``stats.failed``. Returns the error that stops the run (the endpoint stopped answering, or the results
    cannot be written), else None when the rows ran out."""
    t0 = time.perf_counter() if t0 is None else t0
    for row in rows:
        kind = str(row["kind"])
        cid = str(row["id"])
        if kind == ENDPOINT:
            return EndpointError(str(row["error"]), hint=str(row.get("hint") or "") or None)
        if kind != OK:
            if cid not in writer.ids:  # a claim Ray re-ran after it was written is not a failure
                stats.failed.append((cid, str(row["error"])))
            continue
        record = json.loads(str(row["record"]))
        try:
            if not writer.write(record):
                continue  # a duplicate (a task Ray retried): the first result stays, this one is dropped
        except OSError as exc:  # disk full, file size limit, ...: stop; a torn line is cut on resume
            return OutputError(f"cannot write results to {writer.writer.path}: {exc.strerror or exc}",
                               hint="free space or fix the folder, then run the same command again to resume")
        summary = (record.get("trace") or {}).get("summary") or {}
        stats.done += 1
        stats.prompt_tokens += int(summary.get("prompt_tokens", 0))
        stats.completion_tokens += int(summary.get("completion_tokens", 0))
        stats.elapsed_s = time.perf_counter() - t0
        if bar is not None:
            bar.advance()
        if on_result is not None:
            on_result(record)
    return None


def _served_model(verifier: Any) -> tuple[str | None, str | None]:
    """(endpoint string, model name) the actors use: the endpoint must answer and serve the model (one
    EndpointError line otherwise, before Ray starts)."""
    if verifier._llm is not None:
        return None, getattr(verifier._llm, "model", None)
    url, model = verifier.resolve_endpoint()

    async def check() -> str | None:
        async with verifier.client(1) as llm:
            return getattr(llm, "model", None) or model

    return url, asyncio.run(check())


def _pipeline_rows(ray: Any, claims: list[Claim], recipe: dict[str, Any], options: RayOptions,
                   concurrency: int) -> Iterator[dict[str, Any]]:
    from ray.data import ActorPoolStrategy

    cpus = actor_cpus(float(ray.cluster_resources().get("CPU", 0)), options.actors)
    items = [{"id": c.id, "claim": claim_payload(c)} for c in claims]
    ds = ray.data.from_items(items, override_num_blocks=len(items))  # one block per claim: none waits on another
    ds = ds.map_batches(
        ClaimActor, fn_constructor_kwargs={"recipe": recipe}, batch_size=1,
        compute=ActorPoolStrategy(size=min(options.actors, len(items)), max_concurrent_calls_per_actor=concurrency,
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
                    hint="every node needs veracity, the index at the driver's path and the model endpoint within "
                         "reach; then run the same command again to resume")
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return ClusterError(f"the Ray pipeline failed: {type(exc).__name__}: {first[:300]}",
                        hint="run the same command again to resume; add --debug for Ray's traceback"
                             + (f" (Ray's own output: {log_path})" if log_path is not None else ""))


def verify_many_ray(verifier: Any, claims: Any, out: Path | str | None = None, concurrency: int | None = None,
                    progress: bool = False, on_result: Callable[[dict[str, Any]], None] | None = None,
                    rows: Callable[..., Iterable[dict[str, Any]]] | None = None) -> RunStats:
    """:meth:`Verifier.verify_many` on the Ray backend (the Verifier's ``ray`` options): same checks, same
    results file, manifest, resume and :class:`RunStats`. ``concurrency`` is claims in flight per actor.
    ``rows`` replaces the Ray pipeline (a callable ``(claims, recipe, options, concurrency) -> rows``; tests)."""
    options: RayOptions = verifier.ray or RayOptions()
    n, loaded = verifier.prepare_many(claims, out, concurrency)
    with contextlib.ExitStack() as stack:
        if out is None:
            out_path = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="veracity-"))) / "results.jsonl"
        else:
            out_path = Path(out).expanduser()
        stats = RunStats(out_path=out_path, total=len(loaded.claims), rejected=list(loaded.rejected))
        done = read_done_ids(out_path)
        pending = [c for c in loaded.claims if c.id not in done]
        stats.skipped = len(loaded.claims) - len(pending)
        endpoint, model = _served_model(verifier) if pending else (verifier.endpoint, verifier.model)
        owned = False
        log_path = Path(verifier.settings.run_dir) / RAY_LOG
        if pending and rows is None:
            stack.enter_context(ray_output_to(log_path))  # Ray's own output: a file, not the terminal
            stack.enter_context(ray_messages_to_log())  # and not stdout either
            try:
                owned = connect(options)  # a ClusterError before anything is written
            except ClusterError as exc:
                exc.hint = f"{exc.hint} (Ray's own output: {log_path})"
                raise
        if pending:
            stack.callback(_shutdown, owned)
        out_path.parent.mkdir(parents=True, exist_ok=True)
        if out is not None:
            write_run_manifest(out_path, verifier.spec, verifier.params, _ManifestLLM(endpoint, model, verifier),
                               verifier.searcher, verifier.state_dir, verifier.label_space, verifier.evidence)
        writer = KeyedResultWriter(out_path, done)
        stack.callback(_close_quietly, writer)
        stop: VeracityError | None = None
        if pending:
            recipe = actor_recipe(verifier, endpoint, model)
            bar = _Progress(len(pending), verifier.spec.name, stats) if progress else None
            t0 = time.perf_counter()
            stream: Iterable[dict[str, Any]] = ()
            try:
                if bar is not None:
                    bar.start()
                if rows is None:
                    import ray

                    stream = _pipeline_rows(ray, pending, recipe, options, n)
                else:
                    stream = rows(pending, recipe, options, n)
                stop = collect(stream, writer, stats, bar=bar, on_result=on_result, t0=t0)
            except (KeyboardInterrupt, VeracityError):
                raise
            except Exception as exc:  # Ray's errors: one line, what was written is kept
                stop = _cluster_failure(exc, log_path)
            finally:
                close = getattr(stream, "close", None)
                if callable(close):
                    with contextlib.suppress(Exception):
                        close()  # stops the pipeline's executor when the run stops early
                stats.elapsed_s = time.perf_counter() - t0
                if bar is not None:
                    bar.stop()
        if stop is not None:
            stats.stopped = str(stop)
            stop.stats = stats  # type: ignore[attr-defined]
            raise stop
        if out is None:
            order = {c.id: i for i, c in enumerate(loaded.claims)}
            found = [json.loads(line) for line in out_path.read_text(encoding="utf-8").splitlines() if line.strip()]
            stats.results = sorted(found, key=lambda r: order.get(r["id"], len(order)))
    return stats


@dataclass
class _ManifestLLM:
    """What the run manifest records of the model: the endpoint and model the actors use."""

    base_url: str | None
    model: str | None
    verifier: Any

    @property
    def temperature(self) -> float:
        return getattr(self.verifier._llm, "temperature", self.verifier.settings.temperature)

    @property
    def seed(self) -> int | None:
        return getattr(self.verifier._llm, "seed", self.verifier.settings.seed)


def _close_quietly(writer: KeyedResultWriter) -> None:
    with contextlib.suppress(OSError):
        writer.close()


def _shutdown(owned: bool) -> None:
    if owned:
        import ray

        with contextlib.suppress(Exception):
            ray.shutdown()


__all__ = ["BACKENDS", "ClaimActor", "KeyedResultWriter", "RayOptions", "collect", "connect", "ray_options",
           "require_ray", "verify_many_ray"]
