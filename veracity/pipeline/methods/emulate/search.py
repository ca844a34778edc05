"""EMULATE's search engine and web pages on the local index.

The paper's search engine returns results of a title, a URL and a snippet, and clicking one opens a
web page (§3). On the local index a query returns passages; they are grouped by article, so a search
result is an article with its title, the place of its best passage in the article (``section``: indexes
keep no section headings, so it is the passage's number, :func:`~veracity.pipeline.tools.passage_section`)
and a snippet (the first words of that passage). The URL's place is taken by the source identity of the
claim's tools (``ctx.tools.source``: the index's source files and dump date), which SearchRank sees once
per result list. The web page behind a result is the article's passages from ``open_page(title)``, cut to
a token budget (``page_tokens``, tokens estimated as characters / :data:`CHARS_PER_TOKEN`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from veracity.pipeline.tools import passage_section
from veracity.pipeline.types import Evidence

# tokens are estimated, not counted (methods load no tokenizer): about 4 characters of English per token,
# so the paper's 400 words (~5.3 characters each with the space) are about 533 tokens
CHARS_PER_TOKEN = 4


def estimate_tokens(text: str) -> int:
    """The token estimate of ``text``: characters / CHARS_PER_TOKEN, rounded up."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def cut_to_tokens(text: str, tokens: int) -> str:
    """``text`` cut to about ``tokens`` tokens at a word boundary, `` ...`` marking the cut."""
    if estimate_tokens(text) <= tokens:
        return text
    cut = text[: tokens * CHARS_PER_TOKEN]
    head, space, _ = cut.rpartition(" ")
    return (head if space and head else cut).rstrip() + " ..."

if TYPE_CHECKING:  # pragma: no cover
    from veracity.pipeline.methods.base import MethodContext


@dataclass
class SearchResult:
    title: str
    snippet: str
    first_hit: Evidence

    @property
    def section(self) -> str:
        """Where the result's best passage sits in its article (the index keeps no section headings)."""
        return passage_section(self.first_hit.passage_id)


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
    """0-based indices: the 1-based numbers in ``order`` that are in range, first mention wins, then the
    rest."""
    picked: list[int] = []
    for num in order:
        if 1 <= num <= n and (num - 1) not in picked:
            picked.append(num - 1)
    return picked + [i for i in range(n) if i not in picked]


async def search_engine(ctx: "MethodContext", query: str, skip: set[str]) -> list[SearchResult]:
    """SearchEngine(query): ``search_k`` passages grouped into article results; titles in ``skip`` dropped."""
    hits = await ctx.tools.search(query, ctx.params.search_k, role="emulate.search")
    return group_results(hits, ctx.params.snippet_words, skip)


def page_within(passages: list[Evidence], tokens: int) -> list[Evidence]:
    """The passages, in order, until ``tokens`` (estimated) are used up; the last one shown is cut."""
    shown: list[Evidence] = []
    budget = tokens
    for ev in passages:
        if budget <= 0:
            break
        need = estimate_tokens(ev.text)
        if need > budget:
            ev = Evidence(ev.passage_id, ev.title, cut_to_tokens(ev.text, budget), ev.score)
        shown.append(ev)
        budget -= need
    return shown


async def open_result(ctx: "MethodContext", result: SearchResult) -> Page:
    """The result's "web page": the article's passages, cut to ``page_tokens`` (estimated) tokens."""
    passages = await ctx.tools.open_page(result.title, role="emulate.open_page") or [result.first_hit]
    return Page(result.title, page_within(passages, ctx.params.page_tokens))
