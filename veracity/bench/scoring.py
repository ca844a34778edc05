"""Scoring a benchmark run: its predictions against the dataset's gold labels (accuracy, per-class P/R/F1,
confusion, bootstrap intervals, majority baseline, reply reliability, efficiency, per hop for HoVer, how
each original label was predicted) and the statistics each method records in its trace events (the
``MethodSpec.run_statistics`` hook)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from veracity.bench.datasets import Dataset
from veracity.bench.manifest import PREDICTIONS_FILE
from veracity.bench.metrics import (bootstrap_ci, efficiency_summary, evaluate, majority_baseline,
                                    orig_label_breakdown, reply_reliability)
from veracity.bench.selective import run_confidence
from veracity.pipeline.labels import FORCED_EVENT, LabelSpace, label_space
from veracity.pipeline.types import Label


def read_predictions(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / PREDICTIONS_FILE
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a torn last line of an interrupted run: that claim is rerun on resume
    return out


def forced_verdicts(results: list[dict[str, Any]]) -> int:
    """Claims whose verdict the binary rule decided (a ``label_space.forced`` event in the trace)."""
    return sum(1 for r in results
               if any(e.get("kind") == FORCED_EVENT for e in (r.get("trace") or {}).get("events", [])))


def score_run(dataset: Dataset, results: list[dict[str, Any]], wall_time_s: float | None,
              space: LabelSpace | str | None = None) -> dict[str, Any]:
    """Metrics of the claims of ``dataset`` that have a prediction (all of them once a run is complete).

    ``space`` is the label space the run used (default 3way, what runs without one recorded used):
    ``label_space`` says which, whether NOT_ENOUGH_INFO was allowed (reports show the NEI rate only then)
    and how many verdicts the binary rule forced."""
    space = label_space(space)
    gold = {c.id: (c, g) for c, g in dataset.claims}
    rows = [r for r in results if r.get("id") in gold]
    order = {cid: i for i, cid in enumerate(gold)}
    rows.sort(key=lambda r: order[r["id"]])
    g = [gold[r["id"]][1] for r in rows]
    p = [Label(r["label"]) for r in rows]
    out: dict[str, Any] = {"complete": len(rows) == len(gold), "n_predicted": len(rows),
                           "n_claims": len(gold)}
    forced = forced_verdicts(rows)
    out["label_space"] = {"name": space.name, "labels": list(space.values()), "nei_allowed": space.allows_nei,
                          "dataset": dataset.label_space.name, "forced_verdicts": forced,
                          "forced_rate": forced / len(rows) if rows else 0.0}
    if not rows:
        out["efficiency"] = efficiency_summary([], wall_time_s)
        return out
    out["scores"] = evaluate(g, p, labels=dataset.labels).to_dict()
    out["scores"]["ci95"] = bootstrap_ci(g, p, labels=dataset.labels)
    out["baseline"] = {"majority": majority_baseline(g, labels=dataset.labels)}
    out["reliability"] = reply_reliability(rows)
    out["efficiency"] = efficiency_summary(rows, wall_time_s)
    out["method_stats"] = method_statistics(rows)
    conf = run_confidence(rows, {r["id"]: gold[r["id"]][1].value for r in rows})
    if conf is not None:
        out["confidence"] = conf
    out["orig_labels"] = orig_label_breakdown([gold[r["id"]][0].meta.get("orig_label") for r in rows], p)
    hops = sorted({gold[r["id"]][0].meta.get("hops") for r in rows} - {None})
    if hops:
        by_hop = {}
        for h in hops:
            idx = [i for i, r in enumerate(rows) if gold[r["id"]][0].meta.get("hops") == h]
            s = evaluate([g[i] for i in idx], [p[i] for i in idx], labels=dataset.labels)
            by_hop[str(h)] = {"n": s.n, "accuracy": s.accuracy, "macro_f1": s.macro_f1}
        out["by_hops"] = by_hop
    return out


def method_statistics(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-claim statistics a method records in its trace events, by method name: each method's
    ``MethodSpec.run_statistics`` hook (Trification: the paper's Table 2; MERMAID: executor steps, memory
    recalls, forced verdicts), for the methods whose events the results hold."""
    from veracity.pipeline.methods import METHODS

    out: dict[str, Any] = {}
    for name in sorted(METHODS, key=lambda n: n != "trification"):  # the order metrics.json had
        hook = METHODS[name].run_statistics
        stats = hook(results) if hook is not None else None
        if stats:
            out[name] = stats
    return out
