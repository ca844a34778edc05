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

# ProgramFC (N=1), open-book Macro-F1 (%), as reported in Trification's Table 1
# (shared/papers/trification.txt,
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


def method_label(config: dict) -> str:
    """The method, with the parameters the run set on the command line: ``rag (select=True)``."""
    params = config.get("params") or {}
    over = ", ".join(f"{k}={v}" for k, v in sorted(params.items()))
    return f"{config['method']} ({over})" if over else config["method"]


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
                run.get("model", {}).get("model", "?"), method_label(run["config"]), ds,
                         m["run"].get("evidence", "open"),
                f"{m['n_predicted']}/{m['n_claims']}",
                f"{_pct(s.get('accuracy'))} [{_pct((ci.get('accuracy') or [None])[0])}, "
                f"{_pct((ci.get('accuracy') or [None, None])[1])}]",
                f"{_pct(s.get('macro_f1'))} [{_pct((ci.get('macro_f1') or [None])[0])}, "
                f"{_pct((ci.get('macro_f1') or [None, None])[1])}]",
                " / ".join(_pct(hops[h]["macro_f1"]) for h in sorted(hops)) or "-",
                f"{_pct(major.get('accuracy'))} / {_pct(major.get('macro_f1'))}",
                ref,
                f"{rel.get('invalid_replies', 0)} / {rel.get('fallback_rate', 0):.2f}",
                         f"{ls.get('forced_rate', 0):.2f}" if not ls.get("nei_allowed", True)
                else f"NEI {s.get('nei_rate', 0):.2f}",
                f"{e.get('llm_calls_per_claim', 0):.1f}", f"{e.get('tokens_per_claim', 0):,.0f}",
                f"{e.get('latency_p50_s', 0):.0f}", f"{e.get('wall_time_s', 0):.0f}",
            ])
    head = ["model", "method", "dataset", "evidence", "n", "accuracy % [95 % CI]", "macro-F1 % [95 % CI]",
            "macro-F1 by hops (2/3/4)", "majority acc / F1", "ProgramFC open F1",
            "invalid replies / fallback rate",
            "forced",
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
    ds = load_dataset(cfg["dataset"], run["dataset"].get("data_dir"), limit=cfg.get("limit"),
                      seed=cfg.get("seed"),
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


def judges_from_trace(events: list[dict]) -> list[tuple[str, str, int]]:
    """The JUDGE nodes that stand at the end of a Trification claim, rebuilt from its trace: ``(id, label,
    finish order)`` for every JUDGE whose status is ``done`` in the last recorded graph (the final graph, or
    the static fallback's), its label and finish position from its last ``trification.node_end`` event
    (a static fallback reuses finished nodes without a new event, so their first finish stands)."""
    graphs = [e for e in events if e.get("kind") == "trification.graph"]
    if not graphs:
        return []
    standing = [n["id"] for n in graphs[-1]["nodes"] if n.get("type") == "JUDGE" and n.get("status")
                == "done"]
    ends: dict[str, tuple[str, int]] = {}
    for order, e in enumerate(x for x in events if x.get("kind") == "trification.node_end"):
        if e.get("type") == "JUDGE" and e.get("status") in ("done", "failed"):
            ends[e["id"]] = (e.get("label") or "", order)
    return [(i, *ends[i]) for i in standing if i in ends]


def aggregate_label(judges: list[tuple[str, str, int]], rule: str, uncertain: str) -> str:
    """The verdict of ``judges`` under a ``judge_aggregation`` rule, as Trification's label_from_judges
    computes it (a replay of the rule on recorded JUDGE labels; the unit test checks both agree)."""
    labels = [lab for _, lab, _ in judges]
    if rule == "majority":
        sup, ref = labels.count("Supports"), labels.count("Refutes")
        return "SUPPORTED" if sup > ref else "REFUTED" if ref > sup else uncertain
    if rule == "last":
        last = max(judges, key=lambda j: j[2])[1] if judges else ""
        return {"Supports": "SUPPORTED", "Refutes": "REFUTED"}.get(last, uncertain)
    if "Refutes" in labels:
        return "REFUTED"
    return "SUPPORTED" if labels and all(x == "Supports" for x in labels) else uncertain


def aggregate(args: argparse.Namespace) -> int:
    """Trification's ``judge_aggregation`` rules replayed on one run's recorded JUDGE labels: the graphs
    and JUDGE replies are the same for every rule (the rule only combines the JUDGEs that stand at the
    end), so the labels under each rule follow exactly from one run's traces. Checks first that the run's
    own rule reproduces every recorded verdict; a claim with no standing JUDGE keeps its recorded label."""
    from veracity.bench.datasets import load_dataset
    from veracity.bench.manifest import run_manifest
    from veracity.bench.metrics import bootstrap_ci, evaluate

    d = Path(args.run_dir)
    run = json.loads((d / "run.json").read_text())
    if run["config"]["method"] != "trification":
        print(f"error: {d} is a {run['config']['method']} run; judge aggregation is Trification's",
              file=sys.stderr)
        return 2
    params = run_manifest(run).get("params") or {}
    own, uncertain = params.get("judge_aggregation", "all_supported"), params.get("uncertain_label",
                                                                                  "REFUTED")
    cfg = run["config"]
    ds = load_dataset(cfg["dataset"], run["dataset"].get("data_dir"), limit=cfg.get("limit"),
                      seed=cfg.get("seed"),
                      hops=cfg.get("hops"), variant=cfg.get("variant"), label_map=cfg.get("label_map"),
                      evidence=cfg.get("evidence") or "open", sample=cfg.get("sample") or "random")
    gold = {c.id: g.value for c, g in ds.claims}
    rows = [json.loads(line) for line in (d / "predictions.jsonl").read_text(encoding="utf-8").splitlines()]
    rows = [r for r in rows if r["id"] in gold and not r.get("error")]
    mismatch = 0
    preds: dict[str, list[str]] = {rule: [] for rule in ("all_supported", "majority", "last")}
    several = 0
    for r in rows:
        judges = judges_from_trace((r.get("trace") or {}).get("events", []))
        several += len(judges) > 1
        if judges and aggregate_label(judges, own, uncertain) != r["label"]:
            mismatch += 1
            print(f"warning: {r['id']}: replaying {own} gives {aggregate_label(judges, own, uncertain)}, "
                  f"recorded {r['label']}", file=sys.stderr)
        for rule in preds:
            preds[rule].append(aggregate_label(judges, rule, uncertain) if judges else r["label"])
    g = [gold[r["id"]] for r in rows]
    print(f"{d}: {len(rows)} claims, {several} with more than one standing JUDGE; run's rule {own}, "
          f"{mismatch} replay mismatches")
    print("| judge_aggregation | accuracy % [95 % CI] | macro-F1 % [95 % CI] | verdicts changed vs the run |")
    print("|---|---|---|---|")
    for rule, p in preds.items():
        s, ci = evaluate(g, p, ds.labels), bootstrap_ci(g, p, ds.labels)
        changed = sum(a != b for a, b in zip(p, preds[own], strict=True))
        print(f"| {rule}{' (run)' if rule == own else ''} | {_pct(s.accuracy)} [{_pct(ci['accuracy'][0])}, "
              f"{_pct(ci['accuracy'][1])}] | {_pct(s.macro_f1)} [{_pct(ci['macro_f1'][0])}, "
              f"{_pct(ci['macro_f1'][1])}] | {changed} |")
    return 1 if mismatch else 0


def _gold(d: Path) -> dict[str, tuple]:
    """A run directory's claims with their gold labels (its sample, redrawn from its config)."""
    from veracity.bench.datasets import load_dataset

    run = json.loads((d / "run.json").read_text())
    cfg = run["config"]
    ds = load_dataset(cfg["dataset"], run["dataset"].get("data_dir"), limit=cfg.get("limit"),
                      seed=cfg.get("seed"),
                      hops=cfg.get("hops"), variant=cfg.get("variant"), label_map=cfg.get("label_map"),
                      evidence=cfg.get("evidence") or "open", sample=cfg.get("sample") or "random")
    return {c.id: (c, g.value, ds.labels) for c, g in ds.claims}


def _predictions(d: Path, gold: dict) -> dict[str, dict]:
    rows = (json.loads(x) for x in (d / "predictions.jsonl").read_text(encoding="utf-8").splitlines()
            if x.strip())
    return {r["id"]: r for r in rows if r["id"] in gold and not r.get("error")}


def _events(r: dict, kind: str) -> list[dict]:
    return [e for e in (r.get("trace") or {}).get("events", []) if e.get("kind") == kind]


def _labels_of(labels) -> tuple:
    return tuple(getattr(labels, "labels", labels))


def quotes_rule(drop_points: float, real_misreadings: float) -> bool:
    """BENCHMARKS.md's rule for making quotes=check rag's default, written down before the claims were
    drawn: pooled accuracy drops by at most 2 points, and at least 70 % of the hand-read ungrounded
    verdicts are real misreadings."""
    return drop_points <= 2.0 and real_misreadings >= 0.70


def quotes_compare(args: argparse.Namespace) -> int:
    """quotes=off against quotes=check on the same cells (two roots of `quality.py run` with the same seed):
    per cell and pooled accuracy / macro-F1 with bootstrap intervals, the ungrounded rate before the retry
    (a mismatch on the first reply) and after it, and a hand-read sheet of grounded and ungrounded verdicts
    drawn with a seed (``--sheet``); ``--tally SHEET`` counts a filled sheet and applies the rule."""
    import random

    from veracity.bench.metrics import bootstrap_ci, evaluate
    from veracity.pipeline.grounding import MISMATCH_EVENT, UNGROUNDED_EVENT

    if args.tally:
        return _tally(Path(args.tally), args.drop)
    off_root, check_root = Path(args.off_root), Path(args.check_root)
    cells = sorted(d.name for d in check_root.iterdir() if (d / "predictions.jsonl").is_file()
                   and (off_root / d.name / "predictions.jsonl").is_file())
    if not cells:
        print(f"error: no cell is in both {off_root} and {check_root}", file=sys.stderr)
        return 2
    head = ["cell", "n", "off acc % [CI]", "check acc % [CI]", "off F1 % [CI]", "check F1 % [CI]",
            "mismatch before retry",
            "ungrounded after retry", "verdicts changed"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    pooled: dict[str, list[str]] = {"gold": [], "off": [], "check": []}
    pooled_spaces: list = []
    grounded, ungrounded = [], []
    for name in cells:
        gold = _gold(check_root / name)
        off, chk = _predictions(off_root / name, gold), _predictions(check_root / name, gold)
        ids = [i for i in gold if i in off and i in chk]
        labels = next(iter(gold.values()))[2]
        pooled_spaces.append(labels)
        g = [gold[i][1] for i in ids]
        po, pc = [off[i]["label"] for i in ids], [chk[i]["label"] for i in ids]
        so, sc = evaluate(g, po, labels), evaluate(g, pc, labels)
        co, cc = bootstrap_ci(g, po, labels), bootstrap_ci(g, pc, labels)
        before = sum(any(e.get("attempt") == 1 for e in _events(chk[i], MISMATCH_EVENT)) for i in ids)
        after = sum(chk[i].get("grounding") == "ungrounded" for i in ids)
        print(f"| {name} | {len(ids)} | {_pct(so.accuracy)} [{_pct(co['accuracy'][0])}, "
              f"{_pct(co['accuracy'][1])}] | "
              f"{_pct(sc.accuracy)} [{_pct(cc['accuracy'][0])}, {_pct(cc['accuracy'][1])}] | "
              f"{_pct(so.macro_f1)} [{_pct(co['macro_f1'][0])}, {_pct(co['macro_f1'][1])}] | "
              f"{_pct(sc.macro_f1)} [{_pct(cc['macro_f1'][0])}, {_pct(cc['macro_f1'][1])}] | "
              f"{before}/{len(ids)} | {after}/{len(ids)} | "
              f"{sum(a != b for a, b in zip(po, pc, strict=True))} |")
        pooled["gold"] += g
        pooled["off"] += po
        pooled["check"] += pc
        for i in ids:
            item = (name, gold[i][1], chk[i])
            if chk[i].get("grounding") == "ungrounded" and _events(chk[i], UNGROUNDED_EVENT):
                ungrounded.append(item)
            elif chk[i].get("grounding") == "grounded" and chk[i]["quotes"]:
                grounded.append(item)
    n = len(pooled["gold"])
    acc = {k: sum(a == b for a, b in zip(pooled["gold"], pooled[k], strict=True)) / n for k in ("off",
                                                                                                "check")}
    drop = 100 * (acc["off"] - acc["check"])
    print(f"\npooled over {n} claims: accuracy off {_pct(acc['off'])} %, check {_pct(acc['check'])} % "
          f"(drop {drop:.1f} points; the rule allows at most 2.0)")
    if len({_labels_of(c) for c in pooled_spaces}) == 1:  # the same label space in every cell
        labels = pooled_spaces[0]
        for k in ("off", "check"):
            st, ci = evaluate(pooled["gold"], pooled[k], labels), bootstrap_ci(pooled["gold"], pooled[k],
                                                                               labels)
            print(f"pooled {k}: accuracy {_pct(st.accuracy)} [{_pct(ci['accuracy'][0])}, "
                  f"{_pct(ci['accuracy'][1])}], "
                  f"macro-F1 {_pct(st.macro_f1)} [{_pct(ci['macro_f1'][0])}, {_pct(ci['macro_f1'][1])}]")
    else:
        print("pooled macro-F1: not given (the cells have different label spaces)")
    if args.sheet:
        rng = random.Random(args.hand_seed)
        picked = [("grounded", x) for x in rng.sample(grounded, min(args.hand_read, len(grounded)))] + \
                 [("ungrounded", x) for x in rng.sample(ungrounded, min(args.hand_read, len(ungrounded)))]
        Path(args.sheet).write_text(_sheet(picked, args.hand_seed, drop), encoding="utf-8")
        print(f"hand-read sheet ({len(picked)} verdicts, seed {args.hand_seed}) -> {args.sheet}")
    return 0


SHEET_MARK = "check right (yes / no):"


def _sheet(picked: list, seed: int, drop: float) -> str:
    """The hand-read sheet: each verdict with its claim, gold label, the judge's label, its quotes (found or
    not) and the cited passages; the reader writes yes or no after each ``check right`` line."""
    out = [f"# quotes=check hand-read sheet (seed {seed}; pooled accuracy drop {drop:.1f} points)", "",
           "For a grounded verdict: yes if every quote really is the passage's words AND supports the label. "
           "For an ungrounded verdict: yes if the judge really misread (its label is not in its passages).",
           ""]
    for kind, (cell, gold, r) in picked:
        given = next((e["label_given"] for e in _events(r, "quotes.ungrounded")), r["label"])
        out += [f"## {kind}: {r['id']} ({cell})", f"claim: {r['claim']}", f"gold {gold}; judge said {given}; "
                f"verdict {r['label']}", f"explanation: {r.get('explanation', '')}"]
        for q in r.get("quotes") or []:
            out.append(f"- [{q['passage_id']}] \"{q['text']}\" {'found' if q['found'] else 'NOT FOUND'}")
        for ev in r.get("evidence") or []:
            out.append(f"  > [{ev['passage_id']}] {ev['text']}")
        out += [f"{SHEET_MARK} ", ""]
    return "\n".join(out)


def _tally(sheet: Path, drop: float | None) -> int:
    """Count a filled sheet: the share of ungrounded verdicts the reader marked as real misreadings (and of
    grounded ones marked right), then the rule's decision when the pooled drop is given."""
    kind, counts = None, {"grounded": [0, 0], "ungrounded": [0, 0]}
    for line in sheet.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            kind = line[3:].split(":", 1)[0]
        elif line.startswith(SHEET_MARK) and kind in counts:
            answer = line[len(SHEET_MARK):].strip().lower()
            if answer not in ("yes", "no"):
                print(f"error: {sheet}: a verdict of kind {kind} is not marked yes or no", file=sys.stderr)
                return 2
            counts[kind][0] += answer == "yes"
            counts[kind][1] += 1
    for k, (yes, n) in counts.items():
        print(f"{k}: check right on {yes} of {n}")
    real = counts["ungrounded"][0] / counts["ungrounded"][1] if counts["ungrounded"][1] else 0.0
    if drop is not None:
        print(f"rule (drop <= 2 points and >= 70 % real misreadings): "
              f"{'check becomes the default' if quotes_rule(drop, real) else 'off stays the default'}")
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
    a = sub.add_parser("aggregate", help="Trification: the verdicts under each judge_aggregation rule")
    a.add_argument("run_dir")
    q = sub.add_parser("quotes",
                       help="rag quotes=off against quotes=check on the same cells (issue 31's rule)")
    q.add_argument("off_root", nargs="?", help="the quotes=off runs (quality.py run --root ... directory)")
    q.add_argument("check_root", nargs="?", help="the quotes=check runs")
    q.add_argument("--sheet", help="write the hand-read sheet here")
    q.add_argument("--hand-read", type=int, default=20,
                   help="grounded and ungrounded verdicts each (default 20)")
    q.add_argument("--hand-seed", type=int, default=31)
    q.add_argument("--tally", help="count a filled sheet instead")
    q.add_argument("--drop", type=float, default=None, help="with --tally: the pooled drop in points")
    args = ap.parse_args(argv)
    if args.cmd == "quotes" and not args.tally and not (args.off_root and args.check_root):
        ap.error("quotes needs OFF_ROOT and CHECK_ROOT (or --tally SHEET)")
    return {"run": run_cells, "table": table, "wrong": wrong, "aggregate": aggregate,
            "quotes": quotes_compare}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
