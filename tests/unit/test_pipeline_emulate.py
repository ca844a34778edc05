"""EMULATE's algorithm (Figure 1), branch by branch, driven by a scripted LLM and an in-memory index."""

from __future__ import annotations

import pytest

from tests.unit.scripted_llm import FakeSearcher, ScriptedLLM
from veracity.pipeline.methods import METHODS
from veracity.pipeline.methods.emulate import (Classification, Helpful, QueryList, Ranking, SelfContained,
                                               Sufficient, apply_ranking)
from veracity.pipeline.engine import verify_one
from veracity.pipeline.types import Claim, Label

CLAIM = Claim("c1", "Alpha Tower was built in 1889.")

ARTICLES = {
    "Alpha": ["Alpha Tower is a tower in Paris.", "It was completed in 1889 for a fair."],
    "Beta": ["Beta is a river in France."],
    "Gamma": ["Gamma is a village near Alpha Tower."],
    "Delta": ["Delta Tower was built in 1901."],
}
SCRIPTED = {"q1": ["Alpha", "Beta", "Gamma"], "q2": ["Delta", "Beta"], "q3": ["Gamma", "Delta"],
            "q4": ["Beta"], "q5": ["Gamma"], "q6": ["Delta"]}


def T(x: str) -> Classification:
    return Classification(explanation=f"because {x}", label="True")


def run(script, **params):
    llm = ScriptedLLM(script)
    searcher = FakeSearcher(ARTICLES, scripted=SCRIPTED)
    spec = METHODS["emulate"]
    verdict = __import__("asyncio").run(verify_one(CLAIM, spec, llm, searcher, spec.make_params(params)))
    return verdict, llm, searcher


def sc(*vals):
    return [SelfContained(reasoning="r", self_contained=v) for v in vals]


def hp(*vals):
    return [Helpful(reasoning="r", helpful=v) for v in vals]


def su(*vals):
    return [Sufficient(reasoning="r", sufficient=v) for v in vals]


def test_sufficient_evidence_stops_early_with_the_ranked_first_result():
    verdict, llm, searcher = run({
        "emulate.initial_query_gen": [QueryList(queries=["q1", "q2"])],
        "emulate.search_rank": [Ranking(ranking=[2, 1, 3])],
        "emulate.self_contained_check": sc(True),
        "emulate.det_helpful": hp(True),
        "emulate.sufficient_evidence": su(True),
        "emulate.classifier": [T("beta")],
    })
    assert verdict.label is Label.SUPPORTED
    assert searcher.queries == ["q1"]  # stopped before q2
    assert searcher.opened == ["Beta"]  # SearchRank put result 2 first; nothing else read
    assert [e.passage_id for e in verdict.evidence] == ["Beta#0"]
    assert llm.roles() == ["emulate.initial_query_gen", "emulate.search_rank", "emulate.self_contained_check",
                           "emulate.det_helpful", "emulate.sufficient_evidence", "emulate.classifier"]
    # SearchRank saw title, section and snippet of every result, and the source once
    rank_prompt = llm.of("emulate.search_rank")[0].prompt
    assert (("1. Title: Alpha\n   Section: passage 1 (the article's opening)\n"
             "   Snippet: Alpha Tower is a tower in Paris.") in rank_prompt
            and "3. Title: Gamma" in rank_prompt)
    assert rank_prompt.count("Source of every result: local index fake-index") == 1
    # trace: tool calls and every LLM call recorded
    assert [t.tool for t in verdict.trace.tool_calls] == ["search", "open_page"]
    assert len(verdict.trace.llm_calls) == 6


