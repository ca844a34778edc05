"""`veracity bench retrieval`: recall@k of gold evidence titles + queries/s and latency per search mode."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TaskProgressColumn, TextColumn,
                           TimeRemainingColumn)
from rich.table import Table

from veracity.cli._common import console, fail, print_json
from veracity.errors import VeracityError
from veracity.terminal import terminal_safe


def _int_list(value: str, flag: str) -> list[int]:
    try:
        out = [int(x) for x in value.split(",") if x.strip()]
    except ValueError:
        out = []
    if not out or any(x < 1 for x in out):
        fail(f"{flag} needs comma-separated positive integers, got {value!r}", f"e.g. {flag} 1,5,10,20", 2)
    return out


@click.command("retrieval")
@click.option("--index", "index_dir", type=click.Path(path_type=Path), required=True, help="Index directory.")
@click.option("--dataset", type=click.Choice(["hover"]), default="hover", show_default=True,
              help="Claims with gold evidence titles.")
@click.option("--data-file", type=click.Path(path_type=Path), default=None,
              help="Dataset file (default: hover/hover_dev_release_v1.1.json under $VERACITY_DATA_DIR or "
                   "../shared/data).")
@click.option("--modes", default="bm25,dense,hybrid", show_default=True, help="Comma-separated search modes.")
@click.option("--k", "ks", default="1,5,10,20", show_default=True,
              help="Comma-separated cut-offs for recall@k.")
@click.option("--limit", type=int, default=None, help="Use the first N covered claims.")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="JSON report path (default: bench-results/retrieval-<time>.json).")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report instead of a table.")
def retrieval_cmd(index_dir, dataset, data_file, modes, ks, limit, out, as_json) -> None:
    """Recall@1/5/10/20 of the gold supporting-fact titles, queries/s, p50/p99 latency, build rate.

    Only claims whose gold articles are all in the index count (the others are reported as left out).

    \b
    Example:
      veracity index build ../shared/data/wiki_corpus_hover_gold/hover_dev_gold_paragraphs.jsonl demo \\
          --out ~/.veracity/indexes/hover-mix --dump-date 2017-10-01
      veracity bench retrieval --index ~/.veracity/indexes/hover-mix --dataset hover --limit 1000
    """
    from veracity.bench.retrieval import bench_retrieval

    mode_list = [m.strip() for m in modes.split(",") if m.strip()]
    bad = [m for m in mode_list if m not in ("bm25", "dense", "hybrid")]
    if bad or not mode_list:
        fail(f"--modes takes bm25, dense, hybrid; got {modes!r}", "e.g. --modes bm25,hybrid", 2)
    k_list = _int_list(ks, "--k")
    if limit is not None and limit < 1:
        fail(f"--limit must be at least 1, got {limit}", "e.g. --limit 1000", 2)
    from veracity.indexes.manifest import read_manifest

    try:
        read_manifest(index_dir)  # a missing or broken index before the dataset is looked for
    except VeracityError as exc:
        fail(str(exc), exc.hint, exc.exit_code)
    progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TaskProgressColumn(show_speed=True), TimeRemainingColumn(), console=console)
    tasks: dict[str, int] = {}

    def on_progress(mode: str, done: int, total: int) -> None:
        if mode not in tasks:
            tasks[mode] = progress.add_task(mode, total=total)
        progress.update(tasks[mode], completed=done)

    try:
        with progress:
            report = bench_retrieval(index_dir, dataset=dataset, data_file=data_file, modes=mode_list,
                                     ks=k_list,
                                     limit=limit, progress=on_progress)
    except VeracityError as exc:
        fail(str(exc), exc.hint, exc.exit_code)
    out = out or Path("bench-results") / f"retrieval-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    if as_json:
        print_json(report)
        return
    table = Table(title=f"bench retrieval — {dataset}, {report['claims_used']} claims, "
                        f"{report['index_passages']:,} passages")
    table.add_column("mode")
    for k in k_list:
        table.add_column(f"R@{k}", justify="right")
    table.add_column(f"all@{max(k_list)}", justify="right")
    for col in ("q/s", "p50 ms", "p99 ms"):
        table.add_column(col, justify="right")
    for r in report["modes"]:
        table.add_row(r["mode"], *[f"{r['recall'][str(k)]:.3f}" for k in k_list],
                      f"{r['all_gold'][str(max(k_list))]:.3f}", f"{r['queries_per_s']:.1f}",
                      f"{r['p50_latency_ms']:.1f}", f"{r['p99_latency_ms']:.1f}")
    console.print(table)
    rate = report["build_rate_passages_per_s"]
    console.print(f"build rate (manifest): read+BM25 {rate['read_bm25'] or '-'} passages/s, "
                  f"embedding {rate['embed'] or '-'} passages/s; claims left out (gold not in index): "
                  f"{report['claims_left_out_not_covered']}", highlight=False)
    console.print(f"report: {terminal_safe(out)}")


COMMANDS = [retrieval_cmd]
