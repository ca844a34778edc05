"""POST /v1/check and /v1/check/stream with the scripted LLM: the record of `veracity check --json`, the
live events, the history, and bad texts refused in one line before any model call."""

from __future__ import annotations

import json

from fastapi.testclient import TestClient

from tests.unit.scripted_llm import ScriptedLLM
from tests.unit.test_check import TEXT, script
from veracity.web.app import WebConfig, asgi


def make(tmp_path, llm=None):
    config = WebConfig(home=tmp_path / "home", llm=llm or ScriptedLLM(script()),
                       model_health=lambda: {"ok": True, "endpoint": "scripted", "models": ["scripted-llm"]})
    return TestClient(asgi(config), base_url="http://127.0.0.1")  # the Host the app is bound to


def sse(body: str) -> list[tuple[str, dict]]:
    out = []
    for block in body.strip().split("\n\n"):
        name = next(ln[7:] for ln in block.splitlines() if ln.startswith("event: "))
        data = "".join(ln[6:] for ln in block.splitlines() if ln.startswith("data: "))
        out.append((name, json.loads(data)))
    return out


def test_check_returns_the_record_and_keeps_it_in_the_history(tmp_path):
    with make(tmp_path) as client:
        resp = client.post("/v1/check", json={"text": TEXT, "method": "direct", "factscore": True})
        assert resp.status_code == 200, resp.text
        rec = resp.json()
        assert [s["verdict"] for s in rec["sentences"]] == ["SUPPORTED", "SUPPORTED", "REFUTED", "unchecked"]
        assert "factscore" in rec["summary"]
        check_id = resp.headers["X-Veracity-Check"]
        (item,) = client.get("/v1/checks").json()
        assert item["id"] == check_id and item["label"] == "REFUTED" and item["claim"] == TEXT
        stored = client.get(f"/v1/checks/{check_id}").json()
        assert stored["kind"] == "text" and stored["sentences"] == rec["sentences"]


def test_the_stream_sends_sentences_claims_and_verdicts_as_they_come(tmp_path):
    with make(tmp_path) as client:
        resp = client.post("/v1/check/stream", json={"text": TEXT, "method": "direct"})
        assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/event-stream")
        events = sse(resp.text)
    names = [n for n, _ in events]
    assert names[0] == "start" and names[1] == "sentences" and names[-1] == "done"
    assert names.index("extracted") < names.index("claim")  # claims appear before verdicts arrive
    assert names.count("claims") == 4 and names.count("claim") == 4  # 4 sentences; 4 factual claims verified
    assert any(n == "trace" and p["event"]["kind"] == "role.finished" for n, p in events)
    refuted = [p for n, p in events if n == "claim" and p["record"]["label"] == "REFUTED"]
    assert [p["claim_id"].split("#")[1] for p in refuted] == ["s3c2"]
    done = events[-1][1]
    assert done["check_id"] and done["record"]["summary"]["counts"]["REFUTED"] == 1


def test_bad_texts_are_one_line_before_any_model_call(tmp_path):
    llm = ScriptedLLM({})
    with make(tmp_path, llm=llm) as client:
        for body, word in (({"text": "  "}, "empty text"), ({"text": "a\x00b"}, "binary"),
                           ({"text": "x" * 20_001}, "max-chars")):
            for route in ("/v1/check", "/v1/check/stream"):
                resp = client.post(route, json={**body, "method": "direct"})
                assert resp.status_code == 422, resp.text
                assert word in resp.json()["error"] and resp.json()["hint"]
        resp = client.post("/v1/check", json={"text": "Paris is in France.", "method": "nosuch"})
        assert resp.status_code == 400 and "nosuch" in resp.json()["error"]
    assert llm.calls == []


def test_the_page_has_the_text_tab_and_its_script(tmp_path):
    with make(tmp_path) as client:
        page = client.get("/").text
        assert 'id="tab-text"' in page and 'id="view-text"' in page and "/static/text.js" in page
        js = client.get("/static/text.js").text
        assert "/v1/check/stream" in js and "innerHTML" not in js
