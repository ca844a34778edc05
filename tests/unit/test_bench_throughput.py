"""`bench throughput` without a server: the Prometheus parser on a real vLLM /metrics sample, vLLM's
figures from snapshots, and the benchmark loop with a scripted LLM and a fake /metrics (disjoint levels,
per-level deltas, n/a when figures are missing, errors)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from pathlib import Path

import click
import pytest

from tests.unit.scripted_llm import ScriptedLLM
from veracity.pipeline.engine import Engine
from veracity.bench.prom import (Histogram, Metrics, metrics_url, parse_prometheus, server_figures)
from veracity.bench.gpu import parse_nvidia_smi
from veracity.bench.levels import plan_level_sizes
from veracity.bench.throughput import ThroughputConfig, bench_throughput
from veracity.bench.throughput_report import client_rows, render_markdown, server_rows
from veracity.cli._common import run_main
from veracity.config import Settings
from veracity.errors import ConfigError, DataError, EndpointError
from veracity.pipeline.methods.direct import DirectJudgement

SAMPLE = Path(__file__).parent / "data" / "vllm_metrics_sample.txt"
MODEL = "smollm2-135m-instruct"


@pytest.fixture(scope="module")
def sample() -> Metrics:
    return parse_prometheus(SAMPLE.read_text(encoding="utf-8"))


def sample_line_value(prefix: str) -> float:
    """The value of the first sample line of the fixture that starts with ``prefix`` (read independently)."""
    for line in SAMPLE.read_text().splitlines():
        if line.startswith(prefix):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(prefix)


# -- the parser on the real sample -------------------------------------------------------------------
def test_sample_parses_completely_with_types(sample):
    assert sample.bad_lines == 0 and len(sample) > 100
    assert sample.types["vllm:time_to_first_token_seconds"] == "histogram"
    assert sample.types["vllm:num_requests_running"] == "gauge"
    assert sample.types["vllm:prefix_cache_queries_total"] == "counter"  # this server types the _total name


def test_counters_by_family_or_sample_name(sample):
    queries = sample_line_value("vllm:prefix_cache_queries_total{")
    assert sample.counter("vllm:prefix_cache_queries") == queries
    assert sample.counter("vllm:prefix_cache_queries_total") == queries
    assert sample.counter("vllm:prefix_cache_hits") == sample_line_value("vllm:prefix_cache_hits_total{")
    assert 0 < sample.counter("vllm:prefix_cache_hits") < queries
    # request_success has one series per finished_reason: summed, or one selected by label
    reasons = {s.label_dict["finished_reason"]: s.value for s in sample.series("vllm:request_success_total")}
    assert set(reasons) == {"stop", "length", "abort", "error", "repetition"}
    assert sample.counter("vllm:request_success") == sum(reasons.values())
    assert sample.counter("vllm:request_success", labels={"finished_reason": "length"}) == reasons["length"]
    # an older name listed first is skipped when absent
    assert sample.counter("vllm:no_such_counter",
                          "vllm:generation_tokens") == sample_line_value("vllm:generation_tokens_total{")


def test_gauges_and_labels(sample):
    assert sample.gauge("vllm:num_requests_running") == sample_line_value("vllm:num_requests_running{")
    kv = sample.gauge("vllm:gpu_cache_usage_perc", "vllm:kv_cache_usage_perc")
    assert kv == sample_line_value("vllm:kv_cache_usage_perc{") and 0 <= kv <= 1
    assert sample.gauge("vllm:num_requests_running", labels={"model_name": MODEL}) is not None
    assert sample.gauge("vllm:num_requests_running", labels={"model_name": "another-model"}) is None
    info = sample.series("vllm:cache_config_info")[0].label_dict  # 40 labels on one line
    assert info["enable_prefix_caching"] == "True" and info["block_size"] == "128" and info["engine"] == "0"
    http = sample.series("http_requests_total", {"handler": "/v1/chat/completions"})
    assert len(http) == 1 and http[0].label_dict["method"] == "POST"


def test_histograms(sample):
    ttft = sample.histogram("vllm:time_to_first_token_seconds")
    assert ttft.count == sample_line_value("vllm:time_to_first_token_seconds_count{")
    assert ttft.sum == sample_line_value("vllm:time_to_first_token_seconds_sum{")
    assert ttft.mean == pytest.approx(ttft.sum / ttft.count)
    bounds = [le for le, _ in ttft.buckets]
    counts = [c for _, c in ttft.buckets]
    assert bounds == sorted(bounds) and bounds[-1] == float("inf") and counts == sorted(counts)
    assert counts[-1] == ttft.count
    p50, p95 = ttft.quantile(0.5), ttft.quantile(0.95)
    assert 0 < p50 <= p95
    below = max(c for le, c in ttft.buckets if le <= p50)  # the median lies in the bucket that crosses half
    assert below <= ttft.count / 2
    # this vLLM names TPOT inter_token_latency; the older name is tried first and is absent
    assert sample.histogram("vllm:time_per_output_token_seconds") is None
    tpot = sample.histogram("vllm:time_per_output_token_seconds", "vllm:inter_token_latency_seconds")
    assert tpot.count == sample_line_value("vllm:inter_token_latency_seconds_count{")


def test_missing_names_are_none_not_errors(sample):
    assert sample.counter("vllm:nothing") is None
    assert sample.gauge("vllm:nothing") is None
    assert sample.histogram("vllm:nothing") is None
    assert sample.value("vllm:nothing") is None
    assert not sample.has("vllm:nothing") and sample.has("vllm:prefix_cache_hits")
    empty = parse_prometheus("")
    assert len(empty) == 0 and empty.counter("vllm:prefix_cache_hits") is None


def test_exposition_edge_cases():
    m = parse_prometheus(
        "# a free comment\n"
        'odd{path="a,b=\\"c\\"",x="line\\nnext"} 3 1700000000000\n'
        "no_labels 4.5e+00\n"
        'inf{le="+Inf"} +Inf\n'
        "nan NaN\n"
        "this is not a sample line\n"
        'broken{a="unterminated} 1\n'
    )
    assert m.bad_lines == 2
    odd = m.series("odd")[0]
    assert odd.label_dict == {"path": 'a,b="c"', "x": "line\nnext"} and odd.value == 3.0
    assert m.value("no_labels") == 4.5 and m.value("inf") == float("inf")
    assert m.value("nan") != m.value("nan")  # NaN


def test_metrics_url():
    assert metrics_url("http://127.0.0.1:8011/v1") == "http://127.0.0.1:8011/metrics"
    assert metrics_url("http://127.0.0.1:8011/v1/") == "http://127.0.0.1:8011/metrics"
    assert metrics_url("127.0.0.1:8011") == "http://127.0.0.1:8011/metrics"


# -- vLLM figures from snapshots --------------------------------------------------------------------------
def bumped(text: str, changes: dict[str, float]) -> Metrics:
    """The sample with some sample lines' values increased (a later snapshot of the same server)."""
    out = []
    for line in text.splitlines():
        for prefix, add in changes.items():
            if line.startswith(prefix):
                head, value = line.rsplit(" ", 1)
                line = f"{head} {float(value) + add}"
        out.append(line)
    return parse_prometheus("\n".join(out))


