"""Output meant for people does not break pipes: tables print as tab-separated lines when stdout is not a
terminal (no wrapping, no box characters), on a terminal as rich tables."""

from __future__ import annotations

import io

from click.testing import CliRunner
from rich.table import Table

from veracity.cli import _register, cli
from veracity.cli._common import ScriptFriendlyConsole, table_lines

BOX = set("│┃─━┏┓┗┛┡┩└┘┌┐╭╮╰╯")


def test_table_lines_drop_markup_and_collapse_whitespace():
    t = Table(title="t")
    t.add_column("name")
    t.add_column("ok?")
    t.add_row("a very long model name that a terminal would wrap", "[green]yes[/]")
    t.add_row("b\nc", "")
    assert table_lines(t) == ["# t", "name\tok?", "a very long model name that a terminal would wrap\tyes",
                              "b c\t"]


def test_a_piped_table_is_tsv_and_a_terminal_gets_the_rich_table():
    t = Table()
    t.add_column("x")
    t.add_row("llama-3.1-8b-instruct")
    piped = io.StringIO()
    ScriptFriendlyConsole(file=piped, width=20).print(t)
    assert piped.getvalue() == "x\nllama-3.1-8b-instruct\n"
    tty = io.StringIO()
    ScriptFriendlyConsole(file=tty, width=20, force_terminal=True).print(t)
    assert BOX & set(tty.getvalue())


def test_listing_commands_print_whole_names_on_one_line_when_piped(monkeypatch, tmp_path):
    monkeypatch.setenv("VERACITY_HOME", str(tmp_path))
    _register()
    runner = CliRunner()
    out = runner.invoke(cli, ["models", "list"]).output
    assert not BOX & set(out)
    assert any(line.split("\t")[0] == "llama-3.1-8b-instruct" for line in out.splitlines())
    out = runner.invoke(cli, ["methods", "list"]).output
    assert out.splitlines()[0] == "# methods"
    assert [line.split("\t")[0] for line in out.splitlines()[2:]] == [
        "direct", "rag", "mermaid", "emulate", "trification", "zofia"]
