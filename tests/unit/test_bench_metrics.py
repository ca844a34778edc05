"""Metrics against cases worked out by hand (the arithmetic is in the comments) and against scikit-learn."""

from __future__ import annotations

import random

import pytest

from tests.fixtures.index import need_module

from veracity.bench.metrics import (
    accuracy,
    claim_latency,
    confusion_matrix,
    efficiency_summary,
    evaluate,
    macro_f1,
    nei_rate,
    orig_label_breakdown,
    per_class,
    weighted_f1,
)
from veracity.pipeline.types import Label

S, R, N = Label.SUPPORTED, Label.REFUTED, Label.NOT_ENOUGH_INFO


# Binary dataset, one NOT_ENOUGH_INFO prediction (counted as wrong):
#   idx   0 1 2 3   4 5
#   gold  S S S S   R R
#   pred  S S R NEI R S
# SUPPORTED: TP = 2 (idx 0,1), support 4, predicted S = 3 (idx 0,1,5)
#   P = 2/3, R = 2/4 = 1/2, F1 = 2*(1/3)/(7/6) = 4/7
# REFUTED:   TP = 1 (idx 4), support 2, predicted R = 2 (idx 2,4)
#   P = 1/2, R = 1/2, F1 = 1/2
# accuracy = 3/6 = 1/2 (the NEI prediction is wrong)
# macro-F1 = (4/7 + 1/2) / 2 = 15/28
# weighted-F1 = (4/7*4 + 1/2*2) / 6 = (16/7 + 7/7) / 6 = 23/42
# NEI rate = 1/6
BIN_GOLD = [S, S, S, S, R, R]
BIN_PRED = [S, S, R, N, R, S]


def test_binary_with_nei_prediction_by_hand():
    sc = evaluate(BIN_GOLD, BIN_PRED, labels=(S, R))
    assert sc.n == 6
    assert sc.labels == [S, R]
    assert sc.accuracy == pytest.approx(1 / 2)
    assert sc.per_class[S].precision == pytest.approx(2 / 3)
    assert sc.per_class[S].recall == pytest.approx(1 / 2)
    assert sc.per_class[S].f1 == pytest.approx(4 / 7)
    assert sc.per_class[S].support == 4 and sc.per_class[S].predicted == 3
    assert sc.per_class[R].precision == pytest.approx(1 / 2)
    assert sc.per_class[R].recall == pytest.approx(1 / 2)
    assert sc.per_class[R].f1 == pytest.approx(1 / 2)
    assert sc.macro_f1 == pytest.approx(15 / 28)
    assert sc.weighted_f1 == pytest.approx(23 / 42)
    assert sc.nei_rate == pytest.approx(1 / 6)
    assert sc.out_of_set == 1
    # NEI is not a class of the dataset: no per-class row, but an extra confusion column
    assert N not in sc.per_class
    assert sc.confusion_labels == [S, R, N]
    #            pred S  R  NEI
    assert sc.confusion == [[2, 1, 1],   # gold S
                            [1, 1, 0],   # gold R
                            [0, 0, 0]]   # gold NEI (none on a binary set)


# Three-way dataset:
#   idx   0 1 2 3 4 5 6
#   gold  S R N N S R N
#   pred  S N N S S R R
# S: TP 2 (0,4), support 2, predicted 3 (0,3,4) -> P 2/3, R 1, F1 = 2*(2/3)/(5/3) = 4/5
# R: TP 1 (5), support 2 (1,5), predicted 2 (5,6) -> P 1/2, R 1/2, F1 1/2
# N: TP 1 (2), support 3 (2,3,6), predicted 2 (1,2) -> P 1/2, R 1/3, F1 = 2*(1/6)/(5/6) = 2/5
# accuracy 4/7 (0,2,4,5); macro (4/5 + 1/2 + 2/5)/3 = 17/30; weighted (4/5*2 + 1/2*2 + 2/5*3)/7 = 3.8/7 =
# 19/35
# NEI rate 2/7
TRI_GOLD = [S, R, N, N, S, R, N]
TRI_PRED = [S, N, N, S, S, R, R]