LLAMA_METRICS = """\
# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed, excluding cached tokens
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total {fresh}
# TYPE llamacpp:prompt_tokens_cached_total counter
llamacpp:prompt_tokens_cached_total {cached}
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total {generated}
# TYPE llamacpp:tokens_predicted_seconds_total counter
llamacpp:tokens_predicted_seconds_total {seconds}
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing {running}
# TYPE llamacpp:requests_deferred gauge
llamacpp:requests_deferred {waiting}
"""


def llama_metrics(fresh=0, cached=0, generated=0, seconds=0.0, running=0, waiting=0):
    """llama-server's /metrics exposition (the names and types of the build `engines install` makes)."""
    return parse_prometheus(LLAMA_METRICS.format(fresh=fresh, cached=cached, generated=generated,
                                                 seconds=seconds, running=running, waiting=waiting))


def test_llama_servers_figures_are_its_own_counters_and_the_rest_is_none():
    """A llama-server level: the prompt tokens read afresh plus those reused are the prefix cache's queries,
    the reused ones its hits; time per output token is the slots' generating time over the tokens; running
    and deferred requests are gauges over the polls; what llama-server does not report is None, whatever
    model name is asked for (its series carry no labels)."""
    before = llama_metrics(fresh=100, cached=50, generated=10, seconds=1.0)
    after = llama_metrics(fresh=400, cached=650, generated=90, seconds=5.0, running=1)
    polls = [llama_metrics(running=r, waiting=w) for r, w in ((2, 0), (4, 3))]
    fig = server_figures(before, after, polls, model="smollm2-135m-instruct")
    assert fig["scraped"] and fig["polls"] == 2
    assert (fig["prefix_cache_queries"], fig["prefix_cache_hits"]) == (900, 600)
    assert fig["prefix_cache_hit_rate"] == pytest.approx(600 / 900) and \
        fig["prefix_cache_hit_rate_source"] == "counters"
    assert (fig["prompt_tokens"], fig["generation_tokens"]) == (900, 80)
    assert fig["tpot_mean_s"] == pytest.approx(4.0 / 80)
    assert (fig["requests_running_max"], fig["requests_waiting_max"]) == (4, 3)
    assert fig["requests_running_mean"] == pytest.approx((2 + 4 + 1) / 3)
    assert all(fig[k] is None for k in ("ttft_mean_s", "ttft_p95_s", "kv_cache_usage_max",
                                        "requests_finished", "queue_time_mean_s", "request_latency_mean_s",
                                        "preemptions"))
    # a restarted server (counters went back): no delta, not a negative one
    assert server_figures(after, before, [])["generation_tokens"] is None


