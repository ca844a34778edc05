"""Terminal-safe text (veracity.terminal): a claim, text, passage, title, explanation, id or path that holds
control characters or rich markup prints as written, escaped, on a terminal, through a pipe (tab-separated
lines) and as JSON: it can neither drive the terminal (set the title, clear the screen, forge a hyperlink)
nor lose words to rich's markup parser (``"[for] the discovery`` must keep ``[for]``)."""

from __future__ import annotations

import io
import json
import re

import pytest
from click.testing import CliRunner
from rich.table import Table

from veracity.cli._common import fail, print_json
from veracity.cli.console import ScriptFriendlyConsole, table_lines
from veracity.terminal import SafeConsole, control_safe, json_safe, one_line, terminal_safe

TITLE_AND_CLEAR = "The sky \x1b]0;PWNED\x07\x1b[2J is blue."
SHOWN = "The sky \\x1b]0;PWNED\\x07\\x1b[2J is blue."
MARKUP = 'Chemistry "[for] the discovery [link=https://evil.example/]click here[/link] [bold red]ALERT[/]'
SGR = re.compile(r"\x1b\[[0-9;]*m")  # the only escape sequences rich itself writes for styles


def only_styles(out: str) -> str:
    """``out`` with rich's own style sequences removed: what is left must hold no ESC at all."""
    return SGR.sub("", out)


def terminal() -> tuple[ScriptFriendlyConsole, io.StringIO]:
    buf = io.StringIO()
    return ScriptFriendlyConsole(file=buf, force_terminal=True, width=200, color_system="standard"), buf


@pytest.mark.parametrize("raw,shown", [
    ("\x1b[2J", "\\x1b[2J"), ("\x07", "\\x07"), ("a\rb", "a\\x0db"), ("\x00", "\\x00"), ("\x7f", "\\x7f"),
    ("\x9b31m", "\\x9b31m"), ("evil\u202eexe.txt", "evil\\u202eexe.txt"), ("\u2066x\u2069",
                                                                           "\\u2066x\\u2069"),
    ("bad \udcff byte", "bad \\udcff byte"), ("keep\ttab\nnewline", "keep\ttab\nnewline"),
    ("back\\slash [x] ünïcödé ≠ 東京", "back\\slash [x] ünïcödé ≠ 東京"),
])
def test_control_characters_are_shown_as_escapes_and_text_is_kept(raw, shown):
    assert control_safe(raw) == shown


def test_terminal_safe_escapes_markup_so_brackets_and_links_print_as_written():
    con, buf = terminal()
    con.print(f"[bold]passage:[/] {terminal_safe(MARKUP)}", highlight=False, soft_wrap=True)
    out = buf.getvalue()
    assert "\x1b]8;" not in out  # no OSC 8 hyperlink was forged
    assert only_styles(out).strip() == f"passage: {MARKUP}"  # every bracket kept, nothing styled
    assert "\x1b" not in only_styles(out)
    # a backslash before a bracket, or at the end before the caller's own tag, cannot escape the escaping
    con, buf = terminal()
    con.print(terminal_safe("x\\[bold]y\\") + "[red]z[/]", highlight=False)
    assert only_styles(buf.getvalue()).strip() == "x\\[bold]y\\z"
    assert "\x1b[31m" in buf.getvalue()  # the caller's own [red] still styles


def test_the_console_escapes_controls_whatever_reached_print_but_keeps_its_own_styles():
    con, buf = terminal()
    con.print(f"[green]ok[/] {TITLE_AND_CLEAR}", highlight=False)  # a string that missed the helper
    out = buf.getvalue()
    assert SGR.search(out)  # rich's styles still reach the terminal
    # (rich itself drops BEL, backspace, vertical tab, form feed and carriage return from what it prints)
    assert only_styles(out).strip() == f"ok {SHOWN}".replace("\\x07", "")
    err = io.StringIO()
    SafeConsole(file=err, force_terminal=True).print(TITLE_AND_CLEAR, highlight=False)
    assert "\x1b" not in only_styles(err.getvalue()) and "PWNED" in err.getvalue()


def test_text_printed_to_a_pipe_or_file_is_not_folded_at_80_columns():
    """A run directory's path under a long temporary folder came out cut in two when stderr was a pipe
    (rich folds at 80 columns where it knows no width); on a terminal rich still fits the window."""
    path = "/tmp/pytest-of-root/pytest-101/popen-gw0/test_cli_refusals_are_one_line0/run-directory/r"
    piped = io.StringIO()
    SafeConsole(file=piped).print(f"run directory: {path}", highlight=False)
    assert piped.getvalue() == f"run directory: {path}\n"
    term = io.StringIO()
    SafeConsole(file=term, force_terminal=True, width=40).print(f"run directory: {path}", highlight=False)
    assert len(only_styles(term.getvalue()).splitlines()) > 1


def test_tsv_lines_show_controls_escaped_and_keep_brackets():
    t = Table(title=terminal_safe("search — " + TITLE_AND_CLEAR))
    t.add_column("passage")
    t.add_column("text")
    t.add_row(terminal_safe("Chem#0"), terminal_safe(MARKUP + "\tcol\nrow"))
    lines = table_lines(t)
    assert lines == [f"# search — {SHOWN}", "passage\ttext", f"Chem#0\t{MARKUP} col row"]
    piped = io.StringIO()
    ScriptFriendlyConsole(file=piped).print(t)
    assert "\x1b" not in piped.getvalue() and piped.getvalue().splitlines() == lines


