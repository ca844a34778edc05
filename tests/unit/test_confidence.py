"""Verdict confidence: the label's probability from the engine's logprobs (arithmetic on a scripted endpoint),
each method's rule, abstention, and the calibration map."""

from __future__ import annotations

import asyncio
import json
import math
from typing import Literal

import httpx
import pytest
from pydantic import BaseModel

from tests.unit.scripted_llm import FakeSearcher, ScriptedLLM
from veracity.pipeline.confidence import ConfidenceRule, abstain, aggregate, to_labels
from veracity.pipeline.engine import Engine, verify_one
from veracity.pipeline.labels import BINARY, THREE_WAY
from veracity.pipeline.methods import get_method
from veracity.pipeline.types import Claim, Label, Trace, Verdict
from veracity.serving.client import LLMClient, usage_scope
from veracity.serving.confidence import TOP_LOGPROBS, allowed_values, label_probs, value_offset


class Judged(BaseModel):
    explanation: str
    label: Literal["SUPPORTED", "REFUTED", "NOT_ENOUGH_INFO"]


def tok(text: str, lp: float, alts: list[tuple[str, float]] = ()) -> dict:
    """One token of an OpenAI logprobs ``content`` list, with its alternatives."""
    return {"token": text, "logprob": lp, "bytes": list(text.encode()),
            "top_logprobs": [{"token": t, "logprob": v, "bytes": list(t.encode())} for t, v in alts]}


# a reply spelt by tokens; the label's divergence token is "SUP" with four alternatives, one of them not a
# label ("{"), two spelling SUPPORTED ("SUP" and "S"); a non-ASCII character earlier shifts bytes from chars
REPLY_TOKENS = [tok('{"', 0.0), tok("explanation", 0.0), tok('":"', 0.0), tok("Caf", -0.1), tok("é", -0.2),
                tok('","', 0.0), tok("label", 0.0), tok('":"', 0.0),
                tok("SUP", -0.2, [("SUP", -0.2), ("RE", -1.9), ("S", -2.5), ("NOT", -3.0), ("{", -4.0)]),
                tok("PORTED", 0.0), tok('", "cited_passages": []}', 0.0)]
REPLY = "".join(t["token"] for t in REPLY_TOKENS)


def expected_supported() -> float:
    s, r, n = math.exp(-0.2) + math.exp(-2.5), math.exp(-1.9), math.exp(-3.0)
    return s / (s + r + n)


def test_label_probability_is_the_divergence_tokens_alternatives_normalised_over_the_allowed_values():
    values = allowed_values(Judged, "label")
    assert values == ("SUPPORTED", "REFUTED", "NOT_ENOUGH_INFO")
    got = label_probs(REPLY, {"content": REPLY_TOKENS}, "label", values)
    assert got is not None and got.chosen == "SUPPORTED"
    assert got.probs["SUPPORTED"] == pytest.approx(expected_supported())
    assert got.probs["REFUTED"] == pytest.approx(math.exp(-1.9) / (math.exp(-0.2) + math.exp(-2.5)
                                                                   + math.exp(-1.9)
                                                                   + math.exp(-3.0)))
    assert sum(got.probs.values()) == pytest.approx(1.0)
    # the mass the allowed values held before normalising (the "{" alternative is not a label)
    assert got.mass == pytest.approx(math.exp(-0.2) + math.exp(-2.5) + math.exp(-1.9) + math.exp(-3.0))


def test_divergence_inside_a_token_that_also_holds_the_quote_and_a_shared_prefix():
    # values sharing a prefix ("NOT_" ...): the divergence point is after it; the token holding it starts with
    # the opening quote
    class Two(BaseModel):
        verdict: Literal["NOT_TRUE", "NOT_FALSE"]

    tokens = [tok('{"verdict": ', 0.0), tok('"NOT_', 0.0), tok('T', -0.1, [("T", -0.1), ("F", -2.3), ("TR",
                                                                                                      -3.0)]),
              tok('RUE"}', 0.0)]
    raw = "".join(t["token"] for t in tokens)
    got = label_probs(raw, {"content": tokens}, "verdict", ("NOT_TRUE", "NOT_FALSE"))
    t, f = math.exp(-0.1) + math.exp(-3.0), math.exp(-2.3)
    assert got is not None and got.probs["NOT_TRUE"] == pytest.approx(t / (t + f))


