"""Trification fidelity to the paper (issue 14): each test pins one element of trification.txt that an
earlier version dropped or changed, on the scripted LLM.

- planner reasoning before the JSON (Table 4), as a schema field before the nodes, with its own budget;
- Table 4's prompt elements: the five logical relations, "minimize SEARCH roots", the output example, the
  refinement of ambiguous references and unclear times;
- SEARCH nodes synthesize what they retrieved (§3.2), and their children see the synthesis;
- evidence shown to a node: a token budget split fairly among its parents, each keeping its top passages;
- after the modification cap, static mode (§4.3), traced;
- how several JUDGE nodes make one label (not in the paper): a setting.
"""

from __future__ import annotations

import json

import pytest

from tests.unit.scripted_llm import FakeSearcher, ScriptedLLM
from tests.unit.test_trification import N, events, handlers, make_ctx, plan, user_text
from veracity.errors import ConfigError, LLMOutputError
from veracity.pipeline.methods.base import MethodContext
from veracity.pipeline.methods.trification import SPEC
from veracity.pipeline.methods.trification.graph import (NODE_TYPES, plan_model_for, specs_from_plan,
                                                         validate_plan)
from veracity.pipeline.methods.trification.method import NodeRun, label_from_judges, verify_trification
from veracity.pipeline.methods.trification.roles import (MODIFY, PLANNER, planner_example, planner_system,
                                                         select_evidence)
from veracity.pipeline.tools import Tools
from veracity.pipeline.types import Claim, Evidence, Label, Trace

CLAIM = Claim("c1", "Gustave Eiffel's company built the Eiffel Tower. It was completed in 1889.")


# ----------------------------------------------------------------- planner reasoning (Table 4)
async def test_planner_reasons_before_the_nodes_within_its_own_budget():
    llm = ScriptedLLM(handlers(), repeat_last=True)
    ctx = make_ctx(llm, plan_reasoning_chars=300)
    await verify_trification(CLAIM, ctx)
    call = llm.of("trification.planner")[0]
    schema = call.output_model.model_json_schema()
    assert list(schema["properties"]) == ["reasoning", "nodes"]  # the server emits properties in this order
    assert schema["properties"]["reasoning"]["maxLength"] == 300
    assert "reasoning" in schema["required"]
    assert call.max_tokens == 1792 == PLANNER.max_tokens == MODIFY.max_tokens  # room for reasoning + 12 nodes
    assert '"reasoning" field' in call.messages[0]["content"]
    plan_event = events(ctx.trace, "trification.plan")[0]
    assert plan_event["reasoning"] == "the paragraph names a tower and its builder"  # traced
    # a reply without the reasoning does not validate (constrained decoding would never produce one)
    with pytest.raises(ValueError):
        call.output_model.model_validate({"nodes": plan(N("s_1", "SEARCH"), N("j_1", "JUDGE",
                                                                              ["s_1"]))["nodes"]})


async def test_the_modifier_reasons_too_and_zero_drops_the_field():
    llm = ScriptedLLM(handlers(judge=("Uncertain",)), repeat_last=True)
    ctx = make_ctx(llm, max_modifications=1)
    await verify_trification(CLAIM, ctx)
    mod = llm.of("trification.modify")[0]
    assert list(mod.output_model.model_json_schema()["properties"]) == ["reasoning", "nodes"]
    nodes_only = {"nodes": plan(N("s_1", "SEARCH"), N("j_1", "JUDGE", ["s_1"]))["nodes"]}
    llm = ScriptedLLM(handlers(planner=[nodes_only]), repeat_last=True)
    ctx = make_ctx(llm, plan_reasoning_chars=0)
    verdict = await verify_trification(CLAIM, ctx)
    call = llm.of("trification.planner")[0]
    assert list(call.output_model.model_json_schema()["properties"]) == ["nodes"]
    assert '"reasoning"' not in call.messages[0]["content"]
    assert verdict.label == Label.SUPPORTED


# ----------------------------------------------------------------- Table 4 prompt elements
def test_planner_prompt_has_table_4s_elements():
    text = planner_system(NODE_TYPES)
    for relation in ("Combination", "Comparison", "Causality", "Inductivity", "Deductivity"):
        assert f"* {relation}:" in text, relation
    assert "if and only if there is a logical relationship" in text
    assert "minimize the SEARCH nodes at the root" in text
    # ambiguous references and unclear times are refined, with or without a search before
    assert "an ambiguous reference or an unclear time, put a REFINE node before it" in text
    assert "(SEARCH) -> (REFINE) -> (this node)" in text and "(REFINE) -> (this node)" in text
    assert "does not state a time or a statistic explicitly, search for it" in text
    assert "Output format" in text and json.dumps(planner_example(NODE_TYPES)) in text


