"""Ctrl-C for every long command (issue 29 point 1): exit 130 with one line saying what was kept and how
to resume; never a traceback, a crash report of the JVM, or a torch error.

A command says, before its long work, what an interrupt leaves behind (:func:`keep`): a function, called
only when the interrupt comes, so the line can count what was written by then. :func:`run_main` (the
command's error policy in ``_common``) catches the ``KeyboardInterrupt`` wherever it surfaces and calls
:func:`exit_interrupted`. The JVM that pyserini starts in-process is started with ``-Xrs``
(:mod:`veracity.indexes.java`), so the signal reaches Python and nothing else.
"""

from __future__ import annotations

import signal
from typing import Callable, NoReturn

from rich.text import Text

DEFAULT = "results written so far are kept; run the same command again to resume"

_kept: list[Callable[[], str]] = []


def keep(describe: Callable[[], str] | str) -> None:
    """What this invocation keeps if it is interrupted now, and how to resume (replaces the previous one)."""
    _kept[:] = [describe if callable(describe) else (lambda: describe)]


def reset() -> None:
    """Start of an invocation: nothing said yet (the default line applies)."""
    _kept.clear()


def message() -> str:
    """The line's text after ``interrupted: ``; a describer that fails falls back to the default."""
    if not _kept:
        return DEFAULT
    try:
        return " ".join(str(_kept[-1]()).split()) or DEFAULT
    except Exception:  # the line must come out whatever state the interrupted work left
        return DEFAULT


def exit_interrupted() -> NoReturn:
    """Print ``interrupted: ...`` (one line, however wide the terminal) on stderr and exit 130.

    A second Ctrl-C while the line is printed is ignored, so it cannot turn into a traceback."""
    from veracity.cli.console import err_console

    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread (an embedding host): nothing to guard
        pass
    err_console.print(Text.assemble(("interrupted:", "yellow"), " ", message()), highlight=False,
                      soft_wrap=True)
    raise SystemExit(130)
