"""Trification: plan validation, re-planning, concurrent execution order, graph modification and its cap."""

from __future__ import annotations

import pytest

from veracity.pipeline.methods.base import MethodContext
from veracity.pipeline.methods.trification import SPEC
from veracity.pipeline.methods.trification.graph import (NodeSpec, VerificationPlan,
                                                         VerificationPlanNoRefine,
                                                         VerificationPlanSearchJudge, descendants,
                                                         find_cycle, plan_model_for, prefix_subgraph,
                                                         repair_plan, structural_repair, validate_plan)
from veracity.pipeline.methods.trification.method import (NodeRun, TrificationParams, label_from_judges,
                                                          verify_trification)
from veracity.pipeline.methods.trification.roles import JudgeResult, SearchQueries, search_queries_model
from veracity.pipeline.tools import Tools
from veracity.pipeline.types import Claim, Label, Trace

from tests.unit.scripted_llm import FakeSearcher, ScriptedLLM


def N(id, type, deps=(), input="x", hint="h"):
    return NodeSpec(id, type, input, hint, list(deps))


VALID = [N("s_1", "SEARCH"), N("s_2", "SEARCH"), N("r_1", "REFINE", ["s_1"]),
         N("t_1", "THINK", ["s_1", "s_2"]), N("j_1", "JUDGE", ["t_1", "r_1"])]


# ----------------------------------------------------------------- validation, one rule at a time
def test_valid_plan_has_no_errors():
    assert validate_plan(VALID, max_nodes=12) == []


def test_duplicate_ids_rejected():
    errs = validate_plan([N("s_1", "SEARCH"), N("s_1", "SEARCH"), N("j_1", "JUDGE", ["s_1"])], max_nodes=12)
    assert len(errs) == 1 and "more than once: s_1" in errs[0]


def test_unknown_dependency_rejected():
    errs = validate_plan([N("s_1", "SEARCH"), N("j_1", "JUDGE", ["s_1", "s_9"])], max_nodes=12)
    assert len(errs) == 1 and "unknown node(s) s_9" in errs[0]


def test_cycle_rejected():
    plan = [N("s_1", "SEARCH"), N("t_1", "THINK", ["s_1", "t_2"]), N("t_2", "THINK", ["t_1"]),
            N("j_1", "JUDGE", ["t_2"])]
    errs = validate_plan(plan, max_nodes=12)
    assert len(errs) == 1 and "cycle" in errs[0]
    cyc = find_cycle(plan)
    assert cyc is not None and set(cyc) == {"t_1", "t_2"} and cyc[0] == cyc[-1]


def test_self_dependency_is_a_cycle():
    errs = validate_plan([N("s_1", "SEARCH"), N("j_1", "JUDGE", ["s_1", "j_1"])], max_nodes=12)
    assert any("cycle" in e for e in errs)


def test_root_must_be_search():
    errs = validate_plan([N("t_1", "THINK"), N("s_1", "SEARCH"), N("j_1", "JUDGE", ["s_1", "t_1"])],
                         max_nodes=12)
    assert len(errs) == 1 and "t_1: a root node must be a SEARCH node" in errs[0]


def test_refine_has_at_most_one_parent():
    plan = [N("s_1", "SEARCH"), N("s_2", "SEARCH"), N("r_1", "REFINE", ["s_1", "s_2"]), N("j_1", "JUDGE",
                                                                                          ["r_1"])]
    errs = validate_plan(plan, max_nodes=12)
    assert len(errs) == 1 and "r_1: a REFINE node may have at most one parent" in errs[0]


def test_judge_required():
    errs = validate_plan([N("s_1", "SEARCH"), N("t_1", "THINK", ["s_1"])], max_nodes=12)
    assert errs == ["the plan has no JUDGE node"]


def test_node_budget():
    assert validate_plan(VALID, max_nodes=5) == []
    errs = validate_plan(VALID, max_nodes=4)
    assert len(errs) == 1 and "5 nodes, more than the budget of 4" in errs[0]


