"""`bench throughput`'s tables and reports: ``report.json``, ``report.md`` and ``scaling.png``, rewritten
after every level."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

REPORT_JSON = "report.json"
REPORT_MD = "report.md"
SCALING_PNG = "scaling.png"


def fmt(value: Any, spec: str = ".2f", scale: float = 1.0, suffix: str = "") -> str:
    """A number for a table; None -> "n/a"."""
    if value is None:
        return "n/a"
    return format(value * scale, spec) + suffix


def _pair(a: Any, b: Any, spec: str = ".1f") -> str:
    return "n/a" if a is None and b is None else f"{fmt(a, spec)} / {fmt(b, spec)}"


CLIENT_COLUMNS = ("conc.", "ok/failed", "claims/min", "prompt tok/s", "compl tok/s", "total tok/s",
                  "calls/claim", "p50 s", "p95 s")
SERVER_COLUMNS = ("conc.", "prefix hit", "own hit", "TTFT s", "TPOT s", "running avg/max", "waiting avg/max",
                  "KV max", "srv reqs", "GPU MiB")


def client_rows(report: dict[str, Any]) -> list[list[str]]:
    rows = []
    for lv in report["levels"]:
        stopped = " (stopped)" if lv.get("stopped") else ""
        rows.append([str(lv["concurrency"]), f"{lv['done']}/{lv['failed']}{stopped}",
                     fmt(lv["claims_per_min"]), fmt(lv["prompt_tokens_per_s"], ".1f"),
                     fmt(lv["completion_tokens_per_s"], ".1f"), fmt(lv["tokens_per_s"], ".1f"),
                     fmt(lv["llm_calls_per_claim"]), fmt(lv["latency_p50_s"], ".1f"),
                     fmt(lv["latency_p95_s"], ".1f")])
    return rows


def server_rows(report: dict[str, Any]) -> list[list[str]]:
    rows = []
    for lv in report["levels"]:
        s = lv["server"]
        gpu = lv.get("gpu_memory_used_max_mib")
        rows.append([str(lv["concurrency"]) + (" *" if lv.get("other_traffic") else ""),
                     fmt(s["prefix_cache_hit_rate"], ".1%"), fmt(lv.get("own_prefix_cache_hit_rate"), ".1%"),
                     fmt(s["ttft_mean_s"], ".3f"), fmt(s["tpot_mean_s"], ".4f"),
                     _pair(s["requests_running_mean"], s["requests_running_max"]),
                     _pair(s["requests_waiting_mean"], s["requests_waiting_max"]),
                     fmt(s["kv_cache_usage_max"], ".1%"), fmt(s["requests_finished"], ".0f"),
                     fmt(gpu, ".0f")])
    return rows


def _md_table(columns: tuple[str, ...], rows: list[list[str]]) -> list[str]:
    head = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    return head + ["| " + " | ".join(r) + " |" for r in rows]


def render_markdown(report: dict[str, Any], plot: str | None) -> str:
    sizes = ", ".join(f"{c}: {n}" for c, n in zip(report["levels_requested"], report["claims_per_level"],
                                                  strict=True))
    gpu = report.get("gpu")
    gpu_text = fmt((gpu or {}).get("total_mib"), ".0f", suffix=" MiB total") if gpu else "none (CPU)"
    lines = [f"# bench throughput: {report['method']} on {report['dataset']}", "",
             f"- status: {report['status']}",
             f"- model: {report['model']} at {report['endpoint'] or '(stand-in LLM)'}; "
             f"metrics: {report['metrics_url'] or 'n/a'}",
             f"- index: {report['index_dir'] or 'none'}; method parameters: "
             f"`{json.dumps(report['params']) if report['params'] else 'defaults'}`",
             "- concurrency is the number of claims in flight; LLM requests in flight stay at "
             f"{report.get('llm_concurrency') or 'the default'} at every level "
             "($VERACITY_LLM_CONCURRENCY, default "
             "256 = vLLM's default --max-num-seqs, so the client does not cap the server's batch)",
             f"- claims per level (concurrency: claims): {sizes}"
             f" (seed {report['seed']}, warm-up {report['warmup_claims']} claim(s) not reported)",
             f"- levels are independent: {report['disjointness']}. The server's prefix cache outlives a "
             "benchmark: claims an earlier run sent (same dataset and seed) may still be cached; "
             "another --seed gives claims it has not seen.",
             f"- GPU: {gpu_text}",
             f"- started {report['started_at']}, finished {report.get('finished_at', '-')}", ""]
    lines += ["## Client side (whole pipeline)", "", *_md_table(CLIENT_COLUMNS, client_rows(report)), "",
              "Tokens are the LLM usage of the claims that finished, over the level's wall time; "
              "calls/claim counts LLM calls; p50 / p95 are per-claim latencies.", "",
              "## Server side (vLLM /metrics)", "", *_md_table(SERVER_COLUMNS, server_rows(report)), "",
              "Prefix hit (prefix-cache hit rate), TTFT (mean time to first token), TPOT (mean time per "
              "output token) and srv reqs (requests the server finished) are deltas of the server's "
              "counters over the level; running / waiting requests and KV-cache usage (max) are polled "
              f"every {report['poll_interval_s']} s; GPU MiB is the most GPU memory in use during the "
              "level. n/a: the server does not expose the figure (or /metrics could not be read). Own "
              "hit is the share of this benchmark's prompt tokens the server reported as cached "
              "(`usage.prompt_tokens_details`), unaffected by other clients. * marks a level during "
              "which other clients used the server too.", ""]
    if report["warnings"]:
        lines += ["## Warnings", ""] + [f"- {w}" for w in report["warnings"]] + [""]
    failed = [(lv["concurrency"], cid, why) for lv in report["levels"] for cid, why in lv["failed_claims"]]
    if failed:
        lines += ["## Failed claims", ""]
        lines += [f"- concurrency {c}, claim {cid}: {why}" for c, cid, why in failed] + [""]
    if plot:
        lines += [f"![{plot}]({plot})", ""]
    return "\n".join(lines)


def plot_scaling(out_dir: Path, report: dict[str, Any]) -> str | None:
    """claims/min and tokens/s against concurrency (log2 axis)."""
    levels = [lv for lv in report["levels"] if lv["done"]]
    if not levels:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [lv["concurrency"] for lv in levels]
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.4))
    a.plot(xs, [lv["claims_per_min"] for lv in levels], "o-", color="#4477aa")
    a.set_ylabel("claims / min")
    b.plot(xs, [lv["tokens_per_s"] for lv in levels], "o-", label="total", color="#4477aa")
    b.plot(xs, [lv["prompt_tokens_per_s"] for lv in levels], "s--", label="prompt", color="#66ccee")
    b.plot(xs, [lv["completion_tokens_per_s"] for lv in levels], "^--", label="completion", color="#ee6677")
    b.set_ylabel("LLM tokens / s")
    b.legend(fontsize=8)
    for ax in (a, b):
        ax.set_xlabel("claims in flight (concurrency)")
        if len(set(xs)) > 1:
            ax.set_xscale("log", base=2)
        ax.set_xticks(xs, [str(x) for x in xs])
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    fig.suptitle(f"{report['method']}: end-to-end throughput ({report['model']})", fontsize=10)
    fig.tight_layout()
    fig.savefig(out_dir / SCALING_PNG, dpi=110)
    plt.close(fig)
    return SCALING_PNG


def write_reports(out_dir: Path, report: dict[str, Any]) -> None:
    """report.json, report.md and scaling.png; the reports are replaced atomically, so always readable."""
    out_dir = Path(out_dir)
    png = plot_scaling(out_dir, report)
    for name, text in ((REPORT_JSON, json.dumps(report, indent=2, default=str)),
                       (REPORT_MD, render_markdown(report, png))):
        tmp = out_dir / (name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(out_dir / name)
