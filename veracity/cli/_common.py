"""Shared CLI plumbing: one-line errors with hints, the console, small renderers."""

from __future__ import annotations

import json
import sys
from typing import Any

import click
from rich.console import Console

from veracity.errors import VeracityError

console = Console()
err_console = Console(stderr=True)


def fail(message: str, hint: str | None = None, code: int = 1) -> None:
    """Print ``error: message`` (+ hint) on stderr and exit with ``code``."""
    err_console.print(f"[bold red]error:[/] {' '.join(message.split())}", highlight=False, soft_wrap=True)
    if hint:
        err_console.print(f"[dim]hint:[/] {hint}", highlight=False, soft_wrap=True)
    raise SystemExit(code)


def run_main(group: click.Group) -> None:
    """Run the click group; turn library errors into one line + hint, never a traceback."""
    try:
        group.main(standalone_mode=False)
    except click.exceptions.Abort:
        err_console.print("aborted")
        raise SystemExit(130)
    except click.ClickException as exc:  # bad flags / arguments
        exc.show()
        raise SystemExit(exc.exit_code)
    except click.exceptions.Exit as exc:
        raise SystemExit(exc.exit_code)
    except VeracityError as exc:
        fail(str(exc), exc.hint, exc.exit_code)
    except KeyboardInterrupt:
        err_console.print("interrupted: results written so far are kept; run the same command again to resume")
        raise SystemExit(130)
    except BrokenPipeError:
        sys.stderr.close()
        raise SystemExit(0)


def print_json(obj: Any) -> None:
    click.echo(json.dumps(obj, ensure_ascii=False, default=str))


def print_table(title: str, columns: list[str], rows: list[list[str]]) -> None:
    """A rich table on a terminal; plain tab-separated lines (a header line, then one line per row, no
    wrapping, no box characters) when stdout is not a terminal, so scripts can cut and grep it."""
    if not console.is_terminal:
        click.echo("\t".join(columns))
        for row in rows:
            click.echo("\t".join(" ".join(str(c).split()) for c in row))
        return
    from rich.table import Table

    table = Table(title=title)
    for col in columns:
        table.add_column(col, overflow="fold")
    for row in rows:
        table.add_row(*[str(c) for c in row])
    console.print(table)