def test_no_number_when_the_tokens_do_not_spell_the_reply_or_the_field_is_absent():
    values = ("SUPPORTED", "REFUTED", "NOT_ENOUGH_INFO")
    assert label_probs(REPLY + "x", {"content": REPLY_TOKENS}, "label", values) is None
    # a reply whose trailing whitespace the server trimmed (llama-server) still reads
    assert label_probs(REPLY, {"content": [*REPLY_TOKENS, tok("\n", 0.0)]}, "label", values) is not None
    # tokens past the reply's end (llama-server: the reply text stops where the JSON does, the tokens go on)
    assert label_probs(REPLY, {"content": [*REPLY_TOKENS, tok("\n```", 0.0)]}, "label", values) is not None
    fenced = label_probs(REPLY, {"content": [tok("```json\n", 0.0), *REPLY_TOKENS, tok("\n```", 0.0)]},
                         "label", values)
    assert fenced is not None and fenced.probs["SUPPORTED"] == pytest.approx(expected_supported())
    assert label_probs(REPLY, None, "label", values) is None
    assert label_probs(REPLY, {"content": []}, "label", values) is None
    assert value_offset('{"a": {"label": "X"}, "label": "SUPPORTED"}', "label") == 32
    assert value_offset('{"a": "\\"label\\": \\"S"}', "label") is None
    assert value_offset('{"label": null}', "label") is None


class Endpoint:
    """An OpenAI-compatible endpoint that answers every completion with REPLY and, when asked, its
    logprobs."""

    def __init__(self, with_logprobs: bool = True, owned_by: str | None = None):
        self.with_logprobs = with_logprobs
        self.owned_by = owned_by
        self.bodies: list[dict] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/models"):
            entry = {"id": "m"} if self.owned_by is None else {"id": "m", "owned_by": self.owned_by}
            return httpx.Response(200, json={"data": [entry]})
        body = json.loads(request.content)
        self.bodies.append(body)
        choice = {"message": {"content": REPLY}, "finish_reason": "stop"}
        if body.get("logprobs") and self.with_logprobs:
            choice["logprobs"] = {"content": REPLY_TOKENS}
        return httpx.Response(200, json={"choices": [choice], "usage": {"prompt_tokens": 5,
                                                                        "completion_tokens": 9}})


def test_the_client_asks_for_logprobs_only_for_a_deciding_field_and_changes_nothing_else():
    server, said = Endpoint(), []

    async def go():
        async with LLMClient("http://fake:1", "m", transport=httpx.MockTransport(server),
                             notify=said.append) as llm:
            with usage_scope() as recs:
                await llm.generate([{"role": "user", "content": "x"}], Judged, role="r", seed=7)
                await llm.generate([{"role": "user", "content": "x"}], Judged, role="r", seed=7,
                                   confidence_field="label")
        return recs

    recs = asyncio.run(go())
    plain, asked = server.bodies
    assert "logprobs" not in plain and asked["logprobs"] is True and asked["top_logprobs"] == TOP_LOGPROBS
    assert {k: v for k, v in asked.items() if k not in ("logprobs", "top_logprobs")} == plain  # same sampling
    assert recs[0].label_probs is None
    assert recs[1].label_probs["probs"]["SUPPORTED"] == pytest.approx(expected_supported())
    assert said == []


