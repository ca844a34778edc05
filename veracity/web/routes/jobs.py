"""Batch jobs: ``/v1/jobs`` (a JSONL claims file in, results out; they persist and resume, see
:mod:`veracity.web.jobs`)."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import FileResponse, JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from veracity.errors import ConfigError, DataError
from veracity.pipeline.methods import DEFAULT_METHOD
from veracity.web.common import TooBusy, WebContext, error
from veracity.web.jobs import job_view


def router(ctx: WebContext) -> APIRouter:
    r = APIRouter()
    config, store = ctx.config, ctx.store

    @r.post("/v1/jobs", tags=["jobs"], summary="Start a batch job from a JSONL claims file (the body)",
            status_code=201,
            openapi_extra={"requestBody": {
                "required": True, "content": {"application/x-ndjson": {"schema": {"type": "string"}}}}})
    async def create_job(request: Request, method: str = DEFAULT_METHOD, labels: str = "3way",
                         params: str = Query("{}", description="method parameters as a JSON object")
                         ) -> JSONResponse:
        try:
            parsed = json.loads(params)
        except json.JSONDecodeError:
            parsed = None
        if not isinstance(parsed, dict):
            raise ConfigError("params must be a JSON object", hint='e.g. params={"t_max": 3}')
        # the job's Verifier, built now: its config checks the method, parameters and label space (one line
        # each, before anything is kept) and is the one the runner takes up
        run = ctx.verifier_for(method, labels, parsed).config.method
        if store.count_active() >= config.max_jobs:
            raise TooBusy(f"{config.max_jobs} jobs are queued or running, the limit", retry_after=30)
        body = await request.body()
        if not body.strip():
            raise DataError("the uploaded claims file is empty",
                            hint='one JSON object per line, e.g. '
                                 '{"id": "c1", "claim": "Paris is in France."}')
        job = store.create_job(body, method, run.labels, parsed)
        ctx.runner.submit(job["id"])
        return JSONResponse(job_view(store, ctx.runner, job), status_code=201,
                            headers={"Location": f"/v1/jobs/{job['id']}"})

    @r.get("/v1/jobs", tags=["jobs"], summary="Jobs, newest first")
    async def list_jobs(limit: int = Query(50, ge=1, le=500)) -> list[dict[str, Any]]:
        return [job_view(store, ctx.runner, j) for j in store.jobs(limit)]

    def _job_or_404(job_id: str) -> dict[str, Any]:
        job = store.job(job_id)
        if job is None:
            raise StarletteHTTPException(404, f"no job {job_id[:64]!r}")
        return job

    @r.get("/v1/jobs/{job_id}", tags=["jobs"], summary="A job's state and progress")
    async def get_job(job_id: str) -> dict[str, Any]:
        return job_view(store, ctx.runner, _job_or_404(job_id))

    @r.get("/v1/jobs/{job_id}/results", tags=["jobs"], summary="A job's results (JSONL, one verdict a line)",
           responses={200: {"content": {"application/x-ndjson": {}}}})
    async def job_results(job_id: str) -> Response:
        job = _job_or_404(job_id)
        path = store.results_path(job["id"])
        if not path.exists():
            return Response(b"", media_type="application/x-ndjson")
        return FileResponse(path, media_type="application/x-ndjson", filename=f"results-{job['id']}.jsonl")

    @r.post("/v1/jobs/{job_id}/resume", tags=["jobs"], summary="Queue a stopped or finished job again "
            "(claims already written are skipped; failed ones are retried)")
    async def resume_job(job_id: str) -> dict[str, Any]:
        job = _job_or_404(job_id)
        if job["state"] in ("queued", "running"):
            return error(409, f"job {job_id} is already {job['state']}")  # type: ignore[return-value]
        if store.count_active() >= config.max_jobs:
            raise TooBusy(f"{config.max_jobs} jobs are queued or running, the limit", retry_after=30)
        store.set_state(job["id"], "queued", error=None)
        ctx.runner.submit(job["id"])
        return job_view(store, ctx.runner, store.job(job["id"]))  # type: ignore[arg-type]

    return r
