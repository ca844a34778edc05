"""The web app's API with httpx (starlette's TestClient is an httpx client running the app's lifespan),
on the scripted stand-in LLM and an in-memory index: every route, every error, the security rules, the
live trace stream, and batch jobs that resume after a restart without losing or repeating a claim.
The same routes against the real SmolLM2 server and a real index: tests/integration/test_web_real.py."""

from __future__ import annotations

import json
import re
import time

import pytest
from fastapi.testclient import TestClient

from tests.unit.scripted_llm import FakeSearcher, ScriptedLLM, keep_every_passage
from veracity.errors import EndpointError
from veracity.pipeline.methods.direct import DirectJudgement
from veracity.web.app import WebConfig, asgi

NDJSON = {"Content-Type": "application/x-ndjson"}  # a claims file upload declares its type (issue 29 point 3)
JSON_BODY = {"Content-Type": "application/json"}  # every other state-changing request is JSON
TOKEN = "s3cret-token-0123456789"

ARTICLES = {"Eiffel Tower": ["The Eiffel Tower is a wrought-iron tower in Paris, France.",
                             "It was completed in 1889."],
            "Berlin": ["Berlin is the capital of Germany."]}


def rag_reply(messages, output_model, index):
    cited = ["Eiffel Tower#0"] if "Eiffel Tower#0" in messages[-1]["content"] else []
    return output_model.model_validate({"explanation": "The tower is in Paris, not Berlin.",
                                        "label": "REFUTED",
                                        "cited_passages": cited})


def make(tmp_path, llm=None, searcher="fake", job_concurrency=None, **kw):
    llm = llm or ScriptedLLM({"rag.select": keep_every_passage, "rag.judge": rag_reply,
                              "direct.judge": lambda m: DirectJudgement(explanation="known",
                                                                        label="SUPPORTED")})
    searcher = FakeSearcher(dict(ARTICLES)) if searcher == "fake" else searcher
    if job_concurrency is not None:  # claims in flight per job: the run configuration's
        from veracity.config import Settings
        from veracity.pipeline.config import VerifierConfig

        kw["verifier"] = VerifierConfig.of(concurrency=job_concurrency,
                                           settings=Settings(home=tmp_path / "home"))
    config = WebConfig(home=tmp_path / "home", searcher=searcher, llm=llm,
                       model_health=lambda: {"ok": True, "endpoint": "scripted", "models": ["scripted-llm"]},
                       **kw)
    return TestClient(asgi(config), base_url="http://127.0.0.1"), config  # the Host the app is bound to


def one_line_error(resp, status, *words):
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert set(body) <= {"error", "hint"} and "\n" not in body["error"]
    for w in words:
        assert w in body["error"], body
    return body


# -- checks -------------------------------------------------------------------------------------------------
def test_verify_returns_the_cli_json_verdict_and_keeps_it_in_the_history(tmp_path):
    client, _ = make(tmp_path)
    with client:
        resp = client.post("/v1/verify", json={"claim": "The Eiffel Tower is in Berlin.", "method": "rag"})
        assert resp.status_code == 200, resp.text
        record = resp.json()
        assert set(record) == {"id", "claim", "label", "explanation", "method", "evidence", "confidence",
                               "trace"}  # verify --json
        assert record["label"] == "REFUTED" and record["method"] == "rag"
        assert [e["passage_id"] for e in record["evidence"]] == ["Eiffel Tower#0"]
        assert [c["role"] for c in record["trace"]["llm_calls"]] == ["rag.select", "rag.judge"]  # select=auto
        check_id = resp.headers["X-Veracity-Check"]
        assert resp.headers["Location"] == f"/v1/checks/{check_id}"
        assert client.get(f"/v1/checks/{check_id}").json() == record
        dl = client.get(f"/v1/checks/{check_id}?download=1")
        assert "attachment" in dl.headers["Content-Disposition"] and dl.json() == record
        (item,) = client.get("/v1/checks").json()
        assert item["id"] == check_id and item["label"] == "REFUTED" and item["claim"] == record["claim"]
        one_line_error(client.get("/v1/checks/" + "0" * 32), 404, "no check")
        one_line_error(client.get("/v1/checks/not-an-id"), 404, "no check")


def test_verify_refuses_bad_requests_in_one_line_before_any_model_call(tmp_path):
    llm = ScriptedLLM({})
    client, _ = make(tmp_path, llm=llm, max_claim_chars=100)
    with client:
        one_line_error(client.post("/v1/verify", json={"claim": "x", "method": "nosuch"}), 400, "nosuch")
        one_line_error(client.post("/v1/verify", json={"claim": "x", "labels": "5way"}), 400, "5way")
        one_line_error(client.post("/v1/verify", json={"claim": "x", "method": "rag",
                                                       "params": {"bogus": 1}}),
                       400, "bogus")
        one_line_error(client.post("/v1/verify", json={"claim": "   ", "method": "rag"}), 422, "empty claim")
        one_line_error(client.post("/v1/verify", json={"claim": "y" * 101, "method": "rag"}), 422,
                       "101 characters", "limit of 100")
        one_line_error(client.post("/v1/verify", json={"method": "rag"}), 422, "claim")
        bad = one_line_error(client.post("/v1/verify", content=b"{not json", headers=JSON_BODY), 422,
                             "the request body is not valid JSON", "at character 1")
        # issue 29: "invalid request: 14: JSON decode error" read like a bug
        assert "decode error" not in bad["error"]
        one_line_error(client.post("/v1/verify", content=b"", headers=JSON_BODY), 422, "no JSON body")
        # a misspelt field is refused by name, never silently ignored (issue 29)
        bad = one_line_error(client.post("/v1/verify", json={"claim": "x", "method": "rag",
                                                             "lables": "binary"}),
                             422, "unknown field 'lables'")
        assert "claim, method, params, labels" in bad["error"]
        one_line_error(client.get("/v1/verify"), 405)
        one_line_error(client.get("/v1/nothing-here"), 404)
    assert llm.calls == []


def test_a_failing_model_server_is_a_503_in_one_line_and_counted_as_a_failure(tmp_path):
    def down(role, messages):
        raise EndpointError("the model server at http://127.0.0.1:9/v1 does not answer", hint="start it")

    client, _ = make(tmp_path, llm=ScriptedLLM({"rag.select": keep_every_passage, "rag.judge": rag_reply},
                                               fail=down))
    with client:
        body = one_line_error(client.post("/v1/verify", json={"claim": "Paris is big.", "method": "rag"}),
                              503,
                              "does not answer")
        assert body["hint"] == "start it"
        assert "veracity_claim_failures_total 1" in client.get("/metrics").text


def test_a_method_that_needs_an_index_on_a_server_without_one_says_so(tmp_path):
    client, _ = make(tmp_path, searcher=None)
    with client:
        one_line_error(client.post("/v1/verify", json={"claim": "Paris is big.", "method": "rag"}), 400,
                       "needs an index")
        ok = client.post("/v1/verify", json={"claim": "Paris is big.", "method": "direct"})
        assert ok.status_code == 200 and ok.json()["label"] == "SUPPORTED"
        one_line_error(client.get("/v1/articles/Berlin"), 400, "no index")
        info = client.get("/v1/methods").json()
        assert info["default_method"] == "direct"
        assert {m["name"]: m["available"] for m in info["methods"]}["rag"] is False
        health = client.get("/healthz")
        assert health.status_code == 503 and health.json()["index"]["ok"] is False


