"""Run a method over many claims without a Verifier (:func:`run_claims`: the run's parts given as they are,
:meth:`Engine.of <veracity.pipeline.engine.Engine.of>`, on the same batch path as a Verifier's,
:func:`veracity.pipeline.batch.run_batch`, whose local backend holds the one worker loop, the one results
writer and the one manifest writer); the pieces live by job and are
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

from pathlib import Path
from typing import Any, Callable, Iterable

from veracity.pipeline.batch import run_batch
from veracity.pipeline.claims import (ClaimsFile, RejectedLine, claim_problem, default_claim_id, load_claims,  # noqa: F401
                                      make_claim, read_claims_jsonl)
from veracity.pipeline.engine import (Engine, _NoIndex, index_namespace, open_run_state,  # noqa: F401
                                      resolve_label_space, resolve_params, retriever_of, verify_one)
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
    engine = Engine.of(spec, llm=llm, searcher=searcher, params=params, state=state, state_dir=state_dir,
                       label_space=label_space, retriever_for=retriever_for, evidence=evidence,
                       exclude_titles=exclude_titles, search_mode=search_mode)
    try:  # the one batch path: checks, resume, manifest, results writer, the local backend's worker loop
        return await run_batch(engine, list(claims), out_path, concurrency=concurrency, progress=progress,
                               on_result=on_result, rejected=rejected, write_manifest=write_manifest)
    finally:
        engine.close()  # the run state this call opened (the caller's ``state`` stays open)
