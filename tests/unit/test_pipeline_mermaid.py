"""MERMAID: ReAct stop conditions, evidence memory reuse and persistence, ablations."""

from __future__ import annotations

import pytest

import asyncio

import numpy as np

from tests.unit.scripted_llm import FakeSearcher, ScriptedLLM
from veracity.pipeline.methods import METHODS
from veracity.pipeline.methods.mermaid import Decomposition, FinalVerdict, ReactStep, Triplet
from veracity.pipeline.methods.mermaid.memory import EvidenceMemory, normalize_key
from veracity.pipeline.engine import index_namespace, open_run_state, verify_one
from veracity.pipeline.types import Claim, Evidence, Label

ARTICLES = {
    "Eiffel Tower": ["The Eiffel Tower is a wrought-iron tower in Paris.", "It was completed in 1889."],
    "Paris": ["Paris is the capital of France."],
    "Berlin": ["Berlin is the capital of Germany."],
}


def step(action, argument="", label=None, cited=()):
    return ReactStep(thought=f"I will {action}", action=action, argument=argument, label=label,
                     cited_passages=list(cited))


def decomp(subject="Eiffel Tower", obj="Paris"):
    return Decomposition(triplets=[Triplet(subject=subject, relation="located in", object=obj,
                                           attributions=[])],
                         keywords=[subject], domain="architecture")


def run(claim, script, *, searcher=None, state=None, state_dir=None, **params):
    """One claim; with ``state_dir`` a run state is opened there (and closed), else ``state`` is used."""
    llm = ScriptedLLM(script)
    searcher = searcher or FakeSearcher(ARTICLES)
    spec = METHODS["mermaid"]
    p = spec.make_params(params)
    own = state is None
    state = open_run_state(spec, p, searcher, state_dir) if own else state
    try:
        verdict = asyncio.run(verify_one(claim, spec, llm, searcher, p, state))
    finally:
        if own:
            state.close()
    return verdict, llm, searcher


def test_stops_on_finish_and_cites_only_observed_passages(tmp_path):
    verdict, llm, searcher = run(Claim("c1", "The Eiffel Tower is in Paris."), {
        "mermaid.decomposer": [decomp()],
        "mermaid.executor": [step("search", "Eiffel Tower Paris"),
                             step("finish", label="SUPPORTED", cited=["Eiffel Tower#0", "Nowhere#3"])],
    }, state_dir=tmp_path, constrain_citations=False)  # a server that ignores the enum
    assert verdict.label is Label.SUPPORTED
    assert llm.roles() == ["mermaid.decomposer", "mermaid.executor", "mermaid.executor"]
    assert [e.passage_id for e in verdict.evidence] == ["Eiffel Tower#0"]  # unknown id ignored
    assert [t.tool for t in verdict.trace.tool_calls] == ["search"]
    assert verdict.trace.summary()["llm_calls"] == 3
    # the second step saw the first step's observation, appended to the same conversation
    second = llm.of("mermaid.executor")[1].messages
    assert second[:2] == llm.of("mermaid.executor")[0].messages[:2]  # prefix kept (server prefix cache)
    assert "[Eiffel Tower#0] Eiffel Tower" in second[-1]["content"]


def test_stops_at_t_max_and_forces_a_final_verdict(tmp_path):
    verdict, llm, searcher = run(Claim("c1", "The Eiffel Tower is in Paris."), {
        "mermaid.decomposer": [decomp()],
        "mermaid.executor": lambda m: step("search", "tower"),
        "mermaid.final": [FinalVerdict(explanation="ran out", label="NOT_ENOUGH_INFO",
                                       cited_passages=["Eiffel Tower#1"])],
    }, state_dir=tmp_path)
    assert llm.count("mermaid.executor") == 5  # paper's T_max
    assert llm.count("mermaid.final") == 1
    assert len(verdict.trace.tool_calls) == 5
    assert verdict.label is Label.NOT_ENOUGH_INFO and verdict.explanation == "ran out"
    assert [e.passage_id for e in verdict.evidence] == ["Eiffel Tower#1"]
    # the final call's schema only allows the passages observed ("tower" never matched Paris)
    final_schema = llm.of("mermaid.final")[0].output_model.model_json_schema()
    assert set(final_schema["properties"]["cited_passages"]["items"]["enum"]) == {"Eiffel Tower#0",
                                                                                  "Eiffel Tower#1"}


