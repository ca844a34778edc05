"""The tools agents call: ``search`` over the local index and ``open_page`` (an article's passages).

Every call is recorded in the claim's :class:`Trace`. Searcher work runs in a worker thread so many
claims can be in flight on one event loop.
"""

from __future__ import annotations

import time
from typing import Iterable, Protocol

from veracity.pipeline.types import Evidence, ToolCall, Trace


class SearcherLike(Protocol):
    def search(self, query: str, k: int = 10, mode: str = "hybrid", exclude_titles: Iterable[str] = ()) -> list: ...

    def open_page(self, title: str) -> list: ...


def hit_to_evidence(hit) -> Evidence:
    return Evidence(passage_id=hit.passage_id, title=hit.title, text=hit.text, score=float(hit.score))


class Tools:
    """Per-claim view of the searcher that records each call in the trace."""

    def __init__(self, searcher: SearcherLike, trace: Trace, *, mode: str = "hybrid",
                 exclude_titles: Iterable[str] = ()):
        self.searcher = searcher
        self.trace = trace
        self.mode = mode
        self.exclude_titles = tuple(exclude_titles)

    async def search(self, query: str, k: int = 5, *, role: str | None = None,
                     exclude_titles: Iterable[str] = ()) -> list[Evidence]:
        import asyncio

        t0 = time.perf_counter()
        excl = self.exclude_titles + tuple(exclude_titles)
        hits = await asyncio.to_thread(self.searcher.search, query, k, self.mode, excl)
        ev = [hit_to_evidence(h) for h in hits]
        self.trace.tool_calls.append(
            ToolCall("search", query, [e.passage_id for e in ev], time.perf_counter() - t0, role)
        )
        return ev

    async def open_page(self, title: str, *, role: str | None = None) -> list[Evidence]:
        import asyncio

        t0 = time.perf_counter()
        hits = [] if title in self.exclude_titles else await asyncio.to_thread(self.searcher.open_page, title)
        ev = [hit_to_evidence(h) for h in hits]
        self.trace.tool_calls.append(
            ToolCall("open_page", title, [e.passage_id for e in ev], time.perf_counter() - t0, role)
        )
        return ev


def format_passages(evidence: Iterable[Evidence], *, max_words: int | None = None) -> str:
    """Passages as the models see them: one block per passage, ``[passage_id] title`` then its text.

    ``max_words`` caps the words of each passage's text (the block header is always kept).
    """
    blocks = []
    for ev in evidence:
        words = ev.text.split()
        text = " ".join(words[:max_words]) + (" ..." if max_words is not None and len(words) > max_words else "") \
            if max_words is not None else ev.text
        blocks.append(f"[{ev.passage_id}] {ev.title}\n{text}")
    return "\n\n".join(blocks) if blocks else "(no passages)"
