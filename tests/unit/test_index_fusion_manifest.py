"""Reciprocal-rank fusion, title exclusion, leakage checks on manifests, size estimates."""

import datetime as dt

import pytest

from veracity.errors import ConfigError, IndexDirError, LeakageError
from veracity.indexes.dense import estimate_resources
from veracity.indexes.hybrid import rrf_fuse
from veracity.indexes.manifest import check_leakage, index_dump_date, index_newer_than, read_manifest
from veracity.indexes.retriever import TitleFilter


def test_rrf_scores_and_order():
    fused = rrf_fuse([["a", "b", "c"], ["c", "a", "d"]], k=60)
    scores = dict(fused)
    assert scores["a"] == pytest.approx(1 / 61 + 1 / 62)
    assert scores["c"] == pytest.approx(1 / 63 + 1 / 61)
    assert scores["d"] == pytest.approx(1 / 63)
    assert [d for d, _ in fused] == ["a", "c", "b", "d"]
    # a document in one list only ranks below one found by both
    assert rrf_fuse([["x"], ["y", "x"]], k=1)[0][0] == "x"


def test_title_filter_exact_regex_and_underscores():
    f = TitleFilter(["Eiffel_Tower"], [r"^List of", r"\(film\)$"])
    assert not f.keep("Eiffel Tower")
    assert not f.keep("List of towers") and not f.keep("The Shining (film)")
    assert f.keep("Eiffel Tower (Paris)") and f.keep("The Shining")
    assert not TitleFilter()
    with pytest.raises(ConfigError):
        TitleFilter(patterns=["("])


def manifest(*dates):
    return {"kind": "veracity-index", "sources": [{"dump_date": d} for d in dates]}


def test_leakage_by_dump_date():
    m = manifest("2017-10-01", "2019-03-01")
    assert index_dump_date(m) == dt.date(2019, 3, 1)
    assert index_newer_than(m, "2019-02-28") is True
    assert index_newer_than(m, dt.date(2019, 3, 1)) is False
    assert index_newer_than(m, "2020-01-01") is False
    check_leakage(m, "2020-01-01")
    with pytest.raises(LeakageError, match="2019-03-01"):
        check_leakage(m, "2018-01-01")
    check_leakage(m, "2018-01-01", allow=True)


def test_unknown_dump_date_counts_as_newer_unless_told():
    m = manifest("2017-10-01", None)
    assert index_dump_date(m) is None
    assert index_newer_than(m, "2030-01-01") is True
    assert index_newer_than(m, "2030-01-01", unknown_is_newer=False) is False


def test_read_manifest_errors(tmp_path):
    with pytest.raises(IndexDirError, match="does not exist"):
        read_manifest(tmp_path / "nope")
    with pytest.raises(IndexDirError, match="not an index directory"):
        read_manifest(tmp_path)
    (tmp_path / "manifest.json").write_text("{broken")
    with pytest.raises(IndexDirError, match="not readable JSON"):
        read_manifest(tmp_path)


def test_estimates_scale_with_passages_and_factory():
    flat = estimate_resources(1_000_000, 384, "Flat")
    assert flat["dense_ram"] == 1_000_000 * 384 * 4
    pq = estimate_resources(1_000_000, 384, "IVF4096,PQ32")
    assert pq["dense_ram"] < flat["dense_ram"] / 10
    hnsw = estimate_resources(1_000_000, 384, "HNSW32")
    assert hnsw["dense_ram"] > flat["dense_ram"]
    assert estimate_resources(10, 384, "Flat", dense=False)["dense_disk"] == 0
