"""rag with quotes=check against the real server (issue 31): the quote schema (an enum of the shown passage
ids, bounded quotes) is accepted and honoured by constrained decoding, each recorded quote's offsets and
found flag are what the model-free check gives, a mismatch costs exactly one retry, and no verdict comes
out SUPPORTED on a quote that is not in its passage (the issue's Amazon example, with the passage that
says nothing about the river's mouth)."""

from __future__ import annotations

import json

import pytest

from veracity.pipeline.api import Verifier
from veracity.pipeline.grounding import MISMATCH_EVENT
from veracity.pipeline.quotes import QUOTE_MAX_CHARS, locate
from veracity.pipeline.types import Claim

pytestmark = pytest.mark.integration

AMAZON = [
    {"id": "Amazon River#0", "title": "Amazon River",
     "text": "The Amazon River in South America is the largest river by discharge volume of water in the world, "
             "and the disputed longest river system in the world in comparison to the Nile."},
    {"id": "Pacific Ocean#0", "title": "Pacific Ocean",
     "text": "The Pacific Ocean is the largest and deepest of Earth's five oceanic divisions. It extends from the "
             "Arctic Ocean in the north to the Southern Ocean in the south."},
]
CLAIMS = [
    Claim("amazon-pacific", "The Amazon River flows into the Pacific Ocean", meta={"evidence": AMAZON}),
    Claim("pacific-deepest", "The Pacific Ocean is the deepest of Earth's oceanic divisions.", meta={"evidence": AMAZON}),
]


def test_rag_quotes_check_end_to_end(llm_endpoint, tmp_path):
    v = Verifier(method="rag", evidence="gold", endpoint=llm_endpoint.url, model=llm_endpoint.model,
                 quotes="check", **{"judge.max_tokens": 512})
    out = tmp_path / "results.jsonl"
    stats = v.verify_many(CLAIMS, out=out, concurrency=2)
    v.close()
    assert stats.failed == [], stats.failed
    rows = {r["id"]: r for r in (json.loads(x) for x in out.read_text(encoding="utf-8").splitlines())}
    assert set(rows) == {c.id for c in CLAIMS}
    texts = {p["id"]: p["text"] for p in AMAZON}
    for r in rows.values():
        calls = [c for c in r["trace"]["llm_calls"] if c["role"] == "rag.judge"]
        mismatches = [e for e in r["trace"]["events"] if e["kind"] == MISMATCH_EVENT]
        assert r["grounding"] in ("grounded", "ungrounded")
        # one retry after a mismatch, none without (transport retries aside, every call here validated)
        assert len([c for c in calls if c["finish_reason"] == "stop"]) == (2 if mismatches else 1)
        for q in r["quotes"]:
            assert q["passage_id"] in texts  # the schema's enum of shown ids held
            assert len(q["text"]) <= QUOTE_MAX_CHARS
            at = locate(q["text"], texts[q["passage_id"]])  # the recorded decision is the check's decision
            assert (q["start"], q["end"]) == (at if at else (None, None)) and q["found"] == (at is not None)
        if r["label"] == "SUPPORTED" or (r["label"] == "REFUTED" and r["grounding"] == "grounded"):
            assert r["grounding"] == "grounded" and r["quotes"] and all(q["found"] for q in r["quotes"])
        if r["grounding"] == "ungrounded":
            assert r["label"] == "NOT_ENOUGH_INFO" and r["explanation"].startswith("Ungrounded: ")
    amazon = rows["amazon-pacific"]
    assert not (amazon["label"] == "SUPPORTED" and not all(q["found"] for q in amazon["quotes"]))


def test_zofia_judge_quotes_check_end_to_end(llm_endpoint, hover_searcher):
    """ZoFia's judge with quotes=check on the real server: its quoted schema (R / F / I and quotes whose ids
    are the passages retrieved) decodes, the recorded quotes are the model-free check's decisions, a ruling
    is retried at most once, and an ungrounded ruling never stands."""
    claim = Claim("hover-tower", "Carnegie Hall Tower is located in the same city as Staten Island.")
    v = Verifier(method="zofia", index=hover_searcher, endpoint=llm_endpoint.url, model=llm_endpoint.model,
                 quotes="check", max_debate_rounds=1, no_linguist=True, no_expert=True, web_k=3, web_pool=10,
                 wiki_candidates=2, rag_k=3, max_subclaims=1, ner="llm",
                 **{"entities.max_tokens": 320, "claim_extractor.max_tokens": 160, "claim_verifier.max_tokens": 160,
                    "judge.max_tokens": 320, "pro.max_tokens": 200, "con.max_tokens": 200})
    verdict = v.verify(claim)
    v.close()
    d = verdict.to_dict(claim)
    judge_calls = [c for c in verdict.trace.llm_calls if c.role == "zofia.judge"]
    kinds = [e["kind"] for e in d["trace"]["events"]]
    if "zofia.nothing_to_check" in kinds:  # no passage and no analysis reached the judge: nothing to quote
        assert not judge_calls
        return
    assert 1 <= len(judge_calls) <= 2 and d["grounding"] in ("grounded", "ungrounded")
    texts = {e.passage_id: e.text for e in verdict.evidence}
    for q in d["quotes"]:
        assert q["passage_id"] in texts  # the schema's enum of the passages the judge was shown held
        at = locate(q["text"], texts[q["passage_id"]])
        assert (q["start"], q["end"]) == (at if at else (None, None)) and q["found"] == (at is not None)
    if d["grounding"] == "ungrounded":
        assert d["label"] == "NOT_ENOUGH_INFO" and d["explanation"].startswith("Ungrounded: ")
    elif d["label"] != "NOT_ENOUGH_INFO":
        assert d["quotes"] and all(q["found"] for q in d["quotes"])
