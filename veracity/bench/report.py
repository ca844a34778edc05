"""A benchmark run's report: :func:`finalize` scores what the run directory holds and (re)writes
``metrics.json``, ``report.md`` and the plots (``confusion.png``, ``hops.png`` for HoVer)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from veracity.bench.datasets import Dataset, load_dataset
from veracity.bench.manifest import (METRICS_FILE, REPORT_FILE, _write_json, evidence_meaning, read_run,
                                     run_evidence, run_manifest)
from veracity.bench.scoring import read_predictions, score_run
from veracity.pipeline.labels import BINARY, BINARY_RULE, THREE_WAY, label_space


def _plots(run_dir: Path, metrics: dict[str, Any]) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made = []
    scores = metrics.get("scores")
    if scores:
        labels = scores["confusion"]["labels"]
        matrix = scores["confusion"]["matrix"]
        fig, ax = plt.subplots(figsize=(1.6 + 1.3 * len(labels), 1.2 + 1.1 * len(labels)))
        ax.imshow(matrix, cmap="Blues")
        short = [lab.replace("NOT_ENOUGH_INFO", "NEI") for lab in labels]
        ax.set_xticks(range(len(labels)), short, rotation=30, ha="right")
        ax.set_yticks(range(len(labels)), short)
        ax.set_xlabel("predicted")
        ax.set_ylabel("gold")
        top = max((max(row) for row in matrix), default=0)
        for i, row in enumerate(matrix):
            for j, v in enumerate(row):
                ax.text(j, i, str(v), ha="center", va="center",
                        color="white" if top and v > top / 2 else "black")
        ax.set_title("confusion matrix")
        fig.tight_layout()
        fig.savefig(run_dir / "confusion.png", dpi=110)
        plt.close(fig)
        made.append("confusion.png")
    hops = metrics.get("by_hops")
    if hops:
        fig, ax = plt.subplots(figsize=(4.5, 3.2))
        keys = list(hops)
        ax.bar([f"{k}-hop" for k in keys], [hops[k]["macro_f1"] for k in keys], color="#4477aa")
        for i, k in enumerate(keys):
            ax.text(i, hops[k]["macro_f1"], f"{hops[k]['macro_f1']:.2f}\nn={hops[k]['n']}", ha="center",
                    va="bottom", fontsize=8)
        ax.set_ylim(0, 1.05)
        ax.set_ylabel("macro-F1")
        ax.set_title("macro-F1 by number of hops")
        fig.tight_layout()
        fig.savefig(run_dir / "hops.png", dpi=110)
        plt.close(fig)
        made.append("hops.png")
    conf = (metrics.get("confidence") or {}).get("metrics") or {}
    if conf.get("curve"):
        fig, ax = plt.subplots(figsize=(4.5, 3.2))
        cov, acc = zip(*conf["curve"], strict=True)
        ax.plot(cov, acc, color="#4477aa", label="as given")
        raw = ((metrics.get("confidence") or {}).get("raw") or {}).get("curve")
        if raw:
            rc, ra = zip(*raw, strict=True)
            ax.plot(rc, ra, color="#aa7744", linestyle="--", label="before the map")
            ax.legend(fontsize=8)
        ax.set_xlim(0, 1.02)
        ax.set_ylim(0, 1.05)
        ax.set_xlabel("coverage (most confident share answered)")
        ax.set_ylabel("accuracy")
        ax.set_title("risk-coverage")
        fig.tight_layout()
        fig.savefig(run_dir / "coverage.png", dpi=110)
        plt.close(fig)
        made.append("coverage.png")
    return made


def _label_space_line(run: dict[str, Any], metrics: dict[str, Any]) -> str:
    ls = metrics.get("label_space") or {}
    name = ls.get("name") or run_manifest(run).get("label_space") or THREE_WAY.name
    labels = " / ".join(ls.get("labels") or label_space(name).values())
    dataset = ls.get("dataset") or (run.get("dataset") or {}).get("label_space")
    whose = ("the dataset's" if dataset == name
             else f"--labels; the dataset's is {dataset}") if dataset else "recorded"
    rule = f"; a claim no verdict was reached for: {BINARY_RULE}" if name == BINARY.name else ""
    return f"- label space: {name} ({labels}; {whose}){rule}"


def _evidence_line(run: dict[str, Any]) -> str:
    evidence = run_evidence(run)
    line = f"- evidence: {evidence} ({run.get('evidence_meaning') or evidence_meaning(evidence)})"
    gold = (run.get("dataset") or {}).get("gold") or {}
    if evidence == "gold" and gold.get("dropped_without_complete_gold"):
        line += (f"; {gold['dropped_without_complete_gold']} of {gold['claims_read']} claims left out of the "
                 "selection for lack of complete gold evidence")
    return line


def _confidence_section(run: dict[str, Any], metrics: dict[str, Any]) -> list[str]:
    """The verdicts' confidence (veracity/bench/selective.py): ECE, AUROC, accuracy at 100 / 80 / 60 %
    coverage,
    before the calibration map too when one was applied."""
    conf = metrics.get("confidence")
    if not conf:
        return []
    settings = run_manifest(run).get("confidence") or {}
    cal = settings.get("calibration")
    lines = ["## Confidence", "",
             f"{conf['with_confidence']} verdicts with a confidence, {conf['without']} without (no logprobs, "
             "or no "
             f"deciding reply); {conf['abstained']} abstained (--min-confidence "
             f"{settings.get('min_confidence')}). Calibration map: "
             + (f"temperature {cal['temperature']} ({cal['path']})" if cal else "none") + ".", "",
             "| confidence | ECE | AUROC right-vs-wrong | accuracy at 100 % | at 80 % | at 60 % |",
             "|---|---|---|---|---|---|"]
    for name, key in (("as given", "metrics"), ("before the map", "raw")):
        m = conf.get(key)
        if not m or not m.get("n"):
            continue
        ci = m["ci95"]
        span = (lambda v, c: f"{v:.3f} [{c[0]:.3f}, {c[1]:.3f}]" if v is not None and c else "n/a")  # noqa: E731
        lines.append(f"| {name} | {span(m['ece'], ci['ece'])} | {span(m['auroc'], ci['auroc'])} | "
                     + " | ".join(span(m["accuracy_at"][k], ci["accuracy_at"][k]) for k in ("100%", "80%",
                                                                                            "60%"))
                     + " |")
    lines.append("")
    return lines


CLAIMS_CSV = "predictions.csv"
ENGINE_WORDS = {"vllm": "vLLM", "llamacpp": "llama.cpp (llama-server)",
                "llama-server": "llama.cpp (llama-server)",
                "llama.cpp": "llama.cpp (llama-server)"}


def server_engine(model: dict[str, Any]) -> str | None:
    """The program that served a run, as run.json records it: the managed server's engine (or its launch
    command's program), else what the endpoint's model list says of itself (``owned_by``); None: unknown."""
    server = model.get("server") or {}
    if server.get("engine"):
        return str(server["engine"])
    cmd = server.get("command") or []
    if cmd:
        prog = Path(str(cmd[0])).name.lower()
        if "llama" in prog:
            return "llamacpp"
        if "vllm" in " ".join(str(c) for c in cmd[:4]).lower():
            return "vllm"
    owners = {str(m.get("owned_by")) for m in model.get("served") or [] if m.get("owned_by")}
    return ", ".join(sorted(owners)) if owners else None


def _server_words(model: dict[str, Any]) -> str:
    engine = server_engine(model)
    managed = (model.get("server") or {}).get("managed")
    if engine is None:
        return " (managed server)" if managed else ""
    return f" ({'managed ' if managed else ''}{ENGINE_WORDS.get(engine, engine)} server)"


CLAIMS_IN_REPORT = 200  # the per-claim table of report.md; predictions.csv holds every claim


def claim_rows(dataset: Dataset, results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per predicted claim in the dataset's order: id, gold, predicted, correct, the claim, its
    cost."""
    gold = {c.id: (c, g) for c, g in dataset.claims}
    by_id = {r.get("id"): r for r in results if r.get("id") in gold}
    rows = []
    for cid, (c, g) in gold.items():
        r = by_id.get(cid)
        if r is None:
            continue
        summary = (r.get("trace") or {}).get("summary") or {}
        rows.append({"id": cid, "gold": r.get("gold") or g.value, "predicted": r.get("label"),
                     "correct": (r.get("gold") or g.value) == r.get("label"), "claim": c.text,
                     "llm_calls": summary.get("llm_calls"),
                     "tokens": (summary.get("prompt_tokens") or 0) + (summary.get("completion_tokens") or 0),
                     "grounding": r.get("grounding")})
    return rows


