"""`veracity check`: a whole text (a file, `-` for stdin, or `-i docs.jsonl` with `-o`) -> sentences ->
atomic claims -> check-worthiness -> each factual claim verified with `--method` -> scores.

The verification flags are `veracity verify`'s own option objects (so every flag verify has, check has);
the text is checked before any index or server is touched."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import click
from veracity.terminal import terminal_safe

from veracity.cli._common import console, err_console, fail, print_json
from veracity.errors import ClusterError, ConfigError, EndpointError, OutputError, endpoint_stop_hint

# verify's options that mean the same here; verify's own CLAIM, -i, -o, --json and -q are check's below
_OWN = {"claim", "input_path", "output_path", "as_json", "quiet"}


def _verify_options() -> list[click.Parameter]:
    from veracity.cli.verify import verify

    return [p for p in verify.params if p.name not in _OWN]


def build_claim_verifier(opts: dict):
    """A ClaimVerifier from verify's options, validated as `veracity verify` validates them."""
    from veracity.check.engine import ClaimVerifier
    from veracity.cli.verify import run_config
    from veracity.pipeline.api import Verifier

    config = run_config(opts, opts["semantic_memory"])  # verify's checks, once
    if config.evidence.setting == "gold":
        raise ConfigError("--evidence gold needs claims that carry their gold evidence: extracted claims "
                          "have none",
                          hint="use --evidence open (the index) or --evidence none (closed book)")
    return ClaimVerifier(Verifier.from_config(config))


