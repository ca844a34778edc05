"""Check a text, or a file of texts: extract (sentences -> atomic claims -> check-worthiness), verify the
factual claims with the run's method, score.

One text (:func:`check_text`): everything in memory; a sentence's claims are verified while later sentences
are still being extracted. ``on_event(dict)`` hears each step as it happens (the web page's stream and the
terminal's live view): ``check.sentences``, the extraction roles' calls, ``check.sentence`` (a sentence's
claims), ``check.extracted``, then per claim ``claim.event`` (a step of its verification trace) and
``claim.verdict`` (held until ``check.extracted`` is sent, so the order is the same as when extraction came
first), and finally ``check.done`` with the whole record.

A file of texts (:func:`check_batch`), resumable like ``verify -i``: beside the results file ``OUT`` (one
line per text) a folder ``OUT.parts/`` holds ``extractions.jsonl`` (a text's extraction, appended before any
of its claims is verified) and ``claims.jsonl`` (one line per verified claim, written by the engine's batch
path with its manifest). A rerun skips texts already in ``OUT``, reuses stored extractions (no text is
extracted twice) and claims already verified (none verified twice, none lost). A text whose claims did not
all verify is not written to ``OUT``: the rerun retries those claims only.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from veracity.check.engine import ClaimVerifier
from veracity.check.extract import Extraction, Sentence, extract, text_id
from veracity.check.inputs import Doc
from veracity.check.roles import CheckParams
from veracity.check.score import sentence_verdict, text_scores
from veracity.errors import DataError, OutputError
from veracity.pipeline.backends.local import ClaimFeed
from veracity.pipeline.quotes import unsupported_attributions
from veracity.pipeline.results import ResultWriter, read_done_ids
from veracity.pipeline.types import Claim, Evidence

OnEvent = Callable[[dict[str, Any]], None]


def claims_to_verify(extraction: Extraction) -> list[Claim]:
    """The factual claims of a text, as engine claims (id ``<text>#s<i>c<j>``)."""
    return [c for s in extraction.sentences for c in _factual(s, extraction.text_id)]


def _factual(sentence: Sentence, tid: str) -> list[Claim]:
    return [Claim(id=c.id, text=c.text, meta={"text_id": tid}) for c in sentence.claims if c.factual]


UNCERTAIN_BELOW = 0.7  # a verdict less sure than this is listed apart as uncertain (abstained ones always)


def uncertain_claims(sentences: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The factual claims whose verdict is unsure: abstained (``--min-confidence``), or a confidence below
    :data:`UNCERTAIN_BELOW`; each with its number in the text, label (or the one it would give), confidence
    and
    grounding."""
    out, n = [], 0
    for s in sentences:
        for c in s["claims"]:
            n += 1
            conf = c.get("confidence")
            if c.get("label") is None or not (c.get("abstained") or (conf is not None
                                                                     and conf < UNCERTAIN_BELOW)):
                continue
            out.append({"n": n, "id": c["id"], "text": c["text"],
                        "label": c.get("abstained_label") or c["label"],
                        "confidence": conf, "abstained": bool(c.get("abstained")),
                        "grounding": c.get("grounding")})
    return out


def assemble(extraction: Extraction, results: dict[str, dict[str, Any]], method: str,
             gamma: int | None = None, header: dict[str, Any] | None = None) -> dict[str, Any]:
    """The record of one text: text -> sentences (with their worst verdict) -> claims (verdict, evidence,
    trace) and the text's scores. ``results`` maps a claim id to its verdict record (or ``{"error"}``)."""
    sentences = []
    labels: list[str | None] = []
    categories = {"factual": 0, "opinion": 0, "not_a_claim": 0}
    for s in extraction.sentences:
        claims = []
        mine: list[str | None] = []
        for c in s.claims:
            categories[c.category] = categories.get(c.category, 0) + 1
            item: dict[str, Any] = {"id": c.id, "text": c.text, "category": c.category}
            if c.factual:
                r = results.get(c.id) or {"error": "not verified"}
                if "label" in r:
                    item.update(label=r["label"], explanation=r["explanation"], evidence=r["evidence"],
                                trace=r["trace"])
                    for key in ("quotes", "grounding", "quote_terms"):  # quotes=show|check
                        if key in r:
                            item[key] = r[key]
                    # words the explanation attributes to its passages that they lack (any quotes mode;
                    # shown beside the explanation, the verdict unchanged)
                    lacks = unsupported_attributions(r["explanation"], [Evidence(e["passage_id"], e["title"],
                                                                                 e["text"])
                                                                       for e in r["evidence"]])
                    if lacks:
                        item["explanation_lacks"] = lacks
                    for key in ("confidence", "abstained", "abstained_label"):  # how sure the verdict is
                        if key in r:
                            item[key] = r[key]
                    mine.append(r["label"])
                else:
                    item.update(label=None, error=r["error"])
                    mine.append(None)
            claims.append(item)
        labels.extend(mine)
        sentences.append({"index": s.index, "start": s.start, "end": s.end, "text": s.text,
                          "verdict": sentence_verdict(mine), "claims": claims,
                          # its verified facts beside its worst verdict: "REFUTED (2 of 3 supported)"
                          "supported": sum(1 for x in mine if x == "SUPPORTED"), "verified": len(mine)})
    summary = {"sentences": len(sentences), "claims": sum(categories.values()), "categories": categories,
               **text_scores(labels, gamma=gamma), "fallbacks": extraction.fallbacks,
               "dropped": len(extraction.dropped),
               "no_factual_claim": categories["factual"] == 0,
               "uncertain": uncertain_claims(sentences), "uncertain_below": UNCERTAIN_BELOW}
    return {"id": extraction.text_id, "text": extraction.text, "method": method,
            "run": header or {"method": method},
            "summary": summary,
            "sentences": sentences, "dropped": extraction.dropped, "extraction_trace": extraction.trace}


async def check_text(text: str, cv: ClaimVerifier, *, tid: str | None = None,
                     params: CheckParams | None = None,
                     gamma: int | None = None, on_event: OnEvent | None = None) -> dict[str, Any]:
    """Check one text (already validated: :func:`veracity.check.inputs.valid_text`) and return its record.

    Extraction and verification overlap: a sentence's factual claims go to the verification workers as soon
    as that sentence and every sentence before it are extracted (so claims are queued in the text's order,
    as when the whole text was extracted first), while later sentences are still being extracted; both share
    the run's one client and so its limit on requests in flight. What ``on_event`` hears keeps its order:
    the claims' events (``claim.event``, ``claim.verdict``) are held until ``check.extracted`` has been
    sent, then passed on in the order they happened. The record is the one the sequential path gives."""
    params = params or CheckParams()
    emit = on_event or (lambda ev: None)
    tid = tid or text_id(text)
    feed = ClaimFeed()
    ready: dict[int, Sentence] = {}
    released = [0]  # sentences 1..n put into the feed

    def on_sentence(sentence: Sentence) -> None:
        ready[sentence.index] = sentence
        while released[0] + 1 in ready:
            released[0] += 1
            feed.put(_factual(ready.pop(released[0]), tid))

    held: list[dict[str, Any]] | None = []  # the claims' events until check.extracted is sent

    def emit_claim(ev: dict[str, Any]) -> None:
        if held is not None:
            held.append(ev)
        else:
            emit(ev)

    async with cv.client() as llm:
        verifying = asyncio.create_task(cv.verify_claims(
            feed, llm,
            on_record=lambda r: emit_claim({"kind": "claim.verdict", "claim_id": r["id"], "record": r}),
            on_event=(lambda cid, ev: emit_claim({"kind": "claim.event", "claim_id": cid,
                                                  "event": ev})) if on_event else None))
        extracting = asyncio.ensure_future(extract(text, llm, tid=tid, params=params, on_event=on_event,
                                                   on_sentence=on_sentence))
        try:
            # a failure on either side (the endpoint gone) ends both at once: verification cannot end before
            # the feed is closed but by failing, so its ending first is raised at once
            await asyncio.wait({extracting, verifying}, return_when=asyncio.FIRST_COMPLETED)
            if verifying.done() and not extracting.done():
                await verifying
            ex = await extracting
            feed.close()
            emit({"kind": "check.extracted", "id": ex.text_id, "fallbacks": ex.fallbacks,
                  "sentences": [{"index": s.index, "start": s.start, "end": s.end, "text": s.text,
                                 "claims": [{"id": c.id, "text": c.text,
                                             "category": c.category} for c in s.claims]}
                                for s in ex.sentences]})
            pending, held = held, None
            for ev in pending:
                emit(ev)
            results = await verifying
        finally:
            for task in (extracting, verifying):
                if not task.done():
                    task.cancel()
            await asyncio.gather(extracting, verifying, return_exceptions=True)
        header = cv.header(llm)
    record = assemble(ex, results, cv.method, gamma, header)
    emit({"kind": "check.done", "record": record})
    return record


# -- a file of texts, resumable ---------------------------------------------------------------------------
def parts_dir(out: Path) -> Path:
    return out.with_name(out.name + ".parts")


@dataclass
class BatchStats:
    out_path: Path
    total: int = 0
    skipped: int = 0  # texts already in the output
    done: int = 0  # texts written this run
    extracted: int = 0  # extractions made this run (the others were reused)
    claims_verified: int = 0  # claims verified this run
    failed: list[tuple[str, str]] = field(default_factory=list)  # (text id, why): retried on a rerun
    elapsed_s: float = 0.0


def _read_jsonl(path: Path) -> dict[str, dict[str, Any]]:
    """``{id: record}`` of a results file (a torn last line is cut off first, as the engine does)."""
    if not path.exists():
        return {}
    read_done_ids(path)  # repairs a torn last line; raises DataError on a file that is not results
    out: dict[str, dict[str, Any]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            rec = json.loads(line)
            out[str(rec["id"])] = rec
    return out


def check_batch_output(out: Path, cv: ClaimVerifier) -> None:
    """Everything about a batch's output that can be wrong, before any server is contacted."""
    if out.is_dir():
        raise DataError(f"output {out} is a directory", hint="pass a file path, e.g. -o checks.jsonl")
    parts = parts_dir(out)
    if parts.exists() and not parts.is_dir():
        raise DataError(f"{parts} is a file, not the batch's parts folder",
                        hint="move it aside or pass another -o")
    cv.check_output(parts / "claims.jsonl")  # writable, results only, same method and parameters
    for path in (out, parts / "extractions.jsonl"):
        if path.exists():
            read_done_ids(path)  # a file that is not results: one line naming it


async def check_batch(docs: list[Doc], out: Path, cv: ClaimVerifier, *, params: CheckParams | None = None,
                      gamma: int | None = None, on_text: Callable[[dict[str, Any]], None] | None = None,
                      on_claim: Callable[[dict[str, Any]], None] | None = None,
                      on_progress: Callable[[int, int], None] | None = None) -> BatchStats:
    """Check ``docs`` into ``out`` (see the module docstring); ``on_text(record)`` is called as each text is
    written, ``on_claim(record)`` as each claim's result is, ``on_progress(finished, pending)`` before the
    first
    text and after each (texts written or failed this run, texts this run has to do). An endpoint or output
    failure stops the run with
    everything written kept (raised, ``err.stats`` set)."""
    params = params or CheckParams()
    out = Path(out).expanduser()
    check_batch_output(out, cv)
    parts = parts_dir(out)
    parts.mkdir(parents=True, exist_ok=True)
    ext_path, claims_path = parts / "extractions.jsonl", parts / "claims.jsonl"
    stats = BatchStats(out_path=out, total=len(docs))
    done = read_done_ids(out)
    extractions = {k: Extraction.from_dict(v) for k, v in _read_jsonl(ext_path).items()}
    verified = _read_jsonl(claims_path)
    pending = [d for d in docs if d.id not in done]
    changed = [d.id for d in pending if d.id in extractions and extractions[d.id].text != d.text]
    if changed:  # its stored claims belong to the old text: refuse before any work
        ext_writer_hint = f"give the changed text a new id, or pass another -o (stored in {ext_path})"
        raise DataError(f"text {changed[0]!r} differs from the text its stored extraction was made from"
                        + (f" (and {len(changed) - 1} more)" if len(changed) > 1 else ""),
                        hint=ext_writer_hint)
    stats.skipped = len(docs) - len(pending)
    t0 = time.perf_counter()
    ext_writer, out_writer = ResultWriter(ext_path), ResultWriter(out)
    header: dict[str, Any] | None = None

    def append(writer: ResultWriter, record: dict[str, Any], where: Path) -> None:
        try:
            writer.append(record)
        except OSError as exc:
            err = OutputError(f"cannot write {where}: {exc.strerror or exc}",
                              hint="free space or fix the folder, then run the same command again to resume")
            err.stats = stats  # type: ignore[attr-defined]
            raise err from None

    def note_claim(record: dict[str, Any]) -> None:
        verified[str(record["id"])] = record
        stats.claims_verified += 1
        if on_claim is not None:
            on_claim(record)

    if on_progress is not None:
        on_progress(0, len(pending))
    try:
        for n, doc in enumerate(pending, 1):
            ex = extractions.get(doc.id)
            if ex is None:
                async with cv.client() as llm:
                    ex = await extract(doc.text, llm, tid=doc.id, params=params)
                append(ext_writer, ex.to_dict(), ext_path)  # stored before any of its claims is verified
                extractions[doc.id] = ex
                stats.extracted += 1
            claims = claims_to_verify(ex)
            todo = [c for c in claims if c.id not in verified]
            failed: list[tuple[str, str]] = []
            if todo:
                try:
                    run = await cv.verify_into(todo, claims_path, on_record=note_claim)
                except Exception as exc:
                    if getattr(exc, "stats", None) is not None:
                        exc.stats = stats  # type: ignore[attr-defined]
                    raise
                failed = list(run.failed)
            if failed:
                stats.failed.append((doc.id, f"{len(failed)} of {len(claims)} claims failed: {failed[0][1]}"))
                if on_progress is not None:
                    on_progress(n, len(pending))
                continue
            if header is None:
                async with cv.client() as llm:
                    header = cv.header(llm)
            record = assemble(ex, verified, cv.method, gamma, header)
            append(out_writer, record, out)
            stats.done += 1
            stats.elapsed_s = time.perf_counter() - t0
            if on_text is not None:
                on_text(record)
            if on_progress is not None:
                on_progress(n, len(pending))
    finally:
        ext_writer.close()
        out_writer.close()
        stats.elapsed_s = time.perf_counter() - t0
    return stats
