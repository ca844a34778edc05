"""Python API: ``Verifier(method=..., index=..., endpoint=...).verify(claim)`` and ``.verify_many(...)``.

Example::

    from veracity.pipeline.api import Verifier

    v = Verifier(method="mermaid", index="~/.veracity/indexes/demo", endpoint="http://127.0.0.1:8000/v1")
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

``evidence`` is the evidence setting (:data:`veracity.pipeline.runner.EVIDENCE_SETTINGS`): ``"open"``
(default: the index), ``"gold"`` (each claim's own gold passages only: a :class:`Claim` or input line
with an ``evidence`` list of ``{title, text}``) or ``"none"`` (closed book). With ``gold`` or ``none`` no
index is opened. ``retriever_for`` (a callable ``Claim -> Retriever``) gives each claim a retriever of
your own instead (recorded as ``custom`` unless ``evidence`` names it).

``backend`` runs ``verify_many``: ``"local"`` (default: claims in flight in this process) or ``"ray"`` (a
Ray Data pipeline of async actors, :mod:`veracity.pipeline.ray_backend`; needs ``veracity[ray]``), with
``ray_address`` (None: a local Ray instance; ``"auto"``: the running cluster; ``HOST:PORT``) and
``ray_actors`` (actors in the pool, each opening the index once; ``concurrency`` claims in flight each).
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from pathlib import Path
from typing import Any, AsyncIterator, Iterable

from veracity.config import Settings, split_endpoints
from veracity.errors import ConfigError, IndexDirError
from veracity.pipeline.labels import LabelSpace
from veracity.pipeline.methods import get_method
from veracity.pipeline.runner import (ClaimsFile, ClaimRetrievers, RunStats, check_gold_evidence,
                                      check_output, claim_retrievers, evidence_setting, gold_retriever,
                                      make_claim,
                                      open_run_state, read_claims_jsonl, resolve_label_space, run_claims,
                                      verify_one)
from veracity.pipeline.types import Claim, Verdict


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
        raise ConfigError(f"index support cannot be loaded ({exc})", hint="reinstall veracity with its dependencies") from exc
    return Searcher(path)


def check_concurrency(concurrency: int, llm_concurrency: int) -> None:
    """Both limits at least 1 (a ConfigError naming the bad one), checked before any server is contacted."""
    for what, flag, env, value in (("claims in flight", "concurrency", "VERACITY_CONCURRENCY", concurrency),
                                   ("LLM requests in flight", "llm-concurrency", "VERACITY_LLM_CONCURRENCY",
                                    llm_concurrency)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{what} (--{flag}, ${env}) must be an integer of at least 1, got {value!r}",
                              hint=f"e.g. --{flag} {16 if flag == 'concurrency' else 256}")


class Verifier:
    """Verify claims with one method, one index and one model endpoint."""

    def __init__(self, method: str = "mermaid", index: Any = None, endpoint: str | None = None,
                 model: str | None = None, *, settings: Settings | None = None, llm: Any = None,
                 concurrency: int | None = None, llm_concurrency: int | None = None, cache: bool = False,
                 exclude_titles: Iterable[str] = (), search_mode: str | None = None,
                 state_dir: Path | str | None = None, labels: LabelSpace | str | None = None,
                 evidence: str | None = None, retriever_for: ClaimRetrievers | None = None,
                 params: dict[str, Any] | None = None, backend: str = "local", ray_address: str | None = None,
                 ray_actors: int | None = None, **more_params: Any):
        from veracity.pipeline.ray_backend import ray_options

        # a bad backend option (or --backend ray without the extra): one line, before the index is opened
        self.backend, self.ray = ray_options(backend, ray_address, ray_actors)
        self.settings = settings or Settings()
        self.concurrency = concurrency if concurrency is not None else self.settings.concurrency
        self.llm_concurrency = llm_concurrency if llm_concurrency is not None else self.settings.llm_concurrency
        check_concurrency(self.concurrency, self.llm_concurrency)
        self.spec = get_method(method)
        # method parameters: ``params={...}`` (a name there never collides with a Verifier setting, so
        # --param concurrency=3 is refused as no parameter of the method), or as keywords
        self.param_overrides = {**more_params, **(params or {})}  # as given (the Ray backend's actors rebuild them)
        self.params = self.spec.make_params(self.param_overrides)
        self.label_space = resolve_label_space(labels)  # "3way" unless given; bad names: one-line ConfigError
        self.spec.check_label_space(self.params, self.label_space)
        if retriever_for is not None:
            self.evidence = str(evidence) if evidence is not None else "custom"
            self.retriever_for: ClaimRetrievers | None = retriever_for
        else:
            self.evidence = evidence_setting(evidence)  # a bad name: one-line ConfigError
            self.retriever_for = claim_retrievers(self.evidence)
        # an index is read only in the open setting (a per-claim retriever replaces it)
        wants_index = self.retriever_for is None and (self.spec.needs_index or index is not None)
        self.searcher = open_index(index, self.settings) if wants_index else None
        if endpoint is not None:  # one URL or a comma-separated list: malformed or empty fails here
            split_endpoints(endpoint)
        self.endpoint = endpoint
        self.model = model
        self.cache = cache
        self.exclude_titles = tuple(exclude_titles)
        self.search_mode = search_mode
        self.state_dir = Path(state_dir).expanduser() if state_dir is not None else self.settings.home
        self._llm = llm  # an object with the LLMClient contract (tests inject a scripted one)
        self._resolved: tuple[str, str | None] | None = None
        self._state: Any = None  # the method's run state, opened on first use (None: keeps none / not yet)

    # -- run state ----------------------------------------------------------------------------------
    def state(self) -> Any:
        """The method's run state (e.g. MERMAID's evidence memory), opened once from ``state_dir``."""
        if self._state is None and self.spec.state_cls is not None:
            self._state = open_run_state(self.spec, self.params, self.searcher, self.state_dir, self.evidence)
        return self._state

    # -- model endpoint ---------------------------------------------------------------------------
    def resolve_endpoint(self) -> tuple[str, str | None]:
        """(endpoint URL, model name or None): the one given, else the configured or managed server
        (started if needed)."""
        if self._resolved is None:
            if self.endpoint:
                self._resolved = (self.endpoint, self.model)
            else:
                from veracity.serving.server import ensure_endpoint

                self._resolved = ensure_endpoint(self.settings, self.model)
        return self._resolved

    def client(self, llm_concurrency: int | None = None) -> contextlib.AbstractAsyncContextManager[Any]:
        """``async with verifier.client() as llm``: the LLM client the Verifier uses (started: the endpoint
        answered and serves the model), with at most ``llm_concurrency`` requests in flight (default: the
        Verifier's)."""
        return self._client(self.llm_concurrency if llm_concurrency is None else llm_concurrency)

    @contextlib.asynccontextmanager
    async def _client(self, llm_concurrency: int) -> AsyncIterator[Any]:
        """The LLM client, with at most ``llm_concurrency`` requests in flight."""
        if self._llm is not None:
            yield self._llm
            return
        from veracity.serving.client import LLMClient

        url, model = self.resolve_endpoint()
        client = LLMClient(
            url, model, api_key=self.settings.api_key, concurrency=llm_concurrency,
            timeout_s=self.settings.request_timeout_s, temperature=self.settings.temperature,
            seed=self.settings.seed,
            cache_path=(self.settings.cache_dir / "responses.sqlite") if self.cache else None,
        )
        async with client:
            yield client

    # -- one claim ----------------------------------------------------------------------------------
    async def averify(self, claim: str | Claim, on_event: Any = None) -> Verdict:
        """Verify one claim; ``on_event(dict)`` (optional) hears each step of its trace as it happens."""
        claim = make_claim(claim)
        if self.retriever_for is gold_retriever:
            check_gold_evidence([claim])  # before any server is contacted
        state = self.state()
        async with self._client(self.llm_concurrency) as llm:
            return await verify_one(claim, self.spec, llm, self.searcher, self.params, state,
                                    exclude_titles=self.exclude_titles, search_mode=self.search_mode,
                                    label_space=self.label_space, retriever_for=self.retriever_for,
                                    on_event=on_event)

    def verify(self, claim: str | Claim) -> Verdict:
        """Verify one claim (text or :class:`Claim`) and return its :class:`Verdict` (with trace)."""
        return asyncio.run(self.averify(claim))

    # -- many claims --------------------------------------------------------------------------------
    @staticmethod
    def load_claims(claims: Any) -> ClaimsFile:
        """A JSONL path, a ClaimsFile, or an iterable of str / Claim / {"claim": ..., "id": ...} dicts."""
        if isinstance(claims, ClaimsFile):
            return claims
        if isinstance(claims, Path) or (isinstance(claims, str) and claims.endswith((".jsonl", ".json"))):
            return read_claims_jsonl(claims)
        out: list[Claim] = []
        for item in claims:
            if isinstance(item, dict):
                out.append(make_claim(item.get("claim", ""), id=str(item["id"]) if item.get("id") is not None else None,
                                      date=item.get("date"),
                                      meta={k: v for k, v in item.items() if k not in ("id", "claim", "date")}))
            else:
                out.append(make_claim(item))
        ids = [c.id for c in out]
        if len(ids) != len(set(ids)):
            dup = next(i for i in ids if ids.count(i) > 1)
            raise ConfigError(f"duplicate claim id {dup!r}", hint="give every claim a unique id")
        return ClaimsFile(out, [])

    def prepare_many(self, claims: Any, out: Path | str | None, concurrency: int | None) -> tuple[int, ClaimsFile]:
        """(claims in flight, the loaded claims): every check of a batch that needs no server (limits, claims,
        gold evidence, the results file), shared by the backends."""
        n = concurrency if concurrency is not None else self.concurrency
        check_concurrency(n, self.llm_concurrency)
        loaded = self.load_claims(claims)
        if self.retriever_for is gold_retriever:
            check_gold_evidence(loaded.claims)  # before any server is contacted
        if out is not None:  # a results file that cannot be written or resumed: before any server is contacted
            check_output(Path(out).expanduser(), self.spec, self.params, self.label_space, self.evidence)
        return n, loaded

    async def averify_many(self, claims: Any, out: Path | str | None = None, concurrency: int | None = None,
                           progress: bool = False, on_result: Any = None) -> RunStats:
        if self.backend == "ray":  # the Ray driver blocks: run it off the event loop
            return await asyncio.to_thread(self.verify_many, claims, out, concurrency, progress, on_result)
        n, loaded = self.prepare_many(claims, out, concurrency)
        with contextlib.ExitStack() as stack:
            if out is None:
                tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="veracity-"))
                out_path = Path(tmp) / "results.jsonl"
            else:
                out_path = Path(out).expanduser()
            state = self.state()
            async with self._client(self.llm_concurrency) as llm:
                stats = await run_claims(loaded.claims, self.spec, llm, self.searcher, out_path, concurrency=n,
                                         params=self.params, state=state, state_dir=self.state_dir,
                                         rejected=loaded.rejected,
                                         progress=progress, exclude_titles=self.exclude_titles,
                                         search_mode=self.search_mode, write_manifest=out is not None,
                                         on_result=on_result, label_space=self.label_space,
                                         retriever_for=self.retriever_for, evidence=self.evidence)
            if out is None:
                import json

                order = {c.id: i for i, c in enumerate(loaded.claims)}
                rows = [json.loads(line) for line in out_path.read_text(encoding="utf-8").splitlines() if line.strip()]
                stats.results = sorted(rows, key=lambda r: order.get(r["id"], len(order)))
        return stats

    def verify_many(self, claims: Any, out: Path | str | None = None, concurrency: int | None = None,
                    progress: bool = False, on_result: Any = None) -> RunStats:
        """Verify many claims; with ``out`` results are appended there (resumable), else kept in
        ``stats.results`` (input order). ``on_result(record)`` is called as each result is written."""
        if self.backend == "ray":
            from veracity.pipeline.ray_backend import verify_many_ray

            return verify_many_ray(self, claims, out=out, concurrency=concurrency, progress=progress,
                                   on_result=on_result)
        return asyncio.run(self.averify_many(claims, out=out, concurrency=concurrency, progress=progress,
                                             on_result=on_result))

    def close(self) -> None:
        """Close the run state this Verifier opened (the index stays open: it may be the caller's)."""
        if self._state is not None:
            self._state.close()
            self._state = None
