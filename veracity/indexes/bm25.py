"""BM25 through pyserini (Lucene): build an index of ``{id, contents}`` documents, search it, and the
BM25 retriever over it.

The Lucene index in ``bm25/`` is a plain Anserini index (Porter stemming, stopwords removed, raw JSON
stored), readable by pyserini directly: ``LuceneSearcher("DIR/bm25")``.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

from veracity.errors import IndexDirError
from veracity.indexes.java import ensure_jvm
from veracity.indexes.passages import Passage, split_passage_id
from veracity.indexes.retriever import StoredPassagesRetriever, TitleFilter, filtered_top

BM25_DIR = "bm25"
MAX_QUERY_WORDS = 512  # Lucene's BooleanQuery allows 1024 clauses; long inputs (news articles) are cut


class BM25Writer:
    """Feeds Lucene in batches of ``batch`` documents: one JNI call per batch, indexed by Anserini's pool of
    ``threads`` threads while this process goes on reading."""

    def __init__(self, path: Path, threads: int = 1, batch: int = 1024):
        ensure_jvm()
        from pyserini.index.lucene import LuceneIndexer

        path.mkdir(parents=True, exist_ok=True)
        self._indexer = LuceneIndexer(args=["-index", str(path), "-storeRaw"], threads=threads)
        self._batch = batch
        self._pending: list[str] = []

    def add(self, passage: Passage) -> None:
        self._pending.append(json.dumps({"id": passage.id, "contents": passage.indexed_text()}))
        if len(self._pending) >= self._batch:
            self.flush()

    def flush(self) -> None:
        if self._pending:
            self._indexer.add_batch_raw(self._pending)
            self._pending = []

    def close(self) -> None:
        self.flush()
        self._indexer.close()


class BM25Index:
    """Thread-safe BM25 search (pyserini's LuceneSearcher is not safe for concurrent use: one lock)."""

    def __init__(self, path: Path, k1: float = 0.9, b: float = 0.4):
        if not path.is_dir():
            raise IndexDirError(f"BM25 index {path} is missing", hint="rebuild with --overwrite, or use --mode dense")
        ensure_jvm()
        from pyserini.search.lucene import LuceneSearcher

        try:
            self._searcher = LuceneSearcher(str(path))
            self._searcher.set_bm25(k1, b)
        except Exception as exc:  # a Java exception: corrupt or foreign index
            raise IndexDirError(f"BM25 index {path} cannot be opened ({str(exc).splitlines()[0][:160]})",
                                hint="rebuild the index with --overwrite") from None
        self.num_docs = int(self._searcher.num_docs)
        self._lock = threading.Lock()

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        words = query.split()
        if not words or k <= 0:
            return []
        query = " ".join(words[:MAX_QUERY_WORDS])
        with self._lock:
            hits = self._searcher.search(query, k=min(k, max(1, self.num_docs)))
            return [(h.docid, float(h.score)) for h in hits]

    def close(self) -> None:
        with self._lock:
            try:
                self._searcher.close()
            except Exception:
                pass


class BM25Retriever(StoredPassagesRetriever):
    """The :class:`~veracity.indexes.retriever.Retriever` over a BM25 index and its passage store: Lucene's
    ranking, the title filter applied by fetching deeper, texts from the store."""

    name = "bm25"

    def __init__(self, store, bm25_index: BM25Index):
        self.store = store
        self.index = bm25_index

    def ranked(self, query: str, k: int, keep: TitleFilter) -> list[tuple[str, float]]:
        """The top ``k`` ``(passage id, BM25 score)`` pairs whose titles ``keep`` lets through."""
        return filtered_top(lambda d: self.index.search(query, d), lambda it: split_passage_id(it[0])[0],
                            k, keep, self.store.count)