@pytest.mark.parametrize("allowed", [NODE_TYPES, ("SEARCH", "THINK", "JUDGE"), ("SEARCH", "JUDGE")])
def test_the_prompts_example_is_a_valid_plan_of_its_ablation(allowed):
    example = planner_example(allowed)
    parsed = plan_model_for(allowed, 12).model_validate(example)  # fits the schema the server enforces
    assert validate_plan(specs_from_plan(parsed), max_nodes=12, allowed_types=allowed) == []
    assert {n["type"] for n in example["nodes"]} == set(allowed)
    assert [n["id"] for n in example["nodes"] if n["dependencies"] == []] == ["s_1"]  # one SEARCH root
    text = planner_system(allowed)
    assert json.dumps(example) in text
    if "REFINE" not in allowed:  # no rule asks for a node type the schema forbids
        assert "REFINE" not in text


# ----------------------------------------------------------------- SEARCH synthesis (§3.2)
async def test_search_nodes_synthesize_and_children_see_the_synthesis():
    llm = ScriptedLLM(handlers(), repeat_last=True)
    ctx = make_ctx(llm)
    verdict = await verify_trification(CLAIM, ctx)
    syn = llm.of("trification.synthesize")
    assert len(syn) == 2  # one per SEARCH node, after its searches
    assert all("[Eiffel Tower#0]" in user_text(c.messages) or "[Gustave Eiffel#0]" in user_text(c.messages)
               for c in syn)
    think = user_text(llm.of("trification.think")[0].messages)
    assert ("[s_1] (SEARCH) SYNTHESIS of Eiffel Tower" in think
            and "[s_2] (SEARCH) SYNTHESIS of Gustave Eiffel" in think)
    refine = user_text(llm.of("trification.refine")[0].messages)
    assert "[s_1] (SEARCH) SYNTHESIS of Eiffel Tower" in refine
    assert "[Eiffel Tower#0]" in think  # the passages still propagate beside the synthesis (§3.3)
    assert verdict.label == Label.SUPPORTED


async def test_without_synthesis_search_parents_pass_passages_only():
    llm = ScriptedLLM(handlers(), repeat_last=True)
    ctx = make_ctx(llm, search_synthesis=False)
    await verify_trification(CLAIM, ctx)
    assert "trification.synthesize" not in llm.roles()
    think = user_text(llm.of("trification.think")[0].messages)
    assert "(SEARCH)" not in think and "[Eiffel Tower#0]" in think


async def test_an_invalid_synthesis_leaves_the_passages_without_a_summary():
    h = handlers()
    h["trification.synthesize"] = lambda messages, model, i: LLMOutputError("synthesize: json_invalid",
                                                                            role="trification.synthesize")
    llm = ScriptedLLM(h, repeat_last=True)
    ctx = make_ctx(llm)
    verdict = await verify_trification(CLAIM, ctx)
    failed = [e for e in events(ctx.trace,
                                "trification.agent_failed") if e["role"] == "trification.synthesize"]
    assert {e["id"] for e in failed} == {"s_1", "s_2"}
    think = user_text(llm.of("trification.think")[0].messages)
    assert "(SEARCH)" not in think and "[Eiffel Tower#0]" in think
    assert llm.count("trification.search") == 2  # the query reply was fine: no re-search as a fallback
    assert verdict.label == Label.SUPPORTED


# ----------------------------------------------------------------- evidence budget per node (§3.3)
def ev(title, i, words):
    return Evidence(f"{title}#{i}", title, " ".join(f"{title.lower()}{i}w{k}" for k in range(words)), 1.0)