def test_citations_are_constrained_to_observed_passages(tmp_path):
    import pydantic
    import pytest

    verdict, llm, _ = run(Claim("c1", "x"), {
        "mermaid.decomposer": [decomp()],
        "mermaid.executor": [step("open_page", "Paris"), step("finish", label="SUPPORTED",
                                                              cited=["Paris#0"])],
    }, state_dir=tmp_path)
    first, second = (c.output_model.model_json_schema()["properties"]["cited_passages"]
                     for c in llm.of("mermaid.executor"))
    assert first["maxItems"] == 0  # nothing observed yet: nothing can be cited
    assert second["items"].get("enum", [second["items"].get("const")]) == ["Paris#0"]  # one id: JSON "const"
    with pytest.raises(pydantic.ValidationError):
        llm.of("mermaid.executor")[1].output_model.model_validate(
            step("finish", label="SUPPORTED", cited=["Berlin#0"]).model_dump())
    assert [e.passage_id for e in verdict.evidence] == ["Paris#0"]


def test_t_max_is_a_parameter(tmp_path):
    verdict, llm, _ = run(Claim("c1", "x"), {
        "mermaid.decomposer": [decomp()],
        "mermaid.executor": lambda m: step("open_page", "Paris"),
        "mermaid.final": [FinalVerdict(explanation="e", label="SUPPORTED", cited_passages=["Paris#0"])],
    }, t_max=2, state_dir=tmp_path)
    assert llm.count("mermaid.executor") == 2
    assert [t.tool for t in verdict.trace.tool_calls] == ["open_page", "open_page"]
    assert [e.passage_id for e in verdict.evidence] == ["Paris#0"]


def test_finish_without_label_asks_for_the_final_verdict(tmp_path):
    verdict, llm, _ = run(Claim("c1", "x"), {
        "mermaid.decomposer": [decomp()],
        "mermaid.executor": [step("finish")],
        "mermaid.final": [FinalVerdict(explanation="e", label="REFUTED", cited_passages=[])],
    }, state_dir=tmp_path)
    assert verdict.label is Label.REFUTED
    assert llm.roles() == ["mermaid.decomposer", "mermaid.executor", "mermaid.final"]


def _memory_aware_executor(messages):
    """Finish at once when recalled evidence about the tower is in the prompt, else search twice first."""
    opening = messages[1]["content"]
    if "Evidence recalled from memory" in opening and "Eiffel Tower#1" in opening:
        return step("finish", label="SUPPORTED", cited=["Eiffel Tower#1"])
    searches = sum(1 for m in messages if m["role"] == "assistant")
    if searches == 0:
        return step("search", "Eiffel Tower")
    if searches == 1:
        return step("open_page", "Eiffel Tower")
    return step("finish", label="SUPPORTED", cited=["Eiffel Tower#1"])


def _open_state(tmp_path, searcher=None, **params):
    """One run state for several claims (as the runner keeps one per run)."""
    spec = METHODS["mermaid"]
    return open_run_state(spec, spec.make_params(params), searcher or FakeSearcher(ARTICLES), tmp_path)


def _two_claims(tmp_path, **params):
    script = {"mermaid.decomposer": lambda m: decomp(), "mermaid.executor": _memory_aware_executor}
    state = _open_state(tmp_path, **params)
    v1, _, s = run(Claim("a", "The Eiffel Tower is in Paris."), script, state=state, **params)
    v2, _, _ = run(Claim("b", "The Eiffel Tower was completed in 1889."), script, searcher=s, state=state,
                   **params)
    state.close()
    return v1, v2


def test_memory_reuse_makes_fewer_tool_calls_for_a_second_claim_about_the_same_entity(tmp_path):
    v1, v2 = _two_claims(tmp_path)
    assert len(v1.trace.tool_calls) == 2 and v1.trace.memory_hits == []
    assert len(v2.trace.tool_calls) < len(v1.trace.tool_calls)
    assert len(v2.trace.tool_calls) == 0
    assert {h["passage_id"] for h in v2.trace.memory_hits} >= {"Eiffel Tower#0", "Eiffel Tower#1"}
    assert "eiffel tower" in v2.trace.memory_hits[0]["keys"]
    assert [e.passage_id for e in v2.evidence] == ["Eiffel Tower#1"]  # cited from recalled evidence
    assert v2.trace.summary()["memory_hits"] >= 2