@click.command("check", context_settings={"show_default": False})
@click.argument("source", required=False, metavar="TEXT_FILE|-")
@click.option("-i", "--input", "input_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="JSONL file of texts: one {\"id\": ..., \"text\": ...} per line (needs -o).")
@click.option("-o", "--output", "output_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Results JSONL (with -i): one line per text; OUT.parts/ keeps extractions and verified "
                   "claims, "
              "so a rerun resumes per text and per claim.")
@click.option("--max-chars", type=int, default=None,
              help="Longest text accepted, in characters (default 20,000).")
@click.option("--factscore", is_flag=True, help="Also score each text FActScore-style: supported / verified "
              "claims, times exp(1 - gamma/n) when it has n < gamma verified claims (--param gamma=N, "
              "default 10).")
@click.option("--check-param", "check_params", multiple=True, metavar="KEY=VALUE", hidden=True,
              help="The old spelling of --param for the check stage's settings.")
@click.option("--json", "as_json", is_flag=True,
              help="Print the result as JSON: text -> sentences -> claims -> "
              "verdict, evidence, trace (with -i: one object per text as it is written).")
@click.option("--report", "report_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write one self-contained HTML page (opens offline): sentences highlighted, claims and "
              "evidence on click.")
@click.option("-q", "--quiet", is_flag=True, help="With -i: only the progress and the summary.")
@click.pass_context
def check(ctx, source, input_path, output_path, max_chars, factscore, check_params, as_json, report_path,
          quiet,
          **opts) -> None:
    """Check a whole text: split it into sentences, extract atomic claims, keep the factual ones, verify each
    with --method (any method, with verify's flags), and score the text.

    \b
    Examples:
      veracity check examples/text.txt
      cat answer.txt | veracity check - --method rag --json
      veracity check examples/text.txt --report report.html --factscore
      veracity check examples/text.txt --param worthiness=true --param rag.quotes=check
      veracity check -i texts.jsonl -o checks.jsonl --method mermaid

    Each sentence is marked by its worst claim verdict; a text's factual precision is supported / (supported
    + refuted). Opinions and non-claims are listed but not verified.
    """
    from veracity.check import STAGE
    from veracity.check.inputs import DEFAULT_MAX_CHARS, read_docs_jsonl, read_text
    from veracity.cli.verify import _same_file, parse_params

    if (source is None) == (input_path is None):
        raise click.UsageError("give either a TEXT_FILE (or - for stdin) or -i DOCS.jsonl (not both)")
    if input_path is not None and output_path is None:
        raise click.UsageError("-i needs -o RESULTS.jsonl (where results are appended)")
    if output_path is not None and input_path is None:
        raise click.UsageError("-o goes with -i DOCS.jsonl; for one text use --json or --report")
    if input_path is not None and report_path is not None:
        raise click.UsageError("--report writes one text's page: use it without -i")
    if input_path is not None and _same_file(input_path, output_path):
        raise ConfigError(f"-o {output_path} is the texts file given with -i: "
                          "results would be appended to it",
                          hint="pass another -o, e.g. -o checks.jsonl")
    if opts.get("backend") == "ray" and input_path is None:
        raise ConfigError("--backend ray runs a texts file: one text is checked in this process",
                          hint="pass -i DOCS.jsonl -o RESULTS.jsonl, or drop --backend ray")
    limit = DEFAULT_MAX_CHARS if max_chars is None else max_chars
    if limit < 1:
        raise ConfigError(f"--max-chars must be at least 1, got {limit}",
                          hint=f"e.g. --max-chars {DEFAULT_MAX_CHARS}")
    stage_items, method_items = split_params(tuple(opts.get("params") or ()))
    opts["params"] = method_items
    params = STAGE.make_params(parse_params(tuple(check_params) + stage_items))
    gamma = params.gamma if factscore else None
    if report_path is not None:
        _check_writable(report_path)
    # the input, before any index or server is touched
    if input_path is not None:
        docs, rejected = read_docs_jsonl(input_path, limit)
    else:
        text = read_text(source, limit)
    cv = build_claim_verifier(opts)
    try:
        if input_path is not None:
            _run_batch(cv, docs, rejected, output_path, params, gamma, as_json, quiet)
            return
        record = _run_one(cv, text, params, gamma, live=err_console.is_terminal)
        if report_path is not None:
            from veracity.check.render import report_html

            report_path.expanduser().write_text(report_html(record), encoding="utf-8")
        if as_json:
            print_json(record)
        else:
            from veracity.check.render import render_text

            console.print(render_text(record), highlight=False)
            if report_path is not None:
                console.print(f"report: {terminal_safe(str(report_path))}", highlight=False)
    finally:
        cv.close()


def split_params(items: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``--param`` items for the check stage (its settings and roles: ``worthiness=false``, ``gamma=5``,
    ``extractor.max_tokens=256``, or any key written ``check.KEY``) and those for the method."""
    from veracity.check import STAGE
    from veracity.check.roles import CheckParams

    names = {f.name for f in dataclasses.fields(CheckParams)} | {r.short for r in STAGE.roles}
    stage, method = [], []
    for item in items:
        key = item.partition("=")[0].strip()
        if key.startswith("check."):
            stage.append(item.strip().removeprefix("check."))
        elif key.split(".", 1)[0] in names:
            stage.append(item)
        else:
            method.append(item)
    return tuple(stage), tuple(method)


def _check_writable(path: Path) -> None:
    path = path.expanduser()
    if path.is_dir():
        raise ConfigError(f"--report {path} is a directory",
                          hint="pass a file path, e.g. --report report.html")
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise ConfigError(f"--report {path}: folder {folder} does not exist",
                          hint="create it or pass another path")
    import os

    if not os.access(path if path.exists() else folder, os.W_OK):
        raise ConfigError(f"--report {path} cannot be written (permission denied)",
                          hint="pass a path you can write")


def _run_one(cv, text: str, params, gamma, live: bool) -> dict:
    """One text; on a terminal, a progress line as claims are extracted and verified."""
    from veracity.check.run import check_text

    # stderr is a log or a pipe: a bar would draw nothing, so one line per sentence and per claim
    if not live:
        import time

        t0 = time.monotonic()
        seen = {"sentences": 0, "claims": 0, "factual": 0}

        def line(msg: str) -> None:
            err_console.print(f"[{time.monotonic() - t0:6.0f} s] {msg}", highlight=False, markup=False,
                              soft_wrap=True)

        def on_line(ev: dict) -> None:
            kind = ev["kind"]
            if kind == "check.sentences":
                seen["sentences"] = len(ev["sentences"])
                line(f"extracting claims from {seen['sentences']} sentences")
            elif kind == "check.sentence":
                factual = sum(1 for c in ev["claims"] if c["category"] == "factual")
                n = len(ev["claims"])
                line(f"sentence {ev['sentence']}/{seen['sentences']}: {n} claim{'s' if n != 1 else ''}, "
                     f"{factual} factual")
            elif kind == "check.extracted":
                seen["factual"] = sum(1 for s in ev["sentences"] for c in s["claims"] if c["category"]
                                      == "factual")
                line(f"verifying {seen['factual']} factual claims with {cv.method}")
            elif kind == "claim.verdict":
                seen["claims"] += 1
                r = ev["record"]
                line(f"claim {seen['claims']}/{seen['factual']} {r['id']}: {r.get('label') or 'FAILED'}")

        try:
            return asyncio.run(check_text(text, cv, params=params, gamma=gamma, on_event=on_line))
        except EndpointError as exc:
            fail(str(exc), endpoint_stop_hint(exc))
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err_console, transient=True) as bar:
        task = bar.add_task("extracting claims", total=None)

        def on_event(ev: dict) -> None:
            kind = ev["kind"]
            if kind == "check.extracted":
                n = sum(1 for s in ev["sentences"] for c in s["claims"] if c["category"] == "factual")
                bar.update(task, description=f"verifying with {cv.method}", total=n, completed=0)
            elif kind == "claim.verdict":
                bar.advance(task)

        try:
            return asyncio.run(check_text(text, cv, params=params, gamma=gamma, on_event=on_event))
        except EndpointError as exc:
            bar.stop()
            fail(str(exc), endpoint_stop_hint(exc))
    raise AssertionError("unreachable")


def _run_batch(cv, docs, rejected, out: Path, params, gamma, as_json: bool, quiet: bool) -> None:
    from veracity.check.render import summary_line
    from veracity.check.run import check_batch

    for bad in rejected:
        err_console.print(f"[yellow]skipped[/] {terminal_safe(str(bad))}", highlight=False, soft_wrap=True)
    written = [0]

    def on_text(record: dict) -> None:
        written[0] += 1
        if as_json:
            print_json(record)
        elif not quiet:
            console.print(f"{terminal_safe(record['id'])}  {terminal_safe(summary_line(record))}",
                          highlight=False, soft_wrap=True)

    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                               TimeRemainingColumn)

    bar = Progress(TextColumn("checking texts"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   TimeRemainingColumn(), console=err_console, transient=True,
                   disable=not err_console.is_terminal)
    task = bar.add_task("texts", total=None)

    lines = not err_console.is_terminal  # a log or a pipe: one line per text and per verified claim instead

    def on_progress(finished: int, pending: int) -> None:
        bar.update(task, completed=finished, total=pending)
        if lines:
            err_console.print(f"texts {finished}/{pending}", highlight=False, markup=False)

    def on_claim(record: dict) -> None:
        if lines:
            err_console.print(f"claim {record['id']}: {record.get('label') or 'FAILED'}", highlight=False,
                              markup=False, soft_wrap=True)

    try:
        with bar:
            stats = asyncio.run(check_batch(docs, out, cv, params=params, gamma=gamma, on_text=on_text,
                                            on_claim=on_claim, on_progress=on_progress))
    except (EndpointError, OutputError, ClusterError) as exc:
        hint = exc.hint if isinstance(exc, (OutputError, ClusterError)) else endpoint_stop_hint(exc)
        fail(f"{exc}; {written[0]} texts written this run, all kept in {out} (verified claims in "
             f"{out}.parts/)", hint)
        return
    except KeyboardInterrupt:
        err_console.print(f"interrupted: {written[0]} texts written this run, kept in "
                          f"{terminal_safe(str(out))}; "
                          "run the same command again to resume", highlight=False)
        raise SystemExit(130) from None
    for tid, why in stats.failed:
        err_console.print(f"[red]failed[/] text {terminal_safe(tid)}: {terminal_safe(why)}", highlight=False,
                          soft_wrap=True)
    (err_console if as_json else console).print(
        f"{stats.done} texts written, {stats.skipped} already done, {len(stats.failed)} failed, "
        f"{len(rejected)} bad "
        f"lines → {terminal_safe(str(out))}  ({stats.extracted} extracted, {stats.claims_verified} claims "
        "verified this run)",
        highlight=False)
    if stats.failed:
        err_console.print("[dim]hint:[/] run the same command again to retry the failed claims")


check.params.extend(_verify_options())
COMMANDS = [check]