def test_empty_plan_rejected():
    assert validate_plan([], max_nodes=12) == ["the plan has no nodes"]


def test_ablation_types_rejected():
    errs = validate_plan(VALID, max_nodes=12, allowed_types=("SEARCH", "THINK", "JUDGE"))
    assert len(errs) == 1 and "r_1: node type REFINE is not allowed" in errs[0]


def test_subgraph_may_depend_on_existing_nodes_but_not_reuse_their_ids():
    sub = [N("s_3", "SEARCH"), N("j_2", "JUDGE", ["s_3", "s_1"])]
    assert validate_plan(sub, max_nodes=12, external_ids=["s_1"]) == []
    assert validate_plan(sub, max_nodes=12) != []  # s_1 unknown without the graph
    clash = validate_plan([N("s_1", "SEARCH"), N("j_2", "JUDGE", ["s_1"])], max_nodes=12,
                          external_ids=["s_1"])
    assert any("already used" in e for e in clash)


def test_repair_drops_dangling_and_repeated_dependencies_only():
    plan = [N(" s_1 ", "SEARCH"), N("j_1", "JUDGE", ["s_1", "s_1", "ghost"])]
    fixed, fixes = repair_plan(plan)
    assert [n.id for n in fixed] == ["s_1", "j_1"]
    assert fixed[1].dependencies == ["s_1"]
    assert len(fixes) == 3 and validate_plan(fixed, max_nodes=12) == []
    # a repair never hides a structural error: the orphaned THINK root is still rejected
    fixed2, _ = repair_plan([N("s_1", "SEARCH"), N("t_1", "THINK", ["ghost"]), N("j_1", "JUDGE", ["t_1"])])
    assert any("t_1: a root node must be a SEARCH node" in e for e in validate_plan(fixed2, max_nodes=12))


def test_prefix_subgraph_and_descendants():
    sub = prefix_subgraph([N("s_1", "SEARCH"), N("j_1", "JUDGE", ["s_1", "t_0"])], "m1.", ["t_0"])
    assert [(n.id, n.dependencies) for n in sub] == [("m1.s_1", []), ("m1.j_1", ["m1.s_1", "t_0"])]
    assert descendants(VALID, "s_1") == {"r_1", "t_1", "j_1"}
    assert descendants(VALID, "j_1") == set()


def test_plan_models_follow_ablations():
    assert plan_model_for(("SEARCH", "REFINE", "THINK", "JUDGE")) is VerificationPlan
    assert plan_model_for(("SEARCH", "THINK", "JUDGE")) is VerificationPlanNoRefine
    assert plan_model_for(("SEARCH", "JUDGE")) is VerificationPlanSearchJudge
    enum = VerificationPlanNoRefine.model_json_schema()["$defs"]["PlanNodeNoRefine"][
        "properties"]["type"]["enum"]
    assert "REFINE" not in enum


def test_plan_schema_caps_nodes_at_the_budget():
    bounded = plan_model_for(("SEARCH", "REFINE", "THINK", "JUDGE"), 5)
    assert issubclass(bounded, VerificationPlan)
    assert bounded.model_json_schema()["properties"]["nodes"]["maxItems"] == 5
    assert plan_model_for(("SEARCH", "REFINE", "THINK", "JUDGE"), 5) is bounded  # one class per budget
    node = {"id": "s_1", "type": "SEARCH", "input": "q", "hint": "h", "dependencies": []}
    bounded.model_validate({"reasoning": "r", "nodes": [node] * 5})
    with pytest.raises(ValueError):
        bounded.model_validate({"reasoning": "r", "nodes": [node] * 6})
    with pytest.raises(ValueError):
        plan_model_for(("SEARCH", "JUDGE"), 0)


def test_label_rule():
    def j(label):
        r = NodeRun(N("j", "JUDGE", ["s"]))
        r.label = label
        return r

    assert label_from_judges([j("Supports"), j("Supports")], "REFUTED") == Label.SUPPORTED
    assert label_from_judges([j("Supports"), j("Refutes")], "REFUTED") == Label.REFUTED
    assert label_from_judges([j("Supports"), j("Uncertain")], "REFUTED") == Label.REFUTED
    assert label_from_judges([j("Supports"), j("Uncertain")], "NOT_ENOUGH_INFO") == Label.NOT_ENOUGH_INFO