def test_server_figures_are_deltas_over_the_level(sample):
    text = SAMPLE.read_text()
    after = bumped(text, {"vllm:prefix_cache_queries_total{": 1000, "vllm:prefix_cache_hits_total{": 250,
                          "vllm:time_to_first_token_seconds_count{": 4,
                          "vllm:time_to_first_token_seconds_sum{": 2.0,
                          'vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf"': 4,
                          "vllm:inter_token_latency_seconds_count{": 100,
                          "vllm:inter_token_latency_seconds_sum{": 5.0,
                          'vllm:request_success_total{engine="0",finished_reason="stop"': 4,
                          "vllm:generation_tokens_total{": 104})
    polls = [bumped(text, {"vllm:num_requests_running{": r, "vllm:num_requests_waiting{": w})
             for r, w in ((1, 0), (3, 2), (5, 4))]
    fig = server_figures(sample, after, polls, model=MODEL)
    assert fig["scraped"] and fig["polls"] == 3
    assert fig["prefix_cache_queries"] == 1000 and fig["prefix_cache_hits"] == 250
    assert (fig["prefix_cache_hit_rate"] == pytest.approx(0.25)
            and fig["prefix_cache_hit_rate_source"] == "counters")
    assert fig["ttft_mean_s"] == pytest.approx(0.5) and fig["tpot_mean_s"] == pytest.approx(0.05)
    assert fig["requests_finished"] == 4 and fig["generation_tokens"] == 104
    base_running = sample.gauge("vllm:num_requests_running")
    # gauges: mean / max over the polls and the final snapshot
    assert fig["requests_running_max"] == base_running + 5
    assert fig["requests_running_mean"] == pytest.approx(base_running + (1 + 3 + 5) / 4)
    assert fig["requests_waiting_max"] == sample.gauge("vllm:num_requests_waiting") + 4
    assert fig["kv_cache_usage_max"] == sample.gauge("vllm:kv_cache_usage_perc")
    # the TTFT histogram of the level alone: 4 observations, all above the largest finite bound used
    ttft_level = after.histogram("vllm:time_to_first_token_seconds").minus(
        sample.histogram("vllm:time_to_first_token_seconds"))
    assert ttft_level.count == 4 and ttft_level.mean == pytest.approx(0.5)


def test_server_figures_na_when_missing_unreadable_or_reset(sample):
    none = server_figures(None, None, [])
    assert none["scraped"] is False
    assert all(v is None for k, v in none.items() if k not in ("scraped", "polls"))
    # no traffic in between: rates and means are n/a (no division by zero), counts are 0
    idle = server_figures(sample, sample, [])
    assert (idle["prefix_cache_hit_rate"] is None and idle["ttft_mean_s"] is None
            and idle["requests_finished"] == 0)
    # a restarted server (counters went down) gives n/a, not negative numbers
    restarted = bumped(SAMPLE.read_text(), {"vllm:prefix_cache_queries_total{": -1000})
    assert server_figures(sample, restarted)["prefix_cache_queries"] is None
    # another model's series are not counted
    other = server_figures(sample, sample, [sample], model="another-model")
    assert other["prefix_cache_queries"] is None and other["requests_running_max"] is None


