"""`veracity bench throughput`: end-to-end throughput of a method at several concurrency levels."""

from __future__ import annotations

import time
from pathlib import Path

import click
from rich.table import Table

from veracity.cli._common import RegistryHelp, console, err_console, methods_listed, print_json
from veracity.config import load_settings
from veracity.terminal import terminal_safe


@click.command("throughput")
@click.option("--method", required=True, cls=RegistryHelp,
              help_from=lambda: f"Verification method: {methods_listed()}.")
@click.option("--concurrency", default="1,4,16,64", show_default=True,
              help="Comma-separated claims-in-flight levels "
              "(LLM requests in flight stay at $VERACITY_LLM_CONCURRENCY or 256).")
@click.option("--dataset", default="hover", show_default=True, help="Where the claims come from: a benchmark "
              "name (hover, fever, ...) or jsonl:PATH.")
@click.option("--data-dir", default=None, help="Folder with the datasets (default: $VERACITY_DATA_DIR).")
@click.option("--claims-per-level", type=int, default=None,
              help="Claims per level (default: max(8, 2 x concurrency), cut down to fit the dataset).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the claim sample.")
@click.option("--warmup", type=int, default=1, show_default=True,
              help="Claims verified at concurrency 1 before the first level (not reported; 0 for none).")
@click.option("--index", "index", default=None,
              help="Index directory (default: $VERACITY_INDEX or the demo index).")
@click.option("--endpoint", default=None,
              help="OpenAI-compatible endpoint (default: the managed local server).")
@click.option("--model", default=None, help="Model name on the endpoint (default: the one it serves).")
@click.option("--param", "params", multiple=True, metavar="KEY=VALUE", help="Method parameter, repeatable.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Output directory (default: bench-results/throughput-<method>-<time>/).")
@click.option("--json", "as_json", is_flag=True, help="Print report.json instead of tables.")
def throughput_cmd(method, concurrency, dataset, data_dir, claims_per_level, seed, warmup, index, endpoint,
                   model,
                   params, out_dir, as_json) -> None:
    """End-to-end throughput of a method: claims/min and LLM tokens/s as claims in flight grow.

    Each level verifies its own claims (disjoint from the other levels', so vLLM's prefix cache never
    sees a claim twice) with the whole pipeline, a fresh run state and a fresh evidence memory (the
    level's folder is its state directory). Levels vary the claims in flight; the LLM request limit stays
    at its default (256, vLLM's default --max-num-seqs), so the client never caps the server's batch. Per
    level: claims/min, tokens/s, LLM calls per claim, latency p50/p95 and failures; from the server's
    /metrics: prefix-cache hit rate, running/waiting requests, time to first token, time per output
    token, KV-cache usage; GPU memory when there is a GPU. Writes report.json, report.md and
    scaling.png into the output directory.

    \b
    Examples:
      veracity bench throughput --method rag --concurrency 1,4,16,64 --index ~/.veracity/indexes/hover-mix
      veracity bench throughput --method mermaid --concurrency 1,8 --claims-per-level 16 --out runs/tp-mermaid
    """
    from veracity.bench.throughput import ThroughputConfig, bench_throughput
    from veracity.bench.throughput_report import CLIENT_COLUMNS, SERVER_COLUMNS, client_rows, server_rows
    from veracity.cli.bench import parse_int_list
    from veracity.cli.verify import parse_params

    levels = parse_int_list(concurrency, "--concurrency")
    cfg = ThroughputConfig.of(method=method, levels=levels, dataset=dataset, data_dir=data_dir,
                              claims_per_level=claims_per_level, seed=seed, index=index,
                              params=parse_params(params),
                              warmup=warmup)
    settings = load_settings(endpoint=endpoint, model=model)
    safe = method.replace("/", "_")
    out_dir = out_dir or Path("bench-results") / f"throughput-{safe}-{time.strftime('%Y%m%d-%H%M%S')}"

    def say(msg: str) -> None:
        err_console.print(msg, highlight=False, soft_wrap=True)

    def warn(msg: str) -> None:
        err_console.print(f"[yellow]warning:[/] {terminal_safe(msg)}", highlight=False, soft_wrap=True)

    say(f"output directory: {out_dir}")
    report = bench_throughput(cfg, out_dir, settings=settings, progress=not as_json, notify=say, warn=warn)
    if as_json:
        print_json(report)
        return
    title = f"bench throughput — {report['method']} on {report['dataset']}, {report['model']}"
    for name, columns, rows in (("client side (whole pipeline)", CLIENT_COLUMNS, client_rows(report)),
                                ("server side (vLLM /metrics)", SERVER_COLUMNS, server_rows(report))):
        table = Table(title=f"{title}: {name}")
        for col in columns:
            table.add_column(col, justify="right")
        for row in rows:
            table.add_row(*row)
        console.print(table)
    for lv in report["levels"]:
        for cid, why in lv["failed_claims"]:
            err_console.print(f"[red]failed[/] claim {terminal_safe(cid)} (concurrency {lv['concurrency']}): "
                              f"{terminal_safe(why)}",
                              highlight=False, soft_wrap=True)
    console.print("levels ran disjoint claims with fresh run state and memory; "
                  f"report: {out_dir / 'report.md'}", highlight=False)


COMMANDS = [throughput_cmd]