# ----------------------------------------------------------------- end-to-end with the scripted LLM
SEARCHER_PAGES = {
    "Eiffel Tower": ["The Eiffel Tower is a wrought-iron tower in Paris, completed in 1889."],
    "Gustave Eiffel": ["Gustave Eiffel was a French civil engineer whose company built the tower."],
}


def plan(*nodes):
    return {"reasoning": "the paragraph names a tower and its builder", "nodes": [{"id": n.id, "type": n.type,
                                                                                   "input": n.input,
                                                                                   "hint": n.hint,
                       "dependencies": n.dependencies} for n in nodes]}


def make_ctx(llm, **params):
    trace = Trace()
    searcher = FakeSearcher(dict(SEARCHER_PAGES), strip_punctuation=True)
    return MethodContext(llm=llm, tools=Tools(searcher, trace), trace=trace, params=SPEC.make_params(params))


def events(trace, kind):
    return [e for e in trace.events if e["kind"] == kind]


def user_text(messages):
    return "\n".join(m["content"] for m in messages if m["role"] == "user")


GRAPH = plan(N("s_1", "SEARCH", input="Eiffel Tower"), N("s_2", "SEARCH", input="Gustave Eiffel"),
             N("r_1", "REFINE", ["s_1"], input="It was completed in 1889."),
             N("t_1", "THINK", ["s_1", "s_2"], input="Gustave Eiffel's company built the Eiffel Tower."),
             N("j_1", "JUDGE", ["t_1", "r_1"], input=""))


def handlers(judge=("Supports",), think_ok=True, planner=None, modify=None):
    def search(messages, model, i):
        text = user_text(messages)
        return {"queries": ["Eiffel Tower 1889" if "Eiffel Tower" in text.split("\n")[0]
                            else "Gustave Eiffel engineer"]}

    def synthesize(messages):
        text = user_text(messages)
        node_input = text.split("Search input: ", 1)[1].split("\n", 1)[0]
        return {"summary": f"SYNTHESIS of {node_input}"}

    return {
        "trification.planner": planner or [GRAPH],
        "trification.search": search,
        "trification.synthesize": synthesize,
        "trification.refine": [{"new_input": "The Eiffel Tower was completed in 1889."}],
        "trification.think": [{"explanation": "The engineer's company built it.",
                               "evidence_sufficient": think_ok}],
        "trification.judge": [{"explanation": f"judged {x}", "label": x} for x in judge],
        "trification.modify": modify or [plan(N("s_9", "SEARCH", input="Eiffel Tower completion"),
                                              N("j_9", "JUDGE", ["s_9", "s_1"], input="completed in 1889"))],
    }


