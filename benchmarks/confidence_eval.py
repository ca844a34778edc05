"""Issue 43's measurement from bench run directories: fit the temperature map on the dev runs, apply it to
the held-out runs' raw label distributions, and print ECE before / after, AUROC and accuracy at 100 / 80 / 60
%
coverage with bootstrap intervals (``veracity/bench/selective.py``), per held-out run and pooled.

    python benchmarks/confidence_eval.py --dev runs/dev-rag-feverous-gold --heldout
    runs/heldout-rag-feverous-gold

The dev runs and the held-out runs must be of one model, method and label space; the held-out runs are never
used to fit anything. The map is stored in ``--home`` (default: a temporary folder, never the user's home,
where a stored map would change every later verdict's confidence) as ``veracity bench calibrate`` stores it.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from veracity.bench.calibrate import calibrate_runs
from veracity.bench.manifest import read_run
from veracity.bench.report import run_dataset
from veracity.bench.scoring import read_predictions
from veracity.bench.selective import selective_metrics


def rows_of(run_dir: Path) -> list[tuple[dict[str, float], str, str]]:
    """(raw label distribution, label said, gold label) of each prediction with a distribution."""
    gold = {c.id: g.value for c, g in run_dataset(read_run(run_dir)).claims}
    out = []
    for r in read_predictions(run_dir):
        probs = r.get("raw_label_probs") or r.get("label_probs")
        if not probs or r.get("id") not in gold:
            continue
        said = r.get("abstained_label") if r.get("abstained") else r.get("label")
        out.append((probs, said, gold[r["id"]]))
    return out


def metrics(rows: list[tuple[dict[str, float], str, str]], cmap=None) -> dict:
    conf = [(cmap.apply(p) if cmap else p).get(said, 0.0) for p, said, _ in rows]
    right = [said == gold for _, said, gold in rows]
    m = selective_metrics(conf, right)
    m.pop("curve", None)
    return m


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dev", nargs="+", type=Path, required=True)
    ap.add_argument("--heldout", nargs="+", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--home", type=Path, default=None,
                    help="where to store the fitted map (default: a temporary folder)")
    args = ap.parse_args()
    home = args.home or Path(tempfile.mkdtemp(prefix="confidence-eval-"))
    cmap, path, summary = calibrate_runs(args.dev, home)
    report = {"map": {"temperature": cmap.temperature, "path": str(path), "nll_before": cmap.nll_before,
                      "nll_after": cmap.nll_after, "fitted_on": cmap.fitted_on}, "dev": summary,
              "heldout": {}}
    pooled: list = []
    for d in args.heldout:
        rows = rows_of(d)
        pooled += rows
        report["heldout"][d.name] = {"n": len(rows), "before": metrics(rows), "after": metrics(rows, cmap)}
    if len(args.heldout) > 1:
        report["heldout"]["pooled"] = {"n": len(pooled), "before": metrics(pooled), "after": metrics(pooled,
                                                                                                     cmap)}
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
