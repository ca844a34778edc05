"""rag with quotes=check against the real server (issue 31): the quote schema (an enum of the shown passage
ids, bounded quotes) is accepted and honoured by constrained decoding, each recorded quote's offsets and
found flag are what the model-free check gives, a mismatch costs exactly one retry, and no verdict comes
out SUPPORTED on a quote that is not in its passage (the issue's Amazon example, with the passage that
says nothing about the river's mouth)."""

from __future__ import annotations

import asyncio
import json

import pytest

from veracity.pipeline.api import Verifier
from veracity.pipeline.grounding import MISMATCH_EVENT
from veracity.pipeline.quotes import QUOTE_MAX_CHARS, locate, locate_at_edge
from veracity.pipeline.types import Claim, Evidence

pytestmark = pytest.mark.integration

AMAZON = [
    {"id": "Amazon River#0", "title": "Amazon River",
     "text": "The Amazon River in South America is the largest river by discharge volume of water in the "
             "world, "
             "and the disputed longest river system in the world in comparison to the Nile."},
    {"id": "Pacific Ocean#0", "title": "Pacific Ocean",
     "text": "The Pacific Ocean is the largest and deepest of Earth's five oceanic divisions. It extends "
             "from the "
             "Arctic Ocean in the north to the Southern Ocean in the south."},
]
CLAIMS = [
    Claim("amazon-pacific", "The Amazon River flows into the Pacific Ocean", meta={"evidence": AMAZON}),
    Claim("pacific-deepest", "The Pacific Ocean is the deepest of Earth's oceanic divisions.",
          meta={"evidence": AMAZON}),
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
            # the recorded decision is the check's decision: found in the passage, or cut by its edge (issue
            # 44)
            at = locate(q["text"], texts[q["passage_id"]]) or locate_at_edge(q["text"],
                                                                             texts[q["passage_id"]])
            assert (q["start"], q["end"]) == (at if at else (None, None)) and q["found"] == (at is not None)
        if r["label"] == "SUPPORTED" or (r["label"] == "REFUTED" and r["grounding"] == "grounded"):
            assert r["grounding"] == "grounded" and r["quotes"] and all(q["found"] for q in r["quotes"])
        if r["grounding"] == "ungrounded":
            assert r["label"] == "NOT_ENOUGH_INFO" and r["explanation"].startswith("Ungrounded: ")
    amazon = rows["amazon-pacific"]
    assert not (amazon["label"] == "SUPPORTED" and not all(q["found"] for q in amazon["quotes"]))


class FirstJudgeReplyGiven:
    """The real client, except that the first ``rag.judge`` reply is the one given (recorded like a real
    call): whether the model misquotes on its own cannot be relied on, so the mismatch is put there and the
    retry after it is the real server's."""

    def __init__(self, real, reply: dict):
        from tests.unit.scripted_llm import ScriptedLLM

        self.real, self.reply, self.given = real, reply, ScriptedLLM({"rag.judge": [reply]})
        self.model, self.base_url = real.model, real.base_url

    async def generate(self, messages, output_model, *, role, **kw):
        if role == "rag.judge" and self.given.count("rag.judge") == 0:
            return await self.given.generate(messages, output_model, role=role, **kw)
        return await self.real.generate(messages, output_model, role=role, **kw)


def test_a_misquoting_verdict_is_retried_once_on_the_real_server_and_never_supported(llm_endpoint):
    """The grounding rules on the real server, whatever the model would have answered first: a SUPPORTED
    verdict quoting words the Amazon passage does not hold ("flows into the Pacific Ocean") costs exactly
    one retry (the real model's, with the mismatch in its prompt), and the verdict is SUPPORTED only on quotes
    found in their passages; a retry that misquotes again is NOT_ENOUGH_INFO, "Ungrounded: ..."."""
    from veracity.serving.client import LLMClient

    texts = {p["id"]: p["text"] for p in AMAZON}
    wrong = {"explanation": "The passage says so.", "label": "SUPPORTED",
             "quotes": [{"passage_id": "Amazon River#0",
                         "quote": "The Amazon River flows into the Pacific Ocean"}]}

    async def run():
        async with LLMClient(llm_endpoint.url, llm_endpoint.model) as real:
            llm = FirstJudgeReplyGiven(real, wrong)
            v = Verifier(method="rag", evidence="gold", llm=llm, quotes="check", **{"judge.max_tokens": 512})
            async with v.engine.client() as client:
                verdict = await v.engine.verify(CLAIMS[0], client)
            return verdict.to_dict(CLAIMS[0]), llm

    record, llm = asyncio.run(run())
    calls = [c for c in record["trace"]["llm_calls"] if c["role"] == "rag.judge"]
    mismatches = [e for e in record["trace"]["events"] if e["kind"] == MISMATCH_EVENT]
    assert len(calls) == 2  # exactly one retry, whatever the retry says
    # the given reply's mismatch, and the retry's if any
    assert [e["attempt"] for e in mismatches] in ([1], [1, 2])
    assert llm.given.count("rag.judge") == 1  # the retry went to the real server
    for q in record["quotes"]:
        at = locate(q["text"], texts[q["passage_id"]])
        assert (q["start"], q["end"]) == (at if at else (None, None)) and q["found"] == (at is not None)
    if len(mismatches) == 1:  # the real retry quoted its passages (or quoted nothing, as NOT_ENOUGH_INFO may)
        assert all(q["found"] for q in record["quotes"]) and record["grounding"] in ("grounded", "ungrounded")
        assert record["grounding"] == "grounded" or record["label"] == "NOT_ENOUGH_INFO"
    else:
        assert record["grounding"] == "ungrounded" and record["label"] == "NOT_ENOUGH_INFO"
        assert record["explanation"].startswith("Ungrounded: ")
    assert record["label"] != "SUPPORTED" or all(q["found"] for q in record["quotes"])


def test_zofia_judges_quote_through_the_real_server(llm_endpoint):
    """ZoFia's debate judge with quotes=check through the method's own call and the real server (no retrieval
    and no debaters, so CI pays for the judge only; verify_zofia's wiring and the w/o-debate judge are
    unit-tested): its quoted schema (R / F / I, quotes limited to the passages' ids) decodes, the reply's
    quotes are the model-free check's decisions, a ruling is retried at most once, an ungrounded one is
    marked. (SmolLM2 fills all five quotes to their bound: 400 tokens spare the client's retry after a
    truncated reply.)"""
    from veracity.pipeline.methods import METHODS
    from veracity.pipeline.methods.base import MethodContext
    from veracity.pipeline.methods.zofia.method import _ruling_label, judge_quoting
    from veracity.pipeline.methods.zofia.roles import DebateArgument
    from veracity.pipeline.types import Trace
    from veracity.serving.client import LLMClient

    passages = [Evidence(p["id"], p["title"], p["text"]) for p in AMAZON]
    pool = "## News text\nThe Amazon River flows into the Pacific Ocean."
    argument = DebateArgument(rebuttal="", points=["The Amazon River passage names no ocean (Amazon River)."])

    async def judge():
        async with LLMClient(llm_endpoint.url, llm_endpoint.model) as llm:
            params = METHODS["zofia"].make_params({"quotes": "check", "judge.max_tokens": 400})
            ctx = MethodContext(llm=llm, tools=None, trace=Trace(), params=params, claim_id="amazon")
            ruling, grounded = await judge_quoting(pool, [(argument, argument)], passages, 1, ctx)
            return ruling, grounded, ctx.trace

    ruling, grounded, trace = asyncio.run(judge())
    assert ruling.decision in ("R", "F", "I")
    assert (grounded is None) == (ruling.decision == "I")  # a Continue settles nothing: nothing to check
    texts = {e.passage_id: e.text for e in passages}
    if grounded is not None:
        assert grounded.grounding in ("grounded", "ungrounded")
        for q in grounded.quotes:
            # the schema's enum and bound held
            assert q.passage_id in texts and len(q.text) <= QUOTE_MAX_CHARS
            assert (q.start, q.end) == (locate(q.text, texts[q.passage_id]) or (None, None))
        if grounded.grounding == "grounded" and _ruling_label(grounded.reply) != "NOT_ENOUGH_INFO":
            assert grounded.quotes and all(q.found for q in grounded.quotes)
    mismatches = [e for e in trace.events if e["kind"] == MISMATCH_EVENT]
    assert all(e["attempt"] in (1, 2) for e in mismatches) and sum(e["attempt"] == 1 for e in mismatches) <= 1
