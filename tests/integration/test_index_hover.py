"""A real BM25 + FAISS index over ~300 HoVer gold paragraphs (plus distractors): manifest, known-answer
searches, recall floor, exclusion, open_page, threads and async, error cases."""

import asyncio
import json
import shutil
from concurrent.futures import ThreadPoolExecutor

import pytest
from click.testing import CliRunner

from veracity.errors import IndexDirError
from veracity.indexes.searcher import Searcher

pytestmark = pytest.mark.integration


def test_manifest_records_source_chunking_encoder_and_build(hover_index_dir, hover_corpus_file, hover_subset):
    m = json.loads((hover_index_dir / "manifest.json").read_text())
    records = hover_subset[0]
    src = m["sources"][0]
    assert src["path"] == str(hover_corpus_file) and src["format"] == "hover"
    assert len(src["sha256"]) == 64 and src["articles"] == len(records)
    assert src["dump_date"] == "2017-10-01" and m["dump_date"] == "2017-10-01"
    assert m["articles"] == len(records) and m["passages"] >= len(records)
    assert m["chunking"]["words"] == 100
    assert (m["dense"]["encoder"] == "sentence-transformers/all-MiniLM-L6-v2"
            and m["dense"]["dimension"] == 384)
    assert m["dense"]["faiss_factory"] == "Flat" and m["dense"]["ntotal"] == m["passages"]
    assert m["bm25"] is not None and m["build"]["embed_passages_per_s"] > 0
    assert {"pyserini", "faiss-cpu",
            "sentence-transformers"} <= set(m["versions"]) or "faiss-gpu-cu12" in m["versions"]
    lines = (hover_index_dir / "dense" / "ids.txt").read_text().splitlines()
    assert len(lines) == m["passages"] and lines[0].endswith("#0")
    assert not list(hover_index_dir.parent.glob(".*building"))  # nothing half-written left


@pytest.mark.parametrize("mode", ["bm25", "dense", "hybrid"])
def test_known_answer_search(hover_searcher, mode):
    hits = hover_searcher.search("Stanley Kubrick horror film The Shining based on the Stephen King novel", 5,
                                 mode)
    assert hits and hits[0].title == "The Shining (film)"
    assert hits[0].passage_id == "The Shining (film)#0" and "Kubrick" in hits[0].text
    assert len(hits) == 5 and len({h.passage_id for h in hits}) == 5
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)


def test_recall_on_hover_subset_above_floor(hover_searcher, hover_claims_subset):
    """Floor: mean recall@10 of the gold titles >= 0.6 for every mode, and hybrid >= bm25 - 0.1
    (measured on this fixture: all three modes at ~0.8-0.95)."""
    recalls = {}
    for mode in ("bm25", "dense", "hybrid"):
        per = []
        for c in hover_claims_subset:
            titles = {h.title for h in hover_searcher.search(c["claim"], 10, mode)}
            per.append(len(titles & set(c["gold"])) / len(c["gold"]))
        recalls[mode] = sum(per) / len(per)
    assert len(hover_claims_subset) == 20
    assert min(recalls.values()) >= 0.6, recalls
    assert recalls["hybrid"] >= recalls["bm25"] - 0.1, recalls


def test_exclusion_by_title_and_pattern(hover_searcher):
    q = "Stanley Kubrick horror film The Shining"
    hits = hover_searcher.search(q, 5, "hybrid", exclude_titles=["The Shining (film)"])
    assert len(hits) == 5 and all(h.title != "The Shining (film)" for h in hits)
    hits = hover_searcher.search(q, 5, "bm25", exclude_patterns=[r"\(film\)$"])
    assert len(hits) == 5 and not any(h.title.endswith("(film)") for h in hits)


def test_open_page(hover_searcher):
    page = hover_searcher.open_page("The Shining (film)")
    assert page and page[0].passage_id == "The Shining (film)#0"
    assert [h.passage_id for h in page] == [f"The Shining (film)#{i}" for i in range(len(page))]
    assert hover_searcher.open_page("No Such Article 12345") == []