def test_no_memory_ablation_searches_again(tmp_path):
    v1, v2 = _two_claims(tmp_path, memory=False)
    assert len(v2.trace.tool_calls) == len(v1.trace.tool_calls) == 2
    assert v2.trace.memory_hits == []
    assert not (tmp_path / "memory" / "evidence.sqlite").exists()


def test_no_decomposer_ablation(tmp_path):
    verdict, llm, _ = run(Claim("c1", "The Eiffel Tower is in Paris."), {
        "mermaid.executor": [step("finish", label="SUPPORTED")],
    }, decomposer=False, state_dir=tmp_path)
    assert llm.count("mermaid.decomposer") == 0
    assert "Facts to check" not in llm.calls[0].prompt
    with_d, llm2, _ = run(Claim("c1", "The Eiffel Tower is in Paris."), {
        "mermaid.decomposer": [decomp()], "mermaid.executor": [step("finish", label="SUPPORTED")],
    }, state_dir=tmp_path / "m2")
    assert "(Eiffel Tower | located in | Paris)" in llm2.of("mermaid.executor")[0].prompt


def test_memory_persists_across_instances_on_one_sqlite_file(tmp_path):
    path = tmp_path / "mem.sqlite"
    ev = [Evidence("Eiffel Tower#1", "Eiffel Tower", "It was completed in 1889.", 2.0),
          Evidence("Paris#0", "Paris", "Paris is the capital of France.", 1.0)]
    m1 = EvidenceMemory(path, namespace="idx")
    assert m1.store(ev, keys=["Paris", "capital"]) == 2
    assert m1.store(ev[:1]) == 0  # already known
    m1.close()
    m2 = EvidenceMemory(path, namespace="idx")
    hits = m2.recall(["Eiffel Tower"], "")
    assert [h.evidence.passage_id for h in hits] == ["Eiffel Tower#1"]
    assert hits[0].evidence.text == "It was completed in 1889."
    # stored keys naming something the claim names also recall (no decomposition needed); a common noun
    # of the claim ("capital") does not, while the same word given as a key does
    hits = m2.recall([], "Is Paris the capital of France?")
    assert [h.evidence.passage_id for h in hits] == ["Paris#0"] and set(hits[0].keys) == {"paris"}
    assert m2.recall([], "What is the capital of a country?") == []
    hits = m2.recall(["Eiffel Tower", "Paris"], "")
    assert [h.evidence.passage_id for h in hits] == ["Eiffel Tower#1", "Paris#0"]
    assert set(hits[0].keys) == {"eiffel tower"} and m2.recall(["capital"]) == []  # one word: title only
    assert m2.stats() == {"passages": 2, "keys": 2}
    # another index's memory is separate
    assert EvidenceMemory(path, namespace="other").recall(["Eiffel Tower"], "Eiffel Tower") == []


def test_memory_keys_are_normalised_and_only_link_passages_that_mention_them(tmp_path):
    assert normalize_key("  The Eiffel-Tower! ") == "the eiffel tower"
    m = EvidenceMemory(tmp_path / "m.sqlite")
    m.store([Evidence("Berlin#0", "Berlin", "Berlin is the capital of Germany.")],
            keys=["EIFFEL tower", "capital of Germany", "Germany"])
    assert m.recall(["capital of germany"]) and not m.recall(["Eiffel Tower"])
    assert not m.recall(["Germany"])  # a one-word key links through the title only
    m.store([Evidence("Claim Jumper#0", "Claim Jumper", "Claim Jumper is an American restaurant chain."),
             Evidence("American Airlines#0", "American Airlines", "An airline."),
             Evidence("American Pie (film series)#0", "American Pie (film series)", "Four films.")],
            entities=["American", "Los Angeles"])
    # a one-word name links only the article it is the title of, not every title it is a word of
    assert m.recall(["American"]) == [] and m.recall([], "The American Ian Anderson sang.") == []
    assert {h.evidence.passage_id for h in m.recall(["Los Angeles"])} == {
        "Claim Jumper#0", "American Airlines#0", "American Pie (film series)#0"}
    # the title less its disambiguation and article is a key too
    assert [h.evidence.passage_id for h in m.recall(["American Pie"])] == ["American Pie (film series)#0"]
    m.store([Evidence("Naushad (composer)#0", "Naushad (composer)", "An Indian composer."),
             Evidence("The Beatles (band)#0", "The Beatles (band)", "A rock band.")], keys=["Naushad"],
            entities=["Naushad"])
    assert [h.evidence.passage_id for h in m.recall(["Naushad"])] == ["Naushad (composer)#0"]
    assert ([h.evidence.passage_id for h in m.recall([], "The mother of Naushad was an actor.")]
            == ["Naushad (composer)#0"])
    assert ([h.evidence.passage_id for h in m.recall(["The Beatles"])]
            == [h.evidence.passage_id for h in m.recall(["Beatles"])] == ["The Beatles (band)#0"])