def test_server_figures_of_an_older_vllm():
    """vLLM v0 exposes a hit-rate gauge, gpu_cache_usage_perc and time_per_output_token_seconds."""
    def snap(tpot_count, tpot_sum):
        return parse_prometheus(
            '# TYPE vllm:gpu_prefix_cache_hit_rate gauge\nvllm:gpu_prefix_cache_hit_rate{model_name="m"} '
            '0.75\n'
            'vllm:gpu_cache_usage_perc{model_name="m"} 0.5\n'
            f'vllm:time_per_output_token_seconds_count{{model_name="m"}} {tpot_count}\n'
            f'vllm:time_per_output_token_seconds_sum{{model_name="m"}} {tpot_sum}\n'
            f'vllm:inter_token_latency_seconds_count{{model_name="m"}} {tpot_count * 9}\n'
            f'vllm:inter_token_latency_seconds_sum{{model_name="m"}} {tpot_sum}\n')
    fig = server_figures(snap(10, 1.0), snap(30, 3.0), [], model="m")
    assert fig["prefix_cache_hit_rate"] == 0.75 and fig["prefix_cache_hit_rate_source"] == "gauge"
    assert fig["kv_cache_usage_max"] == 0.5
    assert fig["tpot_mean_s"] == pytest.approx(0.1)  # the older name wins when both exist
    assert fig["ttft_mean_s"] is None


def test_histogram_quantile_interpolates():
    h = Histogram(sum=0.0, count=10, buckets=[(1.0, 2), (2.0, 8), (float("inf"), 10)])
    assert h.quantile(0.5) == pytest.approx(1.5)
    assert h.quantile(0.1) == pytest.approx(0.5)
    assert h.quantile(0.99) == 2.0  # in the +Inf bucket: the largest finite bound
    assert Histogram(0.0, 0).quantile(0.5) is None


# -- planning and helpers ---------------------------------------------------------------------------------
def test_plan_level_sizes():
    assert plan_level_sizes([1, 4, 16, 64], 10_000, None) == ([8, 8, 32, 128], False)
    assert plan_level_sizes([1, 4], 100, 5) == ([5, 5], False)
    sizes, capped = plan_level_sizes([1, 4, 16, 64], 88, None)
    assert capped and sum(sizes) <= 88 and sizes == sorted(sizes) and min(sizes) >= 1
    with pytest.raises(ConfigError, match="need 30 distinct claims, the dataset has 20"):
        plan_level_sizes([1, 2, 3], 20, 10)
    with pytest.raises(ConfigError, match="repeat"):
        plan_level_sizes([4, 4], 100, None)
    with pytest.raises(ConfigError, match="fewer than the 3 levels"):
        plan_level_sizes([1, 2, 4], 2, None)


def test_each_level_folder_is_its_state_dir_so_memory_methods_get_a_fresh_file(tmp_path):
    from tests.unit.scripted_llm import FakeSearcher
    from veracity.pipeline.methods.mermaid import Decomposition, ReactStep

    def executor(messages):  # search once, then finish: every claim stores a passage in its level's memory
        if any(m["role"] == "assistant" for m in messages):
            return ReactStep(thought="seen", action="finish", argument="", label="SUPPORTED",
                             cited_passages=[])
        return ReactStep(thought="look", action="search", argument="Paris", label=None, cited_passages=[])

    llm = ScriptedLLM({"mermaid.decomposer": lambda m: Decomposition(triplets=[], keywords=[], domain=""),
                       "mermaid.executor": executor})
    searcher = FakeSearcher({"Paris": ["Paris is the capital of France."]})
    claims = write_claims(tmp_path / "claims.jsonl", 20)

    def config(**kw):
        return ThroughputConfig.of(method="mermaid", levels=[1, 2], dataset=claims, claims_per_level=2,
                                   seed=3,
                                   warmup=1, index=searcher, poll_interval_s=0.005, **kw)

    report = bench_throughput(config(params={"t_max": 3}), tmp_path / "out",
                              settings=Settings(home=tmp_path / "home"),
                              llm=llm, probe=None)
    assert report["status"] == "complete" and [lv["done"] for lv in report["levels"]] == [2, 2]
    for name in ("warmup", "c0001", "c0002"):
        assert (tmp_path / "out" / name / "memory" / "evidence.sqlite").is_file(), name
    assert not (tmp_path / "home" / "memory").exists()  # no level uses the default state dir
    # a memory file is not a parameter any more: one line before anything runs
    with pytest.raises(ConfigError, match="no parameter memory_path"):
        bench_throughput(config(params={"memory_path": "/shared.sqlite"}), tmp_path / "o2",
                         settings=Settings(home=tmp_path / "home"), llm=llm, probe=None)
    assert not (tmp_path / "o2").exists()


