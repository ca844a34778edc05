"""Issue 14, EMULATE and MERMAID fidelity: each change against the scripted LLM.

EMULATE: per-role temperatures with a per-request seed, recorded in the run manifest (§4 Implementation);
the Classifier judges from the evidence bank unless ``use_knowledge`` (§3 (6)); SearchRank sees the source
identity and each result's place in its article (§3 (2)); the page budget is in tokens. MERMAID: the
decomposer's domain (§3.1) reaches the executor; memory runs in dataset order with one claim in flight;
the forced verdict after T_max is a switch; the observation limits are documented settings.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tests.unit.scripted_llm import FakeSearcher, ScriptedLLM, run_claims
from veracity.bench.config import RunConfig, load_config
from veracity.errors import ConfigError
from veracity.pipeline.labels import BINARY
from veracity.pipeline.methods import METHODS
from veracity.pipeline.methods.emulate import (Classification, Helpful, QueryList, Ranking, SelfContained,
                                               Sufficient)
from veracity.pipeline.methods.emulate.search import CHARS_PER_TOKEN, estimate_tokens, page_within
from veracity.pipeline.methods.mermaid import Decomposition, ReactStep, Triplet
from veracity.pipeline.params import param_infos
from veracity.pipeline.roles import SEED_RULE, request_seed
from veracity.pipeline.engine import verify_one
from veracity.pipeline.tools import SourceIdentity, passage_section
from veracity.pipeline.types import Claim, Evidence, Label

CONFIGS = Path(__file__).resolve().parents[2] / "benchmarks" / "configs"
ARTICLES = {
    "Alpha": ["Alpha Tower is a tower in Paris.", "It was completed in 1889 for a fair."],
    "Beta": ["Beta is a river in France."],
}
MANIFEST = {"kind": "veracity-index", "dump_date": "2017-10-01", "passages": 3,
            "sources": [{"path": "/data/enwiki-20171001-pages-articles.xml.bz2", "format": "wikipedia-xml",
                         "dump_date": "2017-10-01"}]}


def emulate_script(label: str = "True") -> dict:
    return {
        "emulate.initial_query_gen": [QueryList(queries=["alpha tower in france", "beta"])],
        "emulate.search_rank": lambda m: Ranking(ranking=[1, 2]),
        "emulate.self_contained_check": lambda m: SelfContained(reasoning="r", self_contained=True),
        "emulate.det_helpful": lambda m: Helpful(reasoning="r", helpful=True),
        "emulate.sufficient_evidence": lambda m: Sufficient(reasoning="r", sufficient=False),
        "emulate.additional_query_gen": lambda m: QueryList(queries=[]),
        "emulate.classifier": [Classification(explanation="e", label=label)],
    }


def run_emulate(params: dict, claim: Claim | None = None, searcher=None):
    llm = ScriptedLLM(emulate_script())
    searcher = searcher or FakeSearcher(ARTICLES, manifest=dict(MANIFEST))
    spec = METHODS["emulate"]
    verdict = asyncio.run(verify_one(claim or Claim("c1", "Alpha Tower was built in 1889."), spec, llm,
                                     searcher,
                                     spec.make_params(params)))
    return verdict, llm


# -- EMULATE: temperatures and seeds (§4 Implementation) --------------------------------------------------
def test_the_paper_config_runs_every_agent_at_temperature_1_with_its_own_seed():
    cfg = load_config(CONFIGS / "emulate-factool-kbqa.toml")
    _, llm = run_emulate(cfg.method_overrides())
    assert len(llm.calls) >= 6
    assert {c.temperature for c in llm.calls} == {1.0}
    # every request carries the seed the rule gives: run seed (the client's: 0), claim id, role, call index
    seen: dict[str, int] = {}
    for call in llm.calls:
        n = seen.get(call.role, 0)
        seen[call.role] = n + 1
        assert call.seed == request_seed(0, "c1", call.role, n) and call.seed is not None
    assert len({c.seed for c in llm.calls}) == len(llm.calls)  # no two requests share a random stream
    # the same run again sends the same seeds; another claim gets others
    _, again = run_emulate(cfg.method_overrides())
    assert [c.seed for c in again.calls] == [c.seed for c in llm.calls]
    _, other = run_emulate(cfg.method_overrides(), claim=Claim("c2", "Alpha Tower was built in 1889."))
    assert other.calls[0].seed != llm.calls[0].seed


def test_request_seed_is_deterministic_and_none_without_a_run_seed():
    assert request_seed(0, "c1", "emulate.classifier", 0) == request_seed(0, "c1", "emulate.classifier", 0)
    assert request_seed(0, "c1", "emulate.classifier", 0) != request_seed(1, "c1", "emulate.classifier", 0)
    assert request_seed(0, "c1", "emulate.classifier", 0) != request_seed(0, "c1", "emulate.classifier", 1)
    assert 0 <= request_seed(7, "x", "r", 3) < 2 ** 31
    assert request_seed(None, "c1", "emulate.classifier", 0) is None


def test_the_run_manifest_records_each_roles_temperature_and_the_seed_rule(tmp_path):
    cfg = load_config(CONFIGS / "emulate-factool-kbqa.toml")
    spec = METHODS["emulate"]
    out = tmp_path / "results.jsonl"
    asyncio.run(run_claims([Claim("c1", "Alpha Tower was built in 1889.")], spec,
                           ScriptedLLM(emulate_script()),
                           FakeSearcher(ARTICLES, manifest=dict(MANIFEST)), out,
                           params=cfg.method_overrides()))
    manifest = json.loads(out.with_name(out.name + ".manifest.json").read_text())
    assert set(manifest["roles"]) == {r.name for r in spec.roles}
    assert {r["temperature"] for r in manifest["roles"].values()} == {1.0}
    assert {r["temperature_from"] for r in manifest["roles"].values()} == {"role"}
    assert manifest["seed"] == 0 and manifest["seed_rule"] == SEED_RULE
    # without per-role settings the effective temperature is the client's default, and says so
    out2 = tmp_path / "default.jsonl"
    asyncio.run(run_claims([Claim("c1", "Alpha Tower was built in 1889.")], spec,
                           ScriptedLLM(emulate_script()),
                           FakeSearcher(ARTICLES, manifest=dict(MANIFEST)), out2))
    roles = json.loads(out2.with_name(out2.name + ".manifest.json").read_text())["roles"]
    assert roles["emulate.classifier"] == {"max_tokens": 256, "temperature": 0.0,
                                           "temperature_from": "client default"}


# -- EMULATE: the Classifier judges from the evidence bank (§3 (6)) -----------------------------------
def test_the_classifier_is_evidence_only_by_default_and_knowledge_is_a_switch():
    _, llm = run_emulate({})
    prompt = llm.of("emulate.classifier")[0].prompt
    assert "based only on the evidence collected so far" in prompt and "your knowledge" not in prompt
    _, llm = run_emulate({"use_knowledge": True})
    assert "and your knowledge where it is silent" in llm.of("emulate.classifier")[0].prompt
    assert METHODS["emulate"].make_params({}).use_knowledge is False


# -- EMULATE: SearchRank's source identity (§3 (2)) -------------------------------------------------
def test_search_rank_sees_the_source_identity_and_each_results_section():
    _, llm = run_emulate({})
    prompt = llm.of("emulate.search_rank")[0].prompt
    assert ("Source of every result: local index of enwiki-20171001-pages-articles.xml.bz2 (wikipedia-xml), "
            "dump of 2017-10-01") in prompt
    assert ("1. Title: Alpha\n   Section: passage 1 (the article's opening)\n"
            "   Snippet: Alpha Tower is a tower") in prompt
    assert "credibility by the article and passage" in prompt


def test_source_identity_of_per_claim_evidence_and_passage_sections():
    from veracity.indexes.gold import GoldRetriever, NoEvidenceRetriever

    gold = SourceIdentity.of(GoldRetriever([{"title": "A", "text": "a b"}]))
    assert gold.index == "the claim's gold evidence passages" and gold.dump_date is None
    assert "dump date unknown" in gold.describe()
    assert SourceIdentity.of(NoEvidenceRetriever()).index == "no evidence (closed book)"
    assert passage_section("Alpha#3") == "passage 4" and passage_section("Alpha#0").endswith("(the article's "
                                                                                             "opening)")


# -- EMULATE: the page budget is in tokens ------------------------------------------------------------
def test_pages_are_cut_to_a_token_budget():
    text = " ".join(["word"] * 1000)  # 5 characters a word with its space: 1250 tokens
    page = page_within([Evidence("A#0", "A", text), Evidence("A#1", "A", "more text")], 533)
    assert len(page) == 1 and page[0].text.endswith(" ...")
    assert estimate_tokens(page[0].text[:-4]) <= 533 < estimate_tokens(page[0].text[:-4] + " word")
    assert CHARS_PER_TOKEN == 4 and METHODS["emulate"].make_params({}).page_tokens == 533
    # a short passage keeps whole; the next one gets what is left
    page = page_within([Evidence("A#0", "A", "short one"), Evidence("A#1", "A", text)], 10)
    assert (page[0].text == "short one"
            and estimate_tokens(page[1].text[:-4]) <= 10 - estimate_tokens("short one"))
    # in the method: the opened page shown to DetHelpful stops at the budget
    _, llm = run_emulate({"page_tokens": 4})
    shown = llm.of("emulate.det_helpful")[0].prompt.split("New page: Alpha")[1]
    assert "Alpha Tower is ..." in shown and "1889" not in shown


def test_the_word_based_page_setting_names_its_replacement():
    with pytest.raises(ConfigError) as exc:
        METHODS["emulate"].make_params({"page_max_words": 400})
    line = f"{exc.value} {exc.value.hint}"
    assert "\n" not in line and "page_tokens" in exc.value.hint and "533" in exc.value.hint


# -- MERMAID: the decomposer's domain (§3.1) ----------------------------------------------------------
def mermaid_script(executor=None):
    return {
        "mermaid.decomposer": lambda m: Decomposition(
            triplets=[Triplet(subject="Eiffel Tower", relation="located in", object="Paris",
                              attributions=[])],
            keywords=["Eiffel Tower"], domain="architecture"),
        "mermaid.executor": executor or (lambda m: ReactStep(thought="t", action="finish", argument="",
                                                               label="SUPPORTED", cited_passages=[])),
    }


def test_the_decomposer_extracts_the_domain_and_the_executor_sees_it():
    schema = Decomposition.model_json_schema()
    assert "domain" in schema["required"]
    spec = METHODS["mermaid"]
    llm = ScriptedLLM(mermaid_script())
    params = spec.make_params({"memory": False})
    verdict = asyncio.run(verify_one(Claim("c1", "The Eiffel Tower is in Paris."), spec, llm,
                                     FakeSearcher({"Paris": ["Paris is in France."]}), params,
                                     spec.open_state(None, params, "x")))
    assert verdict.label is Label.SUPPORTED
    assert "Domain: architecture" in llm.of("mermaid.executor")[0].messages[1]["content"]
    assert "domain" in llm.of("mermaid.decomposer")[0].messages[0]["content"]
    assert [e for e in verdict.trace.events if e["kind"]
            == "mermaid.decomposition"][0]["domain"] == "architecture"


# -- MERMAID: the forced verdict after T_max is a switch ---------------------------------------------
@pytest.mark.parametrize("space, want", [(None, Label.NOT_ENOUGH_INFO), (BINARY, Label.REFUTED)])
def test_without_the_forced_verdict_t_max_ends_undecided_with_no_extra_call(space, want):
    spec = METHODS["mermaid"]
    search = lambda m: ReactStep(thought="t", action="search", argument="Paris", label=None,  # noqa: E731
                                 cited_passages=[])
    llm = ScriptedLLM(mermaid_script(search))
    params = spec.make_params({"memory": False, "forced_verdict": False, "t_max": 2})
    verdict = asyncio.run(verify_one(Claim("c1", "The Eiffel Tower is in Paris."), spec, llm,
                                     FakeSearcher({"Paris": ["Paris is in France."]}), params,
                                     spec.open_state(None, params, "x"), label_space=space))
    assert llm.count("mermaid.final") == 0 and llm.count("mermaid.executor") == 2
    assert verdict.label is want
    assert [e for e in verdict.trace.events if e["kind"] == "mermaid.no_verdict"] == [
        {"kind": "mermaid.no_verdict", "steps": 2, "t_max": 2}]
    assert spec.make_params({}).forced_verdict is True  # the default keeps the extra call


def test_observation_limits_and_the_forced_verdict_are_documented_settings():
    infos = {i.name: i for i in param_infos(METHODS["mermaid"].params_cls)}
    for name in ("search_k", "page_max_passages", "passage_max_words", "forced_verdict"):
        assert infos[name].help and infos[name].paper and "not stated" in infos[name].paper, name
    for name in ("search_k", "page_max_passages", "passage_max_words"):
        assert "observation limit" in infos[name].help


# -- MERMAID: memory in dataset order, one claim in flight -------------------------------------------
def _memory_executor(messages):
    """Finish at once when memory recalled the tower's passage, else open its page first."""
    if "Evidence recalled from memory" in messages[1]["content"]:
        return ReactStep(thought="recalled", action="finish", argument="", label="SUPPORTED",
                         cited_passages=[])
    if not any(m["role"] == "assistant" for m in messages):
        return ReactStep(thought="look", action="open_page", argument="Eiffel Tower", label=None,
                         cited_passages=[])
    return ReactStep(thought="seen", action="finish", argument="", label="SUPPORTED", cited_passages=[])


