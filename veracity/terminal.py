"""Terminal-safe text: what any user-supplied or corpus-supplied string (a claim, a text, a passage, a title,
an explanation, an id, a path) goes through before it reaches a terminal or a tab-separated line.

Two dangers, one module:

- control characters: ``ESC``, ``BEL``, carriage return, the C1 controls, bidirectional overrides and lone
  surrogates of a badly decoded file would set the window title, clear the screen, move the cursor, hide or
  reorder words, or crash the encoder. :func:`control_safe` shows each as a visible escape (``\\x1b``,
  ``\\u202e``) and keeps newlines and tabs;
- rich markup: a string printed through rich is parsed for ``[bold]``, ``[link=...]`` and the like, so a
  passage holding ``[for]`` loses the word and one holding ``[link=https://...]`` or ``[/]`` forges a link or
  a style. :func:`terminal_safe` escapes the markup as well.

Use :func:`terminal_safe` for every piece of outside text put into a string that rich parses (an f-string
given to ``console.print``, a table cell, a panel title); use :func:`control_safe` for a
:class:`rich.text.Text`
piece (not parsed for markup) and for plain writes (tab-separated lines, ``sys.stdout.write``). The CLI's
consoles (:mod:`veracity.cli.console`) also pass everything they print through :func:`control_safe`, so a
string that missed the helper still cannot drive the terminal.
"""

from __future__ import annotations

import re
from typing import Any

from rich.console import Console
from rich.segment import Segment
from rich.text import Text

# C0 controls but tab and newline, DEL, the C1 controls, the bidirectional embeddings/overrides/isolates and
# marks, the line/paragraph separators, and lone surrogates (a file decoded with errors="surrogateescape")
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u2028\u2029"
                     "\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _escape_char(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def control_safe(text: object) -> str:
    """``text`` (``str()`` of it) with each control character shown as a visible escape (``\\x1b``,
    ``\\x07``, ``\\u202e``); newlines and tabs kept; a backslash is kept as it is."""
    s = text if isinstance(text, str) else str(text)
    return _UNSAFE.sub(_escape_char, s)


def terminal_safe(text: object) -> str:
    """``text`` safe to put into a string that rich parses: control characters shown escaped
    (:func:`control_safe`) and rich markup escaped, so ``[for]`` prints as ``[for]`` and ``[link=...]``,
    ``[/]`` or ``[bold]`` print as written instead of styling the output."""
    from rich.markup import escape

    return escape(control_safe(text))


def json_safe(dumped: str) -> str:
    """A JSON document (``json.dumps(..., ensure_ascii=False)``) with the control characters JSON leaves raw
    (DEL, the C1 controls, bidirectional controls, line separators, lone surrogates) written as ``\\uXXXX``
    escapes: the same JSON value, but printing it cannot drive the terminal."""
    return _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", dumped)


def one_line(text: object) -> str:
    """``text`` on one line, safe for a tab-separated cell or a one-line message: whitespace runs (tabs and
    newlines included) collapsed to one space, control characters shown escaped."""
    s = text if isinstance(text, str) else str(text)
    return control_safe(" ".join(s.split()))


class SafeConsole(Console):
    """A console that shows every control character of the text it prints as a visible escape
    (:func:`veracity.terminal.control_safe`): a claim, passage or path holding ``ESC ]0;...`` or ``ESC [2J``
    cannot set the window title or clear the screen, whichever way it reached ``print``. Rich's own control
    segments (cursor moves of a progress bar) and its styles are left as they are."""

    def print(self, *objects: Any, **kwargs: Any) -> None:  # type: ignore[override]
        """As rich prints, except that text printed where the output is not a terminal (a pipe, a file, a
        log) is not folded at rich's default 80 columns: a path, a claim or a message stays on its line,
        whole, for ``grep`` and for a reader of the log (a run directory's path under a long temporary
        folder came out cut in two)."""
        if (kwargs.get("soft_wrap") is None and not self.is_terminal
                and all(isinstance(o, (str, Text)) for o in objects)):
            kwargs["soft_wrap"] = True
        super().print(*objects, **kwargs)

    def _render_buffer(self, buffer: Any) -> str:
        return super()._render_buffer(
            seg if seg.control else Segment(control_safe(seg.text), seg.style, seg.control) for seg in buffer)