async def test_concurrent_execution_respects_dependencies():
    llm = ScriptedLLM(handlers(), repeat_last=True, delay=0.02)
    ctx = make_ctx(llm)
    verdict = await verify_trification(Claim("c1",
                                             "Gustave Eiffel's company built the Eiffel Tower. It was "
                                             "completed in 1889."), ctx)
    assert verdict.label == Label.SUPPORTED
    order = [(e["kind"], e["id"]) for e in ctx.trace.events if e["kind"] in ("trification.node_start",
                                                                             "trification.node_end")]
    pos = {ev: i for i, ev in enumerate(order)}
    deps = {n["id"]: n["dependencies"] for n in GRAPH["nodes"]}
    for node, parents in deps.items():
        for par in parents:  # a child never starts before each parent finished
            assert pos[("trification.node_end", par)] < pos[("trification.node_start", node)]
    # the two roots run concurrently: both start before either finishes
    assert max(pos[("trification.node_start", "s_1")], pos[("trification.node_start", "s_2")]) < \
        min(pos[("trification.node_end", "s_1")], pos[("trification.node_end", "s_2")])
    # r_1 (needs only s_1) and t_1 (needs s_1 and s_2) overlap too: their LLM calls overlap in time
    refine = next(c for c in llm.calls if c.role == "trification.refine")
    think = next(c for c in llm.calls if c.role == "trification.think")
    assert refine.start_seq < think.end_seq and think.start_seq < refine.end_seq
    # input refinement: the JUDGE's empty input became the REFINE output; evidence of both searches propagated
    judge_call = next(c for c in llm.calls if c.role == "trification.judge")
    text = user_text(judge_call.messages)
    assert "Input: The Eiffel Tower was completed in 1889." in text
    assert "[Eiffel Tower#0]" in text and "[Gustave Eiffel#0]" in text
    assert "The engineer's company built it." in text  # THINK output propagated to the JUDGE
    assert {e.passage_id for e in verdict.evidence} == {"Eiffel Tower#0", "Gustave Eiffel#0"}
    # the graph and the Table-2 statistics are in the trace
    graphs = events(ctx.trace, "trification.graph")
    assert [g["phase"] for g in graphs] == ["initial", "final"]
    stats = events(ctx.trace, "trification.stats")[0]
    assert stats["graph_modifications"] == 0
    assert stats["initial_nodes"] == {"SEARCH": 2, "REFINE": 1, "THINK": 1, "JUDGE": 1}
    assert [t.tool for t in ctx.trace.tool_calls] == ["search", "search"]


async def test_invalid_plan_is_replanned_with_errors_fed_back():
    cyclic = plan(N("s_1", "SEARCH"), N("t_1", "THINK", ["s_1", "j_1"]), N("j_1", "JUDGE", ["t_1"]))
    llm = ScriptedLLM(handlers(planner=[cyclic, GRAPH]), repeat_last=True)
    ctx = make_ctx(llm, structural_repair=False)
    verdict = await verify_trification(Claim("c", "Gustave Eiffel's company built the Eiffel Tower."), ctx)
    planner_calls = [c for c in llm.calls if c.role == "trification.planner"]
    assert len(planner_calls) == 2
    feedback = planner_calls[1].messages[-1]["content"]
    assert planner_calls[1].messages[-1]["role"] == "user" and "cycle" in feedback
    assert planner_calls[1].messages[-2]["role"] == "assistant"
    plans = events(ctx.trace, "trification.plan")
    assert [p["valid"] for p in plans] == [False, True]
    # the cyclic plan was never executed: node events only name the second plan's nodes
    started = {e["id"] for e in events(ctx.trace, "trification.node_start")}
    assert started == {"s_1", "s_2", "r_1", "t_1", "j_1"}
    assert verdict.label == Label.SUPPORTED


async def test_plan_that_never_validates_gives_nei_and_runs_nothing():
    no_judge = plan(N("s_1", "SEARCH"), N("t_1", "THINK", ["s_1"]))
    llm = ScriptedLLM(handlers(planner=[no_judge]), repeat_last=True)
    ctx = make_ctx(llm, max_replans=2, structural_repair=False)
    verdict = await verify_trification(Claim("c", "x"), ctx)
    assert verdict.label == Label.NOT_ENOUGH_INFO
    assert llm.roles() == ["trification.planner"] * 3
    assert ctx.trace.tool_calls == []
    assert events(ctx.trace, "trification.no_plan")[0]["reason"].startswith("the planner produced no valid")
    assert all("the plan has no JUDGE node" in p["errors"] for p in events(ctx.trace, "trification.plan"))


async def test_over_budget_plan_is_rejected():
    # the planner's schema caps the node list at max_nodes, so an over-budget reply never validates
    llm = ScriptedLLM(handlers(planner=[GRAPH]), repeat_last=True)
    ctx = make_ctx(llm, max_nodes=4, max_replans=1, structural_repair=False)
    verdict = await verify_trification(Claim("c", "x"), ctx)
    assert verdict.label == Label.NOT_ENOUGH_INFO
    assert llm.roles() == ["trification.planner"] * 2
    first = events(ctx.trace, "trification.plan")[0]
    assert not first["valid"] and "at most 4 items" in first["errors"][0]