def test_helpful_but_insufficient_pushes_new_queries_to_the_front_and_breaks():
    verdict, llm, searcher = run({
        "emulate.initial_query_gen": [QueryList(queries=["q1", "q2"])],
        "emulate.search_rank": [Ranking(ranking=[1, 2, 3]), Ranking(ranking=[1, 2])],
        "emulate.self_contained_check": sc(True, True),
        "emulate.det_helpful": hp(True, True),
        "emulate.sufficient_evidence": su(False, True),
        "emulate.additional_query_gen": [QueryList(queries=["q3"])],
        "emulate.classifier": [T("alpha and gamma")],
    })
    assert searcher.queries == ["q1", "q3"]  # q3 went before the waiting q2
    assert searcher.opened == ["Alpha", "Gamma"]  # break: Beta (q1's second result) never read
    assert [e.title for e in verdict.evidence] == ["Alpha", "Alpha", "Gamma"]
    # the additional queries were asked with the helpful page in the evidence
    assert "Alpha Tower is a tower in Paris." in llm.of("emulate.additional_query_gen")[0].prompt


def test_not_helpful_moves_on_to_the_next_result():
    verdict, llm, searcher = run({
        "emulate.initial_query_gen": [QueryList(queries=["q1"])],
        "emulate.search_rank": [Ranking(ranking=[1, 2, 3])],
        "emulate.self_contained_check": sc(True, True),
        "emulate.det_helpful": hp(False, True),
        "emulate.sufficient_evidence": su(True),
        "emulate.classifier": [T("beta")],
    })
    assert searcher.opened == ["Alpha", "Beta"]
    assert [e.title for e in verdict.evidence] == ["Beta"]  # Alpha was not kept
    assert llm.count("emulate.sufficient_evidence") == 1  # only asked after a helpful page


def _deferred_script(deferred_sufficient: bool):
    return {
        "emulate.initial_query_gen": [QueryList(queries=["q1"])],
        "emulate.search_rank": [Ranking(ranking=[1, 2, 3])],
        "emulate.self_contained_check": sc(False, True),  # Alpha deferred, Beta comprehensible
        "emulate.det_helpful": hp(True),
        "emulate.sufficient_evidence": su(False, deferred_sufficient),
        "emulate.additional_query_gen": [QueryList(queries=[])],  # nothing more to search
        "emulate.classifier": [Classification(explanation="e", label="False")],
    }


def test_not_self_contained_result_is_deferred_and_can_settle_the_claim_at_the_end():
    verdict, llm, searcher = run(_deferred_script(True))
    assert verdict.label is Label.REFUTED
    assert searcher.queries == ["q1"]
    # the deferred page was tried together with the memory bank, after the loop
    last_sufficient = llm.of("emulate.sufficient_evidence")[-1].prompt
    assert "Page: Beta" in last_sufficient and "Page: Alpha" in last_sufficient
    assert [e.title for e in verdict.evidence] == ["Beta", "Alpha", "Alpha"]
    assert llm.of("emulate.classifier")[0].prompt.count("Page: ") == 2
    ends = [e for e in verdict.trace.events if e["kind"] == "emulate.classify"]
    assert ends[0]["reason"].startswith("deferred page")


def test_deferred_results_that_do_not_help_leave_the_final_classifier_on_the_memory_bank():
    verdict, llm, searcher = run(_deferred_script(False))
    assert [e.title for e in verdict.evidence] == ["Beta"]
    assert "Page: Alpha" not in llm.of("emulate.classifier")[0].prompt
    assert llm.count("emulate.sufficient_evidence") == 2


@pytest.mark.parametrize("budget", [4, 2])
def test_query_budget_is_respected(budget):
    # every page helps but never suffices, so AdditionalQueryGen keeps the queue full: only the budget stops
    verdict, llm, searcher = run({
        "emulate.initial_query_gen": [QueryList(queries=["q1", "q2", "q3"])],
        "emulate.self_contained_check": lambda m: SelfContained(reasoning="r", self_contained=True),
        "emulate.det_helpful": lambda m: Helpful(reasoning="r", helpful=True),
        "emulate.sufficient_evidence": lambda m: Sufficient(reasoning="r", sufficient=False),
        "emulate.additional_query_gen": lambda m: QueryList(queries=["q4", "q5", "q6"]),
        "emulate.classifier": [T("what was collected")],
    }, max_search_queries=budget, max_search_results_per_query=1, search_rank=False)
    # q4 runs twice (pushed to the front twice); the second time Beta was already read
    assert searcher.queries == ["q1", "q4", "q4", "q5"][:budget]
    assert searcher.opened == {4: ["Alpha", "Beta", "Gamma"], 2: ["Alpha", "Beta"]}[budget]
    assert llm.roles()[-1] == "emulate.classifier" and llm.count("emulate.classifier") == 1
    assert {e.title for e in verdict.evidence} == set(searcher.opened)  # classifier on what was collected
    assert llm.count("emulate.additional_query_gen") == len(searcher.opened)


