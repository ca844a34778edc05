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
from veracity.terminal import json_safe, one_line, terminal_safe


def fail(message: str, hint: str | None = None, code: int = 1) -> None:
    """Print ``error: message`` and ``hint: ...`` on stderr, one line each, and exit with ``code``.

    Both are printed as plain text (a path or an ``[Errno 13]`` in them is not taken for rich markup)."""
    err_console.print(Text.assemble(("error:", "bold red"), " ", _one_line(message)), highlight=False,
                      soft_wrap=True)
    if hint:
        err_console.print(Text.assemble(("hint:", "dim"), " ", _one_line(hint)), highlight=False,
                          soft_wrap=True)
    raise SystemExit(code)


def _one_line(text: str) -> str:
    return one_line(text)


# -- the command's error policy -----------------------------------------------------------------------
_debug = {"on": False}  # set by `veracity --debug` (or VERACITY_DEBUG=1) for the current invocation


def set_debug(ctx: click.Context | None = None, param: click.Parameter | None = None,
              value: bool = True) -> None:
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
        sub = cmd.get_command(None, token) if isinstance(cmd, click.Group) else None  # type: ignore[arg-type]
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
        # a group run without a command: its help, as click shows it
        if type(exc).__name__ == "NoArgsIsHelpError":
            exc.show()
            raise SystemExit(exc.exit_code)
        ctx = getattr(exc, "ctx", None)
        where = ctx.command_path if ctx is not None else command
        fail(exc.format_message(), f"see `{where} --help`", exc.exit_code)
    except click.exceptions.Exit as exc:
        raise SystemExit(exc.exit_code)
    except VeracityError as exc:
        _show_traceback()
        fail(str(exc),
             exc.hint or f"see `{command} --help`; add --debug (`veracity --debug ...`) for details",
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
        run_main(self, args=None if args is None else list(args), prog_name=prog_name,
                 complete_var=complete_var,
                 **extra)
        return None


def print_json(obj: Any) -> None:
    click.echo(json_safe(json.dumps(obj, ensure_ascii=False, default=str)))


def print_table(title: str, columns: list[str], rows: list[list[str]]) -> None:
    """A rich table on a terminal; tab-separated lines when stdout is not a terminal (see the console)."""
    from rich.table import Table

    table = Table(title=terminal_safe(title))
    for col in columns:
        table.add_column(terminal_safe(col), overflow="fold")
    for row in rows:
        table.add_row(*[terminal_safe(c) for c in row])
    console.print(table)


class MethodChoice(click.Choice):
    """Choices read from the METHODS registry at run time (methods added later show up)."""

    def __init__(self) -> None:
        super().__init__([], case_sensitive=False)

    @property
    def choices(self):  # type: ignore[override]
        from veracity.pipeline.methods import METHODS

        return list(METHODS)

    @choices.setter
    def choices(self, value) -> None:
        pass


def config_options(*names: str, help: dict[str, Any] | None = None, defaults: bool = True) -> Any:
    """The click options of the :class:`~veracity.pipeline.config.VerifierConfig` fields ``names``, in that
    order on ``--help``: flag, metavar, type and default come from each field's ``Option`` (one source for
    every command); ``help`` replaces a field's help text where a command says it its own way (a callable:
    built when help is shown, e.g. from a registry). ``defaults=False`` (``bench run``, whose config file
    and dataset supply what a flag leaves out): every option defaults to None, and a registry option takes
    any name (the config names a bad one in one line). The values arrive under the field names, ready for
    ``VerifierConfig.from_options``."""
    from pathlib import Path

    from veracity.pipeline.config import VerifierConfig

    opts = dict(VerifierConfig.options(*names))
    unknown = [n for n in names if n not in opts]
    if unknown:
        raise ValueError(f"config_options: no option for {unknown}")

    def decorate(fn: Any) -> Any:
        for name in reversed(names):
            opt = opts[name]
            text = (help or {}).get(name, opt.help)
            kw: dict[str, Any] = {"cls": RegistryHelp,
                                  "help_from": text} if callable(text) else {"help": text}
            if opt.metavar:
                kw["metavar"] = opt.metavar
            if opt.type is bool:
                kw["is_flag"] = True
                if not defaults:
                    kw["default"] = None
            else:
                default = VerifierConfig.option_default(name)
                kw["default"] = (opt.cli_default if opt.cli_default is not None
                                 else default) if defaults else None
                kw["show_default"] = opt.show_default and defaults
                kw["multiple"] = opt.multiple
                if opt.registry == "methods" and defaults:
                    kw["type"] = MethodChoice()
                elif opt.type is Path:
                    kw["type"] = click.Path(path_type=Path, file_okay=not opt.directory)
                elif opt.type is not None:
                    kw["type"] = opt.type
            fn = click.option(opt.flag, name, **kw)(fn)
        return fn

    return decorate


class RegistryHelp(click.Option):
    """An option whose help text is built when help is shown (``help_from()``), e.g. from the METHODS or
    DATASETS registry, so the list follows the registry without importing it when the CLI starts."""

    def __init__(self, *args: Any, help_from: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._help_from = help_from

    def get_help_record(self, ctx: click.Context) -> Any:
        if self._help_from is not None:
            self.help = self._help_from()
        return super().get_help_record(ctx)


def _listed(names: list[str], last: str = "or") -> str:
    return ", ".join(names[:-1]) + f" {last} {names[-1]}" if len(names) > 1 else "".join(names)


def methods_listed() -> str:
    """``direct, rag, ... or zofia``: the METHODS registry, in its order."""
    from veracity.pipeline.methods import METHODS

    return _listed(list(METHODS))


def datasets_listed() -> str:
    """``hover, feverous-s, ..., liar``: the DATASETS registry, in its order."""
    from veracity.bench.datasets.registry import DATASETS

    return ", ".join(DATASETS)
