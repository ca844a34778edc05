"""About the app: ``/v1/methods`` (the page's pickers), ``/healthz``, ``/metrics``."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, PlainTextResponse

from veracity.web.common import WebConfig, WebContext, version
from veracity.pipeline.methods import DEFAULT_METHOD


def router(ctx: WebContext) -> APIRouter:
    r = APIRouter()
    config = ctx.config

    @r.get("/v1/methods", tags=["meta"], summary="Methods and label spaces (the page's pickers)")
    async def methods() -> dict[str, Any]:
        from veracity.pipeline.labels import LABEL_SPACES
        from veracity.pipeline.methods import METHODS

        return {"methods": [{"name": s.name, "summary": s.summary, "needs_index": s.needs_index,
                             "available": s.needs_index is False or config.searcher is not None}
                            for s in METHODS.values()],
                "labels": [{"name": n, "labels": list(sp.values())} for n, sp in LABEL_SPACES.items()],
                "default_method": DEFAULT_METHOD if config.searcher is not None else "direct"}

    @r.get("/healthz", tags=["meta"],
           summary="App, model server and index (with a token set: only `ok` unless "
           "the request carries the token)")
    async def healthz(request: Request) -> JSONResponse:
        model = await asyncio.to_thread(_model_health, config)
        index: dict[str, Any] = {"ok": config.searcher is not None}
        if config.searcher is not None:
            manifest = getattr(config.searcher, "manifest", None) or {}
            index.update({"dir": config.index_dir or str(getattr(config.searcher, "index_dir", "") or ""),
                          "passages": manifest.get("passages")})
        else:
            index["error"] = "no index (start veracity web --index DIR)"
        ok = model["ok"] and index["ok"]
        if config.token and not getattr(request.state, "authorised", False):
            # open to monitors, but the index path, endpoint, model and version only for token holders
            return JSONResponse({"ok": ok}, status_code=200 if ok else 503)
        return JSONResponse({"ok": ok, "app": {"ok": True, "version": version()}, "model_server": model,
                             "index": index}, status_code=200 if ok else 503)

    @r.get("/metrics", tags=["meta"],
           summary="Prometheus text: requests, claims, failures, latency histograms",
           response_class=PlainTextResponse)
    async def get_metrics() -> PlainTextResponse:
        return PlainTextResponse(ctx.metrics.render(ctx.checks.running, ctx.store.count_active()),
                                 media_type="text/plain; version=0.0.4")

    return r


def _model_health(config: WebConfig) -> dict[str, Any]:
    if config.model_health is not None:
        return config.model_health()
    if not config.endpoint:
        return {"ok": config.llm is not None, "endpoint": None, "models": [getattr(config.llm, "model",
                                                                                   None)]}
    from veracity.serving.server import health

    models = health(config.endpoint)
    out: dict[str, Any] = {"ok": bool(models), "endpoint": config.endpoint, "models": models or []}
    if not models:
        out["error"] = "the model server does not answer"
    return out