def sse_events(text):
    out = []
    for block in text.strip().split("\n\n"):
        name = re.search(r"^event: (.*)$", block, re.M).group(1)
        data = json.loads(re.search(r"^data: (.*)$", block, re.M).group(1))
        out.append((name, data))
    return out


def test_the_stream_sends_each_step_as_it_happens_then_the_verdict(tmp_path):
    client, _ = make(tmp_path)
    with client:
        with client.stream("POST", "/v1/verify/stream",
                           json={"claim": "The Eiffel Tower is in Berlin.", "method": "rag"}) as resp:
            assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/event-stream")
            events = sse_events(resp.read().decode())
        stored = client.get(f"/v1/checks/{events[-1][1]['check_id']}").json()
    names = [n for n, _ in events]
    assert names[0] == "start" and names[-1] == "verdict"
    trace = [d for n, d in events if n == "trace"]
    kinds = [e["kind"] for e in trace]
    # rag (select=auto on an index): search, the selection, what it kept, then the judge
    assert kinds == ["tool", "role.started", "role.finished", "rag.selected", "role.started", "role.finished"]
    tool, sel_started, sel_finished, selected, started, finished = trace
    assert sel_started["role"] == "rag.select" and sel_finished["step"] == sel_started["step"]
    assert selected["kept"] == [h["passage_id"] for h in tool["hits"]] and selected["dropped"] == []
    assert tool["tool"] == "search" and tool["hits"][0]["passage_id"].startswith("Eiffel Tower#")
    assert {"title", "score"} <= set(tool["hits"][0])
    assert started["role"] == "rag.judge" and started["messages"][-1]["role"] == "user"
    assert "Eiffel Tower" in started["messages"][-1]["content"]  # the prompt, as sent
    assert finished["step"] == started["step"] and finished["output"]["label"] == "REFUTED"
    assert finished["prompt_tokens"] > 0 and finished["completion_tokens"] > 0 and finished["latency_s"] >= 0
    verdict = events[-1][1]
    assert verdict["record"]["label"] == "REFUTED"
    assert stored == verdict["record"]
    # the stored trace is the one a non-streamed check gets (the hook records nothing extra)
    assert verdict["record"]["trace"]["summary"]["llm_calls"] == 2


def test_a_stream_whose_method_fails_ends_with_an_error_event(tmp_path):
    def down(role, messages):
        raise EndpointError("the model server does not answer", hint="start it")

    client, _ = make(tmp_path, llm=ScriptedLLM({"rag.select": keep_every_passage, "rag.judge": rag_reply},
                                               fail=down))
    with client:
        with client.stream("POST", "/v1/verify/stream", json={"claim": "Paris is big.",
                                                              "method": "rag"}) as resp:
            events = sse_events(resp.read().decode())
    name, data = events[-1]
    assert name == "error" and data["status"] == 503 and "does not answer" in data["error"]
    failed = [d for n, d in events if n == "trace" and d["kind"] == "role.failed"]
    # the first call; an unreachable server is no fallback
    assert failed and failed[0]["role"] == "rag.select"


def test_checks_beyond_the_cap_are_429_with_retry_after(tmp_path):
    client, config = make(tmp_path, llm=ScriptedLLM({"rag.select": keep_every_passage,
                                                     "rag.judge": rag_reply}, delay=0.3), max_checks=1)
    with client:
        with client.stream("POST", "/v1/verify/stream", json={"claim": "Paris is big.",
                                                              "method": "rag"}) as first:
            busy = client.post("/v1/verify", json={"claim": "Berlin is big.", "method": "rag"})
            body = one_line_error(busy, 429, "limit is 1")
            assert int(busy.headers["Retry-After"]) > 0 and "retry" in body["hint"]
            busy2 = client.post("/v1/verify/stream", json={"claim": "Berlin is big.", "method": "rag"})
            assert busy2.status_code == 429 and busy2.headers["Retry-After"]
            assert sse_events(first.read().decode())[-1][0] == "verdict"
        assert client.post("/v1/verify", json={"claim": "Berlin is big.", "method": "rag"}).status_code == 200


# -- index --------------------------------------------------------------------------------------------------
def test_passages_and_articles_come_from_the_index(tmp_path):
    client, _ = make(tmp_path)
    with client:
        assert client.get("/v1/passages/Eiffel Tower#1".replace("#", "%23")).json() == {
            "passage_id": "Eiffel Tower#1", "title": "Eiffel Tower", "text": "It was completed in 1889."}
        art = client.get("/v1/articles/Eiffel%20Tower").json()
        assert art["title"] == "Eiffel Tower" and [p["passage_id"] for p in art["passages"]] == [
            "Eiffel Tower#0", "Eiffel Tower#1"]
        one_line_error(client.get("/v1/passages/Nowhere%230"), 404, "no passage")
        one_line_error(client.get("/v1/articles/Atlantis"), 404, "no article")
        # a title that looks like a path is only ever a lookup key
        one_line_error(client.get("/v1/articles/..%2F..%2Fetc%2Fpasswd"), 404, "no article")


# -- jobs ---------------------------------------------------------------------------------------------------
def claims_jsonl(n, bad=False):
    lines = [json.dumps({"id": f"c{i}",
                         "claim": f"Claim number {i} is about the Eiffel Tower."}) for i in range(n)]
    if bad:
        lines.insert(1, "{not json")
    return ("\n".join(lines) + "\n").encode()


def wait_job(client, job_id, states=("done", "stopped", "error"), timeout=20.0):
    end = time.time() + timeout
    while time.time() < end:
        job = client.get(f"/v1/jobs/{job_id}").json()
        if job["state"] in states:
            return job
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} still {job['state']} after {timeout} s")


def test_a_batch_job_runs_reports_progress_and_serves_its_results(tmp_path):
    client, _ = make(tmp_path)
    with client:
        resp = client.post("/v1/jobs?method=rag&labels=binary", headers=NDJSON, content=claims_jsonl(3,
                                                                                                     bad=True))
        assert resp.status_code == 201, resp.text
        job = resp.json()
        assert re.fullmatch(r"[0-9a-f]{32}", job["id"]) and job["total"] == 3
        assert job["rejected"] == [{"line": 2,
                                    "reason": "not JSON (Expecting property name enclosed in double "
                                                          "quotes at column 2)"}]
        assert resp.headers["Location"] == f"/v1/jobs/{job['id']}"
        done = wait_job(client, job["id"])
        assert (done["state"], done["done"], done["failed"], done["total"]) == ("done", 3, 0, 3)
        assert done["claims_per_min"] > 0 and done["labels"] == "binary"
        res = client.get(f"/v1/jobs/{job['id']}/results")
        assert res.headers["content-type"].startswith("application/x-ndjson")
        rows = [json.loads(x) for x in res.text.splitlines()]
        assert sorted(r["id"] for r in rows) == ["c0", "c1",
                                                 "c2"] and {r["label"] for r in rows} == {"REFUTED"}
        assert set(rows[0]) == {"id", "claim", "label", "explanation", "method", "evidence", "confidence",
                                "trace"}
        (listed,) = client.get("/v1/jobs").json()
        assert listed["id"] == job["id"] and listed["done"] == 3
        metrics = client.get("/metrics").text
        assert 'veracity_claims_total{label="REFUTED"} 3' in metrics
        # resuming a finished job runs nothing again and duplicates nothing
        again = client.post(f"/v1/jobs/{job['id']}/resume", headers=JSON_BODY)
        assert again.status_code == 200
        done2 = wait_job(client, job["id"])
        assert done2["done"] == 3 and len(client.get(f"/v1/jobs/{job['id']}/results").text.splitlines()) == 3


