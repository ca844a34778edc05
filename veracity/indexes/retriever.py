"""The retrieval contract: what every retrieval backend implements, and the pieces backends share.

A retriever answers two questions about its evidence collection:

- ``search(query, k, *, exclude_titles=(), exclude_patterns=())``: the top ``k`` passages for ``query``,
  best first, as :class:`Hit` records (passage id ``title#n``, title, text, score). Titles in
  ``exclude_titles`` (underscores count as spaces) and titles matching a regex in ``exclude_patterns``
  never appear (leakage control: hide the article a claim was written from); a bad pattern is a
  ConfigError. ``k <= 0`` gives ``[]``.
- ``open_page(title)``: the article's passages in order (``[]`` when the title is unknown).

plus a ``name`` (``"bm25"``, ``"dense"``, ``"hybrid"``, ...) that says which backend answered. Calls
may come from many threads at once; the pipeline runs them in worker threads.

Adding a backend is one class with these three members; nothing else changes: the pipeline's
:class:`~veracity.pipeline.tools.Tools` only calls ``search`` and ``open_page``. Today's backends are
:class:`~veracity.indexes.bm25.BM25Retriever` (Lucene), :class:`~veracity.indexes.dense.DenseRetriever`
(FAISS) and :class:`~veracity.indexes.hybrid.HybridRetriever`, which fuses any two retrievers by
reciprocal rank. A per-claim retriever (e.g. one that serves only a claim's gold evidence passages) is
likewise one class implementing this protocol, constructed for that claim. :class:`TitleFilter` and the
helpers below are what the index-backed retrievers share; a new backend may use them or not.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Callable, Iterable, Protocol, runtime_checkable

from veracity.errors import ConfigError
from veracity.indexes.passages import split_passage_id


@dataclass(frozen=True)
class Hit:
    passage_id: str
    title: str
    text: str
    score: float


@runtime_checkable
class Retriever(Protocol):
    """A retrieval backend (see the module docstring for the contract)."""

    name: str

    def search(self, query: str, k: int, *, exclude_titles: Iterable[str] = (),
               exclude_patterns: Iterable[str] = ()) -> list[Hit]: ...

    def open_page(self, title: str) -> list[Hit]: ...


def _norm_title(title: str) -> str:
    return unicodedata.normalize("NFC", title.replace("_", " ")).strip()


class TitleFilter:
    """Exclusion by exact title (underscores = spaces) or by regex searched in the title."""

    def __init__(self, titles: Iterable[str] = (), patterns: Iterable[str] = ()):
        self.titles = {_norm_title(t) for t in titles}
        try:
            self.patterns = [re.compile(p) for p in patterns]
        except re.error as exc:
            raise ConfigError(f"bad title pattern: {exc}",
                              hint="patterns are Python regular expressions") from None

    def __bool__(self) -> bool:
        return bool(self.titles or self.patterns)

    def keep(self, title: str) -> bool:
        t = _norm_title(title)
        return t not in self.titles and not any(p.search(t) for p in self.patterns)


# ------------------------------------------------------------------- shared by index-backed retrievers

def filtered_top(fetch: Callable[[int], list], title_of: Callable, k: int, keep: TitleFilter,
                 total: int) -> list:
    """The first ``k`` items of a ranking that ``keep`` lets through. ``fetch(depth)`` returns the top
    ``depth`` items; with a filter the depth starts at ``2k + 10`` and grows fourfold until ``k`` items
    survive, the ranking runs out, or the whole collection (``total``) was fetched."""
    depth = k if not keep else 2 * k + 10
    while True:
        items = fetch(min(depth, total))
        kept = [it for it in items if keep.keep(title_of(it))] if keep else items
        if len(kept) >= k or len(items) < min(depth, total) or depth >= total:
            return kept[:k]
        depth *= 4


def passage_hits(store, ranked: list[tuple[str, float]]) -> list[Hit]:
    """``(passage id, score)`` pairs as hits with their titles and texts from the passage store (a passage
    the store lacks keeps the title from its id and an empty text)."""
    texts = store.by_ids([pid for pid, _ in ranked])
    hits = []
    for pid, score in ranked:
        title, text = texts.get(pid, (split_passage_id(pid)[0], ""))
        hits.append(Hit(pid, title, text, score))
    return hits


def page_hits(store, title: str) -> list[Hit]:
    """The article's passages in order from the passage store (score 1.0; [] when the title is unknown).
    ``Some_Title`` also finds ``Some Title``."""
    rows = store.page(title)
    if not rows and "_" in title:
        rows = store.page(title.replace("_", " "))
    return [Hit(pid, t, text, 1.0) for pid, t, text in rows]


class StoredPassagesRetriever:
    """Base of the retrievers that rank passages of an index directory's passage store: a subclass sets
    ``store`` and implements ``ranked(query, k, keep) -> [(passage id, score)]`` (the top ``k`` whose titles
    ``keep`` lets through); search and open_page follow from it."""

    name = "stored"
    store = None

    def ranked(self, query: str, k: int, keep: TitleFilter) -> list[tuple[str, float]]:
        raise NotImplementedError

    def search(self, query: str, k: int, *, exclude_titles: Iterable[str] = (),
               exclude_patterns: Iterable[str] = ()) -> list[Hit]:
        if k <= 0:
            return []
        keep = TitleFilter(exclude_titles, exclude_patterns)
        return passage_hits(self.store, self.ranked(query, k, keep))

    def open_page(self, title: str) -> list[Hit]:
        return page_hits(self.store, title)

