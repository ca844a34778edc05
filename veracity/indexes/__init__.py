"""The evidence side: corpus readers, chunking, BM25 (pyserini), dense (FAISS), hybrid search, manifests.

Typical use::

    from veracity.indexes import Searcher
    searcher = Searcher("~/.veracity/indexes/demo")
    hits = searcher.search("Who painted the Mona Lisa?", k=5, mode="hybrid")
    retriever = searcher.retriever()          # a Retriever: search(query, k) / open_page(title)

Retrieval backends implement :class:`veracity.indexes.retriever.Retriever` (BM25Retriever,
DenseRetriever); :class:`veracity.indexes.hybrid.HybridRetriever` fuses any two of them. The per-claim
retrievers of the evidence settings need no index: :class:`veracity.indexes.gold.GoldRetriever` (a
claim's gold passages, ``--evidence gold``) and :class:`veracity.indexes.gold.NoEvidenceRetriever`
(closed book, ``--evidence none``).

Building: :func:`veracity.indexes.build.build_index` (CLI: ``veracity index build``).
"""

from veracity.indexes.manifest import check_leakage, index_dump_date, index_newer_than, read_manifest
from veracity.indexes.passages import Article, Chunking, Passage, chunk_article
from veracity.indexes.gold import GoldRetriever, NoEvidenceRetriever
from veracity.indexes.hybrid import HybridRetriever, rrf_fuse
from veracity.indexes.retriever import Hit, Retriever, TitleFilter
from veracity.indexes.searcher import MODES, Searcher

__all__ = ["Article", "Chunking", "Passage", "chunk_article", "Hit", "Retriever", "TitleFilter",
           "HybridRetriever",
           "GoldRetriever", "NoEvidenceRetriever",
           "Searcher", "MODES", "rrf_fuse",
           "read_manifest", "index_newer_than", "index_dump_date", "check_leakage"]