async def test_uncertain_judge_modifications_are_capped_at_three():
    llm = ScriptedLLM(handlers(judge=("Uncertain",)), repeat_last=True)
    ctx = make_ctx(llm)
    verdict = await verify_trification(Claim("c", "Gustave Eiffel's company built the Eiffel Tower."), ctx)
    assert llm.roles().count("trification.modify") == 3
    assert llm.roles().count("trification.judge") == 4  # the original + one per merged sub-graph
    stats = events(ctx.trace, "trification.stats")[0]
    assert stats["graph_modifications"] == 3
    assert stats["initial_nodes"]["JUDGE"] == 1 and stats["final_nodes"]["JUDGE"] == 4
    assert stats["final_nodes"]["SEARCH"] == 2 + 3
    assert [g["phase"] for g in events(ctx.trace, "trification.graph")] == \
        ["initial", "modification 1", "modification 2", "modification 3", "final", "static fallback"]
    assert len(events(ctx.trace, "trification.modification_capped")) == 1
    # sub-graph ids are prefixed and reuse the original search node s_1
    ids = {n["id"]: n["dependencies"] for n in events(ctx.trace, "trification.graph")[-2]["nodes"]}
    assert ids["m1.j_9"] == ["m1.s_9", "s_1"]
    # after the cap, static mode (§4.3): every node of the initial graph had run, so its results are reused
    # and nothing runs again; its JUDGE is still Uncertain -> the paper's rule (not confirmed -> REFUTED)
    fallback = events(ctx.trace, "trification.static_fallback")
    assert len(fallback) == 1 and fallback[0]["rerun"] == [] and set(fallback[0]["reused"]) == \
        {"s_1", "s_2", "r_1", "t_1", "j_1"}
    assert verdict.label == Label.REFUTED


async def test_uncertain_label_param_and_static_mode():
    llm = ScriptedLLM(handlers(judge=("Uncertain",)), repeat_last=True)
    ctx = make_ctx(llm, static=True, uncertain_label="NOT_ENOUGH_INFO")
    verdict = await verify_trification(Claim("c", "x"), ctx)
    assert "trification.modify" not in llm.roles()
    assert verdict.label == Label.NOT_ENOUGH_INFO


async def test_insufficient_think_skips_descendants_and_merges_subgraph():
    sub = plan(N("s_5", "SEARCH", input="Eiffel Tower builder"), N("j_5", "JUDGE", ["s_5", "s_2"],
                                                                   input="built"))
    llm = ScriptedLLM(handlers(think_ok=False, judge=("Supports",), modify=[sub]), repeat_last=True)
    ctx = make_ctx(llm)
    verdict = await verify_trification(Claim("c", "Gustave Eiffel's company built the Eiffel Tower."), ctx)
    final = {n["id"]: n["status"] for n in events(ctx.trace, "trification.graph")[-1]["nodes"]}
    assert final["t_1"] == "failed" and final["j_1"] == "skipped"
    assert final["m1.s_5"] == "done" and final["m1.j_5"] == "done"
    judge_calls = [c for c in llm.calls if c.role == "trification.judge"]
    assert len(judge_calls) == 1 and "Input: built" in user_text(judge_calls[0].messages)
    # the modification prompt names the finished nodes it may reuse, not the failed node's descendants
    mod = user_text(next(c for c in llm.calls if c.role == "trification.modify").messages)
    assert "- s_1 (SEARCH)" in mod and "- j_1" not in mod
    assert verdict.label == Label.SUPPORTED


async def test_refuting_judge_wins_and_static_mode_never_modifies():
    two_judges = plan(N("s_1", "SEARCH"), N("j_1", "JUDGE", ["s_1"]), N("j_2", "JUDGE", ["s_1"]))
    llm = ScriptedLLM(handlers(planner=[two_judges], judge=("Supports", "Refutes")), repeat_last=True)
    ctx = make_ctx(llm, static=True)
    verdict = await verify_trification(Claim("c", "x"), ctx)
    assert verdict.label == Label.REFUTED
    assert "trification.modify" not in llm.roles()