@pytest.mark.parametrize("owned_by, asked", [("vllm", 5), ("llamacpp", TOP_LOGPROBS), (None, TOP_LOGPROBS)])
def test_vllm_which_masks_before_its_logprobs_is_asked_for_fewer_alternatives(owned_by, asked):
    # vLLM lists only allowed tokens at the label's position: the three values plus two spare tokenisations;
    # llama-server (and an engine that does not say) lists the model's own top tokens: ten
    server = Endpoint(owned_by=owned_by)

    async def go():
        async with LLMClient("http://fake:1", "m", transport=httpx.MockTransport(server)) as llm:
            with usage_scope() as recs:
                await llm.generate([{"role": "user", "content": "x"}], Judged, role="r",
                                   confidence_field="label")
        return recs, llm.masks_first

    recs, masks_first = asyncio.run(go())
    assert server.bodies[0]["top_logprobs"] == asked and masks_first is (owned_by == "vllm")
    assert recs[0].label_probs["probs"]["SUPPORTED"] == pytest.approx(expected_supported())


def test_an_endpoint_without_logprobs_gives_null_and_says_so_once():
    server, said = Endpoint(with_logprobs=False), []

    async def go():
        async with LLMClient("http://fake:1", "m", transport=httpx.MockTransport(server),
                             notify=said.append) as llm:
            with usage_scope() as recs:
                for _ in range(3):
                    await llm.generate([{"role": "user", "content": "x"}], Judged, role="r",
                                       confidence_field="label")
        return recs

    recs = asyncio.run(go())
    assert [r.label_probs for r in recs] == [None, None, None]
    assert len(said) == 1 and "no token logprobs" in said[0]


def test_rag_verdict_confidence_from_the_real_client_on_a_scripted_endpoint():
    server = Endpoint()
    spec = get_method("rag")

    async def go():
        async with LLMClient("http://fake:1", "m", transport=httpx.MockTransport(server)) as llm:
            return await verify_one(Claim("c1", "Paris is in France"), spec, llm,
                                    FakeSearcher({"Paris": ["Paris is the capital of France."]}),
                                    spec.make_params({"constrain_citations": False}))

    v = asyncio.run(go())
    assert v.label is Label.SUPPORTED and v.confidence == pytest.approx(expected_supported(), abs=1e-4)
    assert sum(v.label_probs.values()) == pytest.approx(1.0, abs=1e-5)
    d = v.to_dict()
    assert d["confidence"] == v.confidence and "abstained" not in d


def test_rules_map_values_and_the_binary_space_counts_undecided_as_refuted():
    assert to_labels({"True": 0.7, "False": 0.3}, BINARY, {"True": "SUPPORTED", "False": "REFUTED"}) == \
        pytest.approx({"SUPPORTED": 0.7, "REFUTED": 0.3})
    zofia = get_method("zofia").confidence
    assert to_labels({"R": 0.5, "F": 0.2, "I": 0.3}, BINARY, zofia.mapping) == pytest.approx(
        {"SUPPORTED": 0.5, "REFUTED": 0.5})
    assert to_labels({"R": 0.5, "F": 0.2, "I": 0.3}, THREE_WAY,
                     zofia.mapping)["NOT_ENOUGH_INFO"] == pytest.approx(0.3)

    class Rec:
        def __init__(self, role, probs):
            self.role, self.label_probs = role, ({"probs": probs} if probs else None)

    rule = ConfidenceRule(("mermaid.executor", "mermaid.final"))
    recs = [Rec("mermaid.executor", None), Rec("mermaid.executor", {"SUPPORTED": 0.6, "REFUTED": 0.4}),
            Rec("mermaid.decomposer", None)]
    assert rule.distribution(recs, BINARY) == pytest.approx({"SUPPORTED": 0.6, "REFUTED": 0.4})
    # the deciding call's reply never validated: no number, not an earlier call's
    assert rule.distribution([*recs, Rec("mermaid.final", None)], BINARY) is None


