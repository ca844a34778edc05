"""The index: ``/v1/passages/{id}`` and ``/v1/articles/{title}`` (the page's article view)."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter
from starlette.exceptions import HTTPException as StarletteHTTPException

from veracity.errors import IndexDirError
from veracity.web.common import WebContext


def router(ctx: WebContext) -> APIRouter:
    r = APIRouter()
    config = ctx.config

    def _searcher() -> Any:
        if config.searcher is None:
            raise IndexDirError("this server has no index", hint="start `veracity web --index DIR`")
        return config.searcher

    @r.get("/v1/passages/{passage_id:path}", tags=["index"], summary="One passage of the index")
    async def get_passage(passage_id: str) -> dict[str, Any]:
        found = await asyncio.to_thread(_passage, _searcher(), passage_id)
        if found is None:
            raise StarletteHTTPException(404, f"no passage {passage_id[:200]!r} in the index")
        return found

    @r.get("/v1/articles/{title:path}", tags=["index"], summary="An article's passages in order")
    async def get_article(title: str) -> dict[str, Any]:
        hits = await asyncio.to_thread(_searcher().open_page, title)
        if not hits:
            raise StarletteHTTPException(404, f"no article {title[:200]!r} in the index")
        return {"title": hits[0].title,
                "passages": [{"passage_id": h.passage_id, "text": h.text} for h in hits]}

    return r


def _passage(searcher: Any, passage_id: str) -> dict[str, Any] | None:
    store = getattr(searcher, "store", None)
    if store is not None and hasattr(store, "by_ids"):
        found = store.by_ids([passage_id])
        if passage_id in found:
            title, text = found[passage_id]
            return {"passage_id": passage_id, "title": title, "text": text}
        return None
    title = passage_id.rsplit("#", 1)[0]  # an index without a passage store: ids are "title#n"
    for hit in searcher.open_page(title):
        if hit.passage_id == passage_id:
            return {"passage_id": hit.passage_id, "title": hit.title, "text": hit.text}
    return None