def write_claims_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    import csv

    with open(path, "w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["id", "gold", "predicted", "correct", "claim", "llm_calls",
                                          "tokens",
                                          "grounding"])
        w.writeheader()
        w.writerows(rows)


def _claims_table(rows: list[dict[str, Any]]) -> list[str]:
    if not rows:
        return []
    out = ["## Claims", "", f"Every claim with its gold label and prediction in `{CLAIMS_CSV}` "
           + (f"(the first {CLAIMS_IN_REPORT} of {len(rows)} here)." if len(rows) > CLAIMS_IN_REPORT
              else "(all here)."),
           "", "| id | gold | predicted | right | claim |", "|---|---|---|---|---|"]
    for r in rows[:CLAIMS_IN_REPORT]:
        text = " ".join(str(r["claim"]).split()).replace("|", "\\|")
        text = text if len(text) <= 120 else text[:117] + "..."
        out.append(f"| {str(r['id']).replace('|', '/')} | {r['gold']} | {r['predicted']} | "
                   f"{'yes' if r['correct'] else 'no'} | {text} |")
    return out + [""]


def render_report(run: dict[str, Any], metrics: dict[str, Any], plots: list[str],
                  claims: list[dict[str, Any]] | None = None) -> str:
    cfg = run["config"]
    ds = run["dataset"]
    lines = [f"# bench run: {cfg['method']} on {ds['name']}" + (f" ({ds['variant']})" if ds.get("variant")
                                                                else ""), ""]
    status = ("complete" if metrics.get("complete")
              else f"INCOMPLETE ({metrics['n_predicted']} of {metrics['n_claims']} claims)")
    model = run.get("model", {})
    record = run_manifest(run)
    lines += [
        f"- status: {status}",
        f"- claims: {ds['n_claims']} of {ds['total_before_limit']} (limit {cfg.get('limit')}, seed "
        f"{cfg.get('seed')}, "
        f"sample {cfg.get('sample') or 'random'},"
        f" hops {cfg.get('hops') or 'all'}); labels {', '.join(ds['labels'])}",
        _label_space_line(run, metrics),
        _evidence_line(run),
        f"- dataset sha256: `{ds['sha256'][:16]}`; files: "
        f"{', '.join(Path(p).name for p in ds['source_files'])}",
        "- method parameters: "
        f"""`{json.dumps(run['method_overrides'], default=str)
              if run['method_overrides'] else 'paper defaults'}`"""
        + (f"; ablations: {', '.join(cfg['ablations'])}" if cfg.get("ablations") else ""),
        "- model: "
        f"{model.get('model') or ', '.join(m.get('id', '?') for m in model.get('served') or []) or 'unknown'}"
        f" at {model.get('endpoint')}" + _server_words(model),
        f"- index: {record.get('index_dir') or 'none'}"
        + (f" ({record['index'].get('passages')} passages)" if isinstance(record.get("index"), dict) else ""),
    ]
    leak = run.get("leakage") or {}
    if leak.get("checked"):
        lines.append(f"- leakage guard: dataset released {leak['dataset_created']}, index dump date "
                     f"{leak['index_dump_date'] or 'unknown'}: {leak['status']}")
    else:
        lines.append(f"- leakage guard: not checked ({leak.get('reason', 'n/a')})")
    lines += [f"- sessions: {len(run.get('sessions', []))} (a resumed run adds one)", ""]
    scores = metrics.get("scores")
    if scores:
        lines += ["## Accuracy", "", "| metric | value |", "|---|---|"]
        ls = metrics.get("label_space") or {}
        ci = scores.get("ci95") or {}
        span = (lambda key: f" (95 % bootstrap {ci[key][0]:.3f}-{ci[key][1]:.3f})" if key in ci else "")  # noqa: E731
        lines += [f"| accuracy | {scores['accuracy']:.3f}{span('accuracy')} |",
                  f"| macro-F1 | {scores['macro_f1']:.3f}{span('macro_f1')} |",
                  f"| weighted-F1 | {scores['weighted_f1']:.3f} |"]
        major = (metrics.get("baseline") or {}).get("majority")
        if major:
            lines.append(f"| majority-class baseline ({major['label']}) | accuracy {major['accuracy']:.3f}, "
                         f"macro-F1 {major['macro_f1']:.3f} |")
        rel = metrics.get("reliability")
        if rel:
            lines.append(f"| replies that failed to validate (fallback used) | {rel['invalid_replies']} in "
                         f"{rel['claims_with_fallback']} claims ({rel['fallback_rate']:.3f}) |")
        if ls.get("nei_allowed", True):  # the NEI rate whenever NOT_ENOUGH_INFO is allowed (3way)
            lines.append(f"| NOT_ENOUGH_INFO rate | {scores['nei_rate']:.3f} |")
        else:
            lines.append(f"| verdicts forced by the binary rule | {ls.get('forced_verdicts', 0)} "
                         f"({ls.get('forced_rate', 0.0):.3f}) |")
        lines += [f"| predictions outside the label set | {scores['out_of_set_predictions']} |", ""]
        lines += ["| class | precision | recall | F1 | support |", "|---|---|---|---|---|"]
        for lab, s in scores["per_class"].items():
            lines.append(f"| {lab} | {s['precision']:.3f} | {s['recall']:.3f} | {s['f1']:.3f} | "
                         f"{s['support']} |")
        lines += ["", "Confusion matrix (rows gold, columns predicted):", "",
                  "| gold \\ pred | " + " | ".join(scores["confusion"]["labels"]) + " |",
                  "|---" * (len(scores["confusion"]["labels"]) + 1) + "|"]
        for lab, row in zip(scores["confusion"]["labels"], scores["confusion"]["matrix"], strict=True):
            lines.append(f"| {lab} | " + " | ".join(str(v) for v in row) + " |")
        lines.append("")
    if metrics.get("by_hops"):
        lines += ["## By number of hops", "", "| hops | n | accuracy | macro-F1 |", "|---|---|---|---|"]
        for h, s in metrics["by_hops"].items():
            lines.append(f"| {h} | {s['n']} | {s['accuracy']:.3f} | {s['macro_f1']:.3f} |")
        lines.append("")
    e = metrics.get("efficiency") or {}
    if e.get("claims"):
        lines += ["## Efficiency", "", "| per claim | value |", "|---|---|",
                  f"| LLM calls | {e['llm_calls_per_claim']:.2f} |",
                  f"| tokens (prompt + completion) | {e['tokens_per_claim']:.0f} |",
                  f"| tool calls | {e['tool_calls_per_claim']:.2f} |",
                  f"| memory hits | {e['memory_hits_per_claim']:.2f} |",
                  f"| latency p50 / p95 (s) | {e['latency_p50_s']:.1f} / {e['latency_p95_s']:.1f} |", "",
                  f"Wall time {e['wall_time_s']:.0f} s ({e['wall_time_source']}), {e['claims_per_min']:.2f} "
                  "claims/min "
                  f"at concurrency {run.get('concurrency')}.", ""]
    tri = (metrics.get("method_stats") or {}).get("trification")
    if tri:
        lines += ["## Trification graph statistics (paper's Table 2)", "",
                  f"Graph modifications per claim: {tri['graph_modifications_per_claim']:.2f} "
                  f"({tri['claims_modified']:.0%} of claims modified); claims with no valid plan: "
                  f"{tri['no_plan']}; "
                  "claims decided in static mode after the modification cap: "
                  f"{tri.get('static_fallbacks', 0)}.", "",
                  "| node type | initial graph | final graph |", "|---|---|---|"]
        for k in tri["nodes_initial"]:
            lines.append(f"| {k} | {tri['nodes_initial'][k]:.2f} | {tri['nodes_final'][k]:.2f} |")
        lines.append("")
    lines += _confidence_section(run, metrics)
    mer = (metrics.get("method_stats") or {}).get("mermaid")
    if mer:
        lines += ["## MERMAID executor", "",
                  f"Executor steps per claim {mer['executor_steps_per_claim']:.2f}; claims that recalled "
                  "evidence from "
                  f"memory {mer['claims_with_memory_hits']:.0%}; verdicts forced at T_max "
                  f"{mer['forced_verdicts']:.0%}.", ""]
    for png in plots:
        lines += [f"![{png}]({png})", ""]
    paper = cfg.get("paper") or {}
    if paper:
        lines += ["## Reported in the paper", ""] + [f"- {k}: {v}" for k, v in paper.items()] + [""]
    lines += _claims_table(claims or [])
    return "\n".join(lines)


