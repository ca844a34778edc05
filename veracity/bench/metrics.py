"""Scores of a benchmark run: classification metrics and an efficiency summary. Plain Python.

Conventions
- ``labels`` is the dataset's label set (``Dataset.labels``), e.g. (SUPPORTED, REFUTED) for a binary
  set. Per-class precision / recall / F1 and the macro / weighted averages are computed over these
  labels only.
- A prediction outside ``labels`` — NOT_ENOUGH_INFO on a binary dataset — is counted as wrong: it lowers
  accuracy and the recall of the gold class, and is a false positive for no class of the dataset
  (the same as scikit-learn's ``labels=[...]`` argument). It still appears in the confusion matrix (as
  an extra column) and in ``nei_rate``.
- Any ratio with a zero denominator is 0.0 (precision of a never-predicted class, F1 with P = R = 0, ...).
- Weighted-F1 weights each class's F1 by its gold support (the number of gold claims with that label).
"""

from __future__ import annotations

import random
import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from veracity.pipeline.types import Label


def _as_label(value: Label | str) -> Label:
    if isinstance(value, Label):
        return value
    try:
        return Label(str(value))
    except ValueError:
        raise ValueError(f"not a label: {value!r} "
                         f"(expected one of {', '.join(lab.value for lab in Label)})") from None


def _div(num: float, den: float) -> float:
    return num / den if den else 0.0


def _ordered(labels: Iterable[Label]) -> list[Label]:
    """Labels in Label enum order (SUPPORTED, REFUTED, NOT_ENOUGH_INFO), without duplicates."""
    present = set(labels)
    return [lab for lab in Label if lab in present]


def accuracy(gold: Sequence[Label | str], pred: Sequence[Label | str]) -> float:
    _check_lengths(gold, pred)
    return _div(sum(_as_label(g) == _as_label(p) for g, p in zip(gold, pred, strict=True)), len(gold))


def confusion_matrix(gold: Sequence[Label | str], pred: Sequence[Label | str],
                     labels: Sequence[Label | str]) -> list[list[int]]:
    """``m[i][j]`` = number of claims with gold ``labels[i]`` predicted as ``labels[j]``.

    Pairs whose gold or predicted label is not in ``labels`` are not counted; pass every label that
    occurs (see :func:`evaluate`) to see all of them.
    """
    _check_lengths(gold, pred)
    order = [_as_label(lab) for lab in labels]
    index = {lab: i for i, lab in enumerate(order)}
    m = [[0] * len(order) for _ in order]
    for g, p in zip(gold, pred, strict=True):
        gi, pj = index.get(_as_label(g)), index.get(_as_label(p))
        if gi is not None and pj is not None:
            m[gi][pj] += 1
    return m


@dataclass
class ClassScores:
    precision: float
    recall: float
    f1: float
    support: int  # gold claims with this label
    predicted: int  # claims predicted as this label

    def to_dict(self) -> dict[str, Any]:
        return {"precision": self.precision, "recall": self.recall, "f1": self.f1,
                "support": self.support, "predicted": self.predicted}


def per_class(gold: Sequence[Label | str], pred: Sequence[Label | str],
              labels: Sequence[Label | str]) -> dict[Label, ClassScores]:
    """Precision, recall and F1 of each label in ``labels`` (one-vs-rest counts)."""
    _check_lengths(gold, pred)
    g = [_as_label(x) for x in gold]
    p = [_as_label(x) for x in pred]
    out: dict[Label, ClassScores] = {}
    for lab in (_as_label(x) for x in labels):
        tp = sum(1 for a, b in zip(g, p, strict=True) if a == lab and b == lab)
        support = sum(1 for a in g if a == lab)
        predicted = sum(1 for b in p if b == lab)
        precision = _div(tp, predicted)
        recall = _div(tp, support)
        out[lab] = ClassScores(precision, recall, _div(2 * precision * recall, precision + recall), support,
                               predicted)
    return out


def macro_f1(scores: Mapping[Label, ClassScores]) -> float:
    return _div(sum(s.f1 for s in scores.values()), len(scores))


def weighted_f1(scores: Mapping[Label, ClassScores]) -> float:
    return _div(sum(s.f1 * s.support for s in scores.values()), sum(s.support for s in scores.values()))


def nei_rate(pred: Sequence[Label | str]) -> float:
    """Share of predictions that are NOT_ENOUGH_INFO."""
    return _div(sum(_as_label(p) == Label.NOT_ENOUGH_INFO for p in pred), len(pred))


