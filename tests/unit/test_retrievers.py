"""Retrieval behind one protocol: the hybrid combiner over stand-in retrievers, the index facade's choice
of retriever per mode, the dense retriever's encoder checks, and the tools over any retriever.

Real BM25 (Lucene) and FAISS are exercised by tests/integration; here the index parts are stand-ins
with fixed rankings, so every fused score can be computed by hand from RRF's definition
(score = sum over lists of 1 / (rrf_k + rank), rank from 1)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field

import numpy as np
import pytest

from veracity.errors import ConfigError, IndexDirError
from veracity.indexes.hybrid import HybridRetriever
from veracity.indexes.retriever import Hit, Retriever
from veracity.indexes.store import PassageWriter

# ----------------------------------------------------------------------------- stand-in retrievers


@dataclass
class ListRetriever:
    """A retriever with a fixed ranking of (passage id, title, text); records every call."""

    name: str
    ranking: list[tuple[str, str, str]]
    calls: list[tuple] = field(default_factory=list)
    opened: list[str] = field(default_factory=list)

    def search(self, query, k, *, exclude_titles=(), exclude_patterns=()):
        self.calls.append((query, k, exclude_titles, exclude_patterns))
        kept = [r for r in self.ranking if r[1] not in exclude_titles]
        return [Hit(pid, title, text, 100.0 - i) for i, (pid, title, text) in enumerate(kept[:k])]

    def open_page(self, title):
        self.opened.append(title)
        return [Hit(pid, t, text, 1.0) for pid, t, text in self.ranking if t == title]


def row(title: str) -> tuple[str, str, str]:
    return (f"{title}#0", title, f"text of {title}")


def test_stand_ins_and_hybrid_implement_the_protocol():
    first, second = ListRetriever("one", []), ListRetriever("two", [])
    assert isinstance(first, Retriever)
    assert isinstance(HybridRetriever(first, second), Retriever)


def test_hybrid_fuses_two_retrievers_by_rrf():
    first = ListRetriever("one", [row("A"), row("B"), row("C")])
    second = ListRetriever("two", [row("C"), row("A"), row("D")])
    hybrid = HybridRetriever(first, second, rrf_k=60, depth=3)
    hits = hybrid.search("q", 3)
    # A: rank 1 + rank 2; C: rank 3 + rank 1; B: rank 2 in one list; D: rank 3 in one list
    assert [h.passage_id for h in hits] == ["A#0", "C#0", "B#0"]
    assert [h.score for h in hits] == [1 / 61 + 1 / 62, 1 / 63 + 1 / 61, 1 / 62]
    assert [(h.title, h.text) for h in hits] == [("A", "text of A"), ("C", "text of C"), ("B", "text of B")]
    assert all(type(h) is Hit for h in hits)
    # a passage found by one retriever only keeps that retriever's title and text
    assert hybrid.search("q", 4)[-1] == Hit("D#0", "D", "text of D", 1 / 63)


def test_hybrid_ties_keep_first_appearance_and_rrf_k_applies():
    first = ListRetriever("one", [row("X")])
    second = ListRetriever("two", [row("Y")])
    hits = HybridRetriever(first, second, rrf_k=1, depth=5).search("q", 2)
    assert [(h.passage_id, h.score) for h in hits] == [("X#0", 1 / 2), ("Y#0", 1 / 2)]


def test_hybrid_fetches_max_of_k_and_depth_from_both():
    first = ListRetriever("one", [row("A")])
    second = ListRetriever("two", [row("B")])
    HybridRetriever(first, second, depth=50).search("q", 3)
    HybridRetriever(first, second, depth=2).search("q", 7)
    assert [c[1] for c in first.calls] == [50, 7]
    assert [c[1] for c in second.calls] == [50, 7]


def test_hybrid_passes_exclusions_to_both():
    first = ListRetriever("one", [row("A"), row("B"), row("C")])
    second = ListRetriever("two", [row("C"), row("A"), row("D")])
    hits = HybridRetriever(first, second, depth=3).search("q", 3, exclude_titles=["A"],
                                                          exclude_patterns=[r"^Z"])
    assert first.calls == second.calls == [("q", 3, ("A",), (r"^Z",))]
    # without A: first [B, C], second [C, D]
    assert [(h.passage_id, h.score) for h in hits] == [("C#0", 1 / 62 + 1 / 61), ("B#0", 1 / 61), ("D#0",
                                                                                                   1 / 62)]


def test_hybrid_k_zero_asks_nobody():
    first, second = ListRetriever("one", [row("A")]), ListRetriever("two", [row("B")])
    assert HybridRetriever(first, second).search("q", 0) == []
    assert first.calls == second.calls == []


def test_hybrid_opens_pages_through_the_first():
    first = ListRetriever("one", [row("A")])
    second = ListRetriever("two", [row("A")])
    hybrid = HybridRetriever(first, second)
    assert hybrid.open_page("A") == [Hit("A#0", "A", "text of A", 1.0)]
    assert first.opened == ["A"] and second.opened == []
    assert hybrid.name == "hybrid"


# ------------------------------------------------------------------------------- index facade


class FakeBM25Index:
    ranking = [("A#0", 3.0), ("B#0", 2.0), ("C#0", 1.0)]

    def __init__(self, path):
        self.num_docs = 4
        self.closed = False

    def search(self, query, k):
        return self.ranking[:k] if query.split() and k > 0 else []

    def close(self):
        self.closed = True


class FakeFaiss:
    d = 2
    ranking = [(2, 0.9), (0, 0.8), (3, 0.7)]  # rows: C#0, A#0, D#0

    def search(self, vec, depth):
        got = self.ranking[:depth] + [(-1, 0.0)] * max(0, depth - len(self.ranking))
        return np.array([[s for _, s in got]], dtype=np.float32), np.array([[r for r, _ in got]])


class FakeEncoder:
    name = "fake-encoder"

    def __init__(self, dimension=2):
        self.dimension = dimension

    def encode(self, texts):
        return np.zeros((len(texts), self.dimension), dtype=np.float32)


def make_index(tmp_path, monkeypatch, *, bm25=True, dense=True, encoder=FakeEncoder()):
    import veracity.indexes.bm25 as bm25_mod
    import veracity.indexes.dense as dense_mod
    from veracity.indexes.passages import Passage

    monkeypatch.setattr(bm25_mod, "BM25Index", FakeBM25Index)
    monkeypatch.setattr(dense_mod, "load_faiss", lambda path, expected=None, **kw: FakeFaiss())
    loads = []

    def load(name=None):
        loads.append(name)
        if isinstance(encoder, Exception):
            raise encoder
        return encoder

    monkeypatch.setattr(dense_mod, "load_encoder", load)
    writer = PassageWriter(tmp_path / "passages.sqlite")
    writer.add([Passage(f"{t}#0", t, f"text of {t}") for t in "ABCD"])
    writer.close()
    manifest = {"kind": "veracity-index", "passages": 4}
    if bm25:
        manifest["bm25"] = {"dir": "bm25"}
    if dense:
        manifest["dense"] = {"encoder": "fake-encoder", "dimension": 2}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    from veracity.indexes.searcher import Searcher

    return Searcher(tmp_path), loads


def test_searcher_default_retriever_is_hybrid_with_both_parts(tmp_path, monkeypatch):
    searcher, _ = make_index(tmp_path, monkeypatch)
    assert searcher.modes == ("bm25", "dense", "hybrid")
    assert isinstance(searcher.retriever(), HybridRetriever)
    assert searcher.retriever() is searcher.retriever("hybrid")
    assert [searcher.retriever(m).name for m in ("bm25", "dense", "hybrid")] == ["bm25", "dense", "hybrid"]
    assert all(isinstance(searcher.retriever(m), Retriever) for m in searcher.modes)
    searcher.close()


def test_searcher_default_retriever_is_the_one_part(tmp_path, monkeypatch):
    (tmp_path / "b").mkdir()
    bm25_only, _ = make_index(tmp_path / "b", monkeypatch, dense=False)
    assert bm25_only.retriever().name == "bm25"
    with pytest.raises(IndexDirError, match="mode dense needs dense vectors"):
        bm25_only.retriever("dense")
    with pytest.raises(IndexDirError, match="mode hybrid needs dense vectors"):
        bm25_only.retriever("hybrid")
    (tmp_path / "d").mkdir()
    dense_only, _ = make_index(tmp_path / "d", monkeypatch, bm25=False)
    assert dense_only.retriever().name == "dense"
    with pytest.raises(IndexDirError, match="mode bm25 needs a BM25 index"):
        dense_only.retriever("bm25")
    with pytest.raises(ConfigError, match="unknown search mode 'fuzzy'"):
        dense_only.retriever("fuzzy")
    with pytest.raises(ConfigError, match="unknown search mode"):
        dense_only.search("q", 3, mode="fuzzy")


def test_searcher_search_delegates_to_the_mode_retriever(tmp_path, monkeypatch):
    searcher, loads = make_index(tmp_path, monkeypatch)
    bm25 = searcher.search("q", 2, mode="bm25")
    assert bm25 == [Hit("A#0", "A", "text of A", 3.0), Hit("B#0", "B", "text of B", 2.0)]
    dense = searcher.search("q", 2, mode="dense")
    assert [(h.passage_id, h.title, h.text) for h in dense] == [("C#0", "C", "text of C"), ("A#0", "A",
                                                                                            "text of A")]
    assert [h.score for h in dense] == pytest.approx([0.9, 0.8])
    hybrid = searcher.search("q", 3)  # default mode: hybrid
    assert hybrid == searcher.retriever("hybrid").search("q", 3)
    assert hybrid == [Hit("A#0", "A", "text of A", 1 / 61 + 1 / 62), Hit("C#0", "C", "text of C",
                                                                         1 / 63 + 1 / 61),
                      Hit("B#0", "B", "text of B", 1 / 62)]
    # exclusions reach both parts: without A, BM25 gives [B, C] and dense [C, D]
    hybrid = searcher.search("q", 3, exclude_titles=["A"])
    assert [(h.passage_id, h.score) for h in hybrid] == [("C#0", 1 / 62 + 1 / 61), ("B#0", 1 / 61), ("D#0",
                                                                                                     1 / 62)]
    assert [h.passage_id for h in searcher.search("q", 3, exclude_patterns=["^[AC]$"])] == ["B#0", "D#0"]
    assert searcher.search("q", 0) == []
    assert loads == ["fake-encoder"]  # loaded once, lazily
    assert searcher.open_page("B") == [Hit("B#0", "B", "text of B", 1.0)]
    assert searcher.retriever("dense").open_page("B") == searcher.open_page("B")
    assert asyncio.run(searcher.asearch("q", 3)) == searcher.search("q", 3)
    searcher.close()


def test_dense_retriever_encoder_errors(tmp_path, monkeypatch):
    (tmp_path / "w").mkdir()
    wrong, _ = make_index(tmp_path / "w", monkeypatch, encoder=FakeEncoder(dimension=3))
    with pytest.raises(IndexDirError, match="encoder fake-encoder gives 3-d vectors, the index holds 2-d"):
        wrong.search("q", 2, mode="dense")
    assert wrong.search("   ", 2, mode="dense") == []  # an empty query never loads the encoder
    (tmp_path / "m").mkdir()
    missing, _ = make_index(tmp_path / "m", monkeypatch, encoder=ConfigError("no such model"))
    with pytest.raises(IndexDirError, match="cannot load the index's encoder: no such model"):
        missing.search("q", 2, mode="hybrid")


# ------------------------------------------------------------------------------------- tools


def test_tools_search_the_given_retriever_and_trace_the_calls():
    from veracity.pipeline.tools import Tools
    from veracity.pipeline.types import Trace

    retriever = ListRetriever("one", [row("A"), row("B")])
    trace = Trace()
    tools = Tools(retriever, trace, exclude_titles=["B"])
    ev = asyncio.run(tools.search("query", 4, role="planner", exclude_titles=["Z"]))
    assert [e.passage_id for e in ev] == ["A#0"]
    assert retriever.calls == [("query", 4, ("B", "Z"), ())]
    assert asyncio.run(tools.open_page("B")) == [] and retriever.opened == []
    assert [e.passage_id for e in asyncio.run(tools.open_page("A", role="reader"))] == ["A#0"]
    assert [(c.tool, c.query, c.hits, c.role) for c in trace.tool_calls] == [
        ("search", "query", ["A#0"], "planner"), ("open_page", "B", [], None), ("open_page", "A", ["A#0"],
                                                                                "reader")]