def test_parse_nvidia_smi():
    got = parse_nvidia_smi("0, 1234, 81559\n1, 100, 81559\n")
    assert got["used_mib"] == 1334 and got["total_mib"] == 163118 and len(got["devices"]) == 2
    assert parse_nvidia_smi("") is None and parse_nvidia_smi("No devices were found\n") is None


# -- the benchmark loop with a scripted LLM and a fake /metrics -------------------------------------------
def write_claims(path: Path, n: int) -> str:
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            f.write(json.dumps({"id": f"c{i:02d}", "claim": f"Claim number {i} is about topic {i * 7}.",
                                "label": "SUPPORTED" if i % 2 else "REFUTED"}) + "\n")
    return f"jsonl:{path}"


class SlowLLM(ScriptedLLM):
    """The scripted direct judge; each call takes a little time so gauge polls see calls in flight."""

    def __init__(self, delay_s: float = 0.03, on_call=None):
        super().__init__({"direct.judge": lambda m: DirectJudgement(explanation="ok", label="SUPPORTED")})
        self.delay_s = delay_s
        self.in_flight = 0
        self.on_call = on_call

    async def generate(self, messages, output_model, **kw):
        self.in_flight += 1
        try:
            await asyncio.sleep(self.delay_s)
            if self.on_call is not None:
                self.on_call()
            return await super().generate(messages, output_model, **kw)
        finally:
            self.in_flight -= 1


class FakeServer:
    """A /metrics whose counters move with the scripted LLM's calls, like vLLM's would."""

    url = "http://fake/metrics"

    def __init__(self, foreign_requests_per_scrape: int = 0, with_ttft: bool = True):
        self.llm: SlowLLM | None = None
        self.queries = self.hits = self.requests = self.ttft_n = 0
        self.ttft_sum = 0.0
        self.foreign = foreign_requests_per_scrape
        self.with_ttft = with_ttft
        self.scrapes = 0

    def call(self) -> None:
        self.queries += 100
        self.hits += 40
        self.requests += 1
        self.ttft_n += 1
        self.ttft_sum += 0.2

    async def scrape(self) -> Metrics:
        self.scrapes += 1
        self.requests += self.foreign
        running = self.llm.in_flight if self.llm else 0
        lines = [
            "# TYPE vllm:prefix_cache_queries counter",
            f'vllm:prefix_cache_queries_total{{engine="0",model_name="scripted-llm"}} {self.queries}',
            f'vllm:prefix_cache_hits_total{{engine="0",model_name="scripted-llm"}} {self.hits}',
            'vllm:request_success_total{engine="0",finished_reason="stop",model_name="scripted-llm"} '
            f'{self.requests}',
            f'vllm:num_requests_running{{engine="0",model_name="scripted-llm"}} {running}',
            'vllm:num_requests_waiting{engine="0",model_name="scripted-llm"} 0',
        ]
        if self.with_ttft:
            lines += ['vllm:time_to_first_token_seconds_count{engine="0",model_name="scripted-llm"} '
                      f'{self.ttft_n}',
                      'vllm:time_to_first_token_seconds_sum{engine="0",model_name="scripted-llm"} '
                      f'{self.ttft_sum}']
        return parse_prometheus("\n".join(lines) + "\n")


class DeadServer:
    url = "http://127.0.0.1:9/metrics"

    async def scrape(self) -> Metrics:
        raise ConnectionError("connection refused")


def run(tmp_path, levels, per_level, *, server=None, warmup=1, n_claims=20, llm=None, out="out", **kw):
    llm = llm or SlowLLM()
    if isinstance(server, FakeServer):
        server.llm = llm
        llm.on_call = server.call
    cfg = ThroughputConfig.of(method="direct", levels=levels, dataset=write_claims(tmp_path / "claims.jsonl",
                                                                                   n_claims),
                              claims_per_level=per_level, seed=3, warmup=warmup, poll_interval_s=0.005)
    warnings: list[str] = []
    report = bench_throughput(cfg, tmp_path / out, settings=Settings(home=tmp_path / "home"), llm=llm,
                              probe=server,
                              warn=warnings.append, **kw)
    return report, llm, warnings