def test_default_parameters_are_the_papers():
    p = METHODS["emulate"].make_params()
    assert (p.max_search_queries, p.max_search_results_per_query) == (4, 2)


def test_at_most_max_results_per_query_are_read():
    verdict, llm, searcher = run({
        "emulate.initial_query_gen": [QueryList(queries=["q1"])],
        "emulate.search_rank": [Ranking(ranking=[3, 2, 1])],
        "emulate.self_contained_check": lambda m: SelfContained(reasoning="r", self_contained=True),
        "emulate.det_helpful": lambda m: Helpful(reasoning="r", helpful=False),
        "emulate.classifier": [T("none")],
    })
    assert searcher.opened == ["Gamma", "Beta"]  # 2 of 3, in SearchRank's order


def test_no_search_rank_keeps_search_order():
    verdict, llm, searcher = run({
        "emulate.initial_query_gen": [QueryList(queries=["q1"])],
        "emulate.self_contained_check": lambda m: SelfContained(reasoning="r", self_contained=True),
        "emulate.det_helpful": lambda m: Helpful(reasoning="r", helpful=False),
        "emulate.classifier": [T("none")],
    }, search_rank=False)
    assert llm.count("emulate.search_rank") == 0
    assert searcher.opened == ["Alpha", "Beta"]


def test_no_self_contained_check_treats_every_page_as_self_contained():
    verdict, llm, searcher = run({
        "emulate.initial_query_gen": [QueryList(queries=["q1"])],
        "emulate.search_rank": [Ranking(ranking=[1, 2, 3])],
        "emulate.det_helpful": hp(True),
        "emulate.sufficient_evidence": su(True),
        "emulate.classifier": [T("alpha")],
    }, self_contained_check=False)
    assert llm.count("emulate.self_contained_check") == 0
    assert [e.title for e in verdict.evidence] == ["Alpha", "Alpha"]


def test_search_rank_output_is_sanitised():
    assert apply_ranking([5, 2, 2, 0, -1], 3) == [1, 0, 2]  # out of range and repeats ignored, rest appended
    assert apply_ranking([], 2) == [0, 1]
    verdict, llm, searcher = run({
        "emulate.initial_query_gen": [QueryList(queries=["q1"])],
        "emulate.search_rank": [Ranking(ranking=[9, 3, 3])],
        "emulate.self_contained_check": lambda m: SelfContained(reasoning="r", self_contained=True),
        "emulate.det_helpful": lambda m: Helpful(reasoning="r", helpful=False),
        "emulate.classifier": [T("none")],
    })
    assert searcher.opened == ["Gamma", "Alpha"]


def test_pages_already_read_are_not_reopened_and_pages_are_capped():
    verdict, llm, searcher = run({
        "emulate.initial_query_gen": [QueryList(queries=["q1", "q5"])],  # q5 returns Gamma again
        "emulate.search_rank": [Ranking(ranking=[3, 1, 2])],
        "emulate.self_contained_check": lambda m: SelfContained(reasoning="r", self_contained=True),
        "emulate.det_helpful": lambda m: Helpful(reasoning="r", helpful=False),
        "emulate.classifier": [T("none")],
    }, page_tokens=5)
    assert searcher.queries == ["q1", "q5"]
    assert searcher.opened == ["Gamma", "Alpha"]  # q5's only result was already read
    page_prompt = llm.of("emulate.det_helpful")[1].prompt
    assert "Alpha Tower is a ..." in page_prompt and "1889" not in page_prompt.split("New page: Alpha")[1]