def test_job_errors_are_one_line_and_keep_nothing(tmp_path):
    client, config = make(tmp_path)
    with client:
        one_line_error(client.post("/v1/jobs?method=rag", headers=NDJSON, content=b""), 422, "empty")
        one_line_error(client.post("/v1/jobs?method=rag", headers=NDJSON, content=b"{oops\n[1]\n"), 422,
                       "no claims in the uploaded file")
        dup = b'{"id": "a", "claim": "x"}\n{"id": "a", "claim": "y"}\n'
        one_line_error(client.post("/v1/jobs?method=rag", headers=NDJSON, content=dup), 422, "duplicate id")
        one_line_error(client.post("/v1/jobs?method=nosuch", headers=NDJSON, content=claims_jsonl(1)), 400,
                       "nosuch")
        one_line_error(client.post("/v1/jobs?method=rag&labels=7way", headers=NDJSON,
                                   content=claims_jsonl(1)), 400, "7way")
        one_line_error(client.post("/v1/jobs?method=rag&params=[1]", headers=NDJSON, content=claims_jsonl(1)),
                       400, "JSON object")
        one_line_error(client.get("/v1/jobs/" + "f" * 32), 404, "no job")
        one_line_error(client.get("/v1/jobs/..%2F..%2Fetc/results"), 404)
        one_line_error(client.post("/v1/jobs/" + "f" * 32 + "/resume", headers=JSON_BODY), 404, "no job")
        assert client.get("/v1/jobs").json() == []
    assert list((config.home / "web" / "jobs").iterdir()) == []  # nothing kept of refused uploads


def test_jobs_beyond_the_cap_are_429_and_a_running_job_cannot_be_resumed_twice(tmp_path):
    client, _ = make(tmp_path, llm=ScriptedLLM({"rag.select": keep_every_passage, "rag.judge": rag_reply},
                                               delay=0.2), max_jobs=1, job_concurrency=1)
    with client:
        first = client.post("/v1/jobs?method=rag", headers=NDJSON, content=claims_jsonl(3)).json()
        busy = client.post("/v1/jobs?method=rag", headers=NDJSON, content=claims_jsonl(2))
        one_line_error(busy, 429, "jobs are queued or running")
        assert int(busy.headers["Retry-After"]) > 0
        one_line_error(client.post(f"/v1/jobs/{first['id']}/resume", headers=JSON_BODY), 409, "already")
        assert wait_job(client, first["id"])["state"] == "done"


def test_a_job_stopped_by_the_model_server_resumes_without_loss_or_duplicates(tmp_path):
    state = {"calls": 0, "down": True}

    def flaky(role, messages):
        state["calls"] += role == "rag.judge"  # two claims judged, then the server goes away
        if state["down"] and state["calls"] > 2:
            raise EndpointError("the model server does not answer", hint="start it")

    client, config = make(tmp_path, llm=ScriptedLLM({"rag.select": keep_every_passage,
                                                     "rag.judge": rag_reply}, fail=flaky), job_concurrency=1)
    with client:
        job = client.post("/v1/jobs?method=rag", headers=NDJSON, content=claims_jsonl(5)).json()
        stopped = wait_job(client, job["id"])
        assert (stopped["state"] == "stopped" and "does not answer" in stopped["error"]
                and stopped["done"] == 2)
        state["down"] = False
        assert client.post(f"/v1/jobs/{job['id']}/resume", headers=JSON_BODY).status_code == 200
        done = wait_job(client, job["id"])
        assert done["state"] == "done" and done["done"] == 5
        ids = [json.loads(x)["id"] for x in client.get(f"/v1/jobs/{job['id']}/results").text.splitlines()]
        assert sorted(ids) == [f"c{i}" for i in range(5)]  # each claim exactly once


def test_jobs_persist_and_resume_after_the_app_restarts(tmp_path):
    slow = ScriptedLLM({"rag.select": keep_every_passage, "rag.judge": rag_reply}, delay=0.15)
    client, config = make(tmp_path, llm=slow, job_concurrency=1)
    with client:
        job = client.post("/v1/jobs?method=rag", headers=NDJSON, content=claims_jsonl(8)).json()
        end = time.time() + 10
        while client.get(f"/v1/jobs/{job['id']}").json()["done"] < 2 and time.time() < end:
            time.sleep(0.02)
    # the app stopped mid-job: what was written is kept, the job is still "running"
    results = config.home / "web" / "jobs" / job["id"] / "results.jsonl"
    written = [json.loads(x)["id"] for x in results.read_text().splitlines()]
    assert 2 <= len(written) < 8
    client2, _ = make(tmp_path, llm=ScriptedLLM({"rag.select": keep_every_passage, "rag.judge": rag_reply}),
                      job_concurrency=2)
    with client2:
        done = wait_job(client2, job["id"])
        assert done["state"] == "done" and done["done"] == 8
        ids = [json.loads(x)["id"] for x in client2.get(f"/v1/jobs/{job['id']}/results").text.splitlines()]
    assert sorted(ids) == sorted(f"c{i}" for i in range(8)) and ids[:len(written)] == written


# -- health, metrics, docs, page --------------------------------------------------------------------------
def test_health_metrics_openapi_docs_and_page(tmp_path):
    client, _ = make(tmp_path)
    with client:
        h = client.get("/healthz")
        assert h.status_code == 200 and h.json()["ok"] is True
        assert h.json()["model_server"]["models"] == ["scripted-llm"] and h.json()["index"]["ok"] is True
        client.post("/v1/verify", json={"claim": "The Eiffel Tower is in Berlin.", "method": "rag"})
        text = client.get("/metrics").text
        assert 'veracity_http_requests_total{method="POST",route="/v1/verify",status="200"} 1' in text
        assert 'veracity_claims_total{label="REFUTED"} 1' in text
        assert "veracity_claim_duration_seconds_count 1" in text
        assert re.search(r'veracity_http_request_duration_seconds_bucket\{method="POST",route="/v1/verify",'
                         r'le="\+Inf"\} 1', text)
        client.get("/v1/articles/anything-a-user-types")
        assert "anything-a-user-types" not in client.get("/metrics").text  # route templates only
        spec = client.get("/v1/openapi.json").json()
        for path in ("/v1/verify", "/v1/verify/stream", "/v1/jobs", "/v1/jobs/{job_id}",
                     "/v1/jobs/{job_id}/results",
                     "/v1/passages/{passage_id}", "/v1/articles/{title}", "/v1/checks", "/healthz",
                     "/metrics"):
            assert path in spec["paths"], path
        docs = client.get("/v1/docs")
        assert docs.status_code == 200 and "/static/docs.js" in docs.text
        page = client.get("/")
        assert page.status_code == 200 and 'id="claim"' in page.text
        for asset in ("/static/app.js", "/static/app.css", "/static/docs.js"):
            assert client.get(asset).status_code == 200, asset
        one_line_error(client.get("/static/../app.py"), 404)