def test_levels_run_disjoint_claims_each_once(tmp_path):
    server = FakeServer()
    report, llm, warnings = run(tmp_path, [1, 2, 4], 3, server=server, warmup=1)
    out = tmp_path / "out"
    ids = [lv["claim_ids"] for lv in report["levels"]]
    assert [len(x) for x in ids] == [3, 3, 3]
    flat = [i for x in ids for i in x]
    assert len(set(flat)) == 9  # no claim in two levels
    warm = [json.loads(line)["id"] for line in (out / "warmup" / "results.jsonl").read_text().splitlines()]
    assert len(warm) == 1 and warm[0] not in flat
    # the model saw every claim exactly once over the whole benchmark (warm-up included)
    from veracity.bench.datasets import load_dataset

    sample = [c for c, _ in load_dataset(report["dataset"], limit=10, seed=3).claims]
    assert warm + flat == [c.id for c in sample]
    for claim in sample:
        assert sum(claim.text in call.prompt for call in llm.calls) == 1, claim.id
    for lv in report["levels"]:  # each level's results hold exactly its claims
        rows = [json.loads(line) for line in (out / lv["dir"] / "results.jsonl").read_text().splitlines()]
        assert sorted(r["id"] for r in rows) == sorted(lv["claim_ids"])
    assert report["disjoint"] is True and "disjoint" in (out / "report.md").read_text()
    assert warnings == []


def test_per_level_figures_are_that_levels_deltas(tmp_path):
    server = FakeServer()
    report, llm, _ = run(tmp_path, [1, 3], 4, server=server, warmup=2)
    assert len(llm.calls) == 2 + 4 + 4
    for lv in report["levels"]:
        s = lv["server"]
        assert (lv["done"] == 4 and lv["failed"] == 0 and lv["llm_calls"] == 4
                and lv["llm_calls_per_claim"] == 1.0)
        # not the warm-up's, not cumulative
        assert s["prefix_cache_queries"] == 400 and s["prefix_cache_hits"] == 160
        assert s["prefix_cache_hit_rate"] == pytest.approx(0.4)
        assert s["requests_finished"] == 4 and lv["other_traffic"] is False
        assert s["ttft_mean_s"] == pytest.approx(0.2)
        assert s["polls"] > 0 and 1 <= s["requests_running_max"] <= lv["concurrency"]
        assert lv["claims_per_min"] > 0 and lv["tokens_per_s"] > 0
        assert lv["tokens_per_s"] == pytest.approx(lv["prompt_tokens_per_s"] + lv["completion_tokens_per_s"])
        assert lv["prompt_tokens"] > 0 and lv["latency_p50_s"] <= lv["latency_p95_s"]
        assert lv["own_prefix_cache_hit_rate"] is None  # the scripted LLM reports no cached tokens
        assert lv["gpu_memory_used_max_mib"] is None  # no GPU sampled in the stand-in run
    saved = json.loads((tmp_path / "out" / "report.json").read_text())
    assert saved["status"] == "complete" and [lv["concurrency"] for lv in saved["levels"]] == [1, 3]
    assert (tmp_path / "out" / "scaling.png").stat().st_size > 1000
    md = (tmp_path / "out" / "report.md").read_text()
    assert "| 1 | 40.0% |" in md and "![scaling.png](scaling.png)" in md


def test_other_clients_on_the_server_are_flagged(tmp_path):
    report, _, warnings = run(tmp_path, [1], 2, server=FakeServer(foreign_requests_per_scrape=3), warmup=0)
    lv = report["levels"][0]
    assert lv["other_traffic"] is True and lv["server"]["requests_finished"] > lv["llm_calls"]
    assert any("other clients" in w for w in warnings)
    assert server_rows(report)[0][0] == "1 *"


