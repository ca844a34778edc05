"""The top-level command imports a command's module only when that command runs (veracity/cli/__init__.py):
help still lists every command, and a command that needs no pipeline does not import the methods."""

from __future__ import annotations

import os
import subprocess
import sys

from click.testing import CliRunner

from veracity.cli import COMMAND_MODULES, cli

RUN = ("import sys\nfrom veracity.cli import main\nsys.argv = ['veracity', *sys.argv[1:]]\n"
       "try:\n    main()\nexcept SystemExit:\n    pass\n"
       "print('LOADED', ' '.join(m for m in ('veracity.pipeline.methods', 'veracity.cli.bench', "
       "'veracity.cli.verify') if m in sys.modules) or 'none', file=sys.stderr)")


def loaded(tmp_path, *args: str) -> str:
    env = {**os.environ, "VERACITY_HOME": str(tmp_path / "home")}
    done = subprocess.run([sys.executable, "-c", RUN, *args], capture_output=True, text=True, env=env,
                          timeout=120)
    return done.stderr.strip().splitlines()[-1]


def test_help_lists_every_command():
    out = CliRunner().invoke(cli, ["--help"]).output
    listed = out.split("Commands:", 1)[1].split()
    assert all(name in listed for name in COMMAND_MODULES), out


def test_a_command_without_the_pipeline_does_not_import_it_and_verify_does(tmp_path):
    assert loaded(tmp_path, "serve", "--status") == "LOADED none"
    assert "veracity.pipeline.methods" in loaded(tmp_path, "verify", "--help")
