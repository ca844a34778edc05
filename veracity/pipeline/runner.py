"""Run a method over many claims without a Verifier (:func:`run_claims`); the pieces live by job and are
importable from here as before: claims input (:mod:`veracity.pipeline.claims`), results and resume
(:mod:`veracity.pipeline.results`), evidence settings (:mod:`veracity.pipeline.evidence`), the per-claim
engine (:mod:`veracity.pipeline.engine`). A :class:`~veracity.pipeline.api.Verifier` runs its batches on a
backend (:mod:`veracity.pipeline.backends`).

Input: JSONL, one object per line with ``claim`` (required), ``id`` (optional: default ``sha1(claim)[:12]``),
``date`` (optional); other keys are kept in ``Claim.meta``. A bad line (not UTF-8, not JSON, not an
object, no ``claim``, empty claim, claim over ``MAX_CLAIM_CHARS``) is reported as one ``file:line:
reason`` and skipped; the rest of the batch runs. Duplicate ids are an error for the whole file
(naming the lines), since it is ambiguous which claim a result would belong to.

Output: JSONL, one object per claim in completion order, written as ONE ``write`` + flush + fsync
under a lock, so a killed run leaves whole lines only (a torn last line, if the OS leaves one, is
cut off on the next run). Each line is ``Verdict.to_dict(claim)``: id, claim, label, explanation,
method, evidence, and the claim's full ``trace`` (LLM calls, tool calls, memory hits, timings) in the
same line, so results and traces can never get out of step. Beside it, ``<out>.manifest.json``
records method, parameters, label space, each role's token budget and effective temperature, the run's
seed and the rule that derives each request's seed from it (``roles.SEED_RULE``), model, endpoint, index
manifest, state directory and package version.

Label space (:mod:`veracity.pipeline.labels`): every claim of a run gets the run's ``label_space`` (3way
unless given) as ``ctx.label_space``; in ``binary`` no verdict is NOT_ENOUGH_INFO.

Evidence setting (:data:`EVIDENCE_SETTINGS`): what a claim's tools search. ``open`` (default): the run's
index (``searcher``). ``gold``: only the claim's own gold passages, ``Claim.meta["evidence"]`` (a list of
``{title, text}``; the benchmark readers attach it, a claims file may carry it), served by a
:class:`~veracity.indexes.gold.GoldRetriever` built for that claim. ``none``: closed book, a
:class:`~veracity.indexes.gold.NoEvidenceRetriever` (every search and page is empty, traced as
``evidence.none``). The engine only sees a per-claim retriever factory, ``retriever_for(claim) ->
Retriever`` (:func:`claim_retrievers` builds the one of a setting); it knows nothing of the methods. The
manifest records the setting, and a run is resumed only in the same one.

Run state: a method that keeps state across claims (``spec.state_cls``, e.g. MERMAID's evidence memory)
gets it opened once per run from a state directory and passed to every claim as ``ctx.state``; whoever
opens it closes it (:func:`run_claims` when given ``state_dir`` and no ``state``, else the caller). The
runner knows nothing else about it.

Resume: ids already in the output are skipped. If the model endpoint fails (``EndpointError``) or the
results cannot be written (``OutputError``: disk full, file size limit) the run stops at once, in-flight claims are dropped (not written), and the error is raised with the
run's statistics attached as ``err.stats``; rerunning the same command resumes.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from pathlib import Path
from typing import Any, Callable, Iterable

from veracity.errors import ConfigError, EndpointError, OutputError
from veracity.pipeline.claims import (ClaimsFile, RejectedLine, claim_problem, default_claim_id, load_claims,  # noqa: F401
                                      make_claim, read_claims_jsonl)
from veracity.pipeline.engine import (_NoIndex, index_namespace, open_run_state, resolve_label_space,  # noqa: F401
                                      resolve_params, retriever_of, verify_one)
from veracity.pipeline.evidence import (_NO_EVIDENCE, EVIDENCE_SETTINGS, GOLD_HINT, ClaimRetrievers,  # noqa: F401
                                        check_gold_evidence, claim_retrievers, evidence_setting, gold_retriever)
from veracity.pipeline.labels import LabelSpace
from veracity.pipeline.methods import MethodSpec, get_method
from veracity.pipeline.results import (ResultWriter, RunStats, ServedModel, _check_manifest, _check_result_lines,  # noqa: F401
                                       _params_dict, _Progress, check_output, claim_failure, read_done_ids,
                                       write_run_manifest)
from veracity.pipeline.types import Claim
async def run_claims(
    claims: Iterable[Claim],
    method: str | MethodSpec,
    llm: Any,
    searcher: Any,
    out_path: Path | str,
    *,
    concurrency: int = 4,
    params: Any = None,
    state: Any = None,
    state_dir: Path | str | None = None,
    rejected: Iterable[RejectedLine] = (),
    progress: bool = False,
    exclude_titles: Iterable[str] = (),
    search_mode: str | None = None,
    on_result: Callable[[dict[str, Any]], None] | None = None,
    write_manifest: bool = True,
    label_space: LabelSpace | str | None = None,
    retriever_for: ClaimRetrievers | None = None,
    evidence: str | None = None,
) -> RunStats:
    """Verify ``claims`` with ``concurrency`` claims in flight; append each result to ``out_path``.

    A method that keeps run state gets ``state`` (opened and closed by the caller) or, without one, a
    state opened here from ``state_dir`` and closed when the run ends. Returns :class:`RunStats`.
    Claims whose method fails (e.g. the model's reply never validates) are listed in ``stats.failed``
    and not written, so a rerun retries them. An ``EndpointError`` (or an ``OutputError``: results cannot
    be written) stops the run; it is re-raised with ``err.stats`` set. ``label_space`` (default 3way) is every claim's ``ctx.label_space`` and is recorded in
    the manifest. ``retriever_for`` gives each claim its own retriever instead of the index's (then no index
    is needed); ``evidence`` names the setting in the manifest (default: ``open`` without ``retriever_for``,
    ``custom`` with one).
    """
    spec = get_method(method) if isinstance(method, str) else method
    params = resolve_params(spec, params)
    space = resolve_label_space(label_space)
    spec.check_label_space(params, space)
    setting = evidence or ("open" if retriever_for is None else "custom")
    claims = list(claims)
    if retriever_for is gold_retriever:  # every claim has its gold passages, before anything is written
        check_gold_evidence(claims)
    if spec.needs_index and searcher is None and retriever_for is None:
        raise ConfigError(f"method {spec.name} needs an index", hint="pass --index DIR (build one: veracity index build demo)")
    if concurrency < 1:
        raise ConfigError("concurrency must be at least 1")
    out_path = Path(out_path)
    check_output(out_path, spec, params, space, setting)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    stats = RunStats(out_path=out_path, total=len(claims), rejected=list(rejected))
    done_ids = read_done_ids(out_path)
    pending = deque(c for c in claims if c.id not in done_ids)
    stats.skipped = len(claims) - len(pending)
    if write_manifest:
        write_run_manifest(out_path, spec, params, llm, searcher, state_dir, space, setting)
    writer = ResultWriter(out_path)
    own_state = state is None and spec.state_cls is not None and bool(pending)
    if own_state:
        try:
            state = open_run_state(spec, params, searcher, state_dir, setting)
        except BaseException:
            writer.close()
            raise
    stop: list[EndpointError | OutputError] = []  # what ends the whole run (the others stop at their claim)
    tasks: list[asyncio.Task] = []
    outcomes: list = []
    t0 = time.perf_counter()
    bar = _Progress(len(pending), spec.name, stats) if progress and pending else None

    def halt(exc: EndpointError | OutputError) -> None:
        if not stop:
            stop.append(exc)
            me = asyncio.current_task()
            for t in tasks:
                if t is not me:
                    t.cancel()

    async def worker() -> None:
        while pending and not stop:
            claim = pending.popleft()
            try:
                verdict = await verify_one(claim, spec, llm, searcher, params, state,
                                           exclude_titles=exclude_titles, search_mode=search_mode,
                                           label_space=space, retriever_for=retriever_for)
            except EndpointError as exc:
                halt(exc)
                return
            except Exception as exc:  # a bug in one claim's run must not sink the batch
                stats.failed.append((claim.id, claim_failure(exc)))
                continue
            record = verdict.to_dict(claim)
            try:
                writer.append(record)
            except OSError as exc:  # disk full, file size limit, ...: stop; a torn line is cut on resume
                halt(OutputError(f"cannot write results to {out_path}: {exc.strerror or exc}",
                                 hint="free space or fix the folder, then run the same command again to resume"))
                return
            summary = verdict.trace.summary()
            stats.done += 1
            stats.prompt_tokens += summary["prompt_tokens"]
            stats.completion_tokens += summary["completion_tokens"]
            stats.elapsed_s = time.perf_counter() - t0
            if bar is not None:
                bar.advance()
            if on_result is not None:
                on_result(record)

    try:
        if bar is not None:
            bar.start()
        tasks.extend(asyncio.create_task(worker()) for _ in range(min(concurrency, len(pending))))
        outcomes = await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        for t in tasks:
            t.cancel()
        try:
            writer.close()
        except OSError:  # the failed write was already reported (stop)
            pass
        if own_state:  # the run state this call opened (e.g. the evidence memory's SQLite connection)
            state.close()
        stats.elapsed_s = time.perf_counter() - t0
        if bar is not None:
            bar.stop()
    if stop:
        err = stop[0]
        stats.stopped = str(err)
        err.stats = stats  # type: ignore[attr-defined]
        raise err
    for outcome in outcomes:  # e.g. an on_result callback that raised: surface it, results stay written
        if isinstance(outcome, BaseException) and not isinstance(outcome, asyncio.CancelledError):
            raise outcome
    return stats


