"""How far a run's confidence can be trusted: calibration error, right-vs-wrong AUROC, risk–coverage.

Each verdict with a confidence (``Verdict.confidence``: the probability of its label) is right or wrong
against its gold label; an abstained verdict counts with the label it would have given. Then

- ECE (expected calibration error): 10 equal-width confidence bins, the claim-weighted mean of
  |accuracy − mean confidence| per bin;
- AUROC: how well confidence ranks right verdicts above wrong ones (0.5: no better than chance; ties count
  half);
- risk–coverage: the verdicts sorted by confidence, the most confident ``c`` share of them answered and the
  rest abstained; accuracy at coverage 100 / 80 / 60 % (the top ``ceil(c·n)``), and the whole curve;
- each with a seeded percentile bootstrap interval over the claims (95 %, 1,000 resamples), as bench's other
  intervals.
"""

from __future__ import annotations

import math
import random
from typing import Any, Mapping, Sequence

COVERAGES = (1.0, 0.8, 0.6)
BINS = 10


def ece(conf: Sequence[float], right: Sequence[bool], bins: int = BINS) -> float:
    n = len(conf)
    if n == 0:
        return 0.0
    total = 0.0
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        idx = [i for i, c in enumerate(conf) if (lo <= c < hi) or (b == bins - 1 and c == 1.0)]
        if idx:
            acc = sum(right[i] for i in idx) / len(idx)
            mean = sum(conf[i] for i in idx) / len(idx)
            total += len(idx) / n * abs(acc - mean)
    return total


def auroc(conf: Sequence[float], right: Sequence[bool]) -> float | None:
    """P(a right verdict's confidence > a wrong one's), ties half; None without both kinds."""
    pos = [c for c, r in zip(conf, right, strict=True) if r]
    neg = [c for c, r in zip(conf, right, strict=True) if not r]
    if not pos or not neg:
        return None
    wins = 0.0
    for p in pos:
        for q in neg:
            wins += 1.0 if p > q else 0.5 if p == q else 0.0
    return wins / (len(pos) * len(neg))


def accuracy_at(conf: Sequence[float], right: Sequence[bool], coverage: float) -> float:
    """Accuracy of the most confident ``ceil(coverage·n)`` verdicts (ties broken by their order)."""
    order = sorted(range(len(conf)), key=lambda i: -conf[i])
    k = max(1, math.ceil(coverage * len(conf) - 1e-9))
    kept = order[:k]
    return sum(right[i] for i in kept) / len(kept)


def curve(conf: Sequence[float], right: Sequence[bool]) -> list[list[float]]:
    """[coverage, accuracy] at every number of answered verdicts (1 .. n)."""
    order = sorted(range(len(conf)), key=lambda i: -conf[i])
    out, hits = [], 0
    for k, i in enumerate(order, 1):
        hits += right[i]
        out.append([round(k / len(conf), 4), round(hits / k, 4)])
    return out


def _interval(values: list[float], level: float = 0.95) -> list[float]:
    values = sorted(values)
    if not values:
        return [0.0, 0.0]
    lo = values[int((1 - level) / 2 * (len(values) - 1))]
    hi = values[int(math.ceil((1 + level) / 2 * (len(values) - 1)))]
    return [round(lo, 4), round(hi, 4)]


def selective_metrics(conf: Sequence[float], right: Sequence[bool], *, resamples: int = 1000,
                      seed: int = 0) -> dict[str, Any]:
    """ECE, AUROC and accuracy at each of :data:`COVERAGES`, with bootstrap intervals, and the curve."""
    n = len(conf)
    out: dict[str, Any] = {"n": n}
    if n == 0:
        return out
    out["ece"] = round(ece(conf, right), 4)
    a = auroc(conf, right)
    out["auroc"] = round(a, 4) if a is not None else None
    out["accuracy_at"] = {f"{c:.0%}": round(accuracy_at(conf, right, c), 4) for c in COVERAGES}
    out["mean_confidence"] = round(sum(conf) / n, 4)
    rng = random.Random(seed)
    eces, aucs, accs = [], [], {c: [] for c in COVERAGES}
    for _ in range(resamples):
        idx = [rng.randrange(n) for _ in range(n)]
        c = [conf[i] for i in idx]
        r = [right[i] for i in idx]
        eces.append(ece(c, r))
        got = auroc(c, r)
        if got is not None:
            aucs.append(got)
        for cov in COVERAGES:
            accs[cov].append(accuracy_at(c, r, cov))
    out["ci95"] = {"ece": _interval(eces), "auroc": _interval(aucs) if aucs else None,
                   "accuracy_at": {f"{c:.0%}": _interval(v) for c, v in accs.items()}, "resamples": resamples}
    # the gain of answering the most confident 80 % over answering all (bootstrap of the difference)
    diffs = []
    rng = random.Random(seed + 1)
    for _ in range(resamples):
        idx = [rng.randrange(n) for _ in range(n)]
        c = [conf[i] for i in idx]
        r = [right[i] for i in idx]
        diffs.append(accuracy_at(c, r, 0.8) - accuracy_at(c, r, 1.0))
    out["gain_80_over_100"] = {"value": round(out["accuracy_at"]["80%"] - out["accuracy_at"]["100%"], 4),
                               "ci95": _interval(diffs)}
    out["curve"] = curve(conf, right)
    return out


def confidence_rows(rows: Sequence[Mapping[str, Any]], gold: Mapping[str, str], *,
                    raw: bool = False) -> tuple[list[float], list[bool]]:
    """(confidence, right) of every prediction with a confidence and a gold label; an abstained verdict with
    the label it would have given. ``raw``: the confidence before the calibration map (where one was
    applied)."""
    conf, right = [], []
    for r in rows:
        want = gold.get(str(r.get("id")))
        c = r.get("raw_confidence") if raw and r.get("raw_label_probs") else r.get("confidence")
        if want is None or c is None:
            continue
        said = r.get("abstained_label") if r.get("abstained") else r.get("label")
        conf.append(float(c))
        right.append(said == want)
    return conf, right


def run_confidence(rows: Sequence[Mapping[str, Any]], gold: Mapping[str, str]) -> dict[str, Any] | None:
    """A run's confidence section of metrics.json: the selective metrics, before and after the map when one
    was applied, and how many verdicts had no confidence or abstained; None when no verdict has one."""
    conf, right = confidence_rows(rows, gold)
    if not conf:
        return None
    out: dict[str, Any] = {"with_confidence": len(conf),
                           "without": sum(1 for r in rows if r.get("confidence") is None),
                           "abstained": sum(1 for r in rows if r.get("abstained")),
                           "metrics": selective_metrics(conf, right)}
    if any(r.get("raw_label_probs") for r in rows):
        rc, rr = confidence_rows(rows, gold, raw=True)
        out["raw"] = selective_metrics(rc, rr)
    return out