@dataclass
class Scores:
    """All classification metrics of one run; ``to_dict`` is what reports and JSON output print."""

    n: int
    labels: list[Label]  # the dataset's label set: per-class rows and averages
    accuracy: float
    per_class: dict[Label, ClassScores]
    macro_f1: float
    weighted_f1: float
    nei_rate: float
    out_of_set: int  # predictions outside ``labels`` (e.g. NOT_ENOUGH_INFO on a binary set), all wrong
    confusion_labels: list[Label] = field(default_factory=list)  # rows = gold, columns = predicted
    confusion: list[list[int]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "labels": [lab.value for lab in self.labels],
            "accuracy": self.accuracy,
            "macro_f1": self.macro_f1,
            "weighted_f1": self.weighted_f1,
            "nei_rate": self.nei_rate,
            "out_of_set_predictions": self.out_of_set,
            "per_class": {lab.value: s.to_dict() for lab, s in self.per_class.items()},
            "confusion": {"labels": [lab.value for lab in self.confusion_labels], "matrix": self.confusion},
        }


def evaluate(gold: Sequence[Label | str], pred: Sequence[Label | str],
             labels: Sequence[Label | str] | None = None) -> Scores:
    """Every classification metric at once.

    ``labels`` defaults to the gold labels that occur. The confusion matrix covers ``labels`` plus any
    other predicted label (in Label order) so NOT_ENOUGH_INFO predictions on a binary set stay visible.
    A gold label outside ``labels`` is a ValueError (the dataset and its label set disagree).
    """
    _check_lengths(gold, pred)
    g = [_as_label(x) for x in gold]
    p = [_as_label(x) for x in pred]
    label_set = _ordered(_as_label(x) for x in labels) if labels is not None else _ordered(g)
    stray = sorted({x.value for x in g} - {lab.value for lab in label_set})
    if stray:
        raise ValueError(f"gold labels {stray} are outside the label set {[lab.value for lab in label_set]}")
    scores = per_class(g, p, label_set)
    matrix_labels = _ordered([*label_set, *p])
    return Scores(
        n=len(g),
        labels=label_set,
        accuracy=accuracy(g, p),
        per_class=scores,
        macro_f1=macro_f1(scores),
        weighted_f1=weighted_f1(scores),
        nei_rate=nei_rate(p),
        out_of_set=sum(1 for x in p if x not in label_set),
        confusion_labels=matrix_labels,
        confusion=confusion_matrix(g, p, matrix_labels),
    )


def bootstrap_ci(gold: Sequence[Label | str], pred: Sequence[Label | str],
                 labels: Sequence[Label | str] | None = None,
                 *, resamples: int = 1000, seed: int = 0, level: float = 0.95) -> dict[str, list[float]]:
    """Percentile bootstrap intervals of accuracy and macro-F1: ``resamples`` samples of the claims drawn
    with replacement (seeded, so a report is reproducible), the ``level`` central interval of each.

    On the small samples a CPU can run (tens of claims) these intervals are wide; they are printed so a
    difference between two methods is not read into noise."""
    _check_lengths(gold, pred)
    g = [_as_label(x) for x in gold]
    p = [_as_label(x) for x in pred]
    n = len(g)
    if n == 0:
        return {"accuracy": [0.0, 0.0], "macro_f1": [0.0, 0.0], "level": level, "resamples": 0}
    label_set = _ordered(_as_label(x) for x in labels) if labels is not None else _ordered(g)
    rng = random.Random(seed)
    accs, f1s = [], []
    for _ in range(resamples):
        idx = [rng.randrange(n) for _ in range(n)]
        gs, ps = [g[i] for i in idx], [p[i] for i in idx]
        accs.append(accuracy(gs, ps))
        f1s.append(macro_f1(per_class(gs, ps, label_set)))
    lo, hi = (1 - level) / 2 * 100, (1 + level) / 2 * 100
    return {"accuracy": [_percentile(accs, lo), _percentile(accs, hi)],
            "macro_f1": [_percentile(f1s, lo), _percentile(f1s, hi)], "level": level, "resamples": resamples}


def majority_baseline(gold: Sequence[Label | str], labels: Sequence[Label | str] | None = None) -> dict[str,
                                                                                                        Any]:
    """Accuracy and macro-F1 of always answering the sample's most frequent gold label (ties: Label order):
    the floor a method has to clear on that sample."""
    g = [_as_label(x) for x in gold]
    if not g:
        return {"label": None, "accuracy": 0.0, "macro_f1": 0.0}
    label_set = _ordered(_as_label(x) for x in labels) if labels is not None else _ordered(g)
    counts = Counter(g)
    top = max(_ordered(g), key=lambda lab: counts[lab])
    p = [top] * len(g)
    return {"label": top.value, "accuracy": accuracy(g, p), "macro_f1": macro_f1(per_class(g, p, label_set))}