def test_unreachable_metrics_give_na_and_one_warning(tmp_path):
    report, _, warnings = run(tmp_path, [1, 2], 2, server=DeadServer(), warmup=0)
    assert report["status"] == "complete" and all(lv["done"] == 2 for lv in report["levels"])
    assert (len(warnings) == 1 and "cannot read http://127.0.0.1:9/metrics" in warnings[0]
            and "n/a" in warnings[0])
    for lv in report["levels"]:
        assert lv["server"]["scraped"] is False and lv["server"]["prefix_cache_hit_rate"] is None
    row = server_rows(report)[0]
    assert row[1:5] == ["n/a", "n/a", "n/a", "n/a"] and row[5] == "n/a"
    assert client_rows(report)[0][2] != "n/a"
    assert "n/a" in (tmp_path / "out" / "report.md").read_text()


def test_a_metric_the_server_lacks_is_na(tmp_path):
    report, _, warnings = run(tmp_path, [2], 2, server=FakeServer(with_ttft=False), warmup=0)
    s = report["levels"][0]["server"]
    assert s["ttft_mean_s"] is None and s["tpot_mean_s"] is None and s["kv_cache_usage_max"] is None
    assert s["prefix_cache_hit_rate"] == pytest.approx(0.4)
    row = dict(zip(("conc", "hit", "own", "ttft", "tpot"), server_rows(report)[0], strict=False))
    assert row["ttft"] == "n/a" and row["tpot"] == "n/a" and row["hit"] == "40.0%"
    assert warnings == []


def test_endpoint_failure_keeps_the_finished_levels(tmp_path):
    calls = {"n": 0}

    def die_in_level_two(role, messages):
        calls["n"] += 1
        if calls["n"] > 3:
            raise EndpointError("cannot reach the model endpoint", hint="start it")

    llm = SlowLLM()
    llm.fail = die_in_level_two
    with pytest.raises(EndpointError, match="level\\(s\\) run so far are in"):
        run(tmp_path, [1, 2], 2, server=FakeServer(), warmup=0, llm=llm)
    saved = json.loads((tmp_path / "out" / "report.json").read_text())
    assert saved["status"] == "stopped" and len(saved["levels"]) == 2
    first, second = saved["levels"]
    assert first["done"] == 2 and first["stopped"] is None
    assert second["done"] == 1 and "cannot reach" in second["stopped"]
    assert "stopped" in (tmp_path / "out" / "report.md").read_text()
    assert (tmp_path / "out" / "c0001" / "results.jsonl").read_text().count("\n") == 2
    # a server that is gone during the warm-up: no level runs, the report says so
    dead = SlowLLM()
    dead.fail = lambda role, messages: (_ for _ in ()).throw(EndpointError("cannot reach the model endpoint"))
    with pytest.raises(EndpointError, match="the 0 level\\(s\\) run so far"):
        run(tmp_path, [1, 2], 2, server=FakeServer(), warmup=1, llm=dead, out="out2")
    assert json.loads((tmp_path / "out2" / "report.json").read_text())["status"] == "stopped"


def test_bad_options_fail_before_anything_runs(tmp_path):
    llm = SlowLLM()
    base = dict(levels=[1, 2], dataset=write_claims(tmp_path / "claims.jsonl", 6))
    settings = Settings(home=tmp_path / "home")
    with pytest.raises(ConfigError, match="unknown method 'nope'"):
        bench_throughput(ThroughputConfig.of(method="nope", **base), tmp_path / "a", settings=settings,
                         llm=llm)
    with pytest.raises(DataError, match="unknown dataset 'nope'"):
        bench_throughput(ThroughputConfig.of(method="direct", levels=[1], dataset="nope"), tmp_path / "b",
                         settings=settings, llm=llm)
    with pytest.raises(ConfigError, match="need 10 distinct claims, the dataset has 5"):
        bench_throughput(ThroughputConfig.of(method="direct", claims_per_level=5, **base), tmp_path / "c",
                         settings=settings, llm=llm)
    with pytest.raises(ConfigError, match="has no parameter"):
        bench_throughput(ThroughputConfig.of(method="direct", params={"t_max": 3}, **base), tmp_path / "d",
                         settings=settings, llm=llm)
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "mine.txt").write_text("x")
    with pytest.raises(ConfigError, match="not empty"):
        bench_throughput(ThroughputConfig.of(method="direct", **base), tmp_path / "e", settings=settings,
                         llm=llm)
    assert llm.calls == [] and not any((tmp_path / d).exists() for d in "abcd")


