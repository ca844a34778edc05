"""``bench compare``: one row per run directory (its settings and scores, formatted or not) and the markdown
table of them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

from veracity.bench.manifest import METRICS_FILE, read_run, run_evidence
from veracity.bench.report import finalize
from veracity.pipeline.labels import THREE_WAY


COMPARE_COLUMNS = ("run", "dataset", "method", "n", "acc", "acc 95% CI", "macro-F1", "F1 95% CI",
                   "majority acc",
                   "weighted-F1", "labels", "evidence", "NEI", "forced", "fallback", "LLM calls/claim",
                   "tokens/claim", "tools/claim", "memory hits/claim", "claim p50 s", "wall s",
                   "claims/min", "leakage")


def _runs(run_dirs: list[Path | str]) -> Iterator[tuple[Path, dict[str, Any], dict[str, Any]]]:
    """(directory, run.json, metrics) of each run directory (metrics recomputed from its files if metrics.json
    is missing)."""
    for d in map(Path, run_dirs):
        run = read_run(d)
        mpath = d / METRICS_FILE
        yield d, run, json.loads(mpath.read_text(encoding="utf-8")) if mpath.exists() else finalize(d)


def compare_rows(run_dirs: list[Path | str]) -> list[dict[str, str]]:
    """One row per run directory (metrics recomputed from its files if metrics.json is missing)."""
    rows = []
    for d, run, metrics in _runs(run_dirs):
        s = metrics.get("scores") or {}
        e = metrics.get("efficiency") or {}
        ls = metrics.get("label_space") or {}  # absent in runs from before label spaces: 3way
        cfg = run["config"]
        leak = run.get("leakage") or {}
        name = cfg.get("name") or d.name
        method = cfg["method"] + ("".join(f" --{a}" for a in cfg.get("ablations") or []))
        fmt = (lambda key, src, spec=".3f": format(src[key], spec) if key in src else "n/a")  # noqa: E731
        interval = (lambda src, key: "{:.2f}-{:.2f}".format(*src["ci95"][key])  # noqa: E731
                    if key in (src.get("ci95") or {}) else "n/a")
        rows.append({
            "run": name,
            "dataset": run["dataset"]["name"] + (f"/{run['dataset']['variant']}"
                                                 if run["dataset"].get("variant") else ""),
            "method": method,
            "evidence": run_evidence(run),
            "n": f"{metrics.get('n_predicted', 0)}/{metrics.get('n_claims', 0)}",
            "acc": fmt("accuracy", s), "macro-F1": fmt("macro_f1", s), "weighted-F1": fmt("weighted_f1", s),
            "acc 95% CI": interval(s, "accuracy"), "F1 95% CI": interval(s, "macro_f1"),
            "majority acc": fmt("accuracy", (metrics.get("baseline") or {}).get("majority") or {}),
            "fallback": fmt("fallback_rate", metrics.get("reliability") or {}, ".2f"),
            "labels": ls.get("name", THREE_WAY.name),
            # the NEI rate whenever NOT_ENOUGH_INFO is allowed; in binary, the verdicts the binary rule forced
            "NEI": fmt("nei_rate", s, ".2f") if ls.get("nei_allowed", True) else "n/a",
            "forced": fmt("forced_rate", ls, ".2f") if not ls.get("nei_allowed", True) else "n/a",
            "LLM calls/claim": fmt("llm_calls_per_claim", e, ".1f"), "tokens/claim": fmt("tokens_per_claim",
                                                                                         e, ".0f"),
            "tools/claim": fmt("tool_calls_per_claim", e, ".2f"),
                     "memory hits/claim": fmt("memory_hits_per_claim", e, ".2f"),
            "claim p50 s": fmt("latency_p50_s", e, ".1f"), "wall s": fmt("wall_time_s", e, ".0f"),
            "claims/min": fmt("claims_per_min", e, ".2f"),
            "leakage": ("allowed" if leak.get("index_newer") else "ok") if leak.get("checked") else "n/a",
        })
    return rows


def compare_records(run_dirs: list[Path | str]) -> list[dict[str, Any]]:
    """What ``bench compare --json`` prints: per run, its settings and the unformatted metrics."""
    out = []
    for d, run, metrics in _runs(run_dirs):
        cfg = run["config"]
        out.append({
            "run": cfg.get("name") or d.name, "dir": str(d), "dataset": run["dataset"]["name"],
            "variant": run["dataset"].get("variant"), "method": cfg["method"],
            "ablations": cfg.get("ablations") or [], "params": run.get("method_overrides") or {},
            "evidence": run_evidence(run),
            "label_space": (metrics.get("label_space") or {}).get("name", THREE_WAY.name),
            "model": (run.get("model") or {}).get("model"),
            "n_predicted": metrics.get("n_predicted", 0), "n_claims": metrics.get("n_claims", 0),
            "scores": metrics.get("scores") or {}, "efficiency": metrics.get("efficiency") or {},
            "leakage": run.get("leakage") or {},
        })
    return out


def compare_markdown(rows: list[dict[str, str]]) -> str:
    head = "| " + " | ".join(COMPARE_COLUMNS) + " |"
    sep = "|" + "---|" * len(COMPARE_COLUMNS)
    return "\n".join([head, sep] + ["| " + " | ".join(r[c] for c in COMPARE_COLUMNS) + " |" for r in rows])