def _two_claims_at(concurrency: int, tmp_path: Path) -> list[dict]:
    spec = METHODS["mermaid"]
    out = tmp_path / f"c{concurrency}" / "results.jsonl"
    claims = [Claim("a", "The Eiffel Tower is in Paris."), Claim("b",
                                                                 "The Eiffel Tower was completed in 1889.")]
    asyncio.run(run_claims(claims, spec, ScriptedLLM(mermaid_script(_memory_executor)),
                           FakeSearcher({"Eiffel Tower": ["The Eiffel Tower is in Paris.",
                                                          "Completed in 1889."]}),
                           out, concurrency=concurrency, state_dir=out.parent))
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_one_claim_in_flight_lets_the_next_claim_reuse_the_evidence(tmp_path):
    one = _two_claims_at(1, tmp_path)
    assert [r["id"] for r in one] == ["a", "b"]
    assert one[1]["trace"]["memory_hits"] and one[1]["trace"]["summary"]["tool_calls"] == 0
    # claims in flight together cannot see each other's evidence: the trade-off the memory configs avoid
    two = {r["id"]: r for r in _two_claims_at(2, tmp_path)}
    assert two["b"]["trace"]["memory_hits"] == [] and two["b"]["trace"]["summary"]["tool_calls"] == 1


def test_dataset_order_keeps_the_sampled_claims_in_file_order(tmp_path):
    from veracity.bench.datasets import load_dataset

    path = tmp_path / "claims.jsonl"
    path.write_text("".join(json.dumps({"id": f"c{i}", "claim": f"Claim {i}.",
                                        "label": "SUPPORTED" if i % 2 else "REFUTED"})
                            + "\n" for i in range(20)))
    sampled = [c.id for c, _ in load_dataset(f"jsonl:{path}", limit=6, seed=1).claims]
    ordered = [c.id for c, _ in load_dataset(f"jsonl:{path}", limit=6, seed=1, order="dataset").claims]
    assert sorted(sampled) == sorted(ordered) and sampled != ordered
    assert ordered == sorted(ordered, key=lambda cid: int(cid[1:]))
    with pytest.raises(ConfigError, match="unknown run order"):
        RunConfig.of(dataset="hover", method="mermaid", order="shuffled")
    # old runs resume as before
    assert "order" not in RunConfig.of(dataset="hover", method="mermaid").identity()
    assert RunConfig.of(dataset="hover", method="mermaid", order="dataset").identity()["order"] == "dataset"
