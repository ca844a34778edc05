"""What a check's report says (issue 44 point 4): the NEI share beside factual precision, no precision over
too few decided claims, a header naming model, engine, index with its dump date, method and date, and each
sentence's verified facts beside its worst verdict."""

from __future__ import annotations

import asyncio

from tests.unit.scripted_llm import ScriptedLLM
from veracity.check.engine import ClaimVerifier
from veracity.check.render import header_line, report_html, summary_line
from veracity.check.run import check_text
from veracity.check.score import MIN_DECIDED, text_scores
from veracity.pipeline.api import Verifier


def record_with(labels: list[str]) -> dict:
    s = {"sentences": 3, "claims": len(labels), "categories": {"factual": len(labels), "opinion": 0,
                                                               "not_a_claim": 0},
         "no_factual_claim": False, "fallbacks": {}, **text_scores(labels)}
    return {"id": "t", "method": "rag", "summary": s}


def test_the_nei_share_stands_beside_precision_and_few_decided_claims_give_none():
    line = summary_line(record_with(["SUPPORTED"] * 6 + ["NOT_ENOUGH_INFO"] * 21))
    assert "factual precision 1.00 over 6 decided claims" in line
    assert "NOT ENOUGH INFO for 21 of 27 verified claims (78%)" in line
    line = summary_line(record_with(["SUPPORTED"] * (MIN_DECIDED - 1) + ["NOT_ENOUGH_INFO"] * 5))
    assert "factual precision withheld (only 2 decided claims" in line and "1.00" not in line


def test_the_header_names_model_engine_index_dump_date_method_and_date(tmp_path):
    llm = ScriptedLLM({"check.extractor": lambda m: {"claims": ["The Eiffel Tower is in Paris."]},
                       "check.worthiness": lambda m: {"kind": "checkable_statement"},
                       "direct.judge": lambda m: {"explanation": "ok", "label": "SUPPORTED"}})
    cv = ClaimVerifier(Verifier(method="direct", llm=llm, state_dir=tmp_path))
    rec = asyncio.run(check_text("The Eiffel Tower is in Paris.", cv, tid="t"))
    run = rec["run"]
    assert run["model"] == "scripted-llm" and run["method"] == "direct" and run["date"].endswith("UTC")
    assert rec["sentences"][0]["supported"] == 1 and rec["sentences"][0]["verified"] == 1
    rec["run"] = {**run, "engine": "llama-server (managed)",
                  "index": {"name": "demo", "passages": 10987, "dump_date": "2024-06-01"}}
    line = header_line(rec)
    assert "model scripted-llm on llama-server (managed)" in line
    assert "index demo (10987 passages, dump date 2024-06-01)" in line and "method direct" in line
    assert run["date"] in line
    page = report_html(rec)
    assert "dump date 2024-06-01" in page and "verified claims supported" in page
    # a real run's header holds the server's address: the page names no URL (it fetches nothing), the
    # record keeps it
    rec["run"] = {**rec["run"], "endpoint": "http://127.0.0.1:8400/v1"}
    page = report_html(rec)
    assert "http://" not in page and "https://" not in page and "dump date 2024-06-01" in page
    assert rec["run"]["endpoint"] == "http://127.0.0.1:8400/v1"


def test_the_engine_is_read_from_the_managed_servers_state(tmp_path, monkeypatch):
    from veracity.check import engine as ce
    from veracity.serving import state as st

    class S:
        endpoint, engine = "http://127.0.0.1:9/v1", "llamacpp"

    monkeypatch.setattr(st, "read_state", lambda settings: S())
    assert ce.engine_name("http://127.0.0.1:9/v1", object()) == "llamacpp (managed)"
    monkeypatch.setattr(st, "read_state", lambda settings: None)
    # nobody answers
    assert ce.engine_name("http://127.0.0.1:9/v1", type("X", (), {"api_key": "k"})()) == "unknown"


def test_a_batch_off_a_terminal_writes_a_progress_line_per_claim(tmp_path, capsys):
    """verify -i and bench run go through this bar: a log file gets a line per claim, not silence."""
    from veracity.pipeline.results import RunStats, _Progress

    bar = _Progress(2, "rag", RunStats(out_path=tmp_path / "o.jsonl", total=2))
    bar.start()
    bar.advance()
    bar.advance()
    bar.stop()
    err = capsys.readouterr().err
    assert ("verify (rag): 2 claims to verify" in err and "verify (rag): 1/2 claims" in err
            and "2/2 claims" in err)


def test_param_sends_the_check_stages_keys_to_the_stage_and_the_rest_to_the_method():
    from veracity.cli.check import split_params

    stage, method = split_params(("worthiness=false", "extractor.max_tokens=256", "quotes=check",
                                  "check.gamma=5", "rag.k=3"))
    assert stage == ("worthiness=false", "extractor.max_tokens=256", "gamma=5")
    assert method == ("quotes=check", "rag.k=3")


def test_the_header_names_the_index_folder_the_run_searched_also_the_default_one(tmp_path):
    """Run with the default index (no --index) the header named the manifest's kind, "veracity-index"; it
    names the folder the searcher opened, as when --index is given."""
    class Opened:  # what open_index returns for ~/.veracity/indexes/demo, as far as the header reads it
        index_dir = tmp_path / "indexes" / "demo"
        manifest = {"kind": "veracity-index", "passages": 3,
                    "source": {"dump_date": "2026-08-18"}}

        def search(self, *a, **k):
            return []

        def open_page(self, *a, **k):
            return []

    llm = ScriptedLLM({"direct.judge": lambda m: {"explanation": "ok", "label": "SUPPORTED"}})
    cv = ClaimVerifier(Verifier(method="direct", llm=llm, index=Opened(), state_dir=tmp_path / "s"))
    index = cv.header()["index"]
    assert index["name"] == "demo" and index["path"] == str(Opened.index_dir) and index["passages"] == 3
