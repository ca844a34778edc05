"""Shared CLI plumbing: one-line errors with hints, the console, small renderers."""

from __future__ import annotations

import json
import os
import sys
import traceback
from typing import Any

import click
from rich.text import Text

from veracity.cli import interrupt
from veracity.cli.console import ScriptFriendlyConsole, console, err_console, table_lines  # noqa: F401 (re-exported)
from veracity.errors import VeracityError


def fail(message: str, hint: str | None = None, code: int = 1) -> None:
    """Print ``error: message`` and ``hint: ...`` on stderr, one line each, and exit with ``code``.

    Both are printed as plain text (a path or an ``[Errno 13]`` in them is not taken for rich markup)."""
    err_console.print(Text.assemble(("error:", "bold red"), " ", _one_line(message)), highlight=False,
                      soft_wrap=True)
    if hint:
        err_console.print(Text.assemble(("hint:", "dim"), " ", _one_line(hint)), highlight=False, soft_wrap=True)
    raise SystemExit(code)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


# -- the command's error policy -----------------------------------------------------------------------
_debug = {"on": False}  # set by `veracity --debug` (or VERACITY_DEBUG=1) for the current invocation


def set_debug(ctx: click.Context | None = None, param: click.Parameter | None = None, value: bool = True) -> None:
    """The ``--debug`` option's callback: tracebacks are shown for the rest of this invocation."""
    if value:
        _debug["on"] = True


def debug_option(fn: Any) -> Any:
    """``--debug``: print the traceback of an error before its one-line message."""
    return click.option("--debug", is_flag=True, expose_value=False, is_eager=True, callback=set_debug,
                        help="On an error, also print the Python traceback (for bug reports). "
                        "VERACITY_DEBUG=1 does the same.")(fn)


def _command_path(group: click.Group, args: list[str]) -> str:
    """``veracity verify``, ``veracity bench run``: the command an argument list names, for hints."""
    names = [group.name or "veracity"]
    cmd: Any = group
    for token in args:
        if token.startswith("-"):
            continue
        sub = cmd.commands.get(token) if isinstance(cmd, click.Group) else None
        if sub is None:
            break
        names.append(token)
        cmd = sub
    return " ".join(names)


def _os_error_message(exc: OSError) -> str:
    what = exc.strerror or str(exc) or type(exc).__name__
    if exc.filename is not None:
        target = f"{exc.filename}" + (f" -> {exc.filename2}" if exc.filename2 is not None else "")
        return f"cannot use {target}: {what}"
    return what


def run_main(group: click.Group, args: list[str] | None = None, **extra: Any) -> None:
    """Run the click group with the command's error policy: every error is one ``error:`` line and one
    ``hint:`` line on stderr, never a traceback (unless ``--debug`` / ``VERACITY_DEBUG=1`` asks for it).

    Library errors (:class:`VeracityError`) print their message and hint; bad flags and arguments (click's
    usage errors) their message and the command's ``--help``; an operating-system error (a path that cannot
    be read or written) the path and why; anything else is a bug, named as one."""
    argv = list(sys.argv[1:] if args is None else args)
    _debug["on"] = os.environ.get("VERACITY_DEBUG", "").strip().lower() not in ("", "0", "false", "no")
    command = _command_path(group, argv)
    interrupt.reset()
    try:
        try:
            group.main(args=argv, standalone_mode=False, **extra)
        except BaseExceptionGroup as group_exc:  # a TaskGroup's failure: report the error inside it
            raise _leaf(group_exc) from group_exc
    except click.exceptions.Abort as exc:
        if isinstance(exc.__cause__, KeyboardInterrupt):  # click turns Ctrl-C into Abort
            interrupt.exit_interrupted()
        err_console.print("aborted")
        raise SystemExit(130)
    except click.ClickException as exc:  # bad flags / arguments
        if type(exc).__name__ == "NoArgsIsHelpError":  # a group run without a command: its help, as click shows it
            exc.show()
            raise SystemExit(exc.exit_code)
        ctx = getattr(exc, "ctx", None)
        where = ctx.command_path if ctx is not None else command
        fail(exc.format_message(), f"see `{where} --help`", exc.exit_code)
    except click.exceptions.Exit as exc:
        raise SystemExit(exc.exit_code)
    except VeracityError as exc:
        _show_traceback()
        fail(str(exc), exc.hint or f"see `{command} --help`; add --debug (`veracity --debug ...`) for details",
             exc.exit_code)
    except KeyboardInterrupt:
        interrupt.exit_interrupted()
    except BrokenPipeError:
        sys.stderr.close()
        raise SystemExit(0)
    except OSError as exc:  # a path that cannot be read or written, a full disk, ...
        _show_traceback()
        fail(_os_error_message(exc), "check the path, its folder and their permissions (and free space); "
             "add --debug (`veracity --debug ...`) for the traceback", 1)
    except Exception as exc:  # a bug: one line, the traceback on request
        _show_traceback()
        fail(f"unexpected {type(exc).__name__} in `{command}`: {exc}",
             "this is a bug in veracity: run the same command as `veracity --debug ...` and report the "
             "traceback", 1)


def _leaf(exc: BaseException) -> BaseException:
    """The error to report from an exception group: its first VeracityError, else its first leaf."""
    leaves: list[BaseException] = []

    def walk(e: BaseException) -> None:
        if isinstance(e, BaseExceptionGroup):
            for sub in e.exceptions:
                walk(sub)
        else:
            leaves.append(e)

    walk(exc)
    return next((e for e in leaves if isinstance(e, VeracityError)), leaves[0] if leaves else exc)


def _show_traceback() -> None:
    if _debug["on"]:
        traceback.print_exc(file=sys.stderr)


class VeracityGroup(click.Group):
    """The top-level ``veracity`` group. Run standalone (the installed command, ``CliRunner``) it applies
    :func:`run_main`'s error policy, so every caller sees the same one-line errors."""

    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        run_main(self, args=None if args is None else list(args), prog_name=prog_name, complete_var=complete_var,
                 **extra)
        return None


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