def test_no_external_url_in_the_shipped_page():
    from veracity.web.app import STATIC

    for path in STATIC.iterdir():
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"(src|href)\s*=\s*[\"'](https?:)?//", text), path.name
        assert "http://" not in text and "https://" not in text, path.name


# -- security -----------------------------------------------------------------------------------------------
def test_a_token_guards_every_route_but_healthz(tmp_path):
    client, _ = make(tmp_path, token=TOKEN)
    with client:
        assert client.get("/healthz").status_code == 200
        for method, path in (("GET", "/"), ("GET", "/v1/openapi.json"), ("GET", "/v1/docs"), ("GET",
                                                                                              "/metrics"),
                             ("GET", "/static/app.js"), ("GET", "/v1/checks"), ("GET", "/v1/jobs"),
                             ("GET", "/v1/articles/Berlin"), ("GET", "/v1/passages/Berlin%230"),
                             ("GET", "/v1/methods"), ("POST", "/v1/verify"), ("POST", "/v1/verify/stream"),
                             ("POST", "/v1/jobs")):
            resp = client.request(method, path, json={"claim": "x"})
            body = one_line_error(resp, 401, "bearer token")
            assert resp.headers["WWW-Authenticate"].startswith("Bearer") and "--token" in body["hint"]
        wrong = client.get("/v1/checks", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        good = {"Authorization": f"Bearer {TOKEN}"}
        assert client.get("/v1/checks", headers=good).status_code == 200
        assert client.post("/v1/verify", headers=good, json={"claim": "Paris is big.",
                                                             "method": "rag"}).status_code == 200
        # the page: a sign-in form (no content) for a browser, then the cookie it sets is accepted
        signin = client.get("/", headers={"Accept": "text/html"})
        assert signin.status_code == 401 and 'id="claim"' not in signin.text
        # the sign-in page's own files need no token
        for asset in ("/static/signin.js", "/static/signin.css"):
            assert asset in signin.text and client.get(asset).status_code == 200
        assert "veracity_token" in client.get("/static/signin.js").text
        assert client.get("/static/app.js").status_code == 401
        client.cookies.set("veracity_token", TOKEN)
        assert 'id="claim"' in client.get("/").text


def test_binding_beyond_loopback_needs_a_token(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from veracity.cli import _register, cli

    _register()
    monkeypatch.setenv("VERACITY_HOME", str(tmp_path))
    monkeypatch.delenv("VERACITY_WEB_TOKEN", raising=False)
    for host in ("0.0.0.0", "192.168.1.10", "::"):
        res = CliRunner().invoke(cli, ["web", "--host", host])
        assert res.exit_code == 2 and "needs a token" in res.output and "Traceback" not in res.output
    from veracity.web.app import _loopback

    assert _loopback("127.0.0.1") and _loopback("::1") and _loopback("localhost") and not _loopback("0.0.0.0")
    res = CliRunner().invoke(cli, ["web", "--max-checks", "0"])
    assert res.exit_code == 2 and "--max-checks must be at least 1" in res.output


def test_bodies_over_the_limit_are_413_before_they_are_read(tmp_path):
    llm = ScriptedLLM({})
    client, _ = make(tmp_path, llm=llm, max_body_bytes=1000)
    with client:
        big = json.dumps({"claim": "x" * 2000, "method": "rag"})
        body = one_line_error(client.post("/v1/verify", content=big,
                                          headers={"Content-Type": "application/json"}),
                              413, "over the limit of 1,000")
        assert "smaller" in body["hint"]

        def chunks():  # no Content-Length: counted as it arrives
            for _ in range(5):
                yield b"x" * 400

        one_line_error(client.post("/v1/jobs?method=rag", headers=NDJSON, content=chunks()), 413,
                       "over the limit")
        assert client.get("/v1/jobs").json() == []
    assert llm.calls == []


def test_cors_is_off_by_default_and_on_only_for_named_origins(tmp_path):
    client, _ = make(tmp_path)
    pre = {"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"}
    with client:
        assert "access-control-allow-origin" not in client.options("/v1/verify", headers=pre).headers
        assert "access-control-allow-origin" not in client.get("/v1/checks", headers={"Origin": "http://evil.example"}).headers
    client2, _ = make(tmp_path, cors_origins=("http://tools.local",))
    with client2:
        ok = client2.options("/v1/verify", headers={**pre, "Origin": "http://tools.local"})
        assert ok.headers["access-control-allow-origin"] == "http://tools.local"
        assert "access-control-allow-origin" not in client2.options("/v1/verify", headers=pre).headers


@pytest.mark.parametrize("job_id", ["../x", "ABC", "0" * 31, "0" * 33, "g" * 32])
def test_job_ids_are_checked_before_any_path_is_built(tmp_path, job_id):
    from veracity.web.jobs import Store

    store = Store(tmp_path / "web")
    with pytest.raises(ValueError):
        store.job_dir(job_id)
    assert store.job(job_id) is None


def test_a_stream_abandoned_by_its_client_stops_its_method_and_frees_its_slot(tmp_path):
    llm = ScriptedLLM({"rag.select": keep_every_passage, "rag.judge": rag_reply}, delay=0.5)
    client, config = make(tmp_path, llm=llm, max_checks=1)
    with client:
        with client.stream("POST", "/v1/verify/stream", json={"claim": "Paris is big.",
                                                              "method": "rag"}) as resp:
            first = next(resp.iter_lines())
            assert first == "event: start"
        # the client left mid-check: the slot comes back (the method was cancelled), nothing is kept
        end = time.time() + 5
        while time.time() < end:
            ok = client.post("/v1/verify", json={"claim": "Berlin is big.", "method": "rag"})
            if ok.status_code == 200:
                break
            assert ok.status_code == 429
            time.sleep(0.1)
        assert ok.status_code == 200
        assert [c["claim"] for c in client.get("/v1/checks").json()] == ["Berlin is big."]
        assert "veracity_checks_in_flight 0" in client.get("/metrics").text


# -- issue 29: cross-site requests, the Host header, tokens, headers ----------------------------------------
def test_state_changing_requests_need_their_declared_type_so_no_simple_cross_site_request_passes(tmp_path):
    llm = ScriptedLLM({"rag.select": keep_every_passage, "rag.judge": rag_reply})
    client, _ = make(tmp_path, llm=llm)
    claim = json.dumps({"claim": "Paris is big.", "method": "rag"})
    with client:
        # what a page on another origin can send without a preflight: text/plain, a form, multipart, nothing
        for ctype in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
                      None):
            headers = {"Content-Type": ctype} if ctype else {}
            for path in ("/v1/verify", "/v1/verify/stream"):
                one_line_error(client.post(path, content=claim, headers=headers), 415,
                               "needs Content-Type application/json")
            one_line_error(client.post("/v1/jobs?method=rag", content=claims_jsonl(1), headers=headers), 415,
                           "needs Content-Type application/x-ndjson")
            one_line_error(client.post("/v1/jobs/" + "f" * 32 + "/resume", headers=headers), 415,
                           "application/json")
        assert client.get("/v1/jobs").json() == [] and client.get("/v1/checks").json() == []
        # the browser says where a request comes from: another origin is refused even with the right type
        for headers in ({"Origin": "http://localhost:8399"}, {"Origin": "null"},
                        {"Sec-Fetch-Site": "cross-site"},
                        {"Sec-Fetch-Site": "same-site"}, {"Origin": "http://127.0.0.1:9",
                                                          "Sec-Fetch-Site": "same-site"},
                        # the same host on another port, no Sec-Fetch-Site
                        {"Origin": "http://127.0.0.1:9999"}):
            one_line_error(client.post("/v1/verify", content=claim, headers={**JSON_BODY, **headers}), 403,
                           "cross-site request refused")
            one_line_error(client.post("/v1/jobs?method=rag", content=claims_jsonl(1), headers={**NDJSON,
                                                                                                **headers}),
                           403, "cross-site")
        assert llm.calls == [] and client.get("/v1/jobs").json() == []
        # the page itself: same origin (or a typed URL's "none"), its declared types
        same = {"Origin": "http://127.0.0.1", "Sec-Fetch-Site": "same-origin"}
        assert client.post("/v1/verify", content=claim, headers={**JSON_BODY, **same}).status_code == 200
        assert client.post("/v1/jobs?method=rag", content=claims_jsonl(1),
                           headers={**NDJSON, **same}).status_code == 201
        assert client.post("/v1/verify", content=claim,
                           headers={"Content-Type": "application/json; charset=utf-8"}).status_code == 200
        # reads are safe
        assert client.get("/v1/checks", headers={"Origin": "http://evil.example"}).status_code == 200
    listed, _ = make(tmp_path / "cors", cors_origins=("http://tools.local",))
    with listed:  # an origin named by --cors-origin may post (after its preflight)
        ok = listed.post("/v1/verify", content=claim,
                         headers={**JSON_BODY, "Origin": "http://tools.local",
                                  "Sec-Fetch-Site": "cross-site"})
        assert ok.status_code == 200


def test_the_host_header_must_name_the_address_served(tmp_path):
    from veracity.web.guard import host_allowed

    client, _ = make(tmp_path)
    with client:
        for host in ("evil.example.com", "evil.example.com:8080", "127.0.0.1.nip.io", "192.168.1.10"):
            body = one_line_error(client.get("/v1/checks", headers={"Host": host}), 421,
                                  "does not name this server")
            assert "--allowed-host" in body["hint"]
            one_line_error(client.get("/healthz", headers={"Host": host}), 421)
        for host in ("127.0.0.1", "127.0.0.1:8080", "localhost:8080", "[::1]:8080"):
            assert client.get("/v1/checks", headers={"Host": host}).status_code == 200, host
    proxied, _ = make(tmp_path / "p", allowed_hosts=("checks.example.org",))
    with proxied:
        assert proxied.get("/v1/checks", headers={"Host": "checks.example.org"}).status_code == 200
        assert proxied.get("/v1/checks", headers={"Host": "other.example.org"}).status_code == 421
        # the page through the proxy posts with its public origin, whether the proxy keeps Host or rewrites it
        claim = {"claim": "Paris is big.", "method": "direct"}
        public = {"Origin": "https://checks.example.org", "Sec-Fetch-Site": "same-origin"}
        for host in ("checks.example.org", "127.0.0.1:8080"):
            assert proxied.post("/v1/verify", json=claim, headers={**public,
                                                                   "Host": host}).status_code == 200, host
        one_line_error(proxied.post("/v1/verify", json=claim,
                                    headers={"Origin": "https://other.example.org"}), 403)
    assert host_allowed("10.0.0.5:80", "0.0.0.0") and not host_allowed("evil.example", "0.0.0.0")
    assert host_allowed("10.0.0.5", "10.0.0.5") and not host_allowed("10.0.0.6", "10.0.0.5")
    assert host_allowed("[::1]:8080", "::1") and not host_allowed("", "127.0.0.1")


def test_tokens_are_long_without_whitespace_and_healthz_tells_details_only_to_token_holders(tmp_path):
    from veracity.errors import ConfigError

    for bad in ("   ", "", "short", "x" * 15, "has a space in it!!", "tab\tinside-the-token"):
        with pytest.raises(ConfigError):
            make(tmp_path, token=bad)
    client, _ = make(tmp_path, token=TOKEN)
    with client:
        assert client.get("/v1/checks", headers={"Authorization": "Bearer " + TOKEN[:-1]}).status_code == 401
        client.cookies.set("veracity_token", "%20%20%20")  # issue 29's whitespace cookie
        assert client.get("/v1/checks").status_code == 401
        client.cookies.clear()
        anonymous = client.get("/healthz")
        assert anonymous.status_code == 200 and anonymous.json() == {"ok": True}
        full = client.get("/healthz", headers={"Authorization": f"Bearer {TOKEN}"}).json()
        assert (full["app"]["version"] and full["model_server"]["endpoint"] == "scripted"
                and "dir" in full["index"])


def test_every_response_carries_the_security_headers(tmp_path):
    client, _ = make(tmp_path, token=TOKEN)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with client:
        for resp in (client.get("/", headers=auth), client.get("/static/app.js", headers=auth),
                     client.get("/v1/checks", headers=auth), client.get("/healthz"),
                     client.get("/", headers={"Accept": "text/html"}), client.get("/nothing", headers=auth),
                     client.get("/v1/checks", headers={**auth, "Host": "evil.example"})):
            csp = resp.headers["content-security-policy"]
            assert ("frame-ancestors 'none'" in csp and "default-src 'self'" in csp
                    and "unsafe-inline" not in csp)
            assert (resp.headers["x-content-type-options"] == "nosniff"
                    and resp.headers["x-frame-options"] == "DENY")


def test_the_shipped_pages_run_under_the_csp_no_inline_script_or_style():
    from veracity.web.app import STATIC

    for page in STATIC.glob("*.html"):
        text = page.read_text(encoding="utf-8")
        assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", text), page.name  # every script from a file
        assert "<style" not in text and " style=" not in text and not re.search(r"\son[a-z]+=",
                                                                                text), page.name


def test_the_web_command_reads_its_token_from_a_file_or_the_environment_and_checks_it(tmp_path, monkeypatch):
    from veracity.cli.web import _token
    from veracity.errors import ConfigError

    f = tmp_path / "token"
    f.write_text(TOKEN + "\n")
    assert _token(None, f, None) == TOKEN and _token(None, None, TOKEN) == TOKEN and _token("given", None,
                                                                                            TOKEN) == "given"
    assert _token(None, None, "") is None
    with pytest.raises(ConfigError, match="not both"):
        _token("x", f, None)
    with pytest.raises(ConfigError, match="cannot read the token file"):
        _token(None, tmp_path / "missing", None)


def test_the_guards_rules_one_by_one(tmp_path, monkeypatch):
    """The web guard's rules as functions, each at its edge: Host names, loopback, same origin (scheme, port,
    case), a proxy's origin, and where a token may come from."""
    import socket

    from veracity.web.guard import Guard, host_allowed, host_name, loopback

    assert host_name(" Example.COM:8080 ") == "example.com" and host_name("[::1]:8080") == "::1"
    assert host_name("[::1") == "::1" and host_name("::1") == "::1" and host_name("") == ""
    # an address in brackets followed by anything but :PORT names nothing (and is refused)
    assert host_name("[::1]") == "::1" and host_name("[::1]:8") == "::1"
    for malformed in ("[::1]]", "[::1]x", "[::1]::80", "[::1]:8x", "[::1]:"):
        assert host_name(malformed) == "" and not host_allowed(malformed, "::1"), malformed
    assert loopback("localhost") and loopback("127.0.0.2") and loopback("[::1]") and loopback("::1")
    assert not loopback("10.0.0.1") and not loopback("localhost.example") and not loopback("")
    # a loopback bind: localhost and loopback addresses, any case and port; nothing else
    assert host_allowed("LOCALHOST:80", "127.0.0.1") and host_allowed("127.0.0.5:1", "127.0.0.1")
    assert host_allowed("127.0.0.1", "localhost") and host_allowed("[::1]:80", "[::1]")
    assert not host_allowed("10.0.0.1", "127.0.0.1") and not host_allowed("localhost.evil.example",
                                                                          "127.0.0.1")
    # a wildcard bind: any address, localhost and this machine's names; a name served to nobody else is
    # refused
    for bound in ("0.0.0.0", "::"):
        assert host_allowed("10.1.2.3:8000", bound) and host_allowed("localhost", bound)
        assert host_allowed(socket.gethostname().upper(), bound) and not host_allowed("evil.example", bound)
    # one address: that address (and --allowed-host names, whatever their port), not localhost
    assert not host_allowed("localhost", "10.0.0.5") and not host_allowed("127.0.0.1", "10.0.0.5")
    assert host_allowed("Proxy.Example:443", "10.0.0.5", ("proxy.example",))
    assert host_allowed("proxy.example", "10.0.0.5", ("proxy.example:8443",))
    assert not host_allowed("other.example", "10.0.0.5", ("proxy.example",)) and not host_allowed(":80",
                                                                                                  "0.0.0.0")

    same = Guard._same_origin
    assert same("http://127.0.0.1:8000", " 127.0.0.1:8000 ") and same("HTTPS://LOCALHOST:8000",
                                                                      "localhost:8000")
    assert not same("http://127.0.0.1:9999", "127.0.0.1:8000") and not same("http://127.0.0.1",
                                                                            "127.0.0.1:8000")
    assert not same("ftp://127.0.0.1:8000", "127.0.0.1:8000") and not same("http://", "")
    assert not same("null", "null") and not same("127.0.0.1:8000", "127.0.0.1:8000")

    def guard(**kw) -> Guard:
        return Guard(None, WebConfig(home=tmp_path / "home", **kw), None)

    proxy = guard(allowed_hosts=("Checks.Example.org",))
    assert proxy._proxied("https://checks.example.org") and proxy._proxied("http://checks.example.org:8443")
    assert not proxy._proxied("ftp://checks.example.org") and not proxy._proxied("https://other.example.org")
    assert not proxy._proxied("checks.example.org") and not guard()._proxied("https://checks.example.org")

    def scope(*headers: tuple[str, str]) -> dict:
        return {"headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers]}

    assert guard()._authorised(scope())  # no token configured: everyone
    locked = guard(token=TOKEN)
    assert locked._authorised(scope(("Authorization", f"Bearer {TOKEN}")))
    assert locked._authorised(scope(("authorization", f"bearer   {TOKEN}  ")))  # the scheme in any case
    assert locked._authorised(scope(("Cookie",
                                     f"theme=dark; veracity_token={TOKEN.replace('-', '%2D')}; x=1")))
    for headers in ((), (("Authorization", f"Basic {TOKEN}"),), (("Authorization", "Bearer "),),
                    (("Authorization", f"Bearer {TOKEN}x"),), (("Cookie", f"veracity_tokenx={TOKEN}"),),
                    (("Cookie", f"other={TOKEN}"),), (("Authorization", TOKEN),)):
        assert not locked._authorised(scope(*headers)), headers
    # a token holding "=" (base64's padding) is read whole from the cookie
    padded = guard(token="s3cret=token=0123456789")
    assert padded._authorised(scope(("Cookie", "x=1; veracity_token=s3cret=token=0123456789")))
    # a request without headers is nobody's (the Host rule refuses it before)
    assert not locked._authorised({}) and locked._headers({}) == {}
    # only an address (in brackets or not) is loopback
    assert not loopback("X127.0.0.1") and not loopback("127.0.0.1X")
    # a bind to one IPv6 address, written in brackets: that address
    assert host_allowed("[2001:db8::1]:8000", "[2001:db8::1]") and not host_allowed("[2001:db8::2]:8000",
                                                                                   "[2001:db8::1]")
    # a wildcard bind: localhost, and this machine's names in any case, whatever they are
    import veracity.web.guard as guard_module

    monkeypatch.setattr(guard_module.socket, "gethostname", lambda: "Checker")
    monkeypatch.setattr(guard_module.socket, "getfqdn", lambda: "Checker.Example.ORG")
    for name in ("localhost:8000", "checker", "CHECKER.example.org:8000", "10.0.0.9"):
        assert host_allowed(name, "0.0.0.0"), name
    assert not host_allowed("checker.example", "0.0.0.0") and not host_allowed("other", "::")


# -- the guard driven directly (an ASGI call per request, no app or client between): each of its rules with
# the exact status, line and hint a user sees, in the order it applies them ---------------------------------
class _Routes:
    """Stands for the routes behind the guard: notes each scope and the messages it reads, answers 200."""

    def __init__(self, reads: int = 1, headers: tuple | None = (), fail: bool = False):
        self.scopes: list[dict] = []
        self.channels: list[tuple] = []
        self.read: list[dict] = []
        self.reads, self.headers, self.fail = reads, headers, fail

    async def __call__(self, scope, receive, send):
        self.scopes.append(scope)
        self.channels.append((receive, send))
        if scope["type"] != "http":
            return
        for _ in range(self.reads):
            self.read.append(await receive())
        if self.fail:
            raise RuntimeError("a route failed")
        start = {"type": "http.response.start", "status": 200}
        if self.headers is not None:  # ASGI: a response may leave its headers out
            start["headers"] = list(self.headers)
        await send(start)
        await send({"type": "http.response.body", "body": b"ok"})


class _Metrics:
    def __init__(self):
        self.requests: list[tuple] = []

    def request(self, method, route, status, seconds):
        self.requests.append((method, route, status, seconds))


def _guarded(tmp_path, routes=None, **kw):
    from veracity.web.guard import Guard

    routes = routes or _Routes()
    metrics = _Metrics()
    return Guard(routes, WebConfig(home=tmp_path / "home", **kw), metrics), routes, metrics


def _send(guard, method="GET", path="/v1/checks", headers=(("Host", "127.0.0.1:8000"),), chunks=None,
          route=None):
    """One request through ``guard``: (scope, status, headers by lowercase name, body as JSON or text)."""
    import asyncio
    from types import SimpleNamespace

    incoming = [{"type": "http.request", "body": b"", "more_body": False}] if chunks is None else list(chunks)
    incoming.append({"type": "http.disconnect"})
    sent: list[dict] = []

    async def receive():
        return incoming.pop(0)

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": method, "path": path,
             "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers]}
    if route:
        scope["route"] = SimpleNamespace(path=route)
    asyncio.run(guard(scope, receive, send))
    start = next((m for m in sent if m["type"] == "http.response.start"), None)
    if start is None:
        return scope, None, {}, None
    got = {}
    for k, v in start["headers"]:
        got.setdefault(k.decode("latin-1").lower(), []).append(v.decode("latin-1"))
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body").decode()
    return scope, start["status"], got, json.loads(body) if body.startswith("{") else body


HOST = ("Host", "127.0.0.1:8000")
JSON_TYPE = ("Content-Type", "application/json")


def test_the_guard_refuses_a_foreign_host_first_with_the_line_and_hint_a_user_sees(tmp_path):
    guard, routes, metrics = _guarded(tmp_path, token=TOKEN)
    hint = ("open the address veracity web serves (127.0.0.1); behind a reverse proxy start it with "
            "--allowed-host NAME")
    # before the token and the cross-site rule: a rebound name learns nothing else
    _, status, _, body = _send(guard, "POST", "/v1/verify", (("Host", "evil.example:8000"),
                                                             ("Origin", "http://evil.example")))
    assert status == 421 and body == {
        "error": "the Host header 'evil.example:8000' does not name this server", "hint": hint}
    _, status, _, body = _send(guard, headers=())
    assert status == 421 and body == {"error": "the request has no Host header", "hint": hint}
    _, status, _, body = _send(guard, headers=(("Host", "evil\t  example " + "x" * 150),))
    assert status == 421 and body["error"] == \
        f"the Host header 'evil example {'x' * 87}' does not name this server"
    assert routes.scopes == [] and [r[2] for r in metrics.requests] == [421, 421, 421]
    # the header's name in any case
    _, status, _, _ = _send(guard, "GET", "/healthz", (("HOST", "LOCALHOST:8000"),))
    assert status == 200


def test_the_guard_asks_for_the_token_and_lets_the_open_paths_through(tmp_path):
    from veracity.web.common import STATIC as STATIC_DIR

    guard, routes, _ = _guarded(tmp_path, token=TOKEN)
    for method, accept in (("GET", "application/json"), ("POST", "text/html"), ("GET", "")):
        scope, status, headers, body = _send(guard, method, "/v1/checks", (HOST, ("Accept", accept)))
        assert status == 401 and headers["www-authenticate"] == ['Bearer realm="veracity"']
        assert body == {"error": "this server needs a bearer token",
                        "hint": "send `Authorization: Bearer TOKEN` (the --token veracity web was started "
                                "with)"}
        assert scope["state"] == {"authorised": False}
    # a browser's GET gets the sign-in page, with the same challenge
    _, status, headers, page = _send(guard, "GET", "/", (HOST, ("accept",
                                                                "text/html,application/xhtml+xml")))
    assert (status == 401 and headers["www-authenticate"] == ['Bearer realm="veracity"']
            and page == (STATIC_DIR / "signin.html").read_text(encoding="utf-8"))
    assert routes.scopes == []
    # the open paths need no token, and the routes learn the request was not authorised
    for path in ("/healthz", "/static/signin.js", "/static/signin.css"):
        scope, status, _, _ = _send(guard, "GET", path)
        assert status == 200 and scope["state"] == {"authorised": False}
    scope, status, _, _ = _send(guard, "GET", "/v1/checks", (HOST, ("Authorization", f"Bearer {TOKEN}")))
    assert status == 200 and scope["state"] == {"authorised": True} and len(routes.scopes) == 4
    # no token configured: every request is authorised
    open_guard, _, _ = _guarded(tmp_path)
    scope, status, _, _ = _send(open_guard, "GET", "/v1/checks")
    assert status == 200 and scope["state"] == {"authorised": True}


def test_the_guard_refuses_cross_site_and_undeclared_types_with_the_line_and_hint_a_user_sees(tmp_path):
    guard, routes, _ = _guarded(tmp_path, cors_origins=("http://tools.local",))
    hint = "use the page this server serves, or start veracity web with --cors-origin ORIGIN"
    for extra, shown in (((("Origin", "http://evil.example"),), "http://evil.example"),
                         ((("Origin", "http://127.0.0.1:9999"),), "http://127.0.0.1:9999"),
                         ((("Sec-Fetch-Site", "cross-site"),), "cross-site"),
                         ((("Sec-Fetch-Site", "same-site"),), "same-site"),
                         ((("Origin", "http://evil.example"), ("Sec-Fetch-Site", "same-origin")),
                          "http://evil.example"),
                         ((("Origin", "http://a  b\t" + "c" * 120),), "http://a b " + "c" * 89)):
        _, status, _, body = _send(guard, "POST", "/v1/verify", (HOST, JSON_TYPE, *extra))
        assert status == 403 and body == {
            "error": f"cross-site request refused (POST /v1/verify from {shown})", "hint": hint}, extra
    # the page itself, a typed URL, a request without the browser's headers, a --cors-origin origin
    for extra in ((("Origin", "HTTP://127.0.0.1:8000"), ("Sec-Fetch-Site", "same-origin")),
                  (("Sec-Fetch-Site", "none"),), (),
                  (("Origin", "http://tools.local"), ("Sec-Fetch-Site", "cross-site"))):
        assert _send(guard, "POST", "/v1/verify", (HOST, JSON_TYPE, *extra))[1] == 200, extra
    # a read is never refused, whoever sends it
    for method in ("GET", "HEAD", "OPTIONS"):
        assert _send(guard, method, "/v1/verify", (HOST, ("Origin", "http://evil.example"),
                                                   ("Sec-Fetch-Site", "cross-site")))[1] == 200
    # every other method declares its route's type
    for method, path, ctype, declared, shown in (
            ("POST", "/v1/verify", "text/plain", "application/json", "text/plain"),
            ("DELETE", "/v1/jobs/x", None, "application/json", "none"),
            ("PUT", "/v1/verify", "Text/Plain ; charset=utf-8", "application/json", "text/plain"),
            ("POST", "/v1/verify", "a\tb " + "c" * 80, "application/json",
             "a b " + "c" * 56),
            ("POST", "/v1/jobs", "application/json", "application/x-ndjson", "application/json")):
        headers = (HOST,) + ((("Content-Type", ctype),) if ctype else ())
        _, status, _, body = _send(guard, method, path, headers)
        hint = f"send the body as {declared}" + (" (one JSON object per line)" if path == "/v1/jobs" else "")
        assert status == 415 and body == {
            "error": f"{method} {path} needs Content-Type {declared}, got {shown}", "hint": hint}, path
    assert _send(guard, "POST", "/v1/verify", (HOST, ("Content-Type",
                                                      "Application/JSON; charset=utf-8")))[1] == 200
    assert _send(guard, "POST", "/v1/jobs", (HOST, ("Content-Type", "application/x-ndjson")))[1] == 200
    assert _send(guard, "POST", "/v1/verify", (HOST, ("Content-Type",
                                                      "application/json; charset=utf-8; v=1")))[1] == 200
    # an empty Sec-Fetch-Site is no browser's: refused (and the line says it came from nowhere named)
    _, status, _, body = _send(guard, "POST", "/v1/verify", (HOST, JSON_TYPE, ("Sec-Fetch-Site", "")))
    assert status == 403 and body["error"] == "cross-site request refused (POST /v1/verify from )"
    # behind a reverse proxy (--allowed-host): its name in Host, and its public origin in Origin even
    # where the proxy rewrites Host
    proxied, _, _ = _guarded(tmp_path, allowed_hosts=("checks.example.org",))
    assert _send(proxied, "GET", "/v1/checks", (("Host", "checks.example.org"),))[1] == 200
    public = (("Origin", "https://checks.example.org"), ("Sec-Fetch-Site", "same-origin"), JSON_TYPE)
    assert _send(proxied, "POST", "/v1/verify", (HOST, *public))[1] == 200
    # an unauthorised request is asked for its token before it is told it is cross-site
    locked, _, _ = _guarded(tmp_path, token=TOKEN)
    assert _send(locked, "POST", "/v1/verify", (HOST, JSON_TYPE, ("Origin", "http://evil.example")))[1] == 401


def test_the_guard_limits_bodies_and_hands_the_routes_the_whole_body_once(tmp_path):
    hint = "send a smaller body (split a batch into several jobs)"
    guard, routes, _ = _guarded(tmp_path, max_body_bytes=1000)
    # a declared length over the limit is refused before the body is read
    _, status, _, body = _send(guard, "POST", "/v1/verify", (HOST, JSON_TYPE, ("content-length", "1001")),
                               chunks=[])
    assert status == 413 and body == {"error": "request body of 1,001 bytes is over the limit of 1,000",
                                      "hint": hint}
    assert routes.scopes == []
    # one counted as it arrives: over by one byte is refused, the limit itself passes
    over = [{"type": "http.request", "body": b"x" * 600, "more_body": True},
            {"type": "http.request", "body": b"x" * 401, "more_body": False}]
    _, status, _, body = _send(guard, "POST", "/v1/verify", (HOST, JSON_TYPE), chunks=over)
    assert status == 413 and body == {"error": "request body is over the limit of 1,000 bytes", "hint": hint}
    assert routes.scopes == []
    # the routes read the whole body as one message, then whatever the client sends next
    routes = _Routes(reads=2)
    guard, _, _ = _guarded(tmp_path, routes=routes, max_body_bytes=1000)
    for method in ("POST", "PUT", "PATCH"):
        chunks = [{"type": "http.request", "body": b"x" * 600, "more_body": True},
                  {"type": "http.request", "more_body": True},  # a message may leave the body out
                  {"type": "http.request", "body": b"y" * 400}]  # ... and more_body (the last one)
        assert _send(guard, method, "/v1/verify", (HOST, JSON_TYPE, ("content-length", "1000")),
                     chunks=chunks)[1] == 200
        assert routes.read[-2:] == [{"type": "http.request", "body": b"x" * 600 + b"y" * 400,
                                     "more_body": False}, {"type": "http.disconnect"}]
    # a length that is not a number is not trusted: the body is counted
    assert _send(guard, "POST", "/v1/verify", (HOST, JSON_TYPE, ("content-length", "1e9")))[1] == 200
    # other methods' bodies go to the routes as they come
    first = {"type": "http.request", "body": b"z" * 2000, "more_body": True}
    assert _send(guard, "DELETE", "/v1/jobs/x", (HOST, JSON_TYPE), chunks=[dict(first)])[1] == 200
    assert routes.read[-2:] == [first, {"type": "http.disconnect"}]
    # a client gone while its body arrives: the routes are not called, nothing is answered
    n = len(routes.scopes)
    _, status, _, _ = _send(guard, "POST", "/v1/verify", (HOST, JSON_TYPE),
                            chunks=[{"type": "http.request", "body": b"x", "more_body": True}])
    assert status is None and len(routes.scopes) == n


def test_the_guard_adds_the_security_headers_and_counts_each_request_by_its_route(tmp_path):
    from veracity.web.guard import SECURITY_HEADERS

    routes = _Routes(headers=((b"X-Frame-Options", b"SAMEORIGIN"), (b"content-type", b"text/plain")))
    guard, _, metrics = _guarded(tmp_path, routes=routes)
    _, status, headers, _ = _send(guard, "GET", "/v1/jobs/abc", route="/v1/jobs/{job_id}")
    # the routes' own header wins (any case); the others are added once each
    assert headers["x-frame-options"] == ["SAMEORIGIN"] and headers["content-type"] == ["text/plain"]
    for k, v in SECURITY_HEADERS:
        if k != b"x-frame-options":
            assert headers[k.decode()] == [v.decode()]
    _send(guard, "GET", "/static/app.js")
    _send(guard, "POST", "/nothing", (HOST, JSON_TYPE))
    _send(guard, "GET", "/v1/checks", (("Host", "evil.example"),))
    assert [r[:3] for r in metrics.requests] == [("GET", "/v1/jobs/{job_id}", 200), ("GET", "/static", 200),
                                                  ("POST", "unmatched", 200), ("GET", "unmatched", 421)]
    assert all(0 <= r[3] < 5 for r in metrics.requests)
    # a route that fails is counted as a 500 (and the failure is not swallowed)
    failing, _, failed = _guarded(tmp_path, routes=_Routes(fail=True))
    with pytest.raises(RuntimeError, match="a route failed"):
        _send(failing, "GET", "/v1/checks", route="/v1/checks")
    assert [r[:3] for r in failed.requests] == [("GET", "/v1/checks", 500)]
    # a response without headers gets them too
    bare, _, _ = _guarded(tmp_path, routes=_Routes(headers=None))
    _, status, headers, _ = _send(bare, "GET", "/v1/checks")
    assert status == 200 and all(headers[k.decode()] == [v.decode()] for k, v in SECURITY_HEADERS)
    # what is not an HTTP request (the lifespan) passes through untouched and uncounted
    import asyncio

    async def receive():
        return {"type": "lifespan.startup"}

    async def send(message):
        pass

    scope = {"type": "lifespan"}
    asyncio.run(guard(scope, receive, send))
    assert routes.scopes[-1] is scope and scope == {"type": "lifespan"} and len(metrics.requests) == 4
    assert routes.channels[-1] == (receive, send)
