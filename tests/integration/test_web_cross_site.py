"""Cross-site requests against a served ``veracity web`` app in a real browser (issue 29 point 3).

The app is served by uvicorn on ``127.0.0.1`` without a token (the default loopback set-up). A second
origin, ``http://localhost:PORT2`` (another site to the browser), serves a page that tries what any page on
the web can do without asking the server first: a ``no-cors`` fetch posting a claims file as text/plain (the
issue's recipe, which created and ran a job), a JSON body sent as text/plain, a form post, and a CORS fetch
with the JSON type (the browser's preflight gets no CORS answer). Nothing may be created, checked or run;
every attempt must reach the app and be refused. The app's own page, same origin, still works, under the
Content-Security-Policy, and a malformed ``#`` fragment does not stop it.

Debian's chromium is driven headless by playwright (``executable_path``); the model is the scripted stand-in
(what is tested is the app's guard in front of the routes, the same code whatever model answers).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from tests.integration.test_web_real import browser  # noqa: F401  (the chromium fixture)
from tests.unit.scripted_llm import FakeSearcher, ScriptedLLM
from veracity.pipeline.methods.direct import DirectJudgement

pytestmark = pytest.mark.integration

ATTACKER_PAGE = """<!doctype html><html><body><iframe name="sink"></iframe>
<form id="f" method="POST" target="sink" action="{app}/v1/verify">
<input name="claim" value="Forged claim from a form."></form>
<script>
window.results = [];
async function attempt(name, url, init) {{
  try {{ const r = await fetch(url, init); window.results.push(name + ": " + r.type + " " + r.status); }}
  catch (e) {{ window.results.push(name + ": blocked " + e.name); }}
}}
(async () => {{
  const claims = '{{"id": "x1", "claim": "Forged claim from another origin."}}\\n';
  await attempt("no-cors job", "{app}/v1/jobs?method=direct",
                {{method: "POST", mode: "no-cors", headers: {{"Content-Type": "text/plain"}}, body: claims}});
  await attempt("no-cors job untyped", "{app}/v1/jobs?method=direct",\
 {{method: "POST", mode: "no-cors", body: claims}});
  await attempt("no-cors verify", "{app}/v1/verify",
                {{method: "POST", mode: "no-cors", headers: {{"Content-Type": "text/plain"}},
                  body: JSON.stringify({{claim: "Forged claim.", method: "direct"}})}});
  await attempt("cors json verify", "{app}/v1/verify",
                {{method: "POST", headers: {{"Content-Type": "application/json"}},
                  body: JSON.stringify({{claim: "Forged claim.", method: "direct"}})}});
  document.getElementById("f").submit();
  window.results.push("form submitted");
  window.done = true;
}})();
</script></body></html>"""


def _serve(handler_cls) -> tuple[ThreadingHTTPServer, int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler_cls)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]


@pytest.fixture()
def app_url(tmp_path):
    import uvicorn

    from veracity.serving.server import free_port
    from veracity.web.app import WebConfig, asgi

    llm = ScriptedLLM({"direct.judge": lambda m: DirectJudgement(explanation="known", label="SUPPORTED")})
    config = WebConfig(home=tmp_path / "home", searcher=FakeSearcher({"Paris": ["Paris is in France."]}),
                       llm=llm,
                       model_health=lambda: {"ok": True, "endpoint": "scripted", "models": ["scripted-llm"]})
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(asgi(config), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    for _ in range(150):
        try:
            httpx.get(url + "/healthz", timeout=2)
            break
        except httpx.HTTPError:
            time.sleep(0.2)
    try:
        yield url, llm
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def _refused_posts(url: str) -> int:
    total = 0
    for line in httpx.get(url + "/metrics").text.splitlines():
        if line.startswith("veracity_http_requests_total{") and 'method="POST"' in line and \
                ('status="403"' in line or 'status="415"' in line):
            total += int(float(line.rsplit(" ", 1)[1]))
    return total


def test_a_page_on_another_origin_cannot_create_or_run_anything(browser, app_url):  # noqa: F811
    url, llm = app_url

    class Attacker(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_GET(self) -> None:
            body = ATTACKER_PAGE.format(app=url).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    attacker, port2 = _serve(Attacker)
    try:
        page = browser.new_page()
        page.goto(f"http://localhost:{port2}/")
        page.wait_for_function("window.done === true", timeout=30_000)
        page.wait_for_timeout(1000)  # the form's navigation in the iframe
        results = page.evaluate("window.results")
        page.close()
    finally:
        attacker.shutdown()
        attacker.server_close()
    assert len(results) == 5, results
    assert "blocked TypeError" in results[3], results  # the CORS fetch: its preflight got no CORS answer
    with httpx.Client(base_url=url) as client:
        assert client.get("/v1/jobs").json() == [] and client.get("/v1/checks").json() == []
    assert llm.calls == []
    assert _refused_posts(url) >= 4, results  # the three no-cors posts and the form reached the app, refused


def test_the_apps_own_page_still_works_under_its_csp_and_a_bad_fragment(browser, app_url):  # noqa: F811
    url, llm = app_url
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if "Content Security Policy" in msg.text else None)
    page.goto(url + "/#%E0%A4%A")  # a malformed percent-escape: "URI malformed" stopped the page before
    page.wait_for_selector("#method option[value=direct]", state="attached")
    status = page.evaluate("""async () => {
        const r = await fetch("/v1/verify", {method: "POST", headers: {"Content-Type": "application/json"},
                                             body: JSON.stringify({claim: "Paris is in France.", \
method: "direct"})});
        return r.status; }""")
    assert status == 200
    jobs = page.evaluate("""async () => {
        const r = await fetch("/v1/jobs?method=direct", {method: "POST", \
headers: {"Content-Type": "application/x-ndjson"},
                                                         body: '{"id": "p1", \
"claim": "Paris is in France."}\\n'});
        return r.status; }""")
    assert jobs == 201
    assert page.locator("#view-check").is_visible()
    page.close()
    assert errors == []
    assert llm.roles()[:1] == ["direct.judge"]
    with httpx.Client(base_url=url) as client:
        assert [c["claim"] for c in client.get("/v1/checks").json()] == ["Paris is in France."]
        assert json.dumps(client.get("/v1/jobs").json()).count('"id"') >= 1