def test_passages_are_stored_under_the_claims_entities_even_when_they_do_not_name_them(tmp_path):
    """The paper keys memory by the decomposition's subjects/objects: evidence found for a claim about
    "the 1998 film" is recalled for that entity although the passage says "Titanic"."""
    m = EvidenceMemory(tmp_path / "m.sqlite")
    ev = [Evidence("Titanic (1997 film)#0", "Titanic (1997 film)", "Directed by James Cameron.")]
    m.store(ev, keys=["film", "director"], entities=["The Cameron movie"])
    assert [h.evidence.passage_id for h in m.recall(["the cameron movie"])] == ["Titanic (1997 film)#0"]
    # a keyword is linked only where the passage uses it ("Directed" is not it)
    assert not m.recall(["director"])


def test_function_word_keys_link_nothing(tmp_path):
    """A small model's decomposition yields subjects like "The" or "Both": as keys they would match every
    later claim (the claim-text match finds " the " in any sentence) and recall unrelated passages."""
    from veracity.pipeline.methods.mermaid.memory import usable_key

    assert not usable_key("the") and not usable_key("both") and not usable_key("of the")
    assert not usable_key("claim")  # SmolLM2 often names the claim itself as the subject
    assert usable_key("naushad") and usable_key("the mother of naushad") and not usable_key("ab")
    m = EvidenceMemory(tmp_path / "m.sqlite")
    ev = [Evidence("Brentwood Cathedral#0", "Brentwood Cathedral", "The cathedral is in Brentwood, Essex.")]
    m.store(ev, keys=["The", "Both"], entities=["The", "Both of them"])
    assert not m.recall(["The mother of", "Naushad"], "The mother of Naushad was an actor.")
    # by title
    assert [h.evidence.passage_id for h in m.recall(["Brentwood Cathedral"])] == ["Brentwood Cathedral#0"]
    # a memory file written before such keys were refused: they are ignored at recall
    m._db.execute("INSERT INTO entity_keys VALUES (?, ?, ?)", (m.namespace, "the", "Brentwood Cathedral#0"))
    assert not m.recall([], "The mother of Naushad was an actor.")


def test_memory_keys_are_names():
    """MERMAID keys memory by entity: the names in the decomposition, not common nouns the small model
    made subjects ("the song", "Film" for "the film"), which linked unrelated HoVer claims."""
    from veracity.pipeline.methods.mermaid.memory import name_spans
    from veracity.pipeline.methods.mermaid import Decomposition, entity_keys

    assert name_spans("The film was directed by Steven Spielberg in 1993 after the Battle of Antietam.") == [
        "Steven Spielberg", "Battle of Antietam"]
    assert name_spans("Leonardo da Vinci's town") == ["Leonardo da Vinci"]
    assert name_spans("the mother of") == [] and name_spans("1993") == []
    d = Decomposition.model_validate({"triplets": [
        {"subject": "The mother of Naushad", "relation": "was", "object": "an actor", "attributions": []},
        {"subject": "Film", "relation": "directed by", "object": "Steven Spielberg", "attributions": []},
        {"subject": "The song", "relation": "about", "object": "Lake Geneva", "attributions": []}],
        "keywords": ["song", "film", "Naushad"], "domain": "film"})
    claim = "The mother of Naushad acted in the film by Steven Spielberg, and the song is about Lake Geneva."
    assert entity_keys(d, claim) == ["Naushad", "Steven Spielberg", "Lake Geneva"]


