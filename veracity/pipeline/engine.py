"""The per-claim engine and what a run is built from.

:func:`verify_one` runs a method on one claim: its tools (the index's retriever, or the claim's own from the
evidence setting), its trace (every LLM call and tool call), the label space's rule. :class:`Engine` is a
run's parts built from a :class:`~veracity.pipeline.config.VerifierConfig` alone: the method and its
parameters, the index (opened once, only when the evidence setting reads it), the per-claim retriever
factory, the method's run state (opened on first use from the state directory) and the LLM client on the
endpoint. The Python API's :class:`~veracity.pipeline.api.Verifier`, both backends and every Ray actor use
one.

Run state: a method that keeps state across claims (``spec.state_cls``, e.g. MERMAID's evidence memory)
gets it opened once per run from a state directory and passed to every claim as ``ctx.state``; whoever
opens it closes it. The engine knows nothing else about it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Iterable

from veracity.config import Settings
from veracity.errors import ConfigError, IndexDirError
from veracity.pipeline.config import VerifierConfig
from veracity.pipeline.evidence import ClaimRetrievers, check_gold_evidence, claim_retrievers, gold_retriever
from veracity.pipeline.labels import LabelSpace
from veracity.pipeline.labels import label_space as label_space_of
from veracity.pipeline.confidence import abstain, settle
from veracity.pipeline.methods import MethodContext, MethodSpec
from veracity.pipeline.tools import SourceIdentity, Tools
from veracity.pipeline.types import Claim, Trace, Verdict
from veracity.serving.client import usage_scope
from veracity.serving.pool import affinity_scope


class _NoIndex:
    """Stands in for the retriever of methods that need none; using it is a clear error."""

    name = "no-index"

    def search(self, query: str, k: int = 10, *, exclude_titles: Iterable[str] = (),
               exclude_patterns: Iterable[str] = ()) -> list:
        raise ConfigError("this method needs an index", hint="pass --index DIR")

    def open_page(self, title: str) -> list:
        raise ConfigError("this method needs an index", hint="pass --index DIR")


def retriever_of(searcher: Any, search_mode: str | None = None) -> Any:
    """What a claim's tools search: the index's retriever for ``search_mode`` (None: hybrid when the index
    has both parts, else the one it has); an object without ``retriever`` (a test stand-in) is one itself."""
    if searcher is None:
        return _NoIndex()
    return searcher.retriever(search_mode) if hasattr(searcher, "retriever") else searcher


def index_namespace(searcher: Any) -> str:
    """A stable name for the index a searcher reads, passed to a method's run state (so state gathered
    on one index, such as MERMAID's memory, is not recalled on another)."""
    manifest = getattr(searcher, "manifest", None)
    if not isinstance(manifest, dict) or not manifest:
        return "default"
    # what fixes the passages and their ids (sources with their hashes, chunking, count), not build
    # times, versions or the dense encoder: a rebuild of the same corpus keeps its state
    identity = ("kind", "sources", "chunking", "passages", "limit", "dump_date")
    picked = {k: manifest[k] for k in identity if k in manifest}
    if not picked:
        picked = {k: v for k, v in manifest.items() if k not in ("build", "versions", "estimate", "created",
                                                                 "created_at")}
    blob = json.dumps(picked, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def open_run_state(spec: MethodSpec, params: Any, searcher: Any, state_dir: Path | str | None,
                   evidence: str | None = None) -> Any:
    """The run state of ``spec`` opened from ``state_dir`` for the index ``searcher`` reads (None when the
    method keeps none); with per-claim evidence (``gold`` / ``none``) its namespace is ``evidence-<setting>``,
    so state gathered from gold passages is never recalled in an open-book run. The caller closes it
    (``state.close()``)."""
    setting = evidence or "open"
    namespace = index_namespace(searcher) if setting == "open" else f"evidence-{setting}"
    return spec.open_state(state_dir, params, namespace)


async def verify_one(claim: Claim, spec: MethodSpec, llm: Any, searcher: Any, params: Any, state: Any = None,
                     *,
                     exclude_titles: Iterable[str] = (), search_mode: str | None = None,
                     label_space: LabelSpace | str | None = None,
                     retriever_for: ClaimRetrievers | None = None,
                     on_event: Callable[[dict[str, Any]], None] | None = None) -> Verdict:
    """Run ``spec`` on one claim; the verdict's trace holds every LLM call and tool call it made.

    ``state`` is the method's open run state (:func:`open_run_state`), required when the method keeps one.
    ``label_space`` (default 3way; the engine passes its config's :class:`LabelSpace`) is passed to the
    method as ``ctx.label_space``; a verdict outside it
    (a method path that still returned NOT_ENOUGH_INFO in the binary space) gets the binary rule
    (:meth:`LabelSpace.undecided`, traced). ``retriever_for`` (a per-claim retriever factory, e.g.
    :func:`claim_retrievers`) replaces the index's retriever: the claim's tools use
    ``retriever_for(claim)``. ``on_event`` hears each step as it happens (the trace's ``listener``: role
    calls started / finished, tool calls with their hits, method events)."""
    if state is None and spec.state_cls is not None:
        raise ConfigError(f"method {spec.name} keeps state across claims and was given none",
                          hint="open it with open_run_state(spec, params, searcher, state_dir) and pass "
                               "state=")
    # the engine passes its config's LabelSpace (resolved once, with the config); a name given by a direct
    # caller enters here
    space = label_space if isinstance(label_space, LabelSpace) else label_space_of(label_space)
    trace = Trace(listener=on_event)
    retriever = retriever_for(claim) if retriever_for is not None else retriever_of(searcher, search_mode)
    manifest = getattr(searcher, "manifest", None) if retriever_for is None else None
    tools = Tools(retriever, trace, exclude_titles=exclude_titles, source=SourceIdentity.of(retriever,
                                                                                            manifest))
    ctx = MethodContext(llm=llm, tools=tools, trace=trace, params=params, state=state, label_space=space,
                        seed=getattr(llm, "seed", None), claim_id=claim.id)
    t0 = time.perf_counter()
    # affinity: with several endpoints, one claim's calls (prompts sharing prefixes) stay on one server
    with usage_scope() as sink, affinity_scope(claim.id):
        trace.llm_calls = sink  # filled as the method calls the model
        verdict = await spec.fn(claim, ctx)
    if verdict.label not in space:
        verdict.label = space.undecided(trace,
                                        f"the method returned {verdict.label.value}: {verdict.explanation}",
                                        path="runner")
    trace.llm_calls = list(sink)
    # its label's probability (pipeline/confidence.py)
    settle(verdict, trace.llm_calls, space, spec.confidence)
    trace.timings["total_s"] = round(time.perf_counter() - t0, 4)
    trace.timings["llm_s"] = round(sum(getattr(c, "latency_s", 0.0) for c in trace.llm_calls), 4)
    trace.timings["tools_s"] = round(sum(t.latency_s for t in trace.tool_calls), 4)
    verdict.trace = trace
    verdict.method = verdict.method or spec.name
    return verdict



# -- the index ----------------------------------------------------------------------------------
def default_index_dir(settings: Settings) -> Path:
    """``settings.index_dir`` (``VERACITY_INDEX``), else ``~/.veracity/indexes/demo`` if it exists."""
    if settings.index_dir is not None:
        return Path(settings.index_dir).expanduser()
    demo = settings.indexes_dir / "demo"
    if demo.exists():
        return demo
    raise IndexDirError("no index given and no default index at " + str(demo),
                        hint="build one with `veracity index build demo`, or pass --index DIR")


def open_index(index: Any, settings: Settings | None = None) -> Any:
    """A Searcher for ``index``: a searcher object as is, a directory opened, None -> the default index."""
    if index is not None and hasattr(index, "search") and hasattr(index, "open_page"):
        return index
    settings = settings or Settings()
    path = Path(index).expanduser() if index is not None else default_index_dir(settings)
    if not path.is_dir():
        raise IndexDirError(f"index directory {path} does not exist",
                            hint="build one with `veracity index build demo`, or pass --index DIR")
    if not (path / "manifest.json").is_file():
        raise IndexDirError(f"{path} is not a veracity index (no manifest.json)",
                            hint="pass the directory `veracity index build` wrote")
    try:
        from veracity.indexes.searcher import Searcher
    except ImportError as exc:
        raise ConfigError(f"index support cannot be loaded ({exc})",
                          hint="reinstall veracity with its dependencies") from exc
    return Searcher(path)



# -- a run's parts --------------------------------------------------------------------------------------
class Engine:
    """What a run is built from its config: method, parameters, label space, evidence (the per-claim retriever
    factory), index, run state and LLM client. ``llm`` replaces the client (tests, benchmarks: an object with
    the LLMClient contract); ``retriever_for`` gives each claim a retriever of the caller's (recorded as the
    config's evidence, ``custom`` unless named); ``state`` is a run state the caller opened (used as is, left
    open for the caller to close)."""

    def __init__(self, config: VerifierConfig, *, llm: Any = None,
                 retriever_for: ClaimRetrievers | None = None,
                 state: Any = None):
        self.config: VerifierConfig = config
        self.settings: Settings = config.settings
        method, evidence = config.method, config.evidence
        self.spec: MethodSpec = method.spec
        self.params = method.parsed  # built and checked once, with the config
        self.label_space: LabelSpace = method.label_space
        self.evidence = evidence.setting
        self.retriever_for: ClaimRetrievers | None = (
            retriever_for if retriever_for is not None else claim_retrievers(evidence.setting)
            if evidence.setting != "custom" else None)
        # an index is read only in the open setting (a per-claim retriever replaces it)
        wants_index = self.retriever_for is None and (self.spec.needs_index or evidence.index is not None)
        self.searcher = open_index(evidence.index, self.settings) if wants_index else None
        self.state_dir = config.run_state_dir
        self.exclude_titles: tuple[str, ...] = evidence.exclude_titles
        self.search_mode: str | None = evidence.search_mode
        self.min_confidence: float | None = method.min_confidence
        self.calibration: str = method.calibration
        self._maps: dict[str, Any] = {}
        self._llm = llm
        self._resolved: tuple[str, str | None] | None = None
        self._state: Any = state  # the method's run state, opened on first use (None: keeps none / not yet)
        self._own_state = state is None  # closed by close() (False: the caller's)

    # -- run state -------------------------------------------------------------------------------------
    def state(self) -> Any:
        """The method's run state (e.g. MERMAID's evidence memory), opened once from the state directory."""
        if self._state is None and self.spec.state_cls is not None:
            self._own_state = True
            self._state = open_run_state(self.spec, self.params, self.searcher, self.state_dir, self.evidence)
        return self._state

    # -- model endpoint --------------------------------------------------------------------------------
    @property
    def stand_in(self) -> Any:
        """The LLM object given instead of an endpoint (None: a client on the endpoint)."""
        return self._llm

    def resolve_endpoint(self) -> tuple[str, str | None]:
        """(endpoint URL, model name or None): the one configured, else the managed server (started if
        needed)."""
        if self._resolved is None:
            endpoint = self.config.endpoint
            if endpoint.url:
                self._resolved = (endpoint.url, endpoint.model)
            else:
                from veracity.serving.server import ensure_endpoint

                self._resolved = ensure_endpoint(self.settings, endpoint.model)
        return self._resolved

    def client(self, llm_concurrency: int | None = None) -> contextlib.AbstractAsyncContextManager[Any]:
        """``async with engine.client() as llm``: the LLM client (started: the endpoint answered and serves
        the
        model), with at most ``llm_concurrency`` requests in flight (default: the config's)."""
        if llm_concurrency is None:
            llm_concurrency = self.config.execution.llm_concurrency
        return self._client(llm_concurrency or 1)

    @contextlib.asynccontextmanager
    async def _client(self, llm_concurrency: int) -> AsyncIterator[Any]:
        if self._llm is not None:
            yield self._llm
            return
        from veracity.serving.client import LLMClient

        url, model = self.resolve_endpoint()
        s = self.settings
        client = LLMClient(
            url, model, api_key=s.api_key, concurrency=llm_concurrency, timeout_s=s.request_timeout_s,
            temperature=s.temperature, seed=s.seed,
            cache_path=(s.cache_dir / "responses.sqlite") if self.config.endpoint.cache else None,
        )
        async with client:
            yield client

    # -- claims ----------------------------------------------------------------------------------------
    def check_claims(self, claims: Iterable[Claim]) -> None:
        """What the engine needs of claims before any server is contacted: with ``--evidence gold``, each
        claim's own gold passages (a one-line DataError naming the claims without them)."""
        if self.retriever_for is gold_retriever:
            check_gold_evidence(list(claims))

    async def verify(self, claim: Claim, llm: Any, on_event: Callable[[dict[str, Any]],
                                                                      None] | None = None) -> Verdict:
        """Run the method on ``claim`` with the open client ``llm``."""
        verdict = await verify_one(claim, self.spec, llm, self.searcher, self.params, self.state(),
                                   exclude_titles=self.exclude_titles, search_mode=self.search_mode,
                                   label_space=self.label_space, retriever_for=self.retriever_for,
                                   on_event=on_event)
        return self.finish(verdict, llm)

    def finish(self, verdict: Verdict, llm: Any) -> Verdict:
        """The run's confidence settings on a method's verdict: the calibration map of the model, method and
        label space (when one is stored and ``calibration`` is auto), then ``min_confidence``'s abstention."""
        found = self.calibration_map(getattr(llm, "model", None))
        if found is not None and verdict.label_probs is not None:
            cmap = found[0]
            verdict.raw_label_probs, verdict.raw_confidence = verdict.label_probs, verdict.confidence
            verdict.label_probs = {k: round(v, 6) for k, v in cmap.apply(verdict.label_probs).items()}
            p = verdict.label_probs.get(verdict.label.value)
            verdict.confidence = round(p, 4) if p is not None else None
        abstain(verdict, self.min_confidence)
        return verdict

    def calibration_map(self, model: str | None) -> Any:
        """(TemperatureMap, path) stored for ``model`` with this method and label space, or None (off,
        none)."""
        if self.calibration == "off" or not model:
            return None
        if model not in self._maps:
            from veracity.pipeline.calibration import load

            self._maps[model] = load(self.settings.home, model, self.spec.name, self.label_space.name)
        return self._maps[model]

    def confidence_record(self, model: str | None = None) -> dict[str, Any]:
        """What a run record says of the verdicts' confidence
        (:class:`~veracity.pipeline.results.RunManifest`)."""
        return {"calibration": self.calibration_record(model), "calibration_setting": self.calibration,
                "min_confidence": self.min_confidence}

    def calibration_record(self, model: str | None = None) -> dict[str, Any] | None:
        """What a run manifest records of the map applied (for ``model``, else the one the run's verdicts
        met):
        its file, temperature and the split it was fitted on; None when none was applied."""
        found = self.calibration_map(model) if model else next((m for m in self._maps.values() if m), None)
        if found is None:
            return None
        cmap, path = found
        return {"path": str(path), **cmap.to_dict()}

    def close(self) -> None:
        """Close the run state this engine opened (the index stays open: it may be the caller's)."""
        if self._state is not None and self._own_state:
            self._state.close()
        self._state = None
