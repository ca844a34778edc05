"""benchmarks/check_eval.py on a tiny seeded sample of the real files, with the scripted LLM."""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
from pathlib import Path

import pytest

from tests.fixtures.index import shared_data_dir
from tests.fixtures.server import missing
from tests.unit.scripted_llm import ScriptedLLM
from veracity.check.engine import ClaimVerifier
from veracity.pipeline.api import Verifier

ROOT = Path(__file__).resolve().parents[2]
DATA = (shared_data_dir() or ROOT.parent / "shared" / "data") / "factcheck_bench"
spec = importlib.util.spec_from_file_location("check_eval", ROOT / "benchmarks" / "check_eval.py")
check_eval = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_eval)


def needs_data():
    if not (DATA / "Factbench.jsonl").exists():
        missing(f"the benchmark data {DATA} is not here; set VERACITY_DATA_DIR")  # fails under CI


def exact(gold, extracted):
    return [[1.0 if g == e else 0.0 for e in extracted] for g in gold]


def args(task, **kw):
    ns = check_eval.parser().parse_args([task, "--n", "3", "--seed", "7"])
    for k, v in kw.items():
        setattr(ns, k, v)
    return ns


def test_samples_are_seeded_and_stable():
    needs_data()
    a = check_eval.decomposition_items(DATA / "factcheck-GPT-benchmark.jsonl", 5, seed=3)
    b = check_eval.decomposition_items(DATA / "factcheck-GPT-benchmark.jsonl", 5, seed=3)
    c = check_eval.decomposition_items(DATA / "factcheck-GPT-benchmark.jsonl", 5, seed=4)
    assert [x["id"] for x in a] == [x["id"] for x in b] != [x["id"] for x in c]
    r = check_eval.response_items(DATA / "Factbench.jsonl", None, seed=0)
    assert {x["source"] for x in r} == set(check_eval.SOURCES)
    assert len(r) == 50 + 184 + 92  # factcheckgpt's two NA responses are left out


def test_decomposition_scores_coverage_and_worthiness(tmp_path):
    needs_data()
    items = check_eval.decomposition_items(DATA / "factcheck-GPT-benchmark.jsonl", 3, seed=7)
    gold = {s["text"]: s["claims"] for it in items for s in it["sentences"]}
    sentence = lambda m: m[1]["content"].split("Sentence to split:\n", 1)[1]  # noqa: E731
    # the extractor returns the gold claims of every sentence but drops the last one: coverage < 1
    llm = ScriptedLLM({"check.extractor": lambda m: {"claims": gold[sentence(m)][:-1] or ["There it is."]},
                       "check.worthiness": lambda m: {"kind": "checkable_statement"}})
    cv = ClaimVerifier(Verifier(method="direct", llm=llm, state_dir=tmp_path))
    res = asyncio.run(check_eval.run(args("decomposition"), cv=cv, matcher=exact))
    n_gold = sum(len(c) for c in gold.values())
    dropped = sum(1 for c in gold.values() if c)
    assert res["n_gold_claims"] == n_gold
    assert res["coverage"]["value"] == pytest.approx((n_gold - dropped) / n_gold)
    lo, hi = res["coverage"]["ci95"]
    assert lo <= res["coverage"]["value"] <= hi
    cats = [c for it in items for s in it["sentences"] for c in s["categories"]]
    assert res["worthiness_accuracy"]["value"] == pytest.approx(cats.count("factual") / len(cats))
    assert 0 < res["splitter_exact"]["value"] <= 1


def test_response_and_claim_level_macro_f1(tmp_path):
    needs_data()
    items = check_eval.response_items(DATA / "Factbench.jsonl", 3, seed=7)
    truth = {c["text"]: c["label"] for it in items for c in it["claims"]}
    claim = lambda m: m[-1]["content"].split("Claim: ", 1)[1]  # noqa: E731
    # a perfect judge on the gold claims; the extractor returns each sentence as its one claim
    llm = ScriptedLLM({"check.extractor": lambda m: {"claims": [m[1]["content"].split("Sentence to split:\n",
                                                                                      1)[1]]},
                       "check.worthiness": lambda m: {"kind": "checkable_statement"},
                       "direct.judge": lambda m: {"explanation": "x",
                                                  "label": "SUPPORTED" if truth.get(claim(m),
                                                                                    True) else "REFUTED"}})
    cv = ClaimVerifier(Verifier(method="direct", llm=llm, state_dir=tmp_path))
    res = asyncio.run(check_eval.run(args("response"), cv=cv))
    assert res["claim_macro_f1_gold_claims"]["value"] == pytest.approx(
        check_eval.macro_f1([(v, v) for v in truth.values() if isinstance(v, bool)]))
    # the sentences are no gold claims, so the judge supports them: no response is predicted false
    golds = [it["false"] for it in items]
    assert res["response_accuracy"]["value"] == pytest.approx(golds.count(False) / len(golds))


