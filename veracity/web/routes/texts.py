"""The web app's routes for whole texts (``veracity check`` over HTTP), one router of
:data:`veracity.web.routes.ROUTERS`.

- ``POST /v1/check`` ``{text, method, labels, params, factscore}`` -> the record of ``veracity check --json``
  (text -> sentences with their worst verdict -> claims with verdict, evidence, trace; the text's scores);
  kept in the history like a single claim (its id in ``X-Veracity-Check`` and ``Location``).
- ``POST /v1/check/stream`` (same body) -> server-sent events as the check runs: ``start``, ``sentences``
  (the text's sentences and spans), ``claims`` (one sentence's extracted claims with their check-worthiness),
  ``extracted`` (all claims; the factual ones are verified next), ``trace`` (``{claim_id, event}``: a step of
  one claim's verification), ``claim`` (``{claim_id, record}``: a claim's verdict), then ``done``
  (``{check_id,
  record}``) or ``error``.

A text counts as one check against the app's cap on checks in flight; its claims run at most the
Verifier's ``concurrency`` at a time. Bad texts (empty, NUL characters, over ``max_chars``) are a 422 with a
hint before any model call.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any, Callable

from fastapi import APIRouter
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, Field

from veracity.check.inputs import DEFAULT_MAX_CHARS
from veracity.check.score import worst
from veracity.pipeline.methods import DEFAULT_METHOD

if TYPE_CHECKING:
    from veracity.web.common import WebContext

class CheckTextRequest(BaseModel):
    text: str = Field(description="The text to check (a paragraph, an article, an LLM's answer).")
    method: str = Field(DEFAULT_METHOD, description="The method that verifies each factual claim.")
    params: dict[str, Any] = Field(default_factory=dict,
                                   description="Method parameters, e.g. {\"t_max\": 3}.")
    labels: str = Field("3way", description="Label space: 3way or binary.")
    factscore: bool = Field(False,
                            description="Also score the text FActScore-style (length penalty gamma=10).")


def text_label(record: dict[str, Any]) -> str:
    """The history's label of a checked text: its worst sentence verdict, or NO_FACTUAL_CLAIM."""
    return worst(s["verdict"] for s in record["sentences"]) or "NO_FACTUAL_CLAIM"


def history_record(record: dict[str, Any]) -> dict[str, Any]:
    """What the history keeps: the record, with the fields a single claim's entry has (claim, label)."""
    return {**record, "claim": record["text"], "label": text_label(record), "kind": "text"}


def router(ctx: "WebContext") -> APIRouter:
    """The texts router on the app's shared context (verifiers, the cap on checks in flight, the store)."""
    return text_router(verifier_for=ctx.verifier_for, checks=ctx.checks, store=ctx.store, metrics=ctx.metrics)


def text_router(*, verifier_for: Callable[[str, str, dict[str, Any]], Any], checks: Any, store: Any,
                metrics: Any,
           max_chars: int = DEFAULT_MAX_CHARS) -> APIRouter:
    from veracity.check import STAGE
    from veracity.check.engine import ClaimVerifier
    from veracity.check.inputs import valid_text
    from veracity.check.run import check_text
    from veracity.web.common import sse_response

    api = APIRouter(tags=["checks"])
    params = STAGE.make_params({})

    def prepare(req: CheckTextRequest) -> tuple[ClaimVerifier, str]:
        text = valid_text(req.text, "the text", max_chars)  # a 422 with a hint, before any model call
        return ClaimVerifier(verifier_for(req.method, req.labels, req.params)), text

    def on_claim(record: dict[str, Any], started: float) -> None:
        metrics.claim(record.get("label"), time.perf_counter() - started)

    @api.post("/v1/check", summary="Check a whole text (atomic claims, each verified)",
              responses={200: {"description": "The record of `veracity check --json`"}})
    async def check(req: CheckTextRequest) -> JSONResponse:
        cv, text = prepare(req)
        t0 = time.perf_counter()
        with checks.slot():
            record = await check_text(text, cv, params=params, gamma=params.gamma if req.factscore else None,
                                      on_event=lambda ev: on_claim(ev["record"],
                                                                   t0) if ev["kind"] == "claim.verdict"
                                      else None)
        check_id = store.add_check(history_record(record))
        return JSONResponse(record, headers={"X-Veracity-Check": check_id,
                                             "Location": f"/v1/checks/{check_id}"})

    @api.post("/v1/check/stream", summary="Check a whole text, streaming claims and verdicts (SSE)",
              responses={200: {"content": {"text/event-stream": {}},
                               "description": "events: sentences, claims, extracted, trace, claim, then done "
                                              "or error"}})
    async def check_stream(req: CheckTextRequest) -> StreamingResponse:
        cv, text = prepare(req)
        release = checks.take()  # a 429 comes before the stream starts
        queue: asyncio.Queue[tuple[str, dict[str, Any]]] = asyncio.Queue()
        t0 = time.perf_counter()

        def on_event(ev: dict[str, Any]) -> None:
            kind = ev["kind"]
            if kind == "check.sentences":
                queue.put_nowait(("sentences", {"sentences": ev["sentences"]}))
            elif kind == "check.sentence":
                queue.put_nowait(("claims", {"sentence": ev["sentence"], "claims": ev["claims"]}))
            elif kind == "check.extracted":
                queue.put_nowait(("extracted", {"sentences": ev["sentences"], "fallbacks": ev["fallbacks"]}))
            elif kind == "claim.event":
                queue.put_nowait(("trace", {"claim_id": ev["claim_id"], "event": ev["event"]}))
            elif kind == "claim.verdict":
                on_claim(ev["record"], t0)
                queue.put_nowait(("claim", {"claim_id": ev["claim_id"], "record": ev["record"]}))

        task = asyncio.create_task(check_text(text, cv, params=params, on_event=on_event,
                                              gamma=params.gamma if req.factscore else None))
        task.add_done_callback(lambda _t: release())

        def finish(record: dict[str, Any]) -> tuple[str, dict[str, Any]]:
            return "done", {"check_id": store.add_check(history_record(record)), "record": record}

        return sse_response(task, queue, {"method": req.method, "chars": len(text)}, finish)

    return api
