"""benchmarks/endpoint_scaling.py against two in-process stand-in endpoints (the real figures:
BENCHMARKS.md)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from benchmarks import endpoint_scaling as es


class _StandIn(BaseHTTPRequestHandler):
    counts: dict[int, int] = {}

    def log_message(self, *args) -> None:
        pass

    def _send(self, obj: dict) -> None:
        body = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._send({"data": [{"id": "m"}]})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        port = self.server.server_address[1]
        type(self).counts[port] = type(self).counts.get(port, 0) + 1
        content = json.dumps({"explanation": "Stand-in.", "label": "SUPPORTED"})
        self._send({"choices": [{"message": {"content": content}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 90, "completion_tokens": 10}})


@pytest.fixture()
def two_endpoints():
    servers = [ThreadingHTTPServer(("127.0.0.1", 0), _StandIn) for _ in range(2)]
    for s in servers:
        threading.Thread(target=s.serve_forever, daemon=True).start()
    yield [f"http://127.0.0.1:{s.server_address[1]}/v1" for s in servers]
    for s in servers:
        s.shutdown()
        s.server_close()


def test_paper_model_scales_with_replicas_and_efficiency():
    assert es.paper_model(100.0, 200.0, [1, 2, 4]) == [{"replicas": 1, "claims_per_min": 30.0},
                                                        {"replicas": 2, "claims_per_min": 60.0},
                                                        {"replicas": 4, "claims_per_min": 120.0}]
    assert es.paper_model(100.0, 200.0, [2], efficiency=0.9) == [{"replicas": 2, "claims_per_min": 54.0}]
    assert es.paper_model(100.0, 0.0, [1]) == []


def test_the_script_measures_one_then_two_endpoints(two_endpoints, tmp_path: Path, capsys):
    data = tmp_path / "claims.jsonl"
    data.write_text("".join(json.dumps({"id": f"c{i}", "claim": f"Claim {i} holds.",
                                        "label": "SUPPORTED"}) + "\n"
                            for i in range(40)))
    _StandIn.counts.clear()
    out = tmp_path / "r.json"
    report = es.main(["--endpoints", ",".join(two_endpoints), "--dataset", f"jsonl:{data}", "--claims", "12",
                      "--concurrency", "4", "--out", str(out)])
    one, two = report["runs"]
    assert (one["endpoints"], one["done"], two["endpoints"], two["done"]) == (1, 12, 2, 12)
    assert one["requests_per_endpoint"] == [12] and sum(two["requests_per_endpoint"]) == 12
    # both used (the split follows their speed on a loaded machine)
    assert min(two["requests_per_endpoint"]) >= 1
    assert one["prompt_tokens_per_claim"] == 90 and one["completion_tokens_per_claim"] == 10
    assert sum(_StandIn.counts.values()) == 4 + 24  # warm-up 2 per endpoint, then 12 + 12
    assert report["model"]["tokens_per_claim"] == 100
    printed = capsys.readouterr().out
    assert printed.startswith("python benchmarks/endpoint_scaling.py --endpoints")
    assert "| 2 | 12/12 | 0 |" in printed and "model on paper" in printed
    assert json.loads(out.read_text())["speedup"] == report["speedup"]


def test_doctor_checks_every_endpoint_of_a_list(two_endpoints):
    from veracity.config import Settings
    from veracity.doctor import check_endpoint

    both = check_endpoint(Settings(endpoint=",".join(two_endpoints)))
    assert both.ok and both.detail == "2 of 2 endpoints serve m"
    dead = "http://127.0.0.1:9/v1"
    one_down = check_endpoint(Settings(endpoint=f"{two_endpoints[0]},{dead}"))
    assert not one_down.ok and one_down.detail == f"1 of 2 endpoints serve m; {dead} not answering"
    none = check_endpoint(Settings(endpoint=f"{dead},http://127.0.0.1:7/v1"))
    assert not none.ok and "do not answer" in none.detail
