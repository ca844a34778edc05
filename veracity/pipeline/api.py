"""Python API: ``Verifier(method=..., index=..., endpoint=...).verify(claim)`` and ``.verify_many(...)``.

Example::

    from veracity.pipeline.api import Verifier

    v = Verifier(method="rag", index="~/.veracity/indexes/demo", endpoint="http://127.0.0.1:8000/v1")
    verdict = v.verify("The Eiffel Tower is in Berlin.")
    print(verdict.label, verdict.explanation, [e.passage_id for e in verdict.evidence])
    stats = v.verify_many("claims.jsonl", out="results.jsonl", concurrency=8)

The sync methods wrap the async ones (``averify`` / ``averify_many``) with ``asyncio.run``; inside a
running event loop use the async ones. With ``endpoint=None`` the configured endpoint
(``VERACITY_ENDPOINT``) or the managed local server(s) are used (started if needed). ``endpoint`` may be a
comma-separated list of endpoints serving the same model (:mod:`veracity.serving.pool`).

Two limits: ``concurrency`` is the number of claims in flight in a batch (``VERACITY_CONCURRENCY``,
default 16); ``llm_concurrency`` the number of LLM requests in flight, for one claim or many
(``VERACITY_LLM_CONCURRENCY``, default 256, vLLM's default ``--max-num-seqs``, so a method's parallel
agents and many claims can fill the server's batch). A method's run state (MERMAID's evidence memory)
is opened from ``state_dir`` (default ``$VERACITY_HOME``) on first use, lives as long as the Verifier
and is closed by :meth:`Verifier.close`.

``labels`` is the label space (:mod:`veracity.pipeline.labels`): ``"3way"`` (default: SUPPORTED /
REFUTED / NOT_ENOUGH_INFO) or ``"binary"`` (SUPPORTED / REFUTED: the final verdict's schema and prompt
offer those two only, and a claim no verdict was reached for is REFUTED by the binary rule, traced).

``evidence`` is the evidence setting (:data:`veracity.pipeline.evidence.EVIDENCE_SETTINGS`): ``"open"``
(default: the index), ``"gold"`` (each claim's own gold passages only: a :class:`Claim` or input line
with an ``evidence`` list of ``{title, text}``) or ``"none"`` (closed book). With ``gold`` or ``none`` no
index is opened. ``retriever_for`` (a callable ``Claim -> Retriever``) gives each claim a retriever of
your own instead (recorded as ``custom`` unless ``evidence`` names it).

``backend`` runs ``verify_many``: ``"local"`` (default: claims in flight in this process) or ``"ray"`` (a
Ray Data pipeline of async actors, :mod:`veracity.pipeline.backends.ray`; needs ``veracity[ray]``), with
``ray_address`` (None: a local Ray instance; ``"auto"``: the running cluster; ``HOST:PORT``) and
``ray_actors`` (actors in the pool, each opening the index once; ``concurrency`` claims in flight each).
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any, Iterable

from veracity.config import Settings
from veracity.pipeline.batch import prepare, run_batch
from veracity.pipeline.claims import ClaimsFile, load_claims, make_claim
from veracity.pipeline.config import ExecutionConfig, VerifierConfig
from veracity.pipeline.engine import Engine, default_index_dir, open_index  # noqa: F401 (part of the API)
from veracity.pipeline.evidence import ClaimRetrievers
from veracity.pipeline.labels import LabelSpace
from veracity.pipeline.methods import DEFAULT_METHOD
from veracity.pipeline.results import RunStats
from veracity.pipeline.types import Claim, Verdict


class Verifier:
    """Verify claims with one method, one index and one model endpoint: a facade over an
    :class:`~veracity.pipeline.engine.Engine` built from a
    :class:`~veracity.pipeline.config.VerifierConfig`."""

    def __init__(self, method: str = DEFAULT_METHOD, index: Any = None, endpoint: str | None = None,
                 model: str | None = None, *, settings: Settings | None = None, llm: Any = None,
                 concurrency: int | None = None, llm_concurrency: int | None = None, cache: bool = False,
                 exclude_titles: Iterable[str] = (), search_mode: str | None = None,
                 state_dir: Path | str | None = None, labels: LabelSpace | str | None = None,
                 evidence: str | None = None, retriever_for: ClaimRetrievers | None = None,
                 params: dict[str, Any] | None = None, backend: str = "local", ray_address: str | None = None,
                 ray_actors: int | None = None, min_confidence: float | None = None,
                 calibration: str = "auto",
                 **more_params: Any):
        # method parameters: ``params={...}`` (a name there never collides with a Verifier setting, so
        # --param concurrency=3 is refused as no parameter of the method), or as keywords
        if retriever_for is not None:
            evidence = str(evidence) if evidence is not None else "custom"
        config = VerifierConfig.of(
            method=method, params={**more_params, **(params or {})},
            labels=labels.name if isinstance(labels,
                                             LabelSpace) else (labels if labels is not None else "3way"),
            evidence=evidence if evidence is not None else "open", index=index, endpoint=endpoint,
                                   model=model,
            concurrency=concurrency, llm_concurrency=llm_concurrency, backend=backend,
                                   ray_address=ray_address,
            ray_actors=ray_actors, state_dir=state_dir, cache=cache, search_mode=search_mode,
            exclude_titles=tuple(exclude_titles), min_confidence=min_confidence, calibration=calibration,
            settings=settings or Settings())
        self._build(config, llm=llm, retriever_for=retriever_for)

    @classmethod
    def from_config(cls, config: VerifierConfig, *, llm: Any = None,
                    retriever_for: ClaimRetrievers | None = None) -> "Verifier":
        """A Verifier for a ready-made config (the web app, ``bench run``, benchmarks)."""
        self = cls.__new__(cls)
        self._build(config, llm=llm, retriever_for=retriever_for)
        return self

    def _build(self, config: VerifierConfig, *, llm: Any, retriever_for: ClaimRetrievers | None) -> None:
        self.config = config
        self.engine = Engine(config, llm=llm, retriever_for=retriever_for)

    # -- what the run is (read-only views of the config and the engine) -------------------------------
    settings = property(lambda self: self.config.settings)
    backend = property(lambda self: self.config.execution.backend)
    concurrency = property(lambda self: self.config.execution.concurrency)
    llm_concurrency = property(lambda self: self.config.execution.llm_concurrency)
    endpoint = property(lambda self: self.config.endpoint.url)
    model = property(lambda self: self.config.endpoint.model)
    cache = property(lambda self: self.config.endpoint.cache)
    exclude_titles = property(lambda self: self.config.evidence.exclude_titles)
    search_mode = property(lambda self: self.config.evidence.search_mode)
    param_overrides = property(lambda self: dict(self.config.method.params))
    spec = property(lambda self: self.engine.spec)
    params = property(lambda self: self.engine.params)
    label_space = property(lambda self: self.engine.label_space)
    evidence = property(lambda self: self.engine.evidence)
    retriever_for = property(lambda self: self.engine.retriever_for)
    searcher = property(lambda self: self.engine.searcher)
    state_dir = property(lambda self: self.engine.state_dir)
    min_confidence = property(lambda self: self.engine.min_confidence)

    @property
    def ray(self) -> Any:
        """The Ray options of ``backend="ray"`` (None for local)."""
        ex = self.config.execution
        if ex.backend != "ray":
            return None
        from veracity.pipeline.backends.ray import RayOptions

        return RayOptions(address=ex.ray_address, actors=ex.ray_actors)

    def state(self) -> Any:
        """The method's run state (e.g. MERMAID's evidence memory), opened once from ``state_dir``."""
        return self.engine.state()

    def resolve_endpoint(self) -> tuple[str, str | None]:
        return self.engine.resolve_endpoint()

    def client(self, llm_concurrency: int | None = None) -> contextlib.AbstractAsyncContextManager[Any]:
        """``async with verifier.client() as llm``: the LLM client the Verifier uses."""
        return self.engine.client(llm_concurrency)

    # -- one claim ----------------------------------------------------------------------------------
    async def averify(self, claim: str | Claim, on_event: Any = None) -> Verdict:
        """Verify one claim; ``on_event(dict)`` (optional) hears each step of its trace as it happens."""
        claim = make_claim(claim)
        self.engine.check_claims([claim])  # before any server is contacted
        self.engine.state()
        async with self.engine.client() as llm:
            return await self.engine.verify(claim, llm, on_event=on_event)

    def verify(self, claim: str | Claim) -> Verdict:
        """Verify one claim (text or :class:`Claim`) and return its :class:`Verdict` (with trace)."""
        return asyncio.run(self.averify(claim))

    # -- many claims --------------------------------------------------------------------------------
    @staticmethod
    def load_claims(claims: Any) -> ClaimsFile:
        """A JSONL path, a ClaimsFile, or an iterable of str / Claim / {"claim": ..., "id": ...} dicts."""
        return load_claims(claims)

    def prepare_many(self, claims: Any, out: Path | str | None, concurrency: int | None) -> tuple[int,
                                                                                                  ClaimsFile]:
        """(claims in flight, the loaded claims): every check of a batch that needs no server (limits, claims,
        gold evidence, the results file), made once for every backend
        (:func:`veracity.pipeline.batch.prepare`)."""
        n = self._claims_in_flight(concurrency)
        return n, prepare(self.engine, claims, out)

    def _claims_in_flight(self, concurrency: int | None) -> int:
        """The batch's claims in flight: the config's (checked when it was built), or this call's, which
        enters
        here and is checked by the config's execution part, as any other value of it."""
        if concurrency is None:
            return self.concurrency
        return ExecutionConfig(concurrency=concurrency, llm_concurrency=self.llm_concurrency).concurrency

    async def arun_batch(self, claims: Any, out: Path | str | None = None, concurrency: int | None = None,
                         progress: bool = False, on_result: Any = None,
                         backend_options: dict[str, Any] | None = None) -> RunStats:
        """A batch on the config's backend (:func:`veracity.pipeline.batch.run_batch`): the checks, the
        results
        file and its resume, the manifest, the progress bar and the statistics are the same for both."""
        n = self._claims_in_flight(concurrency)
        return await run_batch(self.engine, claims, out, concurrency=n, llm_concurrency=self.llm_concurrency,
                               backend=self.backend, progress=progress, on_result=on_result,
                               backend_options=backend_options)

    def run_batch(self, claims: Any, out: Path | str | None = None, concurrency: int | None = None,
                  progress: bool = False, on_result: Any = None,
                  backend_options: dict[str, Any] | None = None) -> RunStats:
        return asyncio.run(self.arun_batch(claims, out, concurrency, progress, on_result, backend_options))

    async def averify_many(self, claims: Any, out: Path | str | None = None, concurrency: int | None = None,
                           progress: bool = False, on_result: Any = None) -> RunStats:
        return await self.arun_batch(claims, out=out, concurrency=concurrency, progress=progress,
                                     on_result=on_result)

    def verify_many(self, claims: Any, out: Path | str | None = None, concurrency: int | None = None,
                    progress: bool = False, on_result: Any = None) -> RunStats:
        """Verify many claims; with ``out`` results are appended there (resumable), else kept in
        ``stats.results`` (input order). ``on_result(record)`` is called as each result is written."""
        return self.run_batch(claims, out=out, concurrency=concurrency, progress=progress,
                              on_result=on_result)

    def close(self) -> None:
        """Close the run state this Verifier opened (the index stays open: it may be the caller's)."""
        self.engine.close()
