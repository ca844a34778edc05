"""`veracity check` against the real things: the SmolLM2 server (the extraction roles' schemas enforced
by real constrained decoding), a real BM25 + FAISS index, a batch killed with SIGKILL and resumed, and the
page's Text tab in Debian's chromium (playwright, as tests/integration/test_web_real.py drives it).

SmolLM2 (135M) extracts poor claims; these tests check the contract (every reply validates or falls back as
declared, counted; every factual claim gets a verdict or an error; nothing verified twice), not the quality.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fixtures.netcut import env_without_veracity
from tests.integration.test_web_real import artifacts_dir, browser, web_url  # noqa: F401 (fixtures)

pytestmark = pytest.mark.integration

TEXT = "The Eiffel Tower is in Berlin. It was completed in 1889."
TEXTS = [("t1", "The Eiffel Tower is in Berlin. It was completed in 1889."),
         ("t2", "Marie Curie won two Nobel Prizes. She was born in Warsaw."),
         ("t3", "The Moon orbits Mars. Berlin is the capital of Germany.")]


def env(tmp: Path) -> dict[str, str]:
    e = env_without_veracity()
    e.update(VERACITY_HOME=str(tmp / "home"), PYTHONUNBUFFERED="1", COLUMNS="200")
    return e


def veracity(tmp: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "veracity", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE,
                            text=True, env=env(tmp), start_new_session=True)


def finish(proc: subprocess.Popen, timeout: float = 900) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"veracity did not finish within {timeout}s: {err[-2000:]}")
    return proc.returncode, out, err


def assert_contract(rec: dict) -> None:
    """What holds whatever the model says: sentences from code, replies validated or fallen back (counted),
    every factual claim verified or failed with its reason."""
    assert [s["text"] for s in rec["sentences"]] == [rec["text"][s["start"]:s["end"]]
                                                     for s in rec["sentences"]]
    assert set(rec["summary"]["fallbacks"]) == {"check.extractor", "check.worthiness"}
    for s in rec["sentences"]:
        assert s["verdict"] in ("SUPPORTED", "REFUTED", "NOT_ENOUGH_INFO", "unchecked", "failed")
        for c in s["claims"]:
            assert c["category"] in ("factual", "opinion", "not_a_claim") and c["text"].strip()
            if c["category"] == "factual":
                assert c["label"] in ("SUPPORTED", "REFUTED", "NOT_ENOUGH_INFO") or c["error"]
    calls = rec["extraction_trace"]["llm_calls"]
    assert sum(1 for c in calls if c["role"] == "check.extractor") >= len(rec["sentences"])


def test_check_a_text_with_rag_on_the_real_model_and_index(llm_endpoint, demo_style_index_dir, tmp_path):
    f = tmp_path / "text.txt"
    f.write_text(TEXT)
    report = tmp_path / "report.html"
    # two commands on the same text, started together (neither reads what the other writes; each has its
    # own home): the JSON report with rag, and the terminal view
    with_rag = veracity(tmp_path / "rag", "check", str(f), "--method", "rag", "--index",
                        str(demo_style_index_dir), "--endpoint", llm_endpoint.url, "--json", "--report",
                        str(report), "--factscore")
    # the terminal view of the same text, piped: sentences marked, the summary line. worthiness=false makes
    # every extracted claim factual (whether the model sorts a claim as an opinion is not what this shows),
    # so both sentences are verified and marked, and the summary counts them
    terminal = veracity(tmp_path / "terminal", "check", str(f), "--method", "direct", "--evidence", "none",
                        "--endpoint", llm_endpoint.url, "--check-param", "worthiness=false")
    try:
        rc, out, err = finish(with_rag)
        assert rc == 0, err[-3000:]
        assert "Traceback" not in err
        rec = json.loads(out)
        assert len(rec["sentences"]) == 2 and rec["method"] == "rag"
        assert_contract(rec)
        assert "factscore" in rec["summary"]
        page = report.read_text()
        assert page.startswith("<!doctype html>") and "http://" not in page and "https://" not in page
        rc, out, err = finish(terminal)
    finally:
        for proc in (with_rag, terminal):  # one left running when an assertion above failed
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
    assert rc == 0, err[-3000:]
    # each sentence's line: its mark, its text, and (once verified) its facts, "  (1 of 1 verified claims
    # supported)"
    mark = re.compile(r"\[(?:SUPPORTED|REFUTED|NOT ENOUGH INFO|FAILED)\] (.*?)"
                      r"(?:  \(\d+ of \d+ verified claims supported\))?")
    marked = [m.group(1) for m in map(mark.fullmatch, out.splitlines()) if m]
    assert marked == [s["text"] for s in rec["sentences"]] and "The Eiffel Tower is in Berlin." in marked, out
    summary = [line for line in out.splitlines() if "factual claims in 2 sentences" in line]
    assert len(summary) == 1 and "No factual claim" not in out, out


def test_a_claim_gets_the_verdict_verify_gives_it(repeating_llm_endpoint, tmp_path):
    """The same claim, method and endpoint at temperature 0: check's verdict is verify's (one code path),
    word for word. On a server whose reply to one request at temperature 0 does not depend on what it
    served before (``repeating_llm_endpoint``: one slot, no prompt cache); the session's llama-server reuses
    a slot's cached prompt prefix, and a reply computed on a reused prefix can differ in its last digits from
    one computed afresh, so its explanation may not repeat word for word."""
    llm_endpoint = repeating_llm_endpoint
    f = tmp_path / "text.txt"
    f.write_text("Marie Curie won two Nobel Prizes.")
    common = ("--method", "direct", "--evidence", "none", "--endpoint", llm_endpoint.url, "--json")
    rc, out, err = finish(veracity(tmp_path, "check", str(f), *common, "--check-param", "worthiness=false"))
    assert rc == 0, err[-3000:]
    rec = json.loads(out)
    claims = [c for s in rec["sentences"] for c in s["claims"] if c.get("label")]  # every claim factual here
    assert claims, rec["sentences"]
    claim = claims[0]
    rc, out, err = finish(veracity(tmp_path, "verify", claim["text"], *common))
    assert rc == 0, err[-3000:]
    alone = json.loads(out)
    assert (alone["label"], alone["explanation"]) == (claim["label"], claim["explanation"])
    assert [c["role"] for c in alone["trace"]["llm_calls"]] == [c["role"]
                                                                for c in claim["trace"]["llm_calls"]]


def test_a_killed_batch_resumes_per_text_and_per_claim(llm_endpoint, tmp_path):
    docs = tmp_path / "texts.jsonl"
    # two texts: killed once a claim of the first is verified, the second is not yet extracted
    docs.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in TEXTS[:2]))
    out = tmp_path / "checks.jsonl"
    claims = tmp_path / "checks.jsonl.parts" / "claims.jsonl"
    extractions = tmp_path / "checks.jsonl.parts" / "extractions.jsonl"
    args = ("check", "-i", str(docs), "-o", str(out), "--method", "direct", "--evidence", "none",
            "--endpoint", llm_endpoint.url, "--concurrency", "1", "--check-param", "worthiness=false")
    proc = veracity(tmp_path, *args)
    end = time.time() + 600
    while time.time() < end:  # kill it once a claim of the batch is verified
        if claims.exists() and claims.read_bytes().count(b"\n") >= 1:
            break
        if proc.poll() is not None:
            pytest.fail(f"the batch ended before a claim was verified: {proc.stderr.read()[-2000:]}")
        time.sleep(0.05)
    else:
        pytest.fail("no claim verified within 600 s")
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()
    verified_before = [json.loads(x)["id"] for x in claims.read_text().splitlines() if x.strip()]
    extracted_before = [json.loads(x)["id"] for x in extractions.read_text().splitlines() if x.strip()]
    assert extracted_before and verified_before
    assert all(v.split("#")[0] in extracted_before for v in verified_before)  # extraction stored first

    rc, stdout, stderr = finish(veracity(tmp_path, *args))
    assert rc == 0, stderr[-3000:]
    assert "Traceback" not in stderr
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert sorted(r["id"] for r in rows) == ["t1", "t2"]  # every text, once
    ext = [json.loads(x)["id"] for x in extractions.read_text().splitlines()]
    assert sorted(ext) == ["t1", "t2"]  # no text extracted twice
    ids = [json.loads(x)["id"] for x in claims.read_text().splitlines()]
    assert len(ids) == len(set(ids))  # no claim verified twice
    wanted = {c["id"] for r in rows for s in r["sentences"] for c in s["claims"] if c["category"]
              == "factual"}
    assert wanted == set(ids)  # none lost
    for r in rows:
        assert_contract(r)


def test_the_text_tab_streams_claims_and_verdicts(browser, web_url, tmp_path):  # noqa: F811
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    errors: list[str] = []
    external: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("request", lambda req: external.append(req.url) if not req.url.startswith((web_url,
                                                                                       "data:")) else None)
    page.goto(web_url + "/#text")
    page.wait_for_selector("#text-method option[value=rag]", state="attached")
    page.select_option("#text-method", "rag")
    page.fill("#text-input", TEXT)
    page.click("#text-btn")
    page.wait_for_selector("#text-view .sent", timeout=120_000)  # the sentences appear before any verdict
    assert page.locator("#text-view .sent").count() == 2
    page.wait_for_selector("#text-claims li", timeout=300_000)  # claims appear as they are extracted
    page.wait_for_selector("#text-permalink", timeout=600_000)  # done
    verdicts = page.eval_on_selector_all("#text-view .sent", "ns => ns.map(n => n.dataset.verdict)")
    assert all(v in ("SUPPORTED", "REFUTED", "NOT_ENOUGH_INFO", "unchecked",
                     "failed") for v in verdicts), verdicts
    shots = artifacts_dir()
    page.screenshot(path=str(shots / "text-1280x800.png"), full_page=True)
    factual = page.locator("#text-claims details.claim")
    if factual.count():
        factual.first.locator(":scope > summary").click()
        page.wait_for_selector("#text-claims details.claim[open] details.trace")
    page.locator("#text-view .sent").first.click()  # a sentence's claims only
    href = page.locator("#text-permalink").get_attribute("href")
    assert href.startswith("#text/")
    page.goto(web_url + "/#history")
    page.wait_for_selector("#history li a.grow")
    assert page.locator("#history li a.grow").first.inner_text() == TEXT
    page.goto(web_url + "/" + href)  # a stored text check opens in the Text tab
    page.wait_for_selector("#text-view .sent")
    assert page.locator("#text-input").input_value() == TEXT
    assert not errors, errors
    assert not external, external
