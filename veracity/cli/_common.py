"""Shared CLI plumbing: one-line errors with hints, the console, small renderers."""

from __future__ import annotations

import json
import sys
from typing import Any

import click
from rich.console import Console

from veracity.errors import VeracityError



def table_lines(table: Any) -> list[str]:
    """A rich Table as plain tab-separated lines: ``# title`` (when it has one, so several tables in one output
    stay apart), the header line (when the table shows one), then one line per row; cell markup dropped,
    whitespace inside a cell collapsed, no wrapping, no box characters."""
    from rich.text import Text

    def plain(cell: Any) -> str:
        if isinstance(cell, Text):
            text = cell.plain
        elif isinstance(cell, str):
            text = Text.from_markup(cell).plain
        else:
            text = str(cell)
        return " ".join(text.split())

    columns = list(table.columns)
    lines = [f"# {plain(table.title)}"] if table.title else []
    if table.show_header:
        lines.append("\t".join(plain(c.header) for c in columns))
    cells = [list(c.cells) for c in columns]
    for i in range(table.row_count):
        lines.append("\t".join(plain(col[i]) if i < len(col) else "" for col in cells))
    return lines


class ScriptFriendlyConsole(Console):
    """The CLI's console: on a terminal it prints as rich does; when stdout is not a terminal (a pipe, a
    file) a table prints as tab-separated lines (:func:`table_lines`), so ``| grep`` and ``| cut`` work."""

    def print(self, *objects: Any, **kwargs: Any) -> None:  # type: ignore[override]
        from rich.table import Table

        if not self.is_terminal and len(objects) == 1 and isinstance(objects[0], Table):
            for line in table_lines(objects[0]):
                self.file.write(line + "\n")
            self.file.flush()
            return
        super().print(*objects, **kwargs)


console = ScriptFriendlyConsole()
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
    """A rich table on a terminal; tab-separated lines when stdout is not a terminal (see the console)."""
    from rich.table import Table

    table = Table(title=title)
    for col in columns:
        table.add_column(col, overflow="fold")
    for row in rows:
        table.add_row(*[str(c) for c in row])
    console.print(table)