def test_endpoint_down_is_one_clear_error(tmp_path):
    from veracity.serving.server import free_port

    url = f"http://127.0.0.1:{free_port()}/v1"
    cfg = ThroughputConfig.of(method="direct", levels=[1], dataset=write_claims(tmp_path / "claims.jsonl", 4),
                              claims_per_level=1)
    with pytest.raises(EndpointError, match=f"the model endpoint {url} does not answer") as info:
        bench_throughput(cfg, tmp_path / "out", settings=Settings(home=tmp_path / "home", endpoint=url))
    assert "veracity serve" in info.value.hint


def test_markdown_shows_na_for_a_report_without_levels(tmp_path):
    report, _, _ = run(tmp_path, [1], 1, warmup=0)  # probe None: no server figures at all
    assert report["metrics_url"] is None
    md = render_markdown(report, None)
    assert "metrics: n/a" in md and "| 1 | n/a |" in md


# -- the command line ----------------------------------------------------------------------------------
def run_cli(args, monkeypatch, capsys):
    from veracity.cli.bench import bench

    monkeypatch.setattr(sys, "argv", ["veracity", "bench", "throughput", *args])
    code = 0
    try:
        run_main(click.Group("veracity", commands={"bench": bench}))
    except SystemExit as exc:
        code = exc.code or 0
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("bad,expected", [
    ("1,x", "--concurrency must be a comma-separated list of integers"),
    ("0,4", "--concurrency needs positive integers"),
    ("4,4", "concurrency levels repeat"),
])
def test_cli_bad_concurrency_is_one_line(tmp_path, monkeypatch, capsys, bad, expected):
    claims = write_claims(tmp_path / "claims.jsonl", 20)
    code, out, err = run_cli(["--method", "direct", "--concurrency", bad, "--dataset", claims, "--out",
                              str(tmp_path / "o"), "--endpoint", "http://127.0.0.1:9/v1"], monkeypatch,
                             capsys)
    assert code != 0 and expected in err and "hint:" in err and "Traceback" not in err


def test_cli_unknown_method_and_dead_endpoint(tmp_path, monkeypatch, capsys):
    claims = write_claims(tmp_path / "claims.jsonl", 20)
    code, _, err = run_cli(["--method", "nope", "--dataset", claims], monkeypatch, capsys)
    assert code == 2 and "unknown method 'nope'" in err and "direct" in err
    code, _, err = run_cli(["--method", "direct", "--concurrency", "1", "--dataset", claims, "--out",
                            str(tmp_path / "o"),
                            "--endpoint", "http://127.0.0.1:9/v1"], monkeypatch, capsys)
    assert code == 1 and "does not answer" in err and "hint:" in err and "Traceback" not in err


def test_cli_prints_tables_and_writes_the_reports(tmp_path, monkeypatch, capsys):
    import veracity.bench.throughput as tp

    llm = SlowLLM(delay_s=0.0)
    replies = iter(range(100))

    def judge(messages):  # the third claim breaks (direct's invalid replies fall back now): a failed claim
        if next(replies) == 2:
            raise RuntimeError("the scripted server broke: the reply did not validate")
        return DirectJudgement(explanation="ok", label="SUPPORTED")
    llm.script["direct.judge"] = judge

    @contextlib.asynccontextmanager
    async def client(self, concurrency):
        yield llm

    monkeypatch.setattr(Engine, "_client", client)
    monkeypatch.setattr(tp, "_resolve_endpoint", lambda settings: ("http://127.0.0.1:9/v1", "scripted-llm"))
    claims = write_claims(tmp_path / "claims.jsonl", 20)
    out = tmp_path / "o"
    code, stdout, err = run_cli(["--method", "direct", "--concurrency", "1,2", "--claims-per-level", "2",
                                 "--warmup", "0", "--dataset", claims, "--out", str(out)], monkeypatch,
                                capsys)
    assert code == 0, err
    assert "client side" in stdout and "server side" in stdout and "n/a" in stdout
    assert "cannot read http://127.0.0.1:9/metrics" in err  # the dead /metrics is one warning line
    for name in ("report.json", "report.md", "scaling.png", "c0001/results.jsonl", "c0002/results.jsonl"):
        assert (out / name).is_file(), name
    answered = [c for c in llm.calls if c.reply is not None]  # the stand-in also records the failed call
    assert len(answered) == 3 and "failed claim" in err and "did not validate" in err
    assert "1/1" in stdout  # concurrency 2: one claim done, one failed
