"""Search an index directory: BM25, dense, or hybrid (reciprocal-rank fusion of the two).

A :class:`Searcher` loads the index once and serves many queries from many threads; ``asearch`` /
``aopen_page`` run them in a worker thread for the async pipeline. Titles and title regex patterns can
be excluded at query time (leakage control: e.g. hide the article a claim was written from).
"""

from __future__ import annotations

import asyncio
import re
import threading
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from veracity.errors import ConfigError, IndexDirError
from veracity.indexes.manifest import read_manifest
from veracity.indexes.passages import split_passage_id
from veracity.indexes.store import PassageStore

MODES = ("bm25", "dense", "hybrid")
RRF_K = 60


@dataclass(frozen=True)
class Hit:
    passage_id: str
    title: str
    text: str
    score: float


def rrf_fuse(rankings: Iterable[list[str]], k: int = RRF_K) -> list[tuple[str, float]]:
    """Reciprocal-rank fusion: score(d) = sum over lists of 1 / (k + rank), rank from 1. Ties keep the
    order of first appearance."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, doc in enumerate(ranking, start=1):
            scores[doc] = scores.get(doc, 0.0) + 1.0 / (k + rank)
    order = {doc: i for i, doc in enumerate(scores)}
    return sorted(scores.items(), key=lambda kv: (-kv[1], order[kv[0]]))


def _norm_title(title: str) -> str:
    return unicodedata.normalize("NFC", title.replace("_", " ")).strip()


class TitleFilter:
    """Exclusion by exact title (underscores = spaces) or by regex searched in the title."""

    def __init__(self, titles: Iterable[str] = (), patterns: Iterable[str] = ()):
        self.titles = {_norm_title(t) for t in titles}
        try:
            self.patterns = [re.compile(p) for p in patterns]
        except re.error as exc:
            raise ConfigError(f"bad title pattern: {exc}", hint="patterns are Python regular expressions") from None

    def __bool__(self) -> bool:
        return bool(self.titles or self.patterns)

    def keep(self, title: str) -> bool:
        t = _norm_title(title)
        return t not in self.titles and not any(p.search(t) for p in self.patterns)


class Searcher:
    """Loads an index directory once; ``search`` is safe to call from many threads at once."""

    def __init__(self, index_dir: str | Path, *, encoder: str | None = None, rrf_k: int = RRF_K,
                 rrf_depth: int = 50):
        self.index_dir = Path(index_dir).expanduser()
        self.manifest: dict = read_manifest(self.index_dir)
        self.rrf_k = rrf_k
        self.rrf_depth = rrf_depth
        self.store = PassageStore(self.index_dir / self.manifest.get("passage_store", "passages.sqlite"))
        n = int(self.manifest.get("passages", -1))
        if self.store.count != n:
            raise IndexDirError(f"passage store holds {self.store.count} passages, the manifest says {n}",
                                hint="rebuild the index with --overwrite")
        self._bm25 = None
        if self.manifest.get("bm25"):
            from veracity.indexes.bm25 import BM25Index

            self._bm25 = BM25Index(self.index_dir / self.manifest["bm25"].get("dir", "bm25"))
            if self._bm25.num_docs != n:
                raise IndexDirError(f"BM25 index holds {self._bm25.num_docs} passages, the manifest says {n}",
                                    hint="rebuild the index with --overwrite")
        self._faiss = None
        self._encoder = None
        self._encoder_lock = threading.Lock()
        dense = self.manifest.get("dense")
        self.encoder_name = None
        if dense:
            from veracity.indexes.dense import canonical_encoder, load_faiss, same_encoder

            if encoder is not None and not same_encoder(encoder, dense["encoder"]):
                raise IndexDirError(f"query encoder {canonical_encoder(encoder)} differs from the index's encoder "
                                    f"{dense['encoder']} ({dense['dimension']}-d)",
                                    hint="drop --encoder, or pass the encoder the index was built with")
            self.encoder_name = encoder or dense["encoder"]
            self._faiss = load_faiss(self.index_dir / dense.get("faiss_file", "dense/index.faiss"), expected=n)
        elif encoder is not None:
            raise IndexDirError("this index has no dense part, so --encoder does not apply",
                                hint="drop --encoder, or build with dense vectors")

    # ------------------------------------------------------------------------------------------ info
    @property
    def modes(self) -> tuple[str, ...]:
        have = []
        if self._bm25 is not None:
            have.append("bm25")
        if self._faiss is not None:
            have.append("dense")
        if len(have) == 2:
            have.append("hybrid")
        return tuple(have)

    def _check_mode(self, mode: str) -> None:
        if mode not in MODES:
            raise ConfigError(f"unknown search mode {mode!r}", hint="one of bm25, dense, hybrid")
        if mode not in self.modes:
            missing = "dense vectors" if mode in ("dense", "hybrid") and self._faiss is None else "a BM25 index"
            raise IndexDirError(f"mode {mode} needs {missing}, which {self.index_dir} was built without",
                                hint=f"use --mode {self.modes[0]}, or rebuild the index with both parts")

    def encoder(self):
        if self._encoder is None:
            with self._encoder_lock:
                if self._encoder is None:
                    from veracity.indexes.dense import Encoder

                    try:
                        enc = Encoder(self.encoder_name)
                    except ConfigError as exc:
                        raise IndexDirError(f"cannot load the index's encoder: {exc}",
                                            hint="pass --encoder with a local copy of the same model") from None
                    if enc.dimension != int(self.manifest["dense"]["dimension"]):
                        raise IndexDirError(f"encoder {enc.name} gives {enc.dimension}-d vectors, the index holds "
                                            f"{self.manifest['dense']['dimension']}-d",
                                            hint="pass the encoder the index was built with")
                    self._encoder = enc
        return self._encoder

    # ---------------------------------------------------------------------------------------- ranking
    @staticmethod
    def _filtered(fetch: Callable[[int], list], title_of: Callable, k: int, keep: TitleFilter,
                  total: int) -> list:
        depth = k if not keep else 2 * k + 10
        while True:
            items = fetch(min(depth, total))
            kept = [it for it in items if keep.keep(title_of(it))] if keep else items
            if len(kept) >= k or len(items) < min(depth, total) or depth >= total:
                return kept[:k]
            depth *= 4

    def _bm25_ranked(self, query: str, k: int, keep: TitleFilter) -> list[tuple[str, float]]:
        return self._filtered(lambda d: self._bm25.search(query, d), lambda it: split_passage_id(it[0])[0],
                              k, keep, self.store.count)

    def _dense_ranked(self, query: str, k: int, keep: TitleFilter) -> list[tuple[str, float]]:
        if not query.strip() or k <= 0:
            return []
        vec = self.encoder().encode([query])
        rows_cache: dict[int, tuple[str, str, str]] = {}

        def fetch(depth: int) -> list[tuple[int, float]]:
            scores, rows = self._faiss.search(vec, depth)
            got = [(int(r), float(s)) for r, s in zip(rows[0], scores[0], strict=True) if r >= 0]
            missing = [r for r, _ in got if r not in rows_cache]
            if missing:
                rows_cache.update(self.store.by_rows(missing))
            return got

        ranked = self._filtered(fetch, lambda it: rows_cache[it[0]][1], k, keep, self.store.count)
        return [(rows_cache[r][0], s) for r, s in ranked]

    def search(self, query: str, k: int = 10, mode: str = "hybrid", exclude_titles: Iterable[str] = (),
               exclude_patterns: Iterable[str] = ()) -> list[Hit]:
        """Top-k passages for ``query``. Hybrid fuses the top ``max(k, rrf_depth)`` of each list by RRF."""
        self._check_mode(mode)
        if k <= 0:
            return []
        keep = TitleFilter(exclude_titles, exclude_patterns)
        if mode == "bm25":
            ranked = self._bm25_ranked(query, k, keep)
        elif mode == "dense":
            ranked = self._dense_ranked(query, k, keep)
        else:
            depth = max(k, self.rrf_depth)
            lists = [[pid for pid, _ in self._bm25_ranked(query, depth, keep)],
                     [pid for pid, _ in self._dense_ranked(query, depth, keep)]]
            ranked = rrf_fuse(lists, self.rrf_k)[:k]
        texts = self.store.by_ids([pid for pid, _ in ranked])
        hits = []
        for pid, score in ranked:
            title, text = texts.get(pid, (split_passage_id(pid)[0], ""))
            hits.append(Hit(pid, title, text, score))
        return hits

    def open_page(self, title: str) -> list[Hit]:
        """The article's passages in order ([] when the title is unknown)."""
        rows = self.store.page(title)
        if not rows and "_" in title:
            rows = self.store.page(title.replace("_", " "))
        return [Hit(pid, t, text, 1.0) for pid, t, text in rows]

    async def asearch(self, query: str, k: int = 10, mode: str = "hybrid", exclude_titles: Iterable[str] = (),
                      exclude_patterns: Iterable[str] = ()) -> list[Hit]:
        return await asyncio.to_thread(self.search, query, k, mode, tuple(exclude_titles), tuple(exclude_patterns))

    async def aopen_page(self, title: str) -> list[Hit]:
        return await asyncio.to_thread(self.open_page, title)

    def close(self) -> None:
        if self._bm25 is not None:
            self._bm25.close()
        self.store.close()

    def __enter__(self) -> "Searcher":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