def test_response_rows_are_kept_as_they_finish_and_a_second_run_resumes(tmp_path):
    """Each checked response is appended to OUT.rows.jsonl at once; the same command again checks only the
    responses not there (no LLM call for the others) and scores all of them."""
    needs_data()
    calls = []

    def judge(m):
        calls.append(1)
        return {"explanation": "x", "label": "SUPPORTED"}

    llm = ScriptedLLM({"check.extractor": lambda m: {"claims": [m[1]["content"].split("Sentence to split:\n",
                                                                                      1)[1]]},
                       "check.worthiness": lambda m: {"kind": "checkable_statement"}, "direct.judge": judge})
    cv = ClaimVerifier(Verifier(method="direct", llm=llm, state_dir=tmp_path / "s"))
    out = tmp_path / "r" / "response.json"
    first = asyncio.run(check_eval.run(args("response", out=str(out), items_concurrency=2), cv=cv))
    rows = out.with_suffix(".rows.jsonl").read_text().splitlines()
    first_calls = len(calls)
    assert len(rows) == 3 and first_calls
    # the first response's row is lost (as if the run had been killed before it finished): only it is redone
    out.with_suffix(".rows.jsonl").write_text("\n".join(rows[1:]) + "\n")
    calls.clear()
    again = asyncio.run(check_eval.run(args("response", out=str(out)), cv=cv))
    assert 0 < len(calls) < first_calls
    assert len(out.with_suffix(".rows.jsonl").read_text().splitlines()) == 3
    assert again["items"] == first["items"] and again["response_accuracy"] == first["response_accuracy"]


def test_greedy_matching_is_one_to_one():
    assert check_eval.greedy_matches([[0.9, 0.8], [0.85, 0.1]], 0.5) == [(0, 0)]
    assert check_eval.greedy_matches([[0.9, 0.8], [0.85, 0.6]], 0.5) == [(0, 0), (1, 1)]
    assert check_eval.macro_f1([(True, True), (False, False)]) == 1.0
    assert check_eval.bootstrap([], lambda xs: 1.0) is None


def test_the_parser_names_both_tasks():
    assert isinstance(check_eval.parser().parse_args(["response"]), argparse.Namespace)


def test_replay_applies_todays_model_free_rules_to_stored_rows():
    """`check_eval.py replay` (development only): a claim-less sentence loses its claims, a fragment and a
    near-duplicate are dropped, a sentence left with none is checked as itself, and the claims the extractor
    would re-ask for a reference are counted."""
    text = ("The 1932 Australian Grand Prix was a race. The race was won by driver Bill Thompson. "
            "Compare the quotes offered by each decorator.")
    gold = ["The 1932 Australian Grand Prix was a race.", "The driver Bill Thompson won the race."]
    rows = [{"id": "fcgpt-0", "splitter_exact": 3, "fallbacks": 0, "sentences": [
        {"text": "The 1932 Australian Grand Prix was a race.", "claims": [gold[0]], "categories": ["factual"],
         "extracted": [gold[0], "held on a dirt track circuit"], "predicted_categories": []},
        {"text": "The race was won by driver Bill Thompson.", "claims": [gold[1]], "categories": ["factual"],
         "extracted": ["The race was won by driver Bill Thompson.", "The race was won by Bill Thompson."],
         "predicted_categories": []},
        {"text": "Compare the quotes offered by each decorator.", "claims": [], "categories": [],
         "extracted": ["Compare the quotes offered by each decorator."], "predicted_categories": []}]}]
    new, counts = check_eval.replay_rows(rows, {"fcgpt-0": text})
    assert [s["extracted"] for s in new[0]["sentences"]] == [
        [gold[0]], ["The race was won by driver Bill Thompson."], []]
    assert counts == {"sentences_ruled_out": 1, "claims_of_ruled_sentences": 1, "guard_dropped": 1,
                      "references_named": 0, "split_claims": 0, "near_duplicates": 1, "sentence_as_claim": 0,
                      "would_reask_reference": 1}
    before = check_eval.score_decomposition(rows, exact, 0.75, 0)
    after = check_eval.score_decomposition(new, exact, 0.75, 0)
    assert before["precision"]["value"] == pytest.approx(1 / 5)
    assert after["precision"]["value"] == pytest.approx(1 / 2) and after["n_extracted_claims"] == 2


def test_replay_splits_a_claim_left_as_its_sentence():
    """The model-free split of veracity.check.split is replayed too (seed 765's surfboard sentence)."""
    fins = "The fins, which help control the board in the water, are typically made of plastic or fiberglass."
    rows = [{"id": "fcgpt-0", "splitter_exact": 1, "fallbacks": 0, "sentences": [
        {"text": fins, "claims": ["The fins help control the board in the water."], "categories": ["factual"],
         "extracted": [fins], "predicted_categories": []}]}]
    new, counts = check_eval.replay_rows(rows, {"fcgpt-0": fins})
    assert new[0]["sentences"][0]["extracted"] == ["The fins help control the board in the water.",
                                                   "The fins are typically made of plastic or fiberglass."]
    assert counts["split_claims"] == 1


def test_replay_writes_its_rows_for_a_hand_read(tmp_path):
    fins = "The fins, which help control the board in the water, are typically made of plastic or fiberglass."
    data = tmp_path / "fcgpt.jsonl"
    data.write_text(json.dumps({"response": fins, "sentences": {"sentence1": {
        "text": fins, "claims": ["The fins help control the board in the water."],
        "claim_checkworthiness": ["factual"]}}}) + "\n")
    rows = tmp_path / "run.rows.jsonl"
    rows.write_text(json.dumps({"id": "fcgpt-0", "splitter_exact": 1, "fallbacks": 0, "sentences": [
        {"text": fins, "claims": ["The fins help control the board in the water."], "categories": ["factual"],
         "extracted": [fins], "predicted_categories": []}]}) + "\n")
    out = tmp_path / "replay.json"
    result = asyncio.run(check_eval.run(args("replay", rows=str(rows), data=str(data), out=str(out)),
                                        matcher=exact))
    assert result["replayed"]["coverage"]["value"] == 1.0
    replayed = [json.loads(x) for x in out.with_suffix(".rows.jsonl").read_text().splitlines()]
    assert replayed[0]["sentences"][0]["extracted"][0] == "The fins help control the board in the water."