def test_trification_combines_its_judges_through_its_own_aggregation_rule():
    from veracity.pipeline.methods.trification.method import label_from_judges
    from veracity.pipeline.methods.trification.graph import NodeRun

    a = {"Supports": 0.9, "Refutes": 0.1, "Uncertain": 0.0}
    b = {"Supports": 0.6, "Refutes": 0.3, "Uncertain": 0.1}

    class J:
        def __init__(self, label):
            self.label, self.finished = label, 1

    def rule(values):
        return label_from_judges([J(v) for v in values], "REFUTED", "all_supported")

    got = aggregate([a, b], rule, BINARY)
    assert got["SUPPORTED"] == pytest.approx(0.9 * 0.6)  # all JUDGEs must support
    assert got["REFUTED"] == pytest.approx(1 - 0.54)
    assert NodeRun.__dataclass_fields__["label_probs"].default is None


def test_abstention_keeps_the_label_it_would_have_given():
    v = Verdict(Label.SUPPORTED, "x", trace=Trace(), confidence=0.62)
    abstain(v, None)
    assert v.label is Label.SUPPORTED and not v.abstained
    abstain(v, 0.8)
    assert v.label is Label.NOT_ENOUGH_INFO and v.abstained and v.abstained_label is Label.SUPPORTED
    assert v.to_dict()["abstained_label"] == "SUPPORTED"
    assert v.trace.events[-1]["kind"] == "confidence.abstained"
    sure = Verdict(Label.REFUTED, "x", trace=Trace(), confidence=0.95)
    abstain(sure, 0.8)
    assert sure.label is Label.REFUTED
    unknown = Verdict(Label.REFUTED, "x", trace=Trace(), confidence=None)
    abstain(unknown, 0.8)  # nothing to compare: left as it is
    assert unknown.label is Label.REFUTED and not unknown.abstained


def test_engine_abstains_below_min_confidence_with_a_scripted_distribution():
    llm = ScriptedLLM({"direct.judge": [{"explanation": "e", "label": "SUPPORTED"}] * 2},
                      probs=lambda role, reply: {"SUPPORTED": 0.55, "REFUTED": 0.25, "NOT_ENOUGH_INFO": 0.2})
    from veracity.pipeline.config import VerifierConfig

    eng = Engine(VerifierConfig.of(method="direct", min_confidence=0.7, calibration="off"), llm=llm)
    v = asyncio.run(eng.verify(Claim("c", "x"), llm))
    assert v.abstained and v.label is Label.NOT_ENOUGH_INFO and v.abstained_label is Label.SUPPORTED
    assert v.confidence == pytest.approx(0.55)
    eng = Engine(VerifierConfig.of(method="direct", calibration="off"), llm=llm)
    v = asyncio.run(eng.verify(Claim("c", "x"), llm))
    assert v.label is Label.SUPPORTED and v.confidence == pytest.approx(0.55)


# -- measurement and calibration over a bench run ---------------------------------------------------------
def _skewed_direct():
    """Alternating labels; SUPPORTED said with probability 0.9, REFUTED with 0.6 (so confidence ranks
    them)."""
    from veracity.pipeline.methods.direct import DirectJudgement

    n = {"i": 0}

    def reply(messages):
        n["i"] += 1
        return DirectJudgement(explanation="e", label="SUPPORTED" if n["i"] % 2 else "REFUTED")

    def probs(role, reply):
        return {"SUPPORTED": 0.9, "REFUTED": 0.1} if reply.label == "SUPPORTED" else {"SUPPORTED": 0.4,
                                                                                      "REFUTED": 0.6}

    return ScriptedLLM({"direct.judge": reply}, probs=probs)