async def test_ablation_no_refine_uses_restricted_schema():
    llm = ScriptedLLM(handlers(planner=[plan(N("s_1", "SEARCH"), N("j_1", "JUDGE", ["s_1"]))]),
                      repeat_last=True)
    ctx = make_ctx(llm, no_refine_think=True)
    await verify_trification(Claim("c", "x"), ctx)
    call = llm.calls[0]
    assert issubclass(call.output_model, VerificationPlanSearchJudge)
    assert call.output_model.model_json_schema()["properties"]["nodes"]["maxItems"] == ctx.params.max_nodes
    assert ("REFINE (ids" not in call.messages[0]["content"]
            and "THINK (ids" not in call.messages[0]["content"])


async def test_search_schema_caps_the_queries_at_max_queries():
    llm = ScriptedLLM(handlers(planner=[plan(N("s_1", "SEARCH"), N("j_1", "JUDGE", ["s_1"]))]),
                      repeat_last=True)
    ctx = make_ctx(llm, max_queries=2)
    await verify_trification(Claim("c", "x"), ctx)
    (call,) = [c for c in llm.calls if c.role == "trification.search"]
    assert issubclass(call.output_model, SearchQueries)
    assert call.output_model.model_json_schema()["properties"]["queries"]["maxItems"] == 2
    assert "at most 2 queries" in user_text(call.messages)
    assert search_queries_model(5) is SearchQueries and search_queries_model(2) is call.output_model
    with pytest.raises(ValueError):
        search_queries_model(6)


async def test_bad_uncertain_label_is_a_config_error():
    from veracity.errors import ConfigError

    with pytest.raises(ConfigError):
        await verify_trification(Claim("c", "x"), make_ctx(ScriptedLLM({}), uncertain_label="MAYBE"))


def test_judge_output_model_is_flat():
    schema = JudgeResult.model_json_schema()
    assert schema["properties"]["label"]["enum"] == ["Supports", "Refutes", "Uncertain"]
    assert TrificationParams().max_modifications == 3 and TrificationParams().k == 10


# ----------------------------------------------------------------- structural repair (small-model plans)
def test_structural_repair_reads_a_flat_list_as_a_chain_and_adds_a_judge():
    flat = [N("1", "SEARCH", input="Eiffel Tower"), N("2", "THINK", input="who built it"),
            N("3", "SEARCH", input="Gustave Eiffel"), N("4", "REFINE", input="it")]
    assert validate_plan(flat, max_nodes=12)  # invalid as written
    fixed, fixes = structural_repair(flat, max_nodes=12, judge_input="the claim")
    assert validate_plan(fixed, max_nodes=12) == []
    deps = {n.id: n.dependencies for n in fixed}
    assert deps == {"1": [], "2": ["1"], "3": [], "4": ["3"], "judge": ["2", "4"]}  # JUDGE over the sinks
    assert fixed[-1].type == "JUDGE" and fixed[-1].input == "the claim"
    assert any("no parent" in f for f in fixes) and any("added JUDGE" in f for f in fixes)


def test_structural_repair_drops_repeats_and_trims_to_the_budget():
    rambling = [N("1", "SEARCH", input="a"), N("2", "THINK", input="b")] + \
               [N(str(i), "JUDGE", input="c") for i in range(3, 25)]  # SmolLM2's typical reply
    fixed, fixes = structural_repair(rambling, max_nodes=12)
    assert [n.id for n in fixed] == ["1", "2", "3"]  # 21 repeated JUDGEs dropped
    assert {n.id: n.dependencies for n in fixed} == {"1": [], "2": ["1"], "3": ["2"]}
    assert validate_plan(fixed, max_nodes=12) == []
    many = [N(f"s{i}", "SEARCH", input=f"q{i}") for i in range(20)]
    fixed, fixes = structural_repair(many, max_nodes=5)
    assert len(fixed) == 5 and fixed[-1].type == "JUDGE"  # one slot kept for the JUDGE
    assert fixed[-1].dependencies == ["s0", "s1", "s2", "s3"]
    assert validate_plan(fixed, max_nodes=5) == []


