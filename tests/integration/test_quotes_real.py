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
