"""The CLI's two consoles (results on stdout, messages on stderr) and the plain form of a table when stdout
is not a terminal. Every command and the interrupt handler print through these."""

from __future__ import annotations

from typing import Any

from veracity.terminal import SafeConsole, one_line


def table_lines(table: Any) -> list[str]:
    """A rich Table as plain tab-separated lines: ``# title`` (when it has one, so several tables in one
    output
    stay apart), the header line (when the table shows one), then one line per row; cell markup dropped,
    whitespace inside a cell collapsed, control characters shown escaped (:mod:`veracity.terminal`), no
    wrapping, no box characters."""
    from rich.text import Text

    def plain(cell: Any) -> str:
        if isinstance(cell, Text):
            text = cell.plain
        elif isinstance(cell, str):
            text = Text.from_markup(cell).plain
        else:
            text = str(cell)
        return one_line(text)  # control characters shown escaped: a TSV line cannot drive the terminal

    columns = list(table.columns)
    lines = [f"# {plain(table.title)}"] if table.title else []
    if table.show_header:
        lines.append("\t".join(plain(c.header) for c in columns))
    cells = [list(c.cells) for c in columns]
    for i in range(table.row_count):
        lines.append("\t".join(plain(col[i]) if i < len(col) else "" for col in cells))
    return lines


class ScriptFriendlyConsole(SafeConsole):
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
err_console = SafeConsole(stderr=True)
