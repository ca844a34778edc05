"""The page at ``/`` and the API docs page at ``/v1/docs`` (local files, no CDN)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import FileResponse

from veracity.web.common import STATIC, WebContext


def router(ctx: WebContext) -> APIRouter:
    r = APIRouter()

    @r.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html")

    @r.get("/v1/docs", include_in_schema=False)
    async def docs() -> FileResponse:
        return FileResponse(STATIC / "docs.html", media_type="text/html")

    return r
