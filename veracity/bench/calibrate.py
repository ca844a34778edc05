"""``veracity bench calibrate``: fit a confidence calibration map on bench runs of a dev split
(:mod:`veracity.pipeline.calibration`), store it beside the model, and say what it changed."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Sequence

from veracity.bench.manifest import read_run, run_manifest
from veracity.bench.report import run_dataset
from veracity.bench.scoring import read_predictions
from veracity.bench.selective import confidence_rows, ece
from veracity.errors import ConfigError
from veracity.pipeline.calibration import TemperatureMap, fit_rows, fit_temperature, nll, save


def calibrate_runs(run_dirs: Sequence[Any], home: Any) -> tuple[Any, Any, dict[str, Any]]:
    """Fit the temperature map of the runs' model, method and label space on their predictions and gold labels
    (a dev split: never the split it will be judged on), store it beside the model and return (map, path,
    before/after metrics). The runs must share model, method and label space (a ConfigError otherwise)."""
    keys, rows, splits, preds = set(), [], [], []
    gold_all: dict[str, str] = {}
    for d in run_dirs:
        d = Path(d)
        run = read_run(d)
        model = (run.get("model") or {}).get("model") or next(
            (m.get("id") for m in (run.get("model") or {}).get("served") or []), None)
        if not model:
            raise ConfigError(f"{d}/run.json names no model",
                              hint="calibrate runs made against a model endpoint")
        record = run_manifest(run)
        keys.add((model, record.get("method") or run["config"]["method"],
                  record.get("label_space") or "3way"))
        dataset = run_dataset(run)
        gold = {c.id: g.value for c, g in dataset.claims}
        got = read_predictions(d)
        rows += fit_rows(got, gold)
        preds += [{**r, "id": f"{d}::{r.get('id')}"} for r in got]
        gold_all.update({f"{d}::{k}": v for k, v in gold.items()})
        cfg = run["config"]
        splits.append({"run": str(d), "dataset": run["dataset"]["name"],
                       "variant": run["dataset"].get("variant"),
                       "evidence": record.get("evidence"), "seed": cfg.get("seed"), "limit": cfg.get("limit"),
                       "ids_sha256": hashlib.sha256("\n".join(sorted(gold)).encode()).hexdigest()[:16]})
    if len(keys) != 1:
        raise ConfigError("the runs differ in model, method or label space: "
                          + "; ".join(" / ".join(k) for k in sorted(keys)),
                          hint="a map is per model x method x label space: calibrate each group on its own")
    (model, method, labels), = keys
    t = fit_temperature(rows)
    m = TemperatureMap(model=model, method=method, labels=labels, temperature=t,
                       fitted_on={"runs": splits, "n": len(rows)}, nll_before=round(nll(rows, 1.0), 4),
                       nll_after=round(nll(rows, t), 4))
    path = save(m, home)
    before_c, before_r = confidence_rows(preds, gold_all)
    after = []
    for r in preds:
        if r.get("confidence") is None or not r.get("label_probs"):
            continue
        probs = m.apply(r.get("raw_label_probs") or r["label_probs"])
        said = r.get("abstained_label") if r.get("abstained") else r.get("label")
        after.append((probs.get(said, 0.0), said == gold_all.get(r["id"])))
    summary = {"n": len(rows), "ece_before": round(ece(before_c, before_r), 4) if before_c else None,
               "ece_after": round(ece([a for a, _ in after], [b for _, b in after]), 4) if after else None}
    return m, path, summary
