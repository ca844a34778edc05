"""`bench throughput` against the default engine's real server (llama.cpp's llama-server without a GPU) and
a real pyserini/FAISS HoVer index: two levels of RAG, real throughput numbers, and the server-side figures
scraped from its /metrics (vLLM's figures from its own /metrics: test_serving.py)."""

from __future__ import annotations

import json

import pytest

from tests.fixtures.index import shared_data_dir
from veracity.bench.throughput import ThroughputConfig, bench_throughput
from veracity.bench.throughput_report import server_rows
from veracity.config import Settings

pytestmark = pytest.mark.integration


def test_rag_throughput_at_two_levels_with_server_figures(llm_endpoint, hover_searcher, tmp_path):
    data = shared_data_dir()
    assert data is not None and (data / "hover").is_dir()  # the index fixture already needed the HoVer files
    # rag's judge alone (select=false: no selection call before it): what is measured here is the levels and
    # the server's own figures, which one request per claim moves as two would; the selection step runs on
    # the real servers in test_methods_end_to_end.py (rag with select=true), test_check_real.py and
    # test_network_cut.py (rag on an index: select=auto)
    cfg = ThroughputConfig.of(method="rag", levels=[1, 2], dataset="hover", data_dir=str(data),
                              claims_per_level=2,
                              seed=11, index=hover_searcher, warmup=0, params={"k": 3,
                                                                               "passage_max_words": 60,
                                                                               "select": "false"})
    out = tmp_path / "tp"
    report = bench_throughput(cfg, out, settings=Settings(home=tmp_path / "home", endpoint=llm_endpoint.url,
                                                          model=llm_endpoint.model))
    assert report["status"] == "complete" and report["model"] == llm_endpoint.model
    assert report["metrics_url"].endswith("/metrics") and "/v1" not in report["metrics_url"]
    levels = report["levels"]
    assert [lv["concurrency"] for lv in levels] == [1, 2]
    assert not set(levels[0]["claim_ids"]) & set(levels[1]["claim_ids"])
    for lv in levels:
        assert lv["done"] + lv["failed"] == 2 and lv["done"] >= 1, lv["failed_claims"]
        assert lv["claims_per_min"] > 0 and lv["wall_s"] > 0
        assert lv["prompt_tokens_per_s"] > 0 and lv["completion_tokens_per_s"] > 0
        assert lv["llm_calls_per_claim"] >= 1 and lv["latency_p50_s"] > 0
        s = lv["server"]
        assert s["scraped"] is True, report["warnings"]
        # scraped from llama-server's real /metrics (a managed one runs with --metrics): its counters moved
        # by at least this level's own requests; every prompt token is read afresh or reused from its cache
        assert (s["prefix_cache_queries"] is not None
                and s["prefix_cache_queries"] >= lv["prompt_tokens"] * 0.9)
        assert s["prefix_cache_hit_rate"] is not None and 0.0 <= s["prefix_cache_hit_rate"] <= 1.0
        assert s["generation_tokens"] is not None and s["generation_tokens"] >= lv["completion_tokens"] * 0.9
        assert s["tpot_mean_s"] is not None and s["tpot_mean_s"] > 0
        assert s["requests_running_max"] is not None and s["polls"] >= 1
        # what llama-server does not report stays n/a, never a made-up number
        assert s["ttft_mean_s"] is None and s["kv_cache_usage_max"] is None and s["requests_finished"] is None
        # the server reports cached prompt tokens per request
        assert lv["own_prefix_cache_hit_rate"] is not None
        assert lv["gpu_memory_used_max_mib"] is None or lv["gpu_memory_used_max_mib"] > 0
    row = server_rows(report)[0]  # level, prefix hit (server), prefix hit (own), TTFT, TPOT
    assert "n/a" not in (row[1], row[2], row[4]) and row[3] == "n/a"
    saved = json.loads((out / "report.json").read_text())
    assert saved["levels"][1]["server"]["ttft_mean_s"] == levels[1]["server"]["ttft_mean_s"]
    assert (out / "scaling.png").stat().st_size > 1000 and "prefix hit" in (out / "report.md").read_text()