def test_a_bench_run_reports_confidence_and_a_fitted_map_is_stored_applied_and_recorded(tmp_path):
    from tests.fixtures.index import missing, shared_data_dir
    from veracity.bench.run import RunConfig, bench_run
    from veracity.bench.calibrate import calibrate_runs
    from veracity.config import Settings

    data = shared_data_dir()
    if data is None or not (data / "hover").exists():
        missing("shared evaluation data (hover) not found")  # fails under CI
    settings = Settings(home=tmp_path / "home", data_dir=data)
    cfg = RunConfig.of(dataset="hover", method="direct", limit=8, seed=2, concurrency=1)
    metrics = bench_run(cfg, tmp_path / "dev", settings=settings, llm=_skewed_direct())
    conf = metrics["confidence"]
    assert conf["with_confidence"] == 8 and conf["without"] == 0 and "raw" not in conf
    m = conf["metrics"]
    assert set(m["accuracy_at"]) == {"100%", "80%", "60%"} and 0.0 <= m["ece"] <= 1.0
    assert m["accuracy_at"]["100%"] == pytest.approx(metrics["scores"]["accuracy"])
    report = (tmp_path / "dev" / "report.md").read_text()
    assert "## Confidence" in report and (tmp_path / "dev" / "coverage.png").exists()

    cmap, path, summary = calibrate_runs([tmp_path / "dev"], settings.home)
    assert path == settings.home / "models" / "scripted-llm" / "calibration" / "direct-binary.json"
    assert cmap.fitted_on["n"] == 8 and cmap.fitted_on["runs"][0]["seed"] == 2
    assert cmap.nll_after <= cmap.nll_before

    # the next run of that model, method and label space applies it and records it
    cfg2 = RunConfig.of(dataset="hover", method="direct", limit=4, seed=5, concurrency=1)
    bench_run(cfg2, tmp_path / "test", settings=settings, llm=_skewed_direct())
    run = json.loads((tmp_path / "test" / "run.json").read_text())
    assert run["manifest"]["confidence"]["calibration"]["temperature"] == cmap.temperature
    assert run["manifest"]["confidence"]["calibration"]["fitted_on"]["runs"][0]["seed"] == 2
    rows = [json.loads(x) for x in (tmp_path / "test" / "predictions.jsonl").read_text().splitlines()]
    for r in rows:
        want = cmap.apply(r["raw_label_probs"])[r["label"]]
        assert r["confidence"] == pytest.approx(want, abs=1e-4) and r["raw_confidence"] in (0.9, 0.6)
    # --calibration off: the model's own numbers
    cfg3 = RunConfig.of(dataset="hover", method="direct", limit=2, seed=5, concurrency=1, calibration="off")
    bench_run(cfg3, tmp_path / "off", settings=settings, llm=_skewed_direct())
    assert json.loads((tmp_path / "off"
                       / "run.json").read_text())["manifest"]["confidence"]["calibration"] is None


def test_selective_metrics_arithmetic():
    from veracity.bench.selective import accuracy_at, auroc, ece

    conf = [0.95, 0.9, 0.8, 0.7, 0.6]
    right = [True, True, False, True, False]
    assert accuracy_at(conf, right, 1.0) == pytest.approx(0.6)
    assert accuracy_at(conf, right, 0.6) == pytest.approx(2 / 3)  # the top 3
    assert auroc(conf, right) == pytest.approx(5 / 6)  # right above wrong in 5 of the 6 pairs
    assert auroc([0.5, 0.5], [True, False]) == pytest.approx(0.5)
    # two bins: [0.6, 0.7) holds 0.6 (wrong), ... each bin |acc - conf| weighted by its share
    assert ece([0.95, 0.15], [True, False]) == pytest.approx(0.5 * 0.05 + 0.5 * 0.15)


def test_temperature_fit_and_scale():
    from veracity.pipeline.calibration import fit_temperature, scale

    assert scale({"A": 0.8, "B": 0.2}, 1.0) == pytest.approx({"A": 0.8, "B": 0.2})
    flat = scale({"A": 0.8, "B": 0.2}, 2.0)
    assert flat["A"] == pytest.approx(math.sqrt(0.8) / (math.sqrt(0.8) + math.sqrt(0.2)))
    # over-confident: 0.9 said, right 60 % of the time -> T > 1 brings it towards 0.6
    rows = [({"A": 0.9, "B": 0.1}, "A")] * 6 + [({"A": 0.9, "B": 0.1}, "B")] * 4
    t = fit_temperature(rows)
    assert t > 1 and scale({"A": 0.9, "B": 0.1}, t)["A"] == pytest.approx(0.6, abs=0.01)


