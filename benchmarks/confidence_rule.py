"""Issue 43 point 5's rule over several methods: each method's temperature map fitted on its own dev runs and
applied to its own held-out runs, the held-out binary verdicts pooled, and the rule read off the pool.

    python benchmarks/confidence_rule.py \
        --group rag runs/dev-rag-feverous-gold -- runs/ho-rag-feverous-gold runs/ho-rag-feverous-open \
        --group mermaid runs/dev-mermaid-feverous-gold -- runs/ho-mermaid-feverous-gold

The rule (BENCHMARKS.md, "The rule and the plan, written before any run"): a threshold is recommended only
if, pooled over the held-out binary cells after the maps, accuracy at 80 % coverage beats accuracy at 100 %
by at least 3 points and the bootstrap interval of that gain excludes 0; the threshold is then the
calibrated confidence at 80 % coverage of the pooled dev cells, rounded down to 0.05. Maps are fitted into a
scratch home (``--home``, default a temporary folder), never the user's.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from pathlib import Path

from veracity.bench.calibrate import calibrate_runs
from veracity.bench.selective import selective_metrics

sys.path.insert(0, str(Path(__file__).resolve().parent))
from confidence_eval import rows_of  # noqa: E402  (the same reading of a run's predictions)

MARGIN = 0.03  # the rule's 3 points


def parse_groups(argv: list[str]) -> list[tuple[str, list[Path], list[Path]]]:
    """``--group NAME DEV... -- HELDOUT...`` repeated."""
    groups, i = [], 0
    while i < len(argv):
        if argv[i] != "--group" or i + 1 >= len(argv):
            raise SystemExit(f"error: expected --group NAME DEV... -- HELDOUT..., got {argv[i]!r}")
        name, i = argv[i + 1], i + 2
        dev: list[Path] = []
        held: list[Path] = []
        side = dev
        while i < len(argv) and argv[i] != "--group":
            if argv[i] == "--":
                side = held
            else:
                side.append(Path(argv[i]))
            i += 1
        if not dev or not held:
            raise SystemExit(f"error: group {name} needs dev runs, then --, then held-out runs")
        groups.append((name, dev, held))
    return groups


def calibrated(rows, cmap) -> tuple[list[float], list[bool]]:
    conf = [cmap.apply(p).get(said, 0.0) for p, said, _ in rows]
    return conf, [said == gold for _, said, gold in rows]


def threshold_at(conf: list[float], coverage: float = 0.8) -> float:
    """The confidence of the verdict at ``coverage`` (most confident first), rounded down to 0.05."""
    order = sorted(conf, reverse=True)
    k = max(1, math.ceil(coverage * len(order) - 1e-9))
    return math.floor(order[k - 1] * 20 + 1e-9) / 20


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=None)
    args, rest = ap.parse_known_args()
    home = args.home or Path(tempfile.mkdtemp(prefix="confidence-rule-"))
    report: dict = {"groups": {}}
    held_conf, held_right, dev_conf = [], [], []
    for name, dev, held in parse_groups(rest):
        cmap, _, summary = calibrate_runs(dev, home)
        d_conf, _ = calibrated([r for d in dev for r in rows_of(d)], cmap)
        dev_conf += d_conf
        rows = [r for h in held for r in rows_of(h)]
        conf, right = calibrated(rows, cmap)
        held_conf += conf
        held_right += right
        m = selective_metrics(conf, right)
        m.pop("curve", None)
        report["groups"][name] = {"temperature": cmap.temperature, "dev": [str(d) for d in dev],
                                  "heldout": [str(h) for h in held], "dev_n": len(d_conf), "after": m}
    pooled = selective_metrics(held_conf, held_right)
    pooled.pop("curve", None)
    gain = pooled.get("gain_80_over_100", {})
    holds = bool(gain) and gain["value"] >= MARGIN - 1e-9 and gain["ci95"][0] > 0
    report["pooled"] = pooled
    report["rule"] = {"margin": MARGIN, "gain": gain, "holds": holds,
                      "threshold": threshold_at(dev_conf) if holds and dev_conf else None,
                      "dev_threshold_if_it_held": threshold_at(dev_conf) if dev_conf else None}
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
