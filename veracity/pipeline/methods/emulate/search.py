"""EMULATE's search engine and web pages on the local index.

The paper's search engine returns results of a title, a URL and a snippet, and clicking one opens a
web page (§3). On the local index a query returns passages; they are grouped by article, so a search
result is an article with its title and a snippet (the first words of its best passage), and the web
page behind it is the article's passages from ``open_page(title)``, capped in words.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from veracity.pipeline.types import Evidence

if TYPE_CHECKING:  # pragma: no cover
    from veracity.pipeline.methods.base import MethodContext


@dataclass
class SearchResult:
    title: str
    snippet: str
    first_hit: Evidence


@dataclass
class Page:
    title: str
    passages: list[Evidence] = field(default_factory=list)


def group_results(hits: list[Evidence], snippet_words: int, skip: set[str]) -> list[SearchResult]:
    """Passages -> one result per article (search order), snippet from its best passage."""
    out: dict[str, SearchResult] = {}
    for h in hits:
        if h.title in out or h.title in skip:
            continue
        out[h.title] = SearchResult(h.title, " ".join(h.text.split()[:snippet_words]), h)
    return list(out.values())


def apply_ranking(order: list[int], n: int) -> list[int]:
    """0-based indices: the 1-based numbers in ``order`` that are in range, first mention wins, then the rest."""
    picked: list[int] = []
    for num in order:
        if 1 <= num <= n and (num - 1) not in picked:
            picked.append(num - 1)
    return picked + [i for i in range(n) if i not in picked]


async def search_engine(ctx: "MethodContext", query: str, skip: set[str]) -> list[SearchResult]:
    """SearchEngine(query): ``search_k`` passages grouped into article results; titles in ``skip`` dropped."""
    hits = await ctx.tools.search(query, ctx.params.search_k, role="emulate.search")
    return group_results(hits, ctx.params.snippet_words, skip)


async def open_result(ctx: "MethodContext", result: SearchResult) -> Page:
    """The result's "web page": the article's passages, capped at ``page_max_words`` words."""
    passages = await ctx.tools.open_page(result.title, role="emulate.open_page") or [result.first_hit]
    budget = ctx.params.page_max_words
    shown: list[Evidence] = []
    for ev in passages:
        if budget <= 0:
            break
        words = ev.text.split()
        if len(words) > budget:
            ev = Evidence(ev.passage_id, ev.title, " ".join(words[:budget]) + " ...", ev.score)
        shown.append(ev)
        budget -= len(words)
    return Page(result.title, shown)