def reply_reliability(results: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """How often a role's reply failed to validate and its declared fallback stood in (trace events
    carrying ``fallback``), per claim and in all: the client's zero-parse-failure contract, measured."""
    n = len(results)
    events = [[e for e in ((r.get("trace") or {}).get("events") or []) if isinstance(e,
                                                                                     Mapping)
               and "fallback" in e]
              for r in results]
    by_role: Counter[str] = Counter()
    for evs in events:
        for e in evs:
            by_role[str(e.get("role") or e.get("agent") or e.get("kind"))] += 1
    with_fallback = sum(1 for evs in events if evs)
    return {"invalid_replies": sum(by_role.values()), "claims_with_fallback": with_fallback,
            "fallback_rate": _div(with_fallback, n), "by_role": dict(by_role.most_common())}


def orig_label_breakdown(orig_labels: Sequence[Any], pred: Sequence[Label | str]) -> dict[str, dict[str,
                                                                                                    int]]:
    """How each original (fine-grained) label was predicted, e.g. LIAR's six ratings or BingCheck's
    "partially supported": ``{orig: {predicted Label value: count}}``, originals in first-seen order."""
    _check_lengths(orig_labels, pred)
    out: dict[str, Counter[str]] = {}
    for o, p in zip(orig_labels, pred, strict=True):
        out.setdefault(str(o), Counter())[_as_label(p).value] += 1
    return {o: {lab.value: c[lab.value] for lab in Label if c[lab.value]} for o, c in out.items()}


def _check_lengths(a: Sequence[Any], b: Sequence[Any]) -> None:
    if len(a) != len(b):
        raise ValueError(f"{len(a)} gold labels but {len(b)} predictions")


# --------------------------------------------------------------------------------------------------
# Efficiency
# --------------------------------------------------------------------------------------------------

_LATENCY_KEYS = ("latency_s", "wall_s", "total_s", "total")


def claim_latency(result: Mapping[str, Any]) -> float | None:
    """Seconds one claim took: ``result["latency_s"]``, else ``trace.timings`` "total_s" / "wall_s" /
    "total"."""
    if isinstance(result.get("latency_s"), (int, float)):
        return float(result["latency_s"])
    timings = (result.get("trace") or {}).get("timings") or {}
    for key in _LATENCY_KEYS:
        if isinstance(timings.get(key), (int, float)):
            return float(timings[key])
    return None


def _percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default), q in [0, 100]."""
    xs = sorted(values)
    if not xs:
        return 0.0
    pos = (len(xs) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def efficiency_summary(results: Sequence[Mapping[str, Any]], wall_time_s: float | None = None) -> dict[str,
                                                                                                       Any]:
    """Cost of a run from its result dicts (each with ``trace.summary``: llm_calls, prompt_tokens,
    completion_tokens, tool_calls [, memory_hits]).

    Per-claim means of LLM calls, tokens (prompt + completion) and tool calls; per-claim latency
    (mean / p50 / p95, from :func:`claim_latency`, over the claims that report one); ``wall_time_s`` is
    the run's elapsed time (claims run concurrently, so it is not the sum of latencies); claims/min =
    n / wall time. Without ``wall_time_s`` the sum of claim latencies stands in (a sequential run).
    """
    n = len(results)
    tot = Counter()
    for r in results:
        summary = ((r.get("trace") or {}).get("summary")) or {}
        for key in ("llm_calls", "prompt_tokens", "completion_tokens", "tool_calls", "memory_hits"):
            tot[key] += int(summary.get(key) or 0)
    lats = [x for x in (claim_latency(r) for r in results) if x is not None]
    wall = float(wall_time_s) if wall_time_s is not None else (sum(lats) if lats else 0.0)
    tokens = tot["prompt_tokens"] + tot["completion_tokens"]
    return {
        "claims": n,
        "llm_calls": tot["llm_calls"],
        "prompt_tokens": tot["prompt_tokens"],
        "completion_tokens": tot["completion_tokens"],
        "tool_calls": tot["tool_calls"],
        "memory_hits": tot["memory_hits"],
        "llm_calls_per_claim": _div(tot["llm_calls"], n),
        "tokens_per_claim": _div(tokens, n),
        "prompt_tokens_per_claim": _div(tot["prompt_tokens"], n),
        "completion_tokens_per_claim": _div(tot["completion_tokens"], n),
        "tool_calls_per_claim": _div(tot["tool_calls"], n),
        "memory_hits_per_claim": _div(tot["memory_hits"], n),
        "latency_mean_s": statistics.fmean(lats) if lats else 0.0,
        "latency_p50_s": _percentile(lats, 50),
        "latency_p95_s": _percentile(lats, 95),
        "wall_time_s": wall,
        "wall_time_source": "run" if wall_time_s is not None else "sum of claim latencies",
        "claims_per_min": _div(n * 60.0, wall),
    }
