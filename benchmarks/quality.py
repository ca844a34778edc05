"""The quality table (BENCHMARKS.md "Verification quality"): run a grid of `veracity bench run` cells with
one model and one sampling seed, then print the table from the run directories.

    # run (resumes: a finished cell is skipped, an interrupted one continues)
    python benchmarks/quality.py run --model qwen2.5-coder-1.5b-instruct --seed 1 --root runs/quality \
        --index ~/.veracity/indexes/hover-mix direct:hover:none:36 direct:hover:gold:36 rag:hover:gold:36
    # table
    python benchmarks/quality.py table runs/quality/qwen2.5-coder-1.5b-instruct-s1

A cell is METHOD:DATASET:EVIDENCE:LIMIT[:CONCURRENCY]. Every cell draws a class-balanced sample
(`--sample balanced`: equal SUPPORTED / REFUTED, and on HoVer equal 2-, 3- and 4-hop claims) with the
same seed, so every method sees the same claims of a dataset and evidence setting (with `gold`, claims
whose gold evidence is incomplete are left out before sampling, so the gold and open samples of a
dataset can differ; the table says n). Cells run one after another (each already runs its claims
concurrently), and each cell's log is kept next to its run directory.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

# ProgramFC (N=1), open-book Macro-F1 (%), as reported in Trification's Table 1 (shared/papers/trification.txt,
# also in benchmarks/PAPERS.md). Its gold-evidence numbers are not in the papers this project holds.
PROGRAMFC_OPEN = {"hover/2": 69.36, "hover/3": 60.63, "hover/4": 59.16, "feverous-s": 67.80}


def cell_dir(root: Path, cell: str) -> Path:
    method, dataset, evidence = cell.split(":")[:3]
    return root / f"{method}-{dataset}-{evidence}"


def run_cells(args: argparse.Namespace) -> int:
    root = Path(args.root).expanduser() / f"{args.model}-s{args.seed}"
    root.mkdir(parents=True, exist_ok=True)
    failed = 0
    for cell in args.cells:
        parts = cell.split(":")
        if len(parts) not in (4, 5):
            print(f"error: bad cell {cell!r}: METHOD:DATASET:EVIDENCE:LIMIT[:CONCURRENCY]", file=sys.stderr)
            return 2
        method, dataset, evidence, limit = parts[:4]
        concurrency = parts[4] if len(parts) == 5 else str(args.concurrency)
        out = cell_dir(root, cell)
        metrics = out / "metrics.json"
        if metrics.is_file() and json.loads(metrics.read_text()).get("complete"):
            print(f"[skip] {out.name}: complete", flush=True)
            continue
        cmd = [sys.executable, "-m", "veracity", "bench", "run", "--dataset", dataset, "--method", method,
               "--evidence", evidence, "--limit", limit, "--seed", str(args.seed), "--sample", "balanced",
               "--concurrency", concurrency, "--model", args.model, "--out", str(out), "--json"]
        if args.endpoint:
            cmd += ["--endpoint", args.endpoint]
        if evidence == "open":
            cmd += ["--index", str(Path(args.index).expanduser()), "--allow-leakage"]
        for p in args.param or []:
            if p.startswith(method + "."):
                cmd += ["--param", p[len(method) + 1:]]
        started = time.time()
        print(f"[run ] {out.name}: {' '.join(cmd[2:])}", flush=True)
        with open(root / f"{out.name}.log", "a", encoding="utf-8") as log:
            rc = subprocess.call(cmd, stdout=log, stderr=log)
        print(f"[done] {out.name}: exit {rc} after {time.time() - started:.0f} s", flush=True)
        failed += rc != 0
    return 1 if failed else 0


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}"


def table(args: argparse.Namespace) -> int:
    rows = []
    for root in args.roots:
        for d in sorted(Path(root).iterdir()):
            mpath, rpath = d / "metrics.json", d / "run.json"
            if not (mpath.is_file() and rpath.is_file()):
                continue
            m, run = json.loads(mpath.read_text()), json.loads(rpath.read_text())
            s, e = m.get("scores") or {}, m.get("efficiency") or {}
            ci = s.get("ci95") or {}
            ls, rel = m.get("label_space") or {}, m.get("reliability") or {}
            major = (m.get("baseline") or {}).get("majority") or {}
            ds = run["dataset"]["name"]
            hops = m.get("by_hops") or {}
            ref = (" / ".join(f"{PROGRAMFC_OPEN[f'hover/{h}']:.1f}" for h in sorted(hops)) if ds == "hover"
                   else f"{PROGRAMFC_OPEN.get(ds, float('nan')):.1f}")
            rows.append([
                run.get("model", {}).get("model", "?"), run["config"]["method"], ds, m["run"].get("evidence", "open"),
                f"{m['n_predicted']}/{m['n_claims']}",
                f"{_pct(s.get('accuracy'))} [{_pct((ci.get('accuracy') or [None])[0])}, {_pct((ci.get('accuracy') or [None, None])[1])}]",
                f"{_pct(s.get('macro_f1'))} [{_pct((ci.get('macro_f1') or [None])[0])}, {_pct((ci.get('macro_f1') or [None, None])[1])}]",
                " / ".join(_pct(hops[h]["macro_f1"]) for h in sorted(hops)) or "-",
                f"{_pct(major.get('accuracy'))} / {_pct(major.get('macro_f1'))}",
                ref,
                f"{rel.get('fallback_rate', 0):.2f}", f"{ls.get('forced_rate', 0):.2f}" if not ls.get("nei_allowed", True)
                else f"NEI {s.get('nei_rate', 0):.2f}",
                f"{e.get('llm_calls_per_claim', 0):.1f}", f"{e.get('tokens_per_claim', 0):,.0f}",
                f"{e.get('latency_p50_s', 0):.0f}", f"{e.get('wall_time_s', 0):.0f}",
            ])
    head = ["model", "method", "dataset", "evidence", "n", "accuracy % [95 % CI]", "macro-F1 % [95 % CI]",
            "macro-F1 by hops (2/3/4)", "majority acc / F1", "ProgramFC open F1", "fallback", "forced",
            "LLM calls/claim", "tokens/claim", "claim p50 s", "wall s"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        print("| " + " | ".join(r) + " |")
    return 0


def wrong(args: argparse.Namespace) -> int:
    """The wrong verdicts of a run directory, each with its gold label, explanation and trace events, to
    read for failure modes (BENCHMARKS.md lists the most common ones per method)."""
    d = Path(args.run_dir)
    run = json.loads((d / "run.json").read_text())
    from veracity.bench.datasets import load_dataset

    cfg = run["config"]
    ds = load_dataset(cfg["dataset"], run["dataset"].get("data_dir"), limit=cfg.get("limit"), seed=cfg.get("seed"),
                      hops=cfg.get("hops"), variant=cfg.get("variant"), label_map=cfg.get("label_map"),
                      evidence=cfg.get("evidence") or "open", sample=cfg.get("sample") or "random")
    gold = {c.id: (c, g.value) for c, g in ds.claims}
    shown = 0
    for line in (d / "predictions.jsonl").read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        c, g = gold.get(r["id"], (None, None))
        if g is None or r["label"] == g:
            continue
        shown += 1
        trace = r.get("trace") or {}
        print(f"## {r['id']} ({c.meta.get('hops', '-')} hops) gold {g}, said {r['label']}")
        print(f"claim: {r['claim']}")
        print(f"explanation: {r.get('explanation', '')[:args.width]}")
        for t in trace.get("tool_calls", [])[:args.steps]:
            print(f"  tool {t.get('tool')} {str(t.get('query') or t.get('title') or '')[:100]!r} -> "
                  f"{', '.join(map(str, (t.get('hits') or [])[:4]))}")
        for e in trace.get("events", [])[:args.steps]:
            print(f"  event {json.dumps(e, ensure_ascii=False, default=str)[:args.width]}")
        print()
    print(f"{shown} wrong of {len(gold)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run the cells (resumes)")
    r.add_argument("--model", required=True)
    r.add_argument("--seed", type=int, required=True)
    r.add_argument("--root", default="runs/quality")
    r.add_argument("--index", default="~/.veracity/indexes/hover-mix")
    r.add_argument("--endpoint", default=None)
    r.add_argument("--concurrency", type=int, default=8)
    r.add_argument("--param", action="append", help="METHOD.KEY=VALUE, passed to that method's cells")
    r.add_argument("cells", nargs="+")
    t = sub.add_parser("table", help="print the markdown table of run directories")
    t.add_argument("roots", nargs="+")
    w = sub.add_parser("wrong", help="print the wrong verdicts of a run directory with their traces")
    w.add_argument("run_dir")
    w.add_argument("--width", type=int, default=400)
    w.add_argument("--steps", type=int, default=12)
    args = ap.parse_args(argv)
    return {"run": run_cells, "table": table, "wrong": wrong}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