def test_check_lists_unsure_claims_apart_with_their_grounding():
    from rich.console import Console

    from veracity.check.render import render_text
    from veracity.check.run import uncertain_claims

    claims = [{"id": "a", "text": "Sure claim.", "category": "factual", "label": "SUPPORTED", "evidence": [],
               "confidence": 0.95},
              {"id": "b", "text": "Unsure claim.", "category": "factual", "label": "REFUTED", "evidence": [],
               "confidence": 0.41, "grounding": "ungrounded"},
              {"id": "c", "text": "Abstained claim.", "category": "factual", "label": "NOT_ENOUGH_INFO",
               "evidence": [],
               "confidence": 0.62, "abstained": True, "abstained_label": "SUPPORTED"},
              {"id": "d", "text": "No number.", "category": "factual", "label": "SUPPORTED", "evidence": [],
               "confidence": None}]
    sentences = [{"index": 0, "start": 0, "end": 10, "text": "S.", "verdict": "REFUTED", "claims": claims}]
    unsure = uncertain_claims(sentences)
    assert [(u["n"], u["label"], u["abstained"]) for u in unsure] == [(2, "REFUTED", False), (3, "SUPPORTED",
                                                                                              True)]
    record = {"id": "t", "method": "rag", "sentences": sentences,
              "summary": {"counts": {"SUPPORTED": 2, "REFUTED": 1, "NOT_ENOUGH_INFO": 1, "failed": 0},
                          "no_factual_claim": False, "factual_precision": 0.5, "sentences": 1, "claims": 4,
                          "categories": {"factual": 4, "opinion": 0, "not_a_claim": 0}, "fallbacks": {},
                          "uncertain": unsure, "uncertain_below": 0.7}}
    con = Console(width=200, record=True)
    con.print(render_text(record))
    out = con.export_text()
    assert "Uncertain (2: abstained, or confidence below 0.70):" in out
    assert "2. Unsure claim.  (REFUTED, confidence 0.41, ungrounded)" in out
    assert "3. Abstained claim.  (abstained, would say SUPPORTED, confidence 0.62)" in out


def test_an_ungrounded_verdict_with_a_low_confidence_shows_both_in_the_panel_the_batch_line_and_the_report():
    """Issue 43 point 5: where the quote check says ``ungrounded`` and the model was unsure, each view says
    both
    (the terminal panel's verdict line, a batch line, the long-form check's HTML claim line)."""
    from rich.console import Console

    from veracity.check.render import report_html
    from veracity.cli.verify import render_verdict, verdict_line

    v = Verdict(Label.REFUTED, "The passage does not say so.", trace=Trace(), method="rag", confidence=0.41,
                quotes=[], grounding="ungrounded")
    record = json.loads(json.dumps(v.to_dict(Claim("c", "The Amazon River flows into the Pacific Ocean."))))
    assert record["grounding"] == "ungrounded" and record["confidence"] == pytest.approx(0.41)
    console = Console(record=True, width=200, color_system=None)
    console.print(render_verdict(record))
    verdict_row = next(line for line in console.export_text().splitlines() if "Verdict: REFUTED" in line)
    assert "confidence 0.41" in verdict_row and "ungrounded: a quote is not in its passage" in verdict_row
    line = verdict_line(record, None).plain
    assert "confidence 0.41" in line and "ungrounded" in line
    html = report_html({"id": "t", "method": "rag", "text": "S.", "sentences": [], "summary": {
        "counts": {"SUPPORTED": 0, "REFUTED": 1, "NOT_ENOUGH_INFO": 0,
                   "failed": 0}, "no_factual_claim": False,
        "factual_precision": 0.0, "sentences": 0, "claims": 0, "categories": {"factual": 0, "opinion": 0,
                                                                                 "not_a_claim": 0},
        "fallbacks": {}, "uncertain": [], "uncertain_below": 0.7}})
    # the report's claim line adds the confidence (with "uncertain" below the bar) and "ungrounded" side by
    # side
    assert "' confidence '+c.confidence.toFixed(2)" in html and "' ungrounded'" in html