def test_prompts_put_shared_evidence_first_and_the_task_last():
    verdict, llm, searcher = run({
        "emulate.initial_query_gen": [QueryList(queries=["q1"])],
        "emulate.search_rank": lambda m: Ranking(ranking=[1, 2, 3]),
        "emulate.self_contained_check": sc(True, True),
        "emulate.det_helpful": hp(True, True),
        "emulate.sufficient_evidence": su(False, True),
        "emulate.additional_query_gen": [QueryList(queries=["q2"])],
        "emulate.classifier": [T("x")],
    })
    helpful = llm.of("emulate.det_helpful")[1].messages[-1]["content"]
    assert helpful.index("Evidence collected so far") < helpful.index("Claim:") < helpful.index("New page:")
    assert helpful.rstrip().endswith("Answer helpful true or false.")
    # the two agents judging one page share everything up to their task
    check = llm.of("emulate.self_contained_check")[1].messages[-1]["content"]
    assert check.rsplit("Task:", 1)[0] == helpful.rsplit("Task:", 1)[0]


def _never_validates(role):
    from veracity.errors import LLMOutputError

    def reply(messages):
        raise LLMOutputError(f"{role}: the reply did not validate against X (json_invalid at top level)",
                             role=role)
    return reply


def _failed_agents(verdict):
    return [e["agent"] for e in verdict.trace.events if e["kind"] == "emulate.agent_failed"]


def test_agents_whose_replies_never_validate_fall_back_and_the_claim_still_gets_a_verdict():
    # initial queries fail -> the claim text is the query; SearchRank fails -> search order kept;
    # SelfContainedCheck fails -> treated as self-contained; the classifier fails -> NOT_ENOUGH_INFO
    verdict, llm, searcher = run({
        "emulate.initial_query_gen": [_never_validates("emulate.initial_query_gen")],
        "emulate.search_rank": [_never_validates("emulate.search_rank")],
        "emulate.self_contained_check": [_never_validates("emulate.self_contained_check")],
        "emulate.det_helpful": hp(True),
        "emulate.sufficient_evidence": su(True),
        "emulate.classifier": [_never_validates("emulate.classifier")],
    })
    assert searcher.queries == [CLAIM.text]
    assert searcher.opened == ["Delta"]  # the search's own first result (most words shared with the claim)
    assert verdict.label is Label.NOT_ENOUGH_INFO and "did not validate" in verdict.explanation
    assert [e.passage_id for e in verdict.evidence] == ["Delta#0"]
    assert _failed_agents(verdict) == ["emulate.initial_query_gen", "emulate.search_rank",
                                       "emulate.self_contained_check", "emulate.classifier"]


def test_failed_helpfulness_sufficiency_and_additional_queries_are_conservative():
    # DetHelpful fails -> not helpful (next result); SufficientEvidence fails -> not sufficient;
    # AdditionalQueryGen fails -> no new queries, the queue goes on
    verdict, llm, searcher = run({
        "emulate.initial_query_gen": [QueryList(queries=["q1", "q2"])],
        "emulate.search_rank": [Ranking(ranking=[1, 2, 3]), Ranking(ranking=[1, 2])],
        "emulate.self_contained_check": sc(True, True, True, True),
        "emulate.det_helpful": [_never_validates("emulate.det_helpful"), *hp(True, False, False)],
        "emulate.sufficient_evidence": [_never_validates("emulate.sufficient_evidence"), *su(False)],
        "emulate.additional_query_gen": [_never_validates("emulate.additional_query_gen")],
        "emulate.classifier": [T("alpha")],
    })
    assert searcher.queries == ["q1", "q2"]
    # q2: Beta was already read, Delta alone (no ranking)
    assert searcher.opened == ["Alpha", "Beta", "Delta"]
    assert verdict.label is Label.SUPPORTED
    assert [e.passage_id for e in verdict.evidence] == ["Beta#0"]  # only the page judged helpful
    assert _failed_agents(verdict) == ["emulate.det_helpful", "emulate.sufficient_evidence",
                                       "emulate.additional_query_gen"]