def test_structural_repair_breaks_cycles_by_list_order_and_roots_the_graph_in_a_search():
    cyclic = [N("s", "SEARCH"), N("t", "THINK", ["s", "j"]), N("j", "JUDGE", ["t"])]
    assert any("cycle" in e for e in validate_plan(cyclic, max_nodes=12))
    fixed, fixes = structural_repair(cyclic, max_nodes=12)
    assert {n.id: n.dependencies for n in fixed} == {"s": [], "t": ["s"], "j": ["t"]}
    assert validate_plan(fixed, max_nodes=12) == [] and any("break a cycle" in f for f in fixes)
    selfloop = [N("1", "SEARCH", ["1"], input="a"), N("2", "JUDGE", ["2"], input="b")]  # SmolLM2: "1 -> 1"
    fixed, _ = structural_repair(selfloop, max_nodes=12)
    assert {n.id: n.dependencies for n in fixed} == {"1": [], "2": ["1"]}
    think_first = [N("t", "THINK"), N("j", "JUDGE", ["t"])]
    fixed, fixes = structural_repair(think_first, max_nodes=12, judge_input="the claim")
    assert [(n.id, n.type, n.dependencies) for n in fixed] == [("search", "SEARCH", []), ("t", "THINK",
                                                                                          ["search"]),
                                                               ("j", "JUDGE", ["t"])]
    assert fixed[0].input == "the claim" and validate_plan(fixed, max_nodes=12) == []
    # an acyclic plan listed out of order keeps its edges
    backwards = [N("j", "JUDGE", ["s"]), N("s", "SEARCH")]
    fixed, _ = structural_repair(backwards + [N("s", "SEARCH", input="again")], max_nodes=12)
    assert fixed[0].dependencies == ["s"]


def test_structural_repair_renames_reused_ids():
    # SmolLM2 used an entity name as the id of every node
    plan_ = [N("Sven Scheuer", "SEARCH", input="Sven Scheuer"), N("Sven Scheuer", "THINK", ["Sven Scheuer"],
                                                                  input="b"),
             N("Sven Scheuer", "JUDGE", ["Sven Scheuer"], input="c")]
    assert any("more than once" in e for e in validate_plan(plan_, max_nodes=12))
    fixed, fixes = structural_repair(plan_, max_nodes=12)
    assert [n.id for n in fixed] == ["Sven Scheuer", "Sven Scheuer_2", "Sven Scheuer_3"]
    assert validate_plan(fixed, max_nodes=12) == [] and any("fresh ids" in f for f in fixes)


async def test_a_repaired_plan_runs_without_a_replan_and_the_trace_shows_the_repairs():
    flat = plan(N("1", "SEARCH", input="Eiffel Tower"), N("2", "THINK", input="Gustave Eiffel built it"))
    llm = ScriptedLLM(handlers(planner=[flat]), repeat_last=True)
    ctx = make_ctx(llm)
    verdict = await verify_trification(Claim("c", "Gustave Eiffel's company built the Eiffel Tower."), ctx)
    assert llm.roles().count("trification.planner") == 1
    plans = events(ctx.trace, "trification.plan")
    assert [(p["valid"], p.get("structural_repair", False)) for p in plans] == [(False, False), (True, True)]
    assert any("added JUDGE" in f for f in plans[1]["repairs"])
    started = {e["id"] for e in events(ctx.trace, "trification.node_start")}
    assert started == {"1", "2", "judge"}
    assert verdict.label == Label.SUPPORTED