def test_budget_is_split_fairly_and_keeps_each_parents_top_passages():
    a = [ev("A", i, 100) for i in range(10)]  # ~170 tokens each
    b = [ev("B", i, 100) for i in range(10)]
    c = [ev("C", i, 5) for i in range(3)]  # cheap: needs less than its share, the rest goes to A and B
    shown = select_evidence([a, b, c], budget=2000, max_words=120)
    ids = [e.passage_id for e in shown]
    assert {"C#0", "C#1", "C#2"} <= set(ids)
    na, nb = sum(i.startswith("A#") for i in ids), sum(i.startswith("B#") for i in ids)
    assert abs(na - nb) <= 1 and na >= 4  # fair; more than the 3 of a plain three-way split of 10
    assert [i for i in ids if i.startswith("A#")] == [f"A#{k}" for k in range(na)]  # top-ranked first
    assert ids[:3] == ["A#0", "B#0", "C#0"]  # every parent represented early
    # the old rule (the first 10 passages of the merged list) is not what the budget does
    many = [[ev(t, i, 10) for i in range(10)] for t in ("P", "Q", "R")]
    assert len(select_evidence(many, budget=2000, max_words=120)) == 30
    assert len(select_evidence(many, budget=200, max_words=120)) < 30
    # a passage shared by two parents is shown once; words beyond max_words do not count
    shared = [ev("S", 0, 10)]
    assert [e.passage_id for e in select_evidence([shared, shared], budget=2000, max_words=120)] == ["S#0"]
    long_ = [ev("L", i, 1000) for i in range(10)]
    assert len(select_evidence([long_], budget=2000, max_words=120)) > len(select_evidence([long_],
                                                                                           budget=2000,
                                                                                          max_words=1000))


async def test_a_node_sees_each_search_parents_passages_within_its_budget():
    titles = {t: [f"{t} fact number {i} " + "filler " * 20 for i in range(1)] for t in
              [f"{p}{i}" for p in ("Alpha", "Beta", "Gamma") for i in range(10)]}
    scripted = {q: [f"{q.capitalize()}{i}" for i in range(10)] for q in ("alpha", "beta", "gamma")}
    three = plan(N("s_1", "SEARCH", input="alpha"), N("s_2", "SEARCH", input="beta"),
                 N("s_3", "SEARCH", input="gamma"), N("j_1", "JUDGE", ["s_1", "s_2", "s_3"], input="claim"))
    h = handlers(planner=[three])
    h["trification.search"] = lambda messages: {
        "queries": [user_text(messages).split("Text: ")[1].split("\n")[0]]}

    def ctx_for(**params):
        trace = Trace()
        searcher = FakeSearcher(titles, scripted=scripted)
        return MethodContext(llm=llm, tools=Tools(searcher, trace), trace=trace,
                             params=SPEC.make_params(params))

    llm = ScriptedLLM(h, repeat_last=True)
    ctx = ctx_for()
    verdict = await verify_trification(CLAIM, ctx)
    judge = user_text(llm.of("trification.judge")[0].messages)
    for q in ("Alpha", "Beta", "Gamma"):
        assert all(f"[{q}{i}#0]" in judge for i in range(10)), q  # 30 short passages fit 2,000 tokens
    end = next(e for e in events(ctx.trace, "trification.node_end") if e["id"] == "j_1")
    assert len(end["evidence"]) == 30 and len(verdict.evidence) == 30
    llm = ScriptedLLM(h, repeat_last=True)
    ctx = ctx_for(evidence_tokens=300)
    await verify_trification(CLAIM, ctx)
    end = next(e for e in events(ctx.trace, "trification.node_end") if e["id"] == "j_1")
    shown = end["evidence"]
    assert 3 <= len(shown) < 30
    for q in ("Alpha", "Beta", "Gamma"):  # each parent keeps its top-ranked passage
        assert f"{q}0#0" in shown


def test_prompt_passages_is_refused_naming_its_replacement():
    with pytest.raises(ConfigError) as info:
        SPEC.make_params({"prompt_passages": 4})
    assert "evidence_tokens" in info.value.hint


# ----------------------------------------------------------------- static mode after the cap (§4.3)
def fallback_handlers():
    """THINK always finds the evidence insufficient; the sub-graphs' JUDGE stays Uncertain; the initial
    JUDGE (input refined by r_1) would support."""
    h = handlers(think_ok=False)

    def judge(messages):
        text = user_text(messages)
        if "Input: The Eiffel Tower was completed in 1889." in text:
            return {"explanation": "static judge", "label": "Supports"}
        return {"explanation": "unsure", "label": "Uncertain"}

    h["trification.judge"] = judge
    return h


async def test_after_the_modification_cap_the_initial_graph_runs_in_static_mode():
    llm = ScriptedLLM(fallback_handlers(), repeat_last=True)
    ctx = make_ctx(llm)
    verdict = await verify_trification(CLAIM, ctx)
    assert llm.count("trification.modify") == 3
    fb = events(ctx.trace, "trification.static_fallback")
    assert len(fb) == 1 and fb[0]["rerun"] == ["j_1"] and "Uncertain" in fb[0]["reason"]
    assert set(fb[0]["reused"]) == {"s_1", "s_2", "r_1", "t_1"}  # finished nodes are not run again
    assert llm.count("trification.think") == 1 and llm.count("trification.planner") == 1
    j1 = [c for c in llm.of("trification.judge")
          if "Input: The Eiffel Tower was completed" in user_text(c.messages)]
    assert len(j1) == 1 and "The engineer's company built it." in user_text(j1[0].messages)  # THINK's result
    stats = events(ctx.trace, "trification.stats")[0]
    assert stats["static_fallback"]["judges"] == {"j_1": "Supports"}
    assert events(ctx.trace, "trification.graph")[-1]["phase"] == "static fallback"
    assert verdict.label == Label.SUPPORTED and "static judge" in verdict.explanation


