"""The tools agents call: ``search`` over the claim's retriever and ``open_page`` (an article's passages).

Every call is recorded in the claim's :class:`Trace`. Retriever work runs in a worker thread so many
claims can be in flight on one event loop. The retriever is any
:class:`~veracity.indexes.retriever.Retriever` (BM25, dense, hybrid, or a per-claim one such as a claim's
gold evidence); the caller picks it. A retriever with a ``trace_event`` attribute (the closed book,
:class:`~veracity.indexes.gold.NoEvidenceRetriever`: ``evidence.none``) also gets that event recorded
with each call (``tool``, ``query``, ``role``, ``note``), beside the call's :class:`ToolCall` record.

``Tools.source`` (:class:`SourceIdentity`) says what the results come from: the index's source files and
their dump date (from the index manifest), or the per-claim evidence, and the retrieval mode. It is the
offline stand-in for a web result's URL (EMULATE's SearchRank shows it, §3 (2)); every result of one run
shares it.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable

from veracity.pipeline.types import Evidence, ToolCall, Trace

if TYPE_CHECKING:
    from veracity.indexes.retriever import Retriever


@dataclass(frozen=True)
class SourceIdentity:
    """Where a claim's search results come from: ``index`` (the index's source files, or the per-claim
    evidence), ``dump_date`` (YYYY-MM-DD; None when unknown) and ``retriever`` (bm25 / dense / hybrid /
    gold / none)."""

    index: str
    dump_date: str | None = None
    retriever: str = ""

    def describe(self) -> str:
        dated = f", dump of {self.dump_date}" if self.dump_date else ", dump date unknown"
        how = f", {self.retriever} retrieval" if self.retriever else ""
        return f"{self.index}{dated}{how}"

    @classmethod
    def of(cls, retriever: Any, manifest: dict | None = None) -> "SourceIdentity":
        """From an index manifest (its sources' file names and formats, its dump date), else the retriever."""
        name = str(getattr(retriever, "name", "") or "")
        if isinstance(manifest, dict) and manifest.get("sources"):
            files = [f"{os.path.basename(str(s.get('path', '?')))} ({s.get('format', '?')})"
                     for s in manifest["sources"] if isinstance(s, dict)]
            return cls("local index of " + ", ".join(files), manifest.get("dump_date"), name)
        if isinstance(manifest, dict) and manifest.get("name"):
            return cls(f"local index {manifest['name']}", manifest.get("dump_date"), name)
        what = {"gold": "the claim's gold evidence passages", "none": "no evidence (closed book)"}.get(
            name, "a local retriever")
        return cls(what, None, name)


def passage_section(passage_id: str) -> str:
    """Where a passage sits in its article. Indexes keep no section headings, only the chunk number ``n``
    of ids ``title#n``: ``passage 1 (the article's opening)``, ``passage 4``; other ids as they are."""
    _, sep, n = passage_id.rpartition("#")
    if sep and n.isdigit():
        return f"passage {int(n) + 1}" + (" (the article's opening)" if n == "0" else "")
    return f"passage {passage_id}"


def hit_to_evidence(hit) -> Evidence:
    return Evidence(passage_id=hit.passage_id, title=hit.title, text=hit.text, score=float(hit.score))


class Tools:
    """Per-claim view of a retriever that records each call in the trace; ``exclude_titles`` are hidden
    from every search and page of this claim."""

    def __init__(self, retriever: Retriever, trace: Trace, *, exclude_titles: Iterable[str] = (),
                 source: SourceIdentity | None = None):
        self.retriever = retriever
        self.trace = trace
        self.exclude_titles = tuple(exclude_titles)
        self.source = source or SourceIdentity.of(retriever, getattr(retriever, "manifest", None))

    async def search(self, query: str, k: int = 5, *, role: str | None = None,
                     exclude_titles: Iterable[str] = ()) -> list[Evidence]:
        import asyncio

        t0 = time.perf_counter()
        excl = self.exclude_titles + tuple(exclude_titles)
        hits = await asyncio.to_thread(self.retriever.search, query, k, exclude_titles=excl)
        ev = [hit_to_evidence(h) for h in hits]
        self.trace.tool_calls.append(
            ToolCall("search", query, [e.passage_id for e in ev], time.perf_counter() - t0, role)
        )
        self._tell(self.trace.tool_calls[-1], ev)
        self._note("search", query, role)
        return ev

    async def open_page(self, title: str, *, role: str | None = None) -> list[Evidence]:
        import asyncio

        t0 = time.perf_counter()
        hits = [] if title in self.exclude_titles else await asyncio.to_thread(self.retriever.open_page,
                                                                               title)
        ev = [hit_to_evidence(h) for h in hits]
        self.trace.tool_calls.append(
            ToolCall("open_page", title, [e.passage_id for e in ev], time.perf_counter() - t0, role)
        )
        self._tell(self.trace.tool_calls[-1], ev)
        self._note("open_page", title, role)
        return ev

    def _tell(self, call: ToolCall, ev: list[Evidence]) -> None:
        """The trace's listener (live progress) hears of the call with its hits (id, title, score)."""
        if self.trace.listener is not None:
            self.trace.notify("tool", tool=call.tool, query=call.query, role=call.role,
                              latency_s=round(call.latency_s, 4),
                              hits=[{"passage_id": e.passage_id, "title": e.title,
                                     "score": e.score} for e in ev])

    def _note(self, tool: str, query: str, role: str | None) -> None:
        kind = getattr(self.retriever, "trace_event", None)
        if isinstance(kind, str) and kind:
            self.trace.event(kind, tool=tool, query=query, role=role, note=getattr(self.retriever, "note",
                                                                                   ""))