def test_a_common_noun_subject_links_no_later_claim(tmp_path):
    """Two claims about different songs whose decompositions both say "The song": the second recalls
    nothing of the first (before, "the song" was a memory key and recalled the first claim's passages)."""
    state = _open_state(tmp_path)
    script = {"mermaid.decomposer": lambda m: decomp("The song", "the tower"),
              "mermaid.executor": _memory_aware_executor}
    v1, _, s = run(Claim("a", "The song is about the Eiffel Tower."), script, state=state)
    assert len(v1.trace.tool_calls) == 2
    v2, _, _ = run(Claim("b", "The song was recorded in Berlin."), script, searcher=s, state=state)
    assert v2.trace.memory_hits == [] and len(v2.trace.tool_calls) == 2
    # the claim's own names are keys even when the decomposition names nothing
    v3, _, _ = run(Claim("c", "The song mentions the Eiffel Tower again."), script, searcher=s, state=state)
    state.close()
    assert {h["passage_id"] for h in v3.trace.memory_hits} >= {"Eiffel Tower#0", "Eiffel Tower#1"}
    assert len(v3.trace.tool_calls) == 0


def test_a_common_noun_in_the_claim_does_not_recall_its_article(tmp_path):
    m = EvidenceMemory(tmp_path / "m.sqlite")
    m.store([Evidence("Film#0", "Film", "A film is a work of visual art."),
             Evidence("The Beatles#0", "The Beatles", "The Beatles were a rock band from Liverpool.")])
    assert m.recall([], "The film was shot in Paris.") == []
    assert [h.evidence.passage_id for h in m.recall([], "A film about the Film festival.")] == ["Film#0"]
    assert ([h.evidence.passage_id for h in m.recall([], "Ringo Starr drummed for The Beatles.")]
            == ["The Beatles#0"])


class BagOfWords:
    VOCAB = ["tower", "iron", "paris", "river", "capital", "germany"]

    def encode(self, texts):
        return np.array([[t.lower().count(w) for w in self.VOCAB] for t in texts], dtype=np.float32) + 1e-3


def test_semantic_recall_finds_evidence_without_a_shared_key(tmp_path):
    path = tmp_path / "m.sqlite"
    m = EvidenceMemory(path, encoder=BagOfWords())
    m.store([Evidence("Eiffel Tower#0", "Eiffel Tower", "A wrought iron tower in Paris."),
             Evidence("Berlin#0", "Berlin", "Berlin is the capital of Germany.")])
    claim = "Which iron tower stands in paris?"
    assert m.recall([], claim) == []  # no key in common
    sem = EvidenceMemory(path, semantic=True, encoder=BagOfWords(), similarity_threshold=0.8)
    hits = sem.recall([], claim)
    assert [h.evidence.passage_id for h in hits] == ["Eiffel Tower#0"] and hits[0].similarity > 0.8


def _never_validates(role):
    from veracity.errors import LLMOutputError

    def reply(messages):
        raise LLMOutputError(f"{role}: the reply did not validate against X (json_invalid at top level)",
                             role=role)
    return reply


def test_a_decomposition_that_never_validates_falls_back_to_the_claim_text(tmp_path):
    verdict, llm, _ = run(Claim("c1", "The Eiffel Tower is in Paris."), {
        "mermaid.decomposer": [_never_validates("mermaid.decomposer")],
        "mermaid.executor": [step("search", "Eiffel Tower"), step("finish", label="SUPPORTED",
                                                                  cited=["Eiffel Tower#0"])],
    }, state_dir=tmp_path)
    assert verdict.label is Label.SUPPORTED
    ev = [e for e in verdict.trace.events if e["kind"] == "mermaid.decomposition"][0]
    assert "did not validate" in ev["error"] and "claim text" in ev["fallback"]
    # the executor still ran, without a decomposition in its prompt
    assert "Facts to check" not in llm.of("mermaid.executor")[0].messages[1]["content"]


def test_an_executor_step_that_never_validates_forces_the_verdict_from_what_was_seen(tmp_path):
    verdict, llm, _ = run(Claim("c1", "The Eiffel Tower is in Paris."), {
        "mermaid.decomposer": [decomp()],
        "mermaid.executor": [step("search", "Eiffel Tower"), _never_validates("mermaid.executor")],
        "mermaid.final": [FinalVerdict(explanation="seen enough", label="SUPPORTED",
                                       cited_passages=["Eiffel Tower#0"])],
    }, state_dir=tmp_path)
    assert verdict.label is Label.SUPPORTED and llm.count("mermaid.final") == 1
    steps = [e for e in verdict.trace.events if e["kind"] == "mermaid.step"]
    assert steps[-1]["action"] == "abandoned" and steps[-1]["t"] == 2
    assert [e.passage_id for e in verdict.evidence] == ["Eiffel Tower#0"]


