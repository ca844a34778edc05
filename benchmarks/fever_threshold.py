"""FEVER 3-way from a binary verdict plus a confidence threshold, against the 3-way run's own NOT_ENOUGH_INFO
(issue 43 point 4), from bench run directories of the same claims.

A binary verdict (``--labels binary``) whose confidence is below τ becomes NOT_ENOUGH_INFO. τ is the value in
0.50, 0.55, ..., 0.95 with the best 3-way accuracy on the dev runs (the smallest such τ on a tie); it is then
applied once to the held-out binary run and compared with the held-out 3-way run on the claims both scored:
accuracy and macro-F1 with bootstrap intervals, and the share of REFUTED claims labelled NOT_ENOUGH_INFO. The
confidence is the one each prediction carries (``--calibration off`` runs: the model's own probability; a
binary temperature map keeps the order of confidences, so it moves τ, not the labels τ gives).

    python benchmarks/fever_threshold.py --dev-binary runs/dev-fever-binary --heldout-binary
    runs/ho-fever-binary \
        --heldout-3way runs/ho-fever-3way
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from veracity.bench.manifest import read_run
from veracity.bench.metrics import accuracy, bootstrap_ci, macro_f1, per_class
from veracity.bench.report import run_dataset
from veracity.bench.scoring import read_predictions

LABELS = ("SUPPORTED", "REFUTED", "NOT_ENOUGH_INFO")
TAUS = [round(0.5 + 0.05 * i, 2) for i in range(10)]


def scored(run_dir: Path) -> dict[str, tuple[str, str, float | None]]:
    """claim id -> (label said, gold label, confidence) of each scored prediction."""
    gold = {c.id: g.value for c, g in run_dataset(read_run(run_dir)).claims}
    out = {}
    for r in read_predictions(run_dir):
        if r.get("id") in gold and r.get("label"):
            said = r.get("abstained_label") if r.get("abstained") else r["label"]
            out[r["id"]] = (said, gold[r["id"]], r.get("confidence"))
    return out


def thresholded(rows: dict, tau: float) -> dict[str, str]:
    """The 3-way label of each binary verdict: NOT_ENOUGH_INFO below τ (or without a confidence)."""
    return {k: (said if conf is not None and conf >= tau else "NOT_ENOUGH_INFO")
            for k, (said, _, conf) in rows.items()}


def summary(gold: list[str], pred: list[str]) -> dict:
    ci = bootstrap_ci(gold, pred, LABELS)
    refuted = [p for g, p in zip(gold, pred, strict=True) if g == "REFUTED"]
    return {"n": len(gold), "accuracy": round(accuracy(gold, pred), 4), "accuracy_ci95": ci["accuracy"],
            "macro_f1": round(macro_f1(per_class(gold, pred, LABELS)), 4), "macro_f1_ci95": ci["macro_f1"],
            "refuted_said_nei": f"{sum(p == 'NOT_ENOUGH_INFO' for p in refuted)}/{len(refuted)}",
            "said": {lab: pred.count(lab) for lab in LABELS}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dev-binary", nargs="+", type=Path, required=True)
    ap.add_argument("--heldout-binary", type=Path, required=True)
    ap.add_argument("--heldout-3way", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    dev: dict = {}
    for d in args.dev_binary:
        dev.update({f"{d}::{k}": v for k, v in scored(d).items()})
    dev_acc = {}
    for tau in TAUS:
        pred = thresholded(dev, tau)
        dev_acc[tau] = accuracy([dev[k][1] for k in dev], [pred[k] for k in dev]) if dev else 0.0
    tau = max(TAUS, key=lambda t: (dev_acc[t], -t))
    binary, three = scored(args.heldout_binary), scored(args.heldout_3way)
    both = sorted(set(binary) & set(three))
    from_threshold = thresholded(binary, tau)
    report = {"tau": tau, "dev_n": len(dev), "dev_accuracy_by_tau": {str(t): round(a, 4) for t,
                                                                     a in dev_acc.items()},
              "heldout_claims_in_both": len(both),
              "binary_plus_threshold": summary([binary[k][1] for k in both],
                                               [from_threshold[k] for k in both]),
              "model_3way": summary([three[k][1] for k in both], [three[k][0] for k in both])}
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