def test_search_results_keep_square_brackets_and_forge_no_link():
    """issue 44's finding: ``index search`` printed ``Chemistry " the discovery`` for ``"[for] the
    discovery`` (rich ate the brackets); a passage holding ``[link=...]`` could forge a hyperlink."""
    from veracity.cli.index import hits_table
    from veracity.indexes.retriever import Hit

    hits = [Hit("Chemistry#3", "Chemistry", MARKUP + " " + TITLE_AND_CLEAR, 1.5)]
    con, buf = terminal()
    con.print(hits_table(hits, "bm25", "[for] \x1b[2J", width=1000))
    out = buf.getvalue()
    assert "\x1b]8;" not in out and "\x1b" not in only_styles(out)
    flat = " ".join(only_styles(out).replace("│", " ").split())
    assert '"[for] the discovery [link=https://evil.example/]click' in flat and "[bold red]ALERT[/]" in flat
    assert "\\x1b]0;PWNED\\x07" in flat and "bm25 — [for] \\x1b[2J" in flat
    piped = io.StringIO()
    ScriptFriendlyConsole(file=piped).print(hits_table(hits, "bm25", "[for]", width=1000))
    assert piped.getvalue().splitlines()[2] == f"1\t1.5000\tChemistry#3\t{MARKUP} {SHOWN}"


def test_json_output_escapes_what_json_leaves_raw_and_parses_back_to_the_same_value(capsys):
    value = {"claim": "\x1b]0;t\x07 \x9b2J \u202e \u2028 \x7f plain ü"}
    print_json(value)
    out = capsys.readouterr().out
    assert not re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u202e]", out)
    assert json.loads(out) == value
    assert json_safe(json.dumps(["\udcff"], ensure_ascii=False)) == '["\\udcff"]'


def test_an_error_line_shows_a_hostile_path_escaped(capsys):
    with pytest.raises(SystemExit):
        fail(f"cannot read /tmp/{TITLE_AND_CLEAR}", hint="[link=https://x]check[/link] the \x1b[2J path")
    err = capsys.readouterr().err
    assert "\x1b" not in err and SHOWN in err and "[link=https://x]check[/link]" in err
    assert one_line("a\n\tb\x1b") == "a b\\x1b"


# -- the commands
# ---------------------------------------------------------------------------------------------
@pytest.fixture
def scripted_verifier(monkeypatch):
    """verify and check run against the scripted model, which repeats the hostile strings back."""
    from tests.unit.scripted_llm import ScriptedLLM, script_every_verifier

    llm = ScriptedLLM({
        "direct.judge": lambda m: {"explanation": f"Because {TITLE_AND_CLEAR} {MARKUP}",
                                   "label": "SUPPORTED"},
        "check.extractor": lambda m: {"claims": [f"The sky {TITLE_AND_CLEAR}"]},
        "check.worthiness": lambda m: {"kind": "checkable_statement"},
    })
    script_every_verifier(monkeypatch, llm)
    return llm


def run(args, tmp_path, input=None):
    from veracity.cli import _register, cli

    _register()
    env = {"VERACITY_HOME": str(tmp_path / "home"), "VERACITY_ENDPOINT": "http://127.0.0.1:9/v1"}
    return CliRunner().invoke(cli, args, env=env, input=input)


def test_verify_prints_a_hostile_claim_and_explanation_escaped(scripted_verifier, tmp_path):
    res = run(["verify", TITLE_AND_CLEAR, "--method", "direct"], tmp_path)
    assert res.exit_code == 0, res.stderr
    assert "\x1b" not in res.stdout
    flat = " ".join(res.stdout.replace("│", " ").split())  # the panel's wrapping and borders undone
    assert f"Claim: {SHOWN}" in flat and f"Because {SHOWN} {MARKUP}" in flat
    src = tmp_path / "claims.jsonl"
    src.write_text(json.dumps({"id": "[bold]x\x1b[2J", "claim": TITLE_AND_CLEAR}) + "\n{bad \x1b[2J line\n")
    res = run(["verify", "-i", str(src), "-o", str(tmp_path / "r.jsonl"), "--method", "direct"], tmp_path)
    assert res.exit_code == 0, res.stderr
    assert "\x1b" not in res.stdout + res.stderr
    assert f"[bold]x\\x1b[2J  SUPPORTED  [no passage cited]  {SHOWN}" in res.stdout


def test_check_prints_a_hostile_text_escaped(scripted_verifier, tmp_path):
    res = run(["check", "-", "--method", "direct"], tmp_path, input=f"{TITLE_AND_CLEAR} [for] the win.")
    assert res.exit_code == 0, res.stderr
    assert "\x1b" not in res.stdout + res.stderr
    flat = " ".join(res.stdout.split())
    assert f"[SUPPORTED] {SHOWN}" in flat and "[SUPPORTED] [for] the win." in flat
    assert f"1. The sky {SHOWN} SUPPORTED" in flat