def test_roles_are_declared_and_their_settings_reach_the_llm_calls():
    spec = METHODS["emulate"]
    by_name = {r.name: r for r in spec.roles}
    assert list(by_name) == ["emulate.initial_query_gen", "emulate.search_rank",
                             "emulate.self_contained_check",
                             "emulate.det_helpful", "emulate.sufficient_evidence", "emulate.classifier",
                             "emulate.additional_query_gen"]
    assert {(r.max_tokens, r.temperature) for r in spec.roles} == {(256, None)}  # the old max_tokens param
    # a run that calls all seven agents (helpful but insufficient, then sufficient)
    script = {
        "emulate.initial_query_gen": [QueryList(queries=["q1", "q2"])],
        "emulate.search_rank": [Ranking(ranking=[1, 2, 3]), Ranking(ranking=[1, 2])],
        "emulate.self_contained_check": sc(True, True),
        "emulate.det_helpful": hp(True, True),
        "emulate.sufficient_evidence": su(False, True),
        "emulate.additional_query_gen": [QueryList(queries=["q3"])],
        "emulate.classifier": [T("alpha and gamma")],
    }
    _, llm, _ = run(script)
    assert set(llm.roles()) == set(by_name)
    for call in llm.calls:
        role = by_name[call.role]
        assert (call.max_tokens, call.temperature) == (role.max_tokens, role.temperature)
        assert call.output_model is role.output
    # a per-role budget reaches that role's call only
    llm = ScriptedLLM(script)
    params = spec.make_params({"classifier.max_tokens": 300})
    __import__("asyncio").run(verify_one(CLAIM, spec, llm, FakeSearcher(ARTICLES, scripted=SCRIPTED), params))
    assert [c.max_tokens for c in llm.of("emulate.classifier")] == [300]
    assert all(c.max_tokens == by_name[c.role].max_tokens for c in llm.calls if c.role
               != "emulate.classifier")


# ------------------------------------------------ the Classifier with quotes (veracity's switch; off in the
# configs)
def _to_classifier(classifier, **params):
    return run({
        "emulate.initial_query_gen": [QueryList(queries=["q1"])],
        "emulate.search_rank": [Ranking(ranking=[1])],
        "emulate.self_contained_check": sc(True),
        "emulate.det_helpful": hp(True),
        "emulate.sufficient_evidence": su(True),
        "emulate.classifier": classifier,
    }, **params)


def test_classifier_quotes_check_turns_a_misread_into_not_supported():
    wrong = {"explanation": "built in 1889", "label": "True",
             "quotes": [{"passage_id": "Alpha#0", "quote": "Alpha Tower was built in 1889"}]}
    verdict, llm, _ = _to_classifier([wrong, wrong], quotes="check")
    calls = llm.of("emulate.classifier")
    assert len(calls) == 2 and "answer False" in calls[1].messages[-1]["content"]
    assert "copied exactly from it" in calls[0].messages[1]["content"]
    assert verdict.label is Label.NOT_ENOUGH_INFO and verdict.grounding == "ungrounded"


def test_classifier_quotes_check_keeps_a_grounded_true():
    right = {"explanation": "a tower in Paris", "label": "True",
             "quotes": [{"passage_id": "Alpha#0", "quote": "Alpha Tower is a tower in Paris"}]}
    verdict, llm, _ = _to_classifier([right], quotes="check")
    assert (verdict.label is Label.SUPPORTED and verdict.grounding == "grounded"
            and len(llm.of("emulate.classifier")) == 1)
    assert verdict.quotes[0].start == 0 and verdict.quotes[0].end == len("Alpha Tower is a tower in Paris")


def test_classifier_quotes_off_is_the_papers_classifier():
    verdict, llm, _ = _to_classifier([T("alpha")])
    call = llm.of("emulate.classifier")[0]
    assert (call.output_model is Classification and "copied exactly" not in call.prompt
            and verdict.quotes is None)