def test_a_final_verdict_that_never_validates_gives_not_enough_info_with_the_reason(tmp_path):
    verdict, _, _ = run(Claim("c1", "x"), {
        "mermaid.decomposer": [decomp()],
        "mermaid.executor": lambda m: step("open_page", "Paris"),
        "mermaid.final": [_never_validates("mermaid.final")],
    }, t_max=1, state_dir=tmp_path)
    assert verdict.label is Label.NOT_ENOUGH_INFO
    assert "did not validate" in verdict.explanation
    final = [e for e in verdict.trace.events if e["kind"] == "mermaid.final"][0]
    assert "did not validate" in final["error"]


def test_the_run_state_keeps_the_memory_at_state_dir_memory_evidence_sqlite(tmp_path):
    from veracity.config import Settings
    from veracity.pipeline.methods.mermaid import MermaidState
    from veracity.pipeline.methods.mermaid.memory import default_memory_path

    spec = METHODS["mermaid"]
    assert spec.state_cls is MermaidState
    state = spec.open_state(tmp_path / "run", spec.make_params({"semantic_memory": True,
                                                                "similarity_threshold": 0.6}),
                            "idx")
    assert (state.memory.path == tmp_path / "run" / "memory" / "evidence.sqlite"
            and state.memory.path.is_file())
    assert (state.memory.namespace == "idx" and state.memory.semantic
            and state.memory.similarity_threshold == 0.6)
    state.close()
    assert state.memory is None
    # the default state dir ($VERACITY_HOME) keeps the memory where it always was
    assert default_memory_path(Settings(home=tmp_path)) == tmp_path / "memory" / "evidence.sqlite"
    # a run through the runner's state: passages gathered for one claim are in that file for the next run
    v1, _, s = run(Claim("a", "The Eiffel Tower is in Paris."),
                   {"mermaid.decomposer": lambda m: decomp(), "mermaid.executor": _memory_aware_executor},
                   state_dir=tmp_path / "run2")
    stored = EvidenceMemory(tmp_path / "run2" / "memory" / "evidence.sqlite", namespace=index_namespace(s))
    assert stored.stats()["passages"] == 2 and len(v1.trace.tool_calls) == 2


def test_parameters_and_roles_are_declared():
    import pytest

    from veracity.errors import ConfigError

    spec = METHODS["mermaid"]
    assert [r.name for r in spec.roles] == ["mermaid.decomposer", "mermaid.executor", "mermaid.final"]
    p = spec.make_params()
    assert all(r.settings(p).max_tokens == 384 for r in spec.roles)  # the former max_tokens parameter
    assert spec.role("executor").settings(spec.make_params({"executor.max_tokens": 512})).max_tokens == 512
    for bad, name in (({"t_max": 0}, "t_max"), ({"search_k": 101}, "search_k"), ({"t_max": "abc"}, "t_max"),
                      ({"max_tokens": 256}, "max_tokens"), ({"memory_path": "/tmp/m.sqlite"}, "memory_path")):
        with pytest.raises(ConfigError, match=name):
            spec.make_params(bad)


def test_fallback_events_keep_their_fields(tmp_path):
    verdict, _, _ = run(Claim("c1", "x"), {
        "mermaid.decomposer": [_never_validates("mermaid.decomposer")],
        "mermaid.executor": [_never_validates("mermaid.executor")],
        "mermaid.final": [_never_validates("mermaid.final")],
    }, state_dir=tmp_path)
    ev = {e["kind"]: e for e in verdict.trace.events}
    assert {"error", "fallback"} <= set(ev["mermaid.decomposition"])
    assert (ev["mermaid.step"]["t"] == 1 and ev["mermaid.step"]["action"] == "abandoned"
            and ev["mermaid.step"]["error"])
    assert (ev["mermaid.final"]["forced_after_steps"] == 0
            and "did not validate" in ev["mermaid.final"]["error"])
    assert verdict.explanation == ("No verdict: the model's final answer did not validate "
                                   f"({ev['mermaid.final']['error']}).")


def test_mermaid_state_needs_a_directory_only_with_memory(tmp_path):
    from veracity.errors import ConfigError
    from veracity.pipeline.methods import get_method

    spec = get_method("mermaid")
    with pytest.raises(ConfigError, match="needs a state directory"):
        spec.open_state(None, spec.make_params({}), "default")
    state = spec.open_state(None, spec.make_params({"memory": False}), "default")
    assert state.memory is None
    state.close()
