"""Hybrid retrieval: a combiner of any two retrievers by reciprocal-rank fusion (RRF).

Each retriever ranks the top ``max(k, depth)`` passages (with the same title exclusions), the two
rankings are fused by :func:`rrf_fuse` and the top ``k`` kept, each with its fused score. BM25 + dense
is the index's ``hybrid`` mode; any other pair of :class:`~veracity.indexes.retriever.Retriever`
implementations combines the same way.
"""

from __future__ import annotations

from typing import Iterable

from veracity.indexes.retriever import Hit, Retriever

RRF_K = 60
RRF_DEPTH = 50


def rrf_fuse(rankings: Iterable[list[str]], k: int = RRF_K) -> list[tuple[str, float]]:
    """Reciprocal-rank fusion: score(d) = sum over lists of 1 / (k + rank), rank from 1. Ties keep the
    order of first appearance."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, doc in enumerate(ranking, start=1):
            scores[doc] = scores.get(doc, 0.0) + 1.0 / (k + rank)
    order = {doc: i for i, doc in enumerate(scores)}
    return sorted(scores.items(), key=lambda kv: (-kv[1], order[kv[0]]))


class HybridRetriever:
    """Two retrievers fused by RRF; ``open_page`` is the first one's."""

    def __init__(self, first: Retriever, second: Retriever, *, rrf_k: int = RRF_K, depth: int = RRF_DEPTH,
                 name: str = "hybrid"):
        self.first = first
        self.second = second
        self.rrf_k = rrf_k
        self.depth = depth
        self.name = name

    def search(self, query: str, k: int, *, exclude_titles: Iterable[str] = (),
               exclude_patterns: Iterable[str] = ()) -> list[Hit]:
        """Top-k passages: the top ``max(k, depth)`` of each retriever fused by RRF (scores: the fused
        scores; title and text: as the retriever that ranked the passage first returned them)."""
        if k <= 0:
            return []
        titles, patterns = tuple(exclude_titles), tuple(exclude_patterns)
        depth = max(k, self.depth)
        lists = [r.search(query, depth, exclude_titles=titles, exclude_patterns=patterns)
                 for r in (self.first, self.second)]
        seen: dict[str, Hit] = {}
        for hits in lists:
            for h in hits:
                seen.setdefault(h.passage_id, h)
        fused = rrf_fuse([[h.passage_id for h in hits] for hits in lists], self.rrf_k)[:k]
        return [Hit(pid, seen[pid].title, seen[pid].text, score) for pid, score in fused]

    def open_page(self, title: str) -> list[Hit]:
        return self.first.open_page(title)