def test_three_way_by_hand():
    sc = evaluate(TRI_GOLD, TRI_PRED)  # labels default to the gold labels present
    assert sc.labels == [S, R, N]
    assert sc.accuracy == pytest.approx(4 / 7)
    assert [sc.per_class[x].f1 for x in (S, R, N)] == pytest.approx([4 / 5, 1 / 2, 2 / 5])
    assert [sc.per_class[x].precision for x in (S, R, N)] == pytest.approx([2 / 3, 1 / 2, 1 / 2])
    assert [sc.per_class[x].recall for x in (S, R, N)] == pytest.approx([1, 1 / 2, 1 / 3])
    assert sc.macro_f1 == pytest.approx(17 / 30)
    assert sc.weighted_f1 == pytest.approx(19 / 35)
    assert sc.nei_rate == pytest.approx(2 / 7)
    assert sc.out_of_set == 0
    assert sc.confusion == [[2, 0, 0],
                            [0, 1, 1],
                            [1, 1, 1]]
    # the pieces agree with the one-shot evaluation
    scores = per_class(TRI_GOLD, TRI_PRED, [S, R, N])
    assert macro_f1(scores) == pytest.approx(17 / 30)
    assert weighted_f1(scores) == pytest.approx(19 / 35)
    assert accuracy(TRI_GOLD, TRI_PRED) == pytest.approx(4 / 7)
    assert nei_rate(TRI_PRED) == pytest.approx(2 / 7)


def test_confusion_matrix_follows_the_given_label_order():
    # order (R, S): gold R predicted S happens once (idx 5 of the binary case), gold S predicted R once
    m = confusion_matrix(BIN_GOLD, BIN_PRED, [R, S])
    assert m == [[1, 1],   # gold R: pred R (idx 4), pred S (idx 5)
                 [1, 2]]   # gold S: pred R (idx 2), pred S (idx 0,1); the NEI prediction is outside [R, S]


def test_zero_division_gives_zero():
    # gold all S, pred all R: S is never predicted (P = 0/0 -> 0), R has no support (R = 0/0 -> 0)
    sc = evaluate([S, S], [R, R], labels=[S, R])
    assert sc.accuracy == 0.0
    assert sc.per_class[S].precision == 0.0 and sc.per_class[S].recall == 0.0 and sc.per_class[S].f1 == 0.0
    assert sc.per_class[R].precision == 0.0 and sc.per_class[R].recall == 0.0 and sc.per_class[R].f1 == 0.0
    assert sc.macro_f1 == 0.0 and sc.weighted_f1 == 0.0
    empty = evaluate([], [], labels=[S, R])
    assert empty.accuracy == 0.0 and empty.macro_f1 == 0.0 and empty.nei_rate == 0.0 and empty.n == 0


def test_all_nei_predictions_on_binary_set():
    sc = evaluate([S, R, R], [N, N, N], labels=[S, R])
    assert sc.accuracy == 0.0 and sc.nei_rate == 1.0 and sc.out_of_set == 3
    assert sc.per_class[S].recall == 0.0 and sc.per_class[R].recall == 0.0
    assert sc.confusion == [[0, 0, 1], [0, 0, 2], [0, 0, 0]]


def test_strings_accepted_and_bad_input_rejected():
    sc = evaluate(["SUPPORTED", "REFUTED"], ["SUPPORTED", "SUPPORTED"], labels=["SUPPORTED", "REFUTED"])
    assert sc.accuracy == 0.5 and sc.per_class[S].precision == 0.5
    with pytest.raises(ValueError, match="2 gold labels but 1 predictions"):
        evaluate([S, R], [S])
    with pytest.raises(ValueError, match="not a label"):
        evaluate([S], ["TRUE"])
    with pytest.raises(ValueError, match="outside the label set"):
        evaluate([S, N], [S, S], labels=[S, R])


def test_to_dict_is_json_ready():
    import json

    d = evaluate(BIN_GOLD, BIN_PRED, labels=(S, R)).to_dict()
    text = json.dumps(d)
    assert d["labels"] == ["SUPPORTED", "REFUTED"]
    assert d["confusion"]["labels"] == ["SUPPORTED", "REFUTED", "NOT_ENOUGH_INFO"]
    assert d["per_class"]["REFUTED"]["f1"] == pytest.approx(0.5)
    assert "NOT_ENOUGH_INFO" not in d["per_class"] and "macro_f1" in text


def test_orig_label_breakdown():
    # LIAR-style: six ratings, binary predictions
    orig = ["half-true", "true", "half-true", "pants-fire"]
    pred = [R, S, S, N]
    assert orig_label_breakdown(orig, pred) == {
        "half-true": {"SUPPORTED": 1, "REFUTED": 1},
        "true": {"SUPPORTED": 1},
        "pants-fire": {"NOT_ENOUGH_INFO": 1},
    }