async def test_a_node_whose_reply_never_validates_falls_back_instead_of_blocking_the_judge():
    """SmolLM2's THINK reply did not validate on 2 of 6 paper-setting claims; the JUDGE below it was skipped
    and the claim ended NOT_ENOUGH_INFO. Now THINK concludes nothing, SEARCH searches its input, REFINE
    passes its input on, and the JUDGE still rules."""
    from veracity.errors import LLMOutputError

    def bad(role):
        return lambda messages, model, i: LLMOutputError(f"{role}: the reply did not validate (json_invalid)",
                                                         role=role)

    h = handlers(judge=("Refutes",))
    h.update({"trification.think": bad("trification.think"), "trification.refine": bad("trification.refine"),
              "trification.search": bad("trification.search")})
    llm = ScriptedLLM(h, repeat_last=True)
    ctx = make_ctx(llm, static=True)
    verdict = await verify_trification(Claim("c1",
                                             "Gustave Eiffel's company built the Eiffel Tower. It was "
                                             "completed in 1889."), ctx)
    assert verdict.label == Label.REFUTED
    failed = {e["id"]: e["fallback"] for e in events(ctx.trace, "trification.agent_failed")}
    assert set(failed) == {n["id"] for n in GRAPH["nodes"] if n["type"] != "JUDGE"}
    assert any(e["status"] == "done" and e["type"] == "JUDGE" for e in events(ctx.trace,
                                                                              "trification.node_end"))
    assert ctx.trace.tool_calls  # the SEARCH nodes searched their inputs
    judge_text = user_text(next(c for c in llm.calls if c.role == "trification.judge").messages)
    assert "[Eiffel Tower#0]" in judge_text or "[Gustave Eiffel#0]" in judge_text  # evidence still reached it


# ----------------------------------------------------------------- JUDGE nodes with quotes (veracity's
# switch)
TOWER = Claim("c1", "Gustave Eiffel's company built the Eiffel Tower. It was completed in 1889.")


def _quoting_judges(*replies):
    h = handlers()
    h["trification.judge"] = [dict(r) for r in replies]
    return h


async def test_a_judge_quoting_what_its_passages_do_not_say_becomes_uncertain_in_check_mode():
    misread = {"explanation": "completed in 1887", "label": "Supports",
               "quotes": [{"passage_id": "Eiffel Tower#0", "quote": "completed in 1887"}]}
    llm = ScriptedLLM(_quoting_judges(misread, misread), repeat_last=True)
    ctx = make_ctx(llm, quotes="check", static=True)
    verdict = await verify_trification(TOWER, ctx)
    judge_calls = [c for c in llm.calls if c.role == "trification.judge"]
    assert len(judge_calls) == 2 and "answer Uncertain" in judge_calls[1].messages[-1]["content"]
    assert "copied exactly from it" in user_text(judge_calls[0].messages)
    # Uncertain -> uncertain_label (REFUTED, the paper's binary setting)
    assert verdict.label is Label.REFUTED
    assert verdict.grounding == "ungrounded" and not verdict.quotes[0].found


async def test_a_grounded_judge_stands_with_its_quote_offsets():
    right = {"explanation": "completed in 1889", "label": "Supports",
             "quotes": [{"passage_id": "Eiffel Tower#0", "quote": "completed in 1889"}]}
    llm = ScriptedLLM(_quoting_judges(right), repeat_last=True)
    ctx = make_ctx(llm, quotes="check", static=True)
    verdict = await verify_trification(TOWER, ctx)
    assert verdict.label is Label.SUPPORTED and verdict.grounding == "grounded"
    text = SEARCHER_PAGES["Eiffel Tower"][0]
    (q,) = verdict.quotes
    assert text[q.start:q.end] == "completed in 1889"


async def test_judges_quote_nothing_with_quotes_off():
    llm = ScriptedLLM(handlers(), repeat_last=True)
    ctx = make_ctx(llm, static=True)
    verdict = await verify_trification(TOWER, ctx)
    call = next(c for c in llm.calls if c.role == "trification.judge")
    assert "copied exactly" not in user_text(call.messages) and "quotes" not in call.output_model.model_fields
    assert verdict.quotes is None and verdict.label is Label.SUPPORTED
