"""Kill the model server in the middle of a batch, then resume on another: nothing lost, nothing doubled."""

from __future__ import annotations

import asyncio
import json

import pytest

from veracity.errors import EndpointError
from veracity.pipeline.runner import run_claims
from veracity.pipeline.types import Claim
from veracity.serving.client import LLMClient

pytestmark = pytest.mark.integration

CLAIMS = [
    Claim("f0", "Greater Swiss Mountain Dog and Harrier are both dog breeds."),
    Claim("f1", "Carnegie Hall Tower is located in the same city as Staten Island."),
    Claim("f2", "Stephen King wrote the novel that The Shining film was based on."),
    Claim("f3", "Zombieland was directed by Ruben Fleischer."),
    Claim("f4", "Nicole Kidman is an Australian actress."),
    Claim("f5", "Staten Island is a borough of New York City."),
    Claim("f6", "The Harrier is a breed of dog."),
    Claim("f7", "Polow da Don produced songs recorded by Fergie."),
]
PARAMS = {"k": 2, "judge.max_tokens": 256}


async def _run(endpoint, searcher, out, *, on_result=None):
    async with LLMClient(endpoint.url, endpoint.model, concurrency=2, max_retries=2, backoff_s=0.2,
                         timeout_s=120) as llm:
        return await run_claims(CLAIMS, "rag", llm, searcher, out, concurrency=2, params=PARAMS,
                                on_result=on_result)


def _ids(out):
    return [json.loads(line)["id"] for line in out.read_text(encoding="utf-8").splitlines()]


def test_server_killed_mid_batch_then_resumed(killable_llm_server, llm_endpoint, hover_searcher, tmp_path):
    out = tmp_path / "results.jsonl"
    written: list[str] = []

    def kill_after_first(record):
        written.append(record["id"])
        if len(written) == 1:
            killable_llm_server.kill()

    with pytest.raises(EndpointError) as info:
        asyncio.run(_run(killable_llm_server, hover_searcher, out, on_result=kill_after_first))
    stats = info.value.stats
    first_ids = _ids(out)
    assert 1 <= len(first_ids) < len(CLAIMS), "the kill should stop the batch part-way"
    assert first_ids == written and stats.done == len(first_ids)
    assert "\n" not in str(info.value)

    stats2 = asyncio.run(_run(llm_endpoint, hover_searcher, out))
    assert stats2.skipped == len(first_ids) and stats2.done == len(CLAIMS) - len(first_ids)
    ids = _ids(out)
    assert sorted(ids) == sorted(c.id for c in CLAIMS)  # none lost
    assert len(ids) == len(set(ids))  # none duplicated