def test_matches_sklearn_on_random_predictions():
    need_module("sklearn.metrics", "pip install scikit-learn")
    import sklearn.metrics as skm
    rng = random.Random(7)
    for labels in ([S, R], [S, R, N]):
        gold = [rng.choice(labels) for _ in range(300)]
        pred = [rng.choice([S, R, N]) for _ in range(300)]  # NEI also on the binary set
        sc = evaluate(gold, pred, labels=labels)
        g = [x.value for x in gold]
        p = [x.value for x in pred]
        lv = [x.value for x in labels]
        assert sc.accuracy == pytest.approx(skm.accuracy_score(g, p))
        assert sc.macro_f1 == pytest.approx(skm.f1_score(g, p, labels=lv, average="macro", zero_division=0))
        assert sc.weighted_f1 == pytest.approx(skm.f1_score(g, p, labels=lv, average="weighted",
                                                            zero_division=0))
        prec, rec, f1, sup = skm.precision_recall_fscore_support(g, p, labels=lv, zero_division=0)
        for i, lab in enumerate(labels):
            assert sc.per_class[lab].precision == pytest.approx(prec[i])
            assert sc.per_class[lab].recall == pytest.approx(rec[i])
            assert sc.per_class[lab].f1 == pytest.approx(f1[i])
            assert sc.per_class[lab].support == sup[i]
        all_lv = [x.value for x in sc.confusion_labels]
        assert sc.confusion == skm.confusion_matrix(g, p, labels=all_lv).tolist()


def _result(llm, pt, ct, tools, latency=None, timings=None):
    r = {"trace": {"summary": {"llm_calls": llm, "prompt_tokens": pt, "completion_tokens": ct,
                               "tool_calls": tools, "memory_hits": 0},
                   "timings": timings or {}}}
    if latency is not None:
        r["latency_s"] = latency
    return r


def test_efficiency_summary_by_hand():
    results = [
        _result(4, 1000, 200, 3, latency=2.0),
        _result(6, 1500, 300, 5, timings={"total_s": 4.0}),  # latency from trace.timings
        _result(2, 500, 100, 1, latency=6.0),
    ]
    eff = efficiency_summary(results, wall_time_s=30.0)
    # LLM calls (4+6+2)/3 = 4; tokens (1200+1800+600)/3 = 1200; tool calls (3+5+1)/3 = 3
    assert eff["claims"] == 3
    assert eff["llm_calls_per_claim"] == pytest.approx(4.0)
    assert eff["tokens_per_claim"] == pytest.approx(1200.0)
    assert eff["prompt_tokens_per_claim"] == pytest.approx(1000.0)
    assert eff["completion_tokens_per_claim"] == pytest.approx(200.0)
    assert eff["tool_calls_per_claim"] == pytest.approx(3.0)
    # latencies 2, 4, 6: mean 4, p50 4, p95 = 4 + (6-4)*0.9 = 5.8 (linear interpolation, pos 1.9)
    assert eff["latency_mean_s"] == pytest.approx(4.0)
    assert eff["latency_p50_s"] == pytest.approx(4.0)
    assert eff["latency_p95_s"] == pytest.approx(5.8)
    # 3 claims in 30 s -> 6 claims/min
    assert eff["wall_time_s"] == 30.0 and eff["claims_per_min"] == pytest.approx(6.0)
    # without the run's wall time, the latencies are summed (sequential run): 12 s -> 15 claims/min
    seq = efficiency_summary(results)
    assert seq["wall_time_s"] == pytest.approx(12.0) and seq["claims_per_min"] == pytest.approx(15.0)
    assert seq["wall_time_source"] == "sum of claim latencies"


def test_efficiency_summary_empty_and_missing_fields():
    assert efficiency_summary([])["llm_calls_per_claim"] == 0.0
    assert efficiency_summary([])["claims_per_min"] == 0.0
    eff = efficiency_summary([{"trace": {}}, {}])
    assert eff["claims"] == 2 and eff["tokens_per_claim"] == 0.0 and eff["latency_mean_s"] == 0.0
    assert claim_latency({"trace": {"timings": {"wall_s": 1.5}}}) == 1.5
    assert claim_latency({"trace": {"timings": {"search": 1.0}}}) is None


