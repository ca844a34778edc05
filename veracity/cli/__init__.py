"""The ``veracity`` command: a thin click layer over the library.

Each command group lives in its own module here; they parse options, call the library, and render
with rich. Every error becomes one ``error:`` line and one ``hint:`` line on stderr, never a traceback
(``veracity --debug ...`` prints the traceback too): see :func:`veracity.cli._common.run_main`.
"""

from __future__ import annotations

import click

from veracity import __version__
from veracity.cli._common import VeracityGroup, debug_option, run_main


@click.group("veracity", cls=VeracityGroup, context_settings={"help_option_names": ["-h", "--help"],
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


def _register() -> None:
    # Imported here so `veracity --help` stays fast and a broken optional module names itself.
    from veracity.cli import bench, bundle, check, doctor, engines, index, methods, models, serve, verify, web

    for module in (models, engines, serve, doctor, index, methods, verify, check, bench, web, bundle):
        for command in module.COMMANDS:
            cli.add_command(command)


def main() -> None:
    _register()
    run_main(cli)
