"""The evidence side: corpus readers, chunking, BM25 (pyserini), dense (FAISS), hybrid search, manifests.

Typical use::

    from veracity.indexes import Searcher
    searcher = Searcher("~/.veracity/indexes/demo")
    hits = searcher.search("Who painted the Mona Lisa?", k=5, mode="hybrid")

Building: :func:`veracity.indexes.build.build_index` (CLI: ``veracity index build``).
"""

from veracity.indexes.manifest import check_leakage, index_dump_date, index_newer_than, read_manifest
from veracity.indexes.passages import Article, Chunking, Passage, chunk_article
from veracity.indexes.searcher import MODES, Hit, Searcher, rrf_fuse

__all__ = ["Article", "Chunking", "Passage", "chunk_article", "Hit", "Searcher", "MODES", "rrf_fuse",
           "read_manifest", "index_newer_than", "index_dump_date", "check_leakage"]