def test_concurrent_threads_and_async_match_sequential(hover_searcher, hover_claims_subset):
    queries = [c["claim"] for c in hover_claims_subset[:8]]
    expected = {(q, m): [h.passage_id for h in hover_searcher.search(q, 5,
                                                                     m)] for q in queries for m in ("bm25",
                                                                                                    "hybrid")}
    with ThreadPoolExecutor(max_workers=8) as pool:
        got = dict(zip(expected, pool.map(lambda qm: [h.passage_id for h in hover_searcher.search(qm[0], 5,
                                                                                                  qm[1])],
                                          expected), strict=True))
    assert got == expected

    async def many():
        return await asyncio.gather(*(hover_searcher.asearch(q, 5, "bm25") for q in queries),
                                    hover_searcher.aopen_page("The Shining (film)"))
    results = asyncio.run(many())
    assert [[h.passage_id for h in r] for r in results[:-1]] == [expected[(q, "bm25")] for q in queries]
    assert results[-1][0].title == "The Shining (film)"


def test_other_encoder_at_query_time_is_refused(hover_index_dir, tmp_path):
    other = tmp_path / "other-model"
    other.mkdir()
    with pytest.raises(IndexDirError, match="differs from the index's encoder"):
        Searcher(hover_index_dir, encoder=str(other))


def test_missing_or_corrupt_faiss_file(hover_index_dir, tmp_path):
    copy = tmp_path / "idx"
    shutil.copytree(hover_index_dir, copy)
    faiss_file = copy / "dense" / "index.faiss"
    faiss_file.write_bytes(faiss_file.read_bytes()[:200])
    with pytest.raises(IndexDirError, match="corrupt"):
        Searcher(copy)
    faiss_file.unlink()
    with pytest.raises(IndexDirError, match="missing"):
        Searcher(copy)


def test_cli_search_and_info(hover_index_dir):
    from veracity.cli.index import index

    runner = CliRunner()
    res = runner.invoke(index, ["search", str(hover_index_dir), "Kubrick horror film The Shining", "-k", "3",
                                "--mode", "bm25", "--json"])
    assert res.exit_code == 0, res.output
    hits = json.loads(res.output)
    assert len(hits) == 3 and hits[0]["title"] == "The Shining (film)"
    res = runner.invoke(index, ["search", str(hover_index_dir), "Kubrick", "--mode", "hybrid", "-k", "2"])
    assert res.exit_code == 0 and "The Shining (film)#0" in res.output
    res = runner.invoke(index, ["info", str(hover_index_dir)])
    assert res.exit_code == 0 and "all-MiniLM-L6-v2" in res.output and "2017-10-01" in res.output
    res = runner.invoke(index, ["search", str(hover_index_dir.parent / "nope"), "x"])
    assert res.exit_code == 1 and "does not exist" in res.output and "Traceback" not in res.output


def test_bench_retrieval_library_reports_all_modes(hover_index_dir, hover_claims_subset, tmp_path):
    from veracity.bench.retrieval import bench_retrieval
    from tests.fixtures.index import shared_data_dir

    report = bench_retrieval(hover_index_dir,
                             data_file=shared_data_dir() / "hover" / "hover_dev_release_v1.1.json",
                             ks=(1, 5, 10, 20), limit=10)
    assert report["claims_used"] == 10
    assert [r["mode"] for r in report["modes"]] == ["bm25", "dense", "hybrid"]
    for r in report["modes"]:
        assert 0 <= r["recall"]["1"] <= r["recall"]["5"] <= r["recall"]["10"] <= r["recall"]["20"] <= 1
        assert (r["recall"]["20"] >= 0.6 and r["queries_per_s"] > 0
                and r["p99_latency_ms"] >= r["p50_latency_ms"])
    assert report["build_rate_passages_per_s"]["embed"] > 0