def test_bootstrap_interval_brackets_the_score_and_narrows_with_n():
    from veracity.bench.metrics import bootstrap_ci

    S, R = Label.SUPPORTED, Label.REFUTED
    gold = [S, R] * 10
    pred = [S, R] * 7 + [R, S] * 3  # 14 of 20 right
    ci = bootstrap_ci(gold, pred, resamples=500, seed=1)
    assert ci["accuracy"][0] < 0.7 < ci["accuracy"][1]
    assert 0.4 < ci["accuracy"][0] and ci["accuracy"][1] < 0.95
    assert ci == bootstrap_ci(gold, pred, resamples=500, seed=1)  # seeded: reproducible
    big = bootstrap_ci(gold * 10, pred * 10, resamples=500, seed=1)
    assert big["accuracy"][1] - big["accuracy"][0] < ci["accuracy"][1] - ci["accuracy"][0]
    perfect = bootstrap_ci(gold, gold, resamples=100)
    assert perfect["accuracy"] == [1.0, 1.0] and perfect["macro_f1"] == [1.0, 1.0]


def test_majority_baseline_and_reply_reliability():
    from veracity.bench.metrics import majority_baseline, reply_reliability

    S, R = Label.SUPPORTED, Label.REFUTED
    base = majority_baseline([S, S, S, R], labels=[S, R])
    assert base["label"] == "SUPPORTED" and base["accuracy"] == 0.75
    assert abs(base["macro_f1"] - (6 / 7) / 2) < 1e-9  # F1 of SUPPORTED 2*0.75/(1.75); REFUTED 0
    results = [
        {"trace": {"events": [{"kind": "emulate.agent_failed", "role": "emulate.classifier", "fallback": "x"},
                              {"kind": "emulate.agent_failed", "role": "emulate.classifier",
                               "fallback": "x"}]}},
        {"trace": {"events": [{"kind": "label_space.forced"}]}},
        {"trace": {}},
        {},
    ]
    rel = reply_reliability(results)
    assert rel == {"invalid_replies": 2, "claims_with_fallback": 1, "fallback_rate": 0.25,
                   "by_role": {"emulate.classifier": 2}}


# -- every reply that never validated is counted, whichever path a method takes after it -------------------
async def test_invalid_replies_count_left_out_zofia_agents_and_trification_plans_and_judges():
    """`invalid_replies` counts trace events that carry `fallback`. ZoFia's agents left out of the pool, a
    Trification plan whose reply did not validate and a Trification JUDGE whose reply did not validate once
    traced no `fallback`, so the quality tables said 0 invalid replies for runs that had some."""
    from tests.unit import test_trification as tri
    from tests.unit import test_zofia as zof
    from tests.unit.scripted_llm import ScriptedLLM
    from veracity.bench.metrics import reply_reliability
    from veracity.errors import LLMOutputError
    from veracity.pipeline.methods.trification.method import verify_trification
    from veracity.pipeline.methods.zofia import verify_zofia
    from veracity.pipeline.types import Claim

    def bad(role):
        return lambda messages, model, i: LLMOutputError(f"{role}: the reply did not validate", role=role)

    llm = ScriptedLLM(zof.scripted(**{"zofia.linguist": bad("zofia.linguist")}), repeat_last=True)
    ctx, _ = zof.make_ctx(llm)
    await verify_zofia(Claim("z", zof.ARTICLE), ctx)
    rel = reply_reliability([{"trace": {"events": ctx.trace.events}}])
    assert (rel["by_role"] == {"zofia.linguist": 1} and rel["invalid_replies"] == 1
            and rel["fallback_rate"] == 1.0)

    plans = [LLMOutputError("trification.planner: the reply did not validate", role="trification.planner"),
             tri.GRAPH]
    h = tri.handlers(planner=plans)
    h["trification.judge"] = bad("trification.judge")
    ctx = tri.make_ctx(ScriptedLLM(h, repeat_last=True), static=True)
    await verify_trification(Claim("t",
                                   "Gustave Eiffel's company built the Eiffel Tower. It was completed in "
                                   "1889."), ctx)
    rel = reply_reliability([{"trace": {"events": ctx.trace.events}}])
    assert rel["by_role"] == {"trification.planner": 1,
                              "trification.judge": 1} and rel["invalid_replies"] == 2