def run_dataset(run: dict[str, Any]) -> Dataset:
    """The claims a run directory's run.json says it ran (the same sample, gold labels included)."""
    cfg = run["config"]
    return load_dataset(cfg["dataset"], run["dataset"].get("data_dir"), limit=cfg.get("limit"),
                        seed=cfg.get("seed"),
                        hops=cfg.get("hops"), variant=cfg.get("variant"), label_map=cfg.get("label_map"),
                        evidence=cfg.get("evidence") or "open", sample=cfg.get("sample") or "random")


def finalize(run_dir: Path, dataset: Dataset | None = None) -> dict[str, Any]:
    """Score what the run directory holds and (re)write metrics.json, report.md and the plots."""
    run_dir = Path(run_dir)
    run = read_run(run_dir)
    if dataset is None:
        dataset = run_dataset(run)
    wall = sum(s.get("elapsed_s", 0.0) for s in run.get("sessions", [])) or None
    # a run directory written before label spaces existed ran in 3way
    results = read_predictions(run_dir)
    metrics = score_run(dataset, results, wall, run_manifest(run).get("label_space") or THREE_WAY.name)
    metrics["run"] = {"name": run["config"].get("name") or run_dir.name, "method": run["config"]["method"],
                      "dataset": run["dataset"]["name"], "variant": run["dataset"].get("variant"),
                      "label_space": metrics["label_space"]["name"],
                      "evidence": run_evidence(run),
                      "ablations": run["config"].get("ablations", []), "model": run.get("model",
                                                                                        {}).get("model"),
                      "concurrency": run.get("concurrency"), "leakage": run.get("leakage")}
    _write_json(run_dir / METRICS_FILE, metrics)
    plots = _plots(run_dir, metrics)
    rows = claim_rows(dataset, results)
    write_claims_csv(run_dir / CLAIMS_CSV, rows)
    (run_dir / REPORT_FILE).write_text(render_report(run, metrics, plots, rows), encoding="utf-8")
    return metrics