async def test_cap_fallback_stand_keeps_the_dynamic_judges():
    llm = ScriptedLLM(fallback_handlers(), repeat_last=True)
    ctx = make_ctx(llm, cap_fallback="stand")
    verdict = await verify_trification(CLAIM, ctx)
    assert not events(ctx.trace, "trification.static_fallback")
    assert verdict.label == Label.REFUTED  # the last sub-graph's JUDGE is Uncertain: uncertain_label


async def test_no_static_fallback_when_the_cap_is_not_reached_or_verification_succeeded():
    llm = ScriptedLLM(handlers(think_ok=False), repeat_last=True)  # one modification, its JUDGE supports
    ctx = make_ctx(llm)
    verdict = await verify_trification(CLAIM, ctx)
    assert verdict.label == Label.SUPPORTED and not events(ctx.trace, "trification.static_fallback")
    llm = ScriptedLLM(fallback_handlers(), repeat_last=True)
    ctx = make_ctx(llm, static=True)  # static mode from the start: nothing to fall back from
    verdict = await verify_trification(CLAIM, ctx)
    assert not events(ctx.trace, "trification.static_fallback") and verdict.label == Label.SUPPORTED


# ----------------------------------------------------------------- several JUDGE nodes (not in the paper)
def judge_run(label, finished):
    r = NodeRun(N("j", "JUDGE", ["s"]))
    r.label, r.finished = label, finished
    return r


def test_judge_aggregation_rules():
    sfr = [judge_run("Supports", 1), judge_run("Refutes", 3), judge_run("Supports", 2)]
    assert label_from_judges(sfr, "REFUTED") == Label.REFUTED  # all_supported: any Refutes refutes
    assert label_from_judges(sfr, "REFUTED", "majority") == Label.SUPPORTED
    assert label_from_judges(sfr, "REFUTED", "last") == Label.REFUTED
    su = [judge_run("Supports", 2), judge_run("Uncertain", 1)]
    assert label_from_judges(su, "NOT_ENOUGH_INFO", "all_supported") == Label.NOT_ENOUGH_INFO
    assert label_from_judges(su, "NOT_ENOUGH_INFO", "majority") == Label.SUPPORTED  # Uncertain does not vote
    assert label_from_judges(su, "NOT_ENOUGH_INFO", "last") == Label.SUPPORTED
    tie = [judge_run("Supports", 1), judge_run("Refutes", 2)]
    assert label_from_judges(tie, "NOT_ENOUGH_INFO", "majority") == Label.NOT_ENOUGH_INFO
    with pytest.raises(ValueError):
        label_from_judges(tie, "REFUTED", "vote")


@pytest.mark.parametrize("rule,want", [("all_supported", Label.REFUTED), ("majority", Label.SUPPORTED),
                                       ("last", Label.SUPPORTED)])
async def test_judge_aggregation_setting(rule, want):
    three = plan(N("s_1", "SEARCH"), N("j_1", "JUDGE", ["s_1"]), N("j_2", "JUDGE", ["s_1"]),
                 N("j_3", "JUDGE", ["j_1", "j_2"]))
    labels = {"j_1": "Supports", "j_2": "Refutes", "j_3": "Supports"}

    def judge(messages):
        node = next(k for k in labels if f"Hint: {k}" in user_text(messages))
        return {"explanation": node, "label": labels[node]}

    three["nodes"] = [dict(n, hint=n["id"]) for n in three["nodes"]]
    h = handlers(planner=[three])
    h["trification.judge"] = judge
    llm = ScriptedLLM(h, repeat_last=True)
    ctx = make_ctx(llm, static=True, judge_aggregation=rule)
    verdict = await verify_trification(CLAIM, ctx)
    assert verdict.label == want
    assert events(ctx.trace, "trification.mode")[0]["judge_aggregation"] == rule
    with pytest.raises(ConfigError):
        SPEC.make_params({"judge_aggregation": "vote"})
