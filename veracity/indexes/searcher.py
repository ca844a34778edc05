"""Search an index directory: the facade that opens its parts and hands out retrievers.

A :class:`Searcher` loads the index once (manifest, passage store, BM25 and/or FAISS parts, each checked
against the manifest) and builds one retriever per mode: ``bm25``
(:class:`~veracity.indexes.bm25.BM25Retriever`), ``dense`` (:class:`~veracity.indexes.dense.DenseRetriever`)
and, when both parts exist, ``hybrid`` (:class:`~veracity.indexes.hybrid.HybridRetriever`, reciprocal-rank
fusion of the two). ``retriever(mode)`` returns one; ``search(query, k, mode)`` / ``open_page`` delegate
to them and serve many queries from many threads; ``asearch`` / ``aopen_page`` run them in a worker
thread for the async pipeline. Titles and title regex patterns can be excluded at query time (leakage
control: e.g. hide the article a claim was written from).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Iterable

from veracity.errors import ConfigError, IndexDirError
from veracity.indexes.hybrid import RRF_K, HybridRetriever
from veracity.indexes.manifest import read_manifest
from veracity.indexes.retriever import Hit, Retriever, page_hits
from veracity.indexes.store import PassageStore

MODES = ("bm25", "dense", "hybrid")

__all__ = ["MODES", "Searcher"]


def _kind_of(factory: str) -> str:
    """ivf / hnsw / exact from a factory string (indexes built before the manifest recorded the kind)."""
    head = factory.replace(" ", "").split(",")[0].upper()
    if head.startswith(("IVF", "IMI")) or ",IVF" in factory.upper().replace(" ", ""):
        return "ivf"
    return "hnsw" if "HNSW" in head else "exact"


class Searcher:
    """Loads an index directory once and builds its retrievers; ``search`` is safe to call from many
    threads at once."""

    def __init__(self, index_dir: str | Path, *, encoder: str | None = None, rrf_k: int = RRF_K,
                 rrf_depth: int = 50, nprobe: int | None = None, ef_search: int | None = None,
                 mmap: bool | None = None):
        for flag, value in (("--nprobe", nprobe), ("--ef-search", ef_search)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ConfigError(f"{flag} must be an integer of at least 1, got {value!r}",
                                  hint=f"e.g. {flag} 32")
        self.index_dir = Path(index_dir).expanduser()
        self.manifest: dict = read_manifest(self.index_dir)
        self.rrf_k = rrf_k
        self.rrf_depth = rrf_depth
        self.store = PassageStore(self.index_dir / self.manifest.get("passage_store", "passages.sqlite"))
        n = int(self.manifest.get("passages", -1))
        if self.store.count != n:
            raise IndexDirError(f"passage store holds {self.store.count} passages, the manifest says {n}",
                                hint="rebuild the index with --overwrite")
        self._retrievers: dict[str, Retriever] = {}
        self._bm25 = None
        if self.manifest.get("bm25"):
            from veracity.indexes.bm25 import BM25Index, BM25Retriever

            self._bm25 = BM25Index(self.index_dir / self.manifest["bm25"].get("dir", "bm25"))
            if self._bm25.num_docs != n:
                raise IndexDirError(f"BM25 index holds {self._bm25.num_docs} passages, the manifest says {n}",
                                    hint="rebuild the index with --overwrite")
            self._retrievers["bm25"] = BM25Retriever(self.store, self._bm25)
        self._faiss = None
        dense = self.manifest.get("dense")
        self.encoder_name = None
        self.nprobe: int | None = None
        self.ef_search: int | None = None
        if dense:
            from veracity.indexes.dense import DenseRetriever, load_faiss
            from veracity.models.encoders import canonical_encoder, same_encoder

            if encoder is not None and not same_encoder(encoder, dense["encoder"]):
                raise IndexDirError(f"query encoder {canonical_encoder(encoder)} differs from the index's "
                                    "encoder "
                                    f"{dense['encoder']} ({dense['dimension']}-d)",
                                    hint="drop --encoder, or pass the encoder the index was built with")
            self.encoder_name = encoder or dense["encoder"]
            search = dense.get("search") or {}
            kind = search.get("kind") or _kind_of(dense.get("faiss_factory", "Flat"))
            if nprobe is not None and kind != "ivf":
                raise ConfigError(f"--nprobe applies to IVF indexes; {self.index_dir} is "
                                  f"{dense.get('faiss_factory')}",
                                  hint="drop --nprobe" + (" (use --ef-search)" if kind == "hnsw" else ""))
            if ef_search is not None and kind != "hnsw":
                raise ConfigError(f"--ef-search applies to HNSW indexes; {self.index_dir} is "
                                  f"{dense.get('faiss_factory')}",
                                  hint="drop --ef-search" + (" (use --nprobe)" if kind == "ivf" else ""))
            self.nprobe = nprobe if nprobe is not None else search.get("nprobe")
            self.ef_search = ef_search if ef_search is not None else search.get("ef_search")
            self._faiss = load_faiss(self.index_dir / dense.get("faiss_file", "dense/index.faiss"),
                                     expected=n,
                                     nprobe=self.nprobe, ef_search=self.ef_search, mmap=mmap)
            self._retrievers["dense"] = DenseRetriever(self.store, self._faiss,
                                                       encoder_name=self.encoder_name,
                                                       dimension=int(dense["dimension"]))
        elif nprobe is not None or ef_search is not None:
            raise ConfigError(f"{self.index_dir} has no dense part, so --nprobe / --ef-search do not apply",
                              hint="drop them, or build with dense vectors")
        elif encoder is not None:
            raise IndexDirError("this index has no dense part, so --encoder does not apply",
                                hint="drop --encoder, or build with dense vectors")
        if "bm25" in self._retrievers and "dense" in self._retrievers:
            self._retrievers["hybrid"] = HybridRetriever(self._retrievers["bm25"], self._retrievers["dense"],
                                                         rrf_k=rrf_k, depth=rrf_depth)

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
            missing = "dense vectors" if mode in ("dense",
                                                  "hybrid") and self._faiss is None else "a BM25 index"
            raise IndexDirError(f"mode {mode} needs {missing}, which {self.index_dir} was built without",
                                hint=f"use --mode {self.modes[0]}, or rebuild the index with both parts")

    def retriever(self, mode: str | None = None) -> Retriever:
        """The retriever of ``mode`` (bm25, dense, hybrid). None: hybrid when the index has both parts,
        else the one it has. An unknown mode is a ConfigError, a mode the index lacks an IndexDirError."""
        if mode is None:
            if not self.modes:
                raise IndexDirError(f"{self.index_dir} has neither a BM25 index nor dense vectors",
                                    hint="rebuild the index with `veracity index build`")
            mode = "hybrid" if "hybrid" in self.modes else self.modes[0]
        self._check_mode(mode)
        return self._retrievers[mode]

    def encoder(self):
        """The dense part's query encoder (loaded on first use)."""
        if "dense" not in self._retrievers:
            raise IndexDirError(f"{self.index_dir} has no dense part, so it has no encoder",
                                hint="build with dense vectors")
        return self._retrievers["dense"].encoder()

    # ---------------------------------------------------------------------------------------- queries
    def search(self, query: str, k: int = 10, mode: str = "hybrid", exclude_titles: Iterable[str] = (),
               exclude_patterns: Iterable[str] = ()) -> list[Hit]:
        """Top-k passages for ``query``. Hybrid fuses the top ``max(k, rrf_depth)`` of each list by RRF."""
        self._check_mode(mode)
        if k <= 0:
            return []
        return self._retrievers[mode].search(query, k, exclude_titles=exclude_titles,
                                             exclude_patterns=exclude_patterns)

    def open_page(self, title: str) -> list[Hit]:
        """The article's passages in order ([] when the title is unknown); the same in every mode."""
        return page_hits(self.store, title)

    async def asearch(self, query: str, k: int = 10, mode: str = "hybrid", exclude_titles: Iterable[str] = (),
                      exclude_patterns: Iterable[str] = ()) -> list[Hit]:
        return await asyncio.to_thread(self.search, query, k, mode, tuple(exclude_titles),
                                       tuple(exclude_patterns))

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
