"""The ``veracity`` command: a thin click layer over the library.

Each command group lives in its own module here; they parse options, call the library, and render
with rich. Every error becomes one ``error:`` line and one ``hint:`` line on stderr, never a traceback
(``veracity --debug ...`` prints the traceback too): see :func:`veracity.cli._common.run_main`.
"""

from __future__ import annotations

import click

from veracity import __version__
from veracity.cli._common import VeracityGroup, debug_option, run_main


# each command lives in the module of its name, imported when the command runs or help lists it: `serve
# --status`, `index search` or `doctor` do not import the methods, datasets and pipeline that verify, check
# and bench need (about 0.5 s of CPU in every such process)
COMMAND_MODULES = ("models", "engines", "serve", "doctor", "index", "methods", "verify", "check", "bench",
                   "web", "bundle")


class _Commands(VeracityGroup):
    """The top-level group, its commands' modules imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(self.commands) | set(COMMAND_MODULES))

    def get_command(self, ctx: click.Context | None, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMAND_MODULES:
            _load(cmd_name)
        return self.commands.get(cmd_name)


@click.group("veracity", cls=_Commands, context_settings={"help_option_names": ["-h", "--help"],
                                                              "max_content_width": 100})
@click.version_option(__version__, prog_name="veracity")
@debug_option
def cli() -> None:
    """Offline claim verification on your own hardware.

    Multi-agent fact-checking methods (MERMAID, EMULATE, Trification, ZoFia) and baselines, every
    agent role calling a locally served open model (vLLM), evidence from a local Wikipedia index.

    \b
    Example (first run sets up everything on the CPU default model):
      veracity index build demo --out ~/.veracity/indexes/demo
      veracity verify "The Eiffel Tower is in Berlin." --index ~/.veracity/indexes/demo
    """


def _load(name: str) -> None:
    """Import ``veracity.cli.<name>`` and add its commands (a broken optional module names itself)."""
    import importlib

    for command in importlib.import_module(f"veracity.cli.{name}").COMMANDS:
        if command.name not in cli.commands:
            cli.add_command(command)


def _register() -> None:
    """Every command added now (what in-process callers of ``cli`` that list its commands use)."""
    for name in COMMAND_MODULES:
        _load(name)


def main() -> None:
    run_main(cli)
