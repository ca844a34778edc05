"""Two real model servers behind one client; one is killed mid-batch (issue 17 point 1).

The two servers are on the default engine (llama.cpp without a GPU): the session's (``llm_endpoint``) and
a private one (``killable_llama_server``, stopped at the test's end) that the test kills. When the
session's server serves another model (a ``VERACITY_TEST_ENDPOINT`` on another model), a second private
server stands in for it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fixtures.server import llama_home, start_llama
from veracity.config import Settings
from veracity.serving.server import stop_server
from veracity.models.registry import CPU_DEFAULT


@pytest.fixture()
def two_servers(llm_endpoint, killable_llama_server, tmp_path_factory):
    if llm_endpoint.model == CPU_DEFAULT:
        yield [llm_endpoint, killable_llama_server]
        return
    a = start_llama(llama_home(tmp_path_factory.mktemp("pool-a")), "pool-a")
    try:
        yield [a, killable_llama_server]
    finally:
        stop_server(Settings(home=a.home), a.name)


@pytest.mark.timeout(1500)
async def test_killing_one_of_two_servers_mid_batch_loses_and_duplicates_no_claim(two_servers,
                                                                                  tmp_path: Path):
    from veracity.pipeline.api import Verifier
    from veracity.serving.client import LLMClient

    a, b = two_servers
    notes: list[str] = []
    llm = LLMClient(f"{a.url},{b.url}", None, concurrency=16, max_tokens=96, notify=notes.append,
                    health_interval_s=2.0)
    # 18 claims at 8 in flight: b is killed once 6 are written, with up to 8 in flight (about half of them
    # on b) and the rest not yet started, which only a can answer
    claims = [{"id": f"c{i}", "claim": f"The river number {i} flows through {city}."}
              for i, city in enumerate(["Paris", "Berlin", "Rome", "Madrid", "Vienna", "Oslo"] * 3)]
    out = tmp_path / "results.jsonl"
    killed: list[int] = []

    def on_result(record: dict) -> None:
        if len(killed) == 0 and sum(1 for _ in out.open()) >= 6:
            killed.append(b.pid or 0)
            b.kill()  # SIGKILL to the whole server group, requests in flight

    async with llm:
        assert llm.model == CPU_DEFAULT
        stats = await Verifier(method="direct", llm=llm).averify_many(claims, out=out, concurrency=8,
                                                                       on_result=on_result)
        pool = llm.pool.stats()
    ids = [json.loads(line)["id"] for line in out.read_text().splitlines()]
    assert killed, "the batch ended before the kill"
    assert sorted(ids) == sorted(c["id"] for c in claims), "a claim was lost"
    assert len(ids) == len(set(ids)), "a claim was written twice"
    assert stats.done == len(claims) and not stats.failed and stats.stopped is None
    ep_a, ep_b = pool["endpoints"]
    assert ep_b["assigned"] >= 3 and not ep_b["alive"], pool  # b worked, then was found dead
    assert ep_a["completed"] > ep_b["completed"], pool
    assert pool["failovers"] >= 1, pool  # requests in flight on b were answered by a
    assert any(f"{b.url} is down" in n and "go to the 1 live one" in n for n in notes), notes
