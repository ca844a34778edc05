"""Single checks: ``POST /v1/verify``, ``POST /v1/verify/stream`` (SSE), and the history under
``/v1/checks``."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from veracity.errors import DataError, VeracityError
from veracity.pipeline.methods import DEFAULT_METHOD
from veracity.pipeline.confidence import abstain
from veracity.web.common import WebContext, error, sse_response


class VerifyRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelt field is a 422 naming it, never silently ignored

    claim: str = Field(description="The claim to verify.")
    method: str = Field(DEFAULT_METHOD, description="A method of `veracity methods list`.")
    params: dict[str, Any] = Field(default_factory=dict,
                                   description="Method parameters, e.g. {\"t_max\": 3}.")
    labels: str = Field("3way", description="Label space: 3way or binary.")
    min_confidence: float | None = Field(None, ge=0.0, le=1.0, description=(
        "Abstain below this confidence: such a verdict becomes NOT_ENOUGH_INFO, marked abstained, with the "
        "label "
        "it would have given (as `veracity verify --min-confidence`)."))


def router(ctx: WebContext) -> APIRouter:
    r = APIRouter()
    config, store, metrics, checks = ctx.config, ctx.store, ctx.metrics, ctx.checks

    def _check_request(req: VerifyRequest) -> tuple[Any, Any]:
        """(verifier, claim) for a request, or a one-line error before any model call."""
        from veracity.pipeline.claims import make_claim

        if len(req.claim) > config.max_claim_chars:
            raise DataError(f"claim has {len(req.claim):,} characters, over the limit of "
                            f"{config.max_claim_chars:,}",
                            hint="shorten the claim")
        claim = make_claim(req.claim)
        return ctx.verifier_for(req.method, req.labels, req.params), claim

    @r.post("/v1/verify", tags=["checks"], summary="Verify one claim",
            responses={200: {"description": "The verdict JSON of `veracity verify --json`"}})
    async def verify(req: VerifyRequest) -> Response:
        verifier, claim = _check_request(req)
        with checks.slot():
            t0 = time.perf_counter()
            try:
                verdict = await verifier.averify(claim)
            except VeracityError:
                metrics.claim(None, time.perf_counter() - t0)
                raise
            abstain(verdict, req.min_confidence)
            record = verdict.to_dict(claim)
            metrics.claim(record["label"], time.perf_counter() - t0)
        check_id = store.add_check(record)
        return JSONResponse(record, headers={"X-Veracity-Check": check_id,
                                             "Location": f"/v1/checks/{check_id}"})

    @r.post("/v1/verify/stream", tags=["checks"], summary="Verify one claim, streaming its trace (SSE)",
            responses={200: {"content": {"text/event-stream": {}},
                             "description": "events: trace (one per step), then verdict or error"}})
    async def verify_stream(req: VerifyRequest) -> StreamingResponse:
        verifier, claim = _check_request(req)
        release = checks.take()  # taken now, so a 429 comes before the stream starts
        queue: asyncio.Queue[tuple[str, dict[str, Any]]] = asyncio.Queue()
        t0 = time.perf_counter()
        task = asyncio.create_task(verifier.averify(claim, on_event=lambda ev: queue.put_nowait(("trace",
                                                                                                 ev))))
        # released when the method ends, even if the stream never starts (a client gone before the first byte)
        task.add_done_callback(lambda _t: release())

        def finish(verdict: Any) -> tuple[str, dict[str, Any]]:
            abstain(verdict, req.min_confidence)
            record = verdict.to_dict(claim)
            metrics.claim(record["label"], time.perf_counter() - t0)
            return "verdict", {"check_id": store.add_check(record), "record": record}

        return sse_response(task, queue, {"claim": claim.text, "id": claim.id, "method": req.method}, finish,
                            failed=lambda: metrics.claim(None, time.perf_counter() - t0))

    @r.get("/v1/checks", tags=["checks"], summary="Past checks, newest first")
    async def list_checks(limit: int = Query(50, ge=1, le=500)) -> list[dict[str, Any]]:
        return store.checks(limit)

    @r.get("/v1/checks/{check_id}", tags=["checks"], summary="One past check (its verdict JSON)")
    async def get_check(check_id: str, download: bool = False) -> JSONResponse:
        record = store.check(check_id)
        if record is None:
            return error(404, f"no check {check_id[:64]!r}", hint="GET /v1/checks lists the checks kept")
        headers = ({"Content-Disposition": f'attachment; filename="check-{check_id}.json"'}
                   if download else None)
        return JSONResponse(record, headers=headers)

    return r
