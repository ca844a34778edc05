"""`veracity bench ...`: benchmarks that print numbers (LLM throughput, retrieval, accuracy runs)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import click
from rich.table import Table

from veracity.cli._common import console, print_json
from veracity.config import load_settings
from veracity.errors import ConfigError
from veracity.terminal import terminal_safe


def parse_int_list(value: str, flag: str) -> list[int]:
    try:
        out = [int(x) for x in value.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"{flag} must be a comma-separated list of integers, got {value!r}",
                          hint=f"e.g. {flag} 1,8,32") from None
    if not out or any(x < 1 for x in out):
        raise ConfigError(f"{flag} needs positive integers, got {value!r}", hint=f"e.g. {flag} 1,8,32")
    return out


@click.group("bench")
def bench() -> None:
    """Benchmarks: numbers, not tests.

    \b
    Examples:
      veracity bench llm --concurrency 1,8,32
      veracity bench retrieval --index ~/.veracity/indexes/hover-mix --dataset hover
      veracity bench datasets
    """


@bench.command("llm")
@click.option("--concurrency", default="1,8,32", show_default=True,
              help="Comma-separated in-flight request levels.")
@click.option("--requests", "requests_per_level", type=int, default=None,
              help="Requests per level and mode (default: max(8, 2 x concurrency)).")
@click.option("--max-tokens", type=int, default=192, show_default=True, help="Output budget per request.")
@click.option("--endpoint", default=None, help="OpenAI-compatible endpoint (default: the managed server).")
@click.option("--model", default=None, help="Served model name (default: what the endpoint serves).")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="JSON report path (default: bench-results/llm-<time>.json).")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report instead of a table.")
def bench_llm_cmd(concurrency, requests_per_level, max_tokens, endpoint, model, out, as_json) -> None:
    """Structured-output throughput of the endpoint, through the client and raw.

    For each concurrency level: output tok/s, requests/s, p50/p99 latency and schema-valid rate, once
    with plain HTTP straight to the server and once through LLMClient; the ratio shows the client's
    overhead (goal: >= 0.9 at concurrency 32).

    \b
    Example:
      veracity bench llm --concurrency 1,8,32 --out bench-results/llm.json
    """
    from veracity.bench.llm import bench_llm
    from veracity.serving.server import ensure_endpoint

    levels = parse_int_list(concurrency, "--concurrency")
    for flag, value in (("--requests", requests_per_level), ("--max-tokens", max_tokens)):
        if value is not None and value < 1:
            raise click.BadParameter(f"must be at least 1, got {value}", param_hint=f"'{flag}'")
    settings = load_settings().with_(endpoint=endpoint, model=model)
    with console.status("finding the model endpoint") as status:
        url, served = ensure_endpoint(settings, model,
                                      progress=lambda s: status.update(f"starting vLLM: {s}"))
        report = asyncio.run(bench_llm(url, served, levels, requests_per_level=requests_per_level,
                                       max_tokens=max_tokens, progress=lambda s: status.update(s)))
    out = out or Path("bench-results") / f"llm-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    if as_json:
        print_json(report)
        return
    table = Table(title=f"bench llm — {report['model']} at {report['endpoint']}")
    for col in ("conc.", "mode", "out tok/s", "req/s", "p50 s", "p99 s", "valid", "client/raw"):
        table.add_column(col, justify="right")
    for lv in report["levels"]:
        for mode in ("raw", "client"):
            r = lv[mode]
            table.add_row(str(lv["concurrency"]), mode, f"{r['output_tok_s']:.1f}", f"{r['requests_s']:.2f}",
                          f"{r['p50_latency_s']:.2f}", f"{r['p99_latency_s']:.2f}",
                          f"{r['schema_valid_rate']:.0%}",
                          f"{lv['client_over_raw_tok_s']:.2f}" if mode == "client" else "")
    console.print(table)
    console.print(f"report: {terminal_safe(out)}")


def _attach() -> None:
    """Subcommands written in their own modules (each exports ``COMMAND``)."""
    import importlib

    for name in ("bench_datasets", "bench_retrieval", "bench_run", "bench_throughput"):
        try:
            module = importlib.import_module(f"veracity.cli.{name}")
        except ModuleNotFoundError as exc:  # a module not written yet; a broken import still raises
            if exc.name != f"veracity.cli.{name}":
                raise
            continue
        for command in getattr(module, "COMMANDS", []):
            bench.add_command(command)


_attach()
COMMANDS = [bench]
