"""`index search` on an index with one part (issue 44): a --no-dense index searches BM25 with a note instead
of
refusing hybrid; a query that is a passage id (title#n, or a corpus's own id such as DPR's) shows that
passage."""

from __future__ import annotations

import json

from click.testing import CliRunner

from veracity.indexes.retriever import Hit


class FakeStore:
    def __init__(self, rows):
        self.rows = rows

    def by_ids(self, ids):
        return {i: self.rows[i] for i in ids if i in self.rows}


class OnePartSearcher:
    """What Searcher gives for an index built with --no-dense: BM25 only."""

    modes = ("bm25",)

    def __init__(self, *a, **kw):
        self.store = FakeStore({"20546": ("Marie Curie", "She shared the 1903 Nobel Prize in Physics.")})
        self.asked: list[str] = []

    def search(self, query, k=10, mode="hybrid", exclude_titles=(), exclude_patterns=()):
        self.asked.append(mode)
        assert mode == "bm25", mode  # hybrid would need dense vectors this index lacks
        return [Hit("Pierre Curie#0", "Pierre Curie", "Pierre Curie was a French physicist.", 3.2)]


def run(monkeypatch, *args):
    import veracity.indexes.searcher as searcher_module
    from veracity.cli import _register, cli

    monkeypatch.setattr(searcher_module, "Searcher", OnePartSearcher)
    _register()
    return CliRunner().invoke(cli, ["index", "search", *args], catch_exceptions=False)


def test_a_bm25_only_index_is_searched_with_bm25_and_a_note(monkeypatch, tmp_path):
    res = run(monkeypatch, str(tmp_path), "Curie physicist", "--json")
    assert res.exit_code == 0, res.output
    assert "has no dense vectors: searching bm25 only" in res.stderr
    assert json.loads(res.stdout)[0]["passage_id"] == "Pierre Curie#0"
    res = run(monkeypatch, str(tmp_path), "Curie physicist", "--mode", "hybrid", "--json")
    assert res.exit_code == 0 and "searching bm25 only" in res.stderr


def test_a_passage_id_is_searchable(monkeypatch, tmp_path):
    res = run(monkeypatch, str(tmp_path), "20546", "--json")
    hits = json.loads(res.stdout)
    assert hits[0]["passage_id"] == "20546" and hits[0]["title"] == "Marie Curie"
    assert "is a passage id" in res.stderr
