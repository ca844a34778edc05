"""`veracity verify`: check one claim (a panel) or a JSONL file of claims (resumable batch)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from rich.console import Group
from veracity.terminal import control_safe, terminal_safe
from rich.panel import Panel
from rich.text import Text

from veracity.cli import interrupt
from veracity.cli._common import config_options, console, err_console, fail, print_json
from veracity.config import load_settings
from veracity.errors import ClusterError, ConfigError, EndpointError, OutputError, endpoint_stop_hint

LABEL_STYLE = {"SUPPORTED": "bold green", "REFUTED": "bold red", "NOT_ENOUGH_INFO": "bold yellow"}


def _method_names() -> list[str]:
    from veracity.pipeline.methods import METHODS

    return list(METHODS)


def parse_params(items: tuple[str, ...]) -> dict[str, object]:
    """``("t_max=3", "k=8", "executor.max_tokens=512")`` -> typed dict (JSON values, else strings)."""
    out: dict[str, object] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--param {item!r} is not key=value", hint="example: --param t_max=3")
        try:
            out[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            out[key.strip()] = value
    return out


def confidence_text(record: dict) -> list[tuple[str, str]]:
    """The verdict's confidence as text pieces: ``confidence 0.83`` (``n/a`` when the engine gave none), and
    with --min-confidence an abstention with the label it would have given."""
    if "confidence" not in record:
        return []
    c = record.get("confidence")
    out = [(f"  confidence {c:.2f}" if c is not None else "  confidence n/a", _confidence_style(c))]
    if record.get("abstained"):
        out.append((f"  abstained: would say {record.get('abstained_label')}", "bold yellow"))
    return out


def _confidence_style(c: float | None) -> str:
    return "dim" if c is None else "green" if c >= 0.9 else "yellow" if c >= 0.7 else "bold red"


def render_verdict(record: dict) -> Panel:
    label = record["label"]
    grounding = record.get("grounding")  # with --param quotes=show|check
    parts: list = [Text.assemble(("Claim: ", "bold"), control_safe(record["claim"])), Text(""),
                   Text.assemble(("Verdict: ", "bold"), (label, LABEL_STYLE.get(label, "bold")),
                                 *confidence_text(record),
                                 *([("  ungrounded: a quote is not in its passage", "bold yellow")]
                                   if grounding == "ungrounded" else [])),
                   Text(control_safe(record["explanation"] or "(no explanation)")), Text("")]
    quotes = record.get("quotes") or []
    if record["evidence"]:
        parts.append(Text("Evidence", style="bold underline"))
        for ev in record["evidence"]:
            words = control_safe(ev["text"]).split()
            text = " ".join(words[:80]) + (" ..." if len(words) > 80 else "")
            parts.append(Text.assemble((f"[{control_safe(ev['passage_id'])}] ", "cyan"),
                                       (control_safe(ev["title"]), "bold"),
                                       "\n", text))
            parts += [quote_line(q) for q in quotes if q["passage_id"] == ev["passage_id"]]
    else:
        parts.append(Text("No evidence passages cited.", style="dim"))
    s = record["trace"]["summary"]
    parts += [Text(""),
              Text(f"{record['method']}: {s['llm_calls']} LLM calls, "
                   f"{s['prompt_tokens'] + s['completion_tokens']}"
                             f" tokens, {s['tool_calls']} tool calls, {s['memory_hits']} memory hits",
                             style="dim")]
    return Panel(Group(*parts), title=f"veracity verify · {terminal_safe(record['id'])}",
                 border_style=LABEL_STYLE.get(label, "white").split()[-1])


def quote_line(q: dict) -> Text:
    """One quote under its passage: the words, and whether the check found them there (with the
    character offsets in the passage) or not."""
    if q["found"]:
        return Text.assemble(("  “", "green"), (control_safe(q["text"]), "italic"), ("”", "green"),
                             (f"  ✓ in the passage (characters {q['start']}-{q['end']})", "green"))
    return Text.assemble(("  “", "red"), (control_safe(q["text"]), "italic"), ("”", "red"),
                         ("  ✗ not in this passage", "bold red"))


def backend_options(fn):
    """``--backend local|ray``, ``--ray-address``, ``--ray-actors`` (verify -i and bench run)."""
    return config_options(*RUN_OPTIONS_BACKEND)(fn)


# verify's (and check's) run settings: the VerifierConfig fields they offer, in --help order
# (three groups, as they sit among verify's own flags; a new setting goes into one of them)
RUN_OPTIONS_MODEL = ("method", "index", "endpoint", "model", "concurrency", "llm_concurrency", "params",
                     "state_dir")
RUN_OPTIONS_EVIDENCE = ("labels", "evidence", "cache", "min_confidence", "calibration")
RUN_OPTIONS_BACKEND = ("backend", "ray_address", "ray_actors")
RUN_OPTIONS = RUN_OPTIONS_MODEL + RUN_OPTIONS_EVIDENCE + RUN_OPTIONS_BACKEND


def run_config(opts: dict, semantic_memory: bool = False) -> Any:
    """The :class:`VerifierConfig` of verify's options (``--param`` and the ablation flags folded into the
    method's parameters, settings read with ``--endpoint`` / ``--model``): each bad value is one line here,
    before any index or server is touched."""
    from veracity.pipeline.config import VerifierConfig
    from veracity.pipeline.methods import ablation_params

    overrides = parse_params(opts["params"])
    chosen = [k.removeprefix("ablation_").replace("_", "-") for k,
              on in opts.items() if k.startswith("ablation_") and on]
    if chosen:
        overrides.update(ablation_params(opts["method"], chosen))
    if semantic_memory:
        overrides["semantic_memory"] = True
    settings = load_settings(endpoint=opts["endpoint"], model=opts["model"])
    return VerifierConfig.from_options({k: opts[k] for k in RUN_OPTIONS if k != "params"}, params=overrides,
                                       settings=settings)


def _ablation_options(fn):
    """One flag per ablation of the ABLATIONS table (--no-memory, --static, --no-debate, ...)."""
    from veracity.pipeline.methods import ABLATIONS

    for name, (owner, _param, _value, text) in reversed(list(ABLATIONS.items())):
        fn = click.option(f"--{name}", f"ablation_{name.replace('-', '_')}", is_flag=True,
                          help=f"[{owner}] {text}")(fn)
    return fn


@click.command("verify")
@click.argument("claim", required=False)
@click.option("-i", "--input", "input_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="JSONL file of claims: one {\"claim\": ..., \"id\": ...} per line.")
@click.option("-o", "--output", "output_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Results JSONL (with -i): appended one line per claim; ids already there are skipped.")
@config_options(*RUN_OPTIONS_MODEL)
@click.option("--semantic-memory", is_flag=True, help="MERMAID: also recall stored evidence by embedding "
              "similarity (all-MiniLM-L6-v2), not only by entity keys.")
@config_options(*RUN_OPTIONS_EVIDENCE)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per claim (id, claim, label, "
              "explanation, evidence, trace) on stdout; with -i, as each result is written (summary on "
              "stderr).")
@click.option("-q", "--quiet", is_flag=True, help="With -i: no line per claim, only the progress bar and the "
              "summary (the results file is written the same).")
@backend_options
@_ablation_options
def verify(claim, input_path, output_path, semantic_memory, as_json, quiet, **opts) -> None:
    """Verify CLAIM, or every claim of a JSONL file, against the local index and model.

    \b
    Examples:
      veracity verify "The Eiffel Tower is in Berlin."
      veracity verify "Marie Curie won two Nobel prizes." --method emulate --json
      veracity verify "..." --method mermaid --no-memory --param t_max=3
      veracity verify "..." --method trification --static
      veracity verify "..." --method zofia --no-debate
      veracity verify -i claims.jsonl -o results.jsonl --method rag --concurrency 8
      veracity verify "..." --method rag --labels binary
      veracity verify "..." --method direct --evidence none
      veracity verify -i claims_with_evidence.jsonl -o results.jsonl --method rag --evidence gold
      veracity verify -i claims.jsonl -o results.jsonl --method rag --backend ray --ray-actors 4

    A batch appends each result to the output as it finishes (with its trace), prints one line per claim
    (verdict and cited passages; when the claim's line names a "label", whether the verdict agrees), shows
    claims/min and tokens/s, and resumes where it stopped when run again. With --evidence gold every input
    line carries
    its own evidence, e.g. {"claim": "...", "evidence": [{"title": "Paris", "text": "Paris is ..."}]}.
    """
    from veracity.pipeline.api import Verifier

    # a single CLAIM on Ray is a mistake whether or not Ray is installed: say that before the extra is looked
    # for
    if str(opts["backend"] or "").strip().lower() == "ray" and claim is not None:
        raise ConfigError("--backend ray runs a claims file: a single CLAIM is verified in this process",
                          hint="pass -i FILE -o RESULTS.jsonl, or drop --backend ray")
    config = run_config(opts, semantic_memory)  # every run setting checked once, each bad one a line
    if (claim is None) == (input_path is None):
        raise click.UsageError("give either a CLAIM or -i FILE (not both)")
    if input_path is not None and output_path is None:
        raise click.UsageError("-i needs -o RESULTS.jsonl (where results are appended)")
    if input_path is not None and _same_file(input_path, output_path):
        raise ConfigError(f"-o {output_path} is the claims file given with -i: results would be appended to "
                          "it",
                          hint="pass another -o, e.g. -o results.jsonl")
    if config.evidence.setting == "gold" and claim is not None:
        raise ConfigError("--evidence gold needs claims that carry their gold evidence: a single CLAIM has "
                          "none",
                          hint="pass -i FILE whose lines carry an \"evidence\" list of {title, text} "
                               "passages, "
                               "or use --evidence open (an index) or --evidence none (closed book)")
    single = None
    if claim is not None:
        from veracity.pipeline.claims import make_claim

        single = make_claim(claim)  # a bad claim fails before any index or server is touched
    if opts["index"] is not None and config.evidence.setting != "open":
        err_console.print("[yellow]warning:[/] --index is not read with "
                          f"--evidence {config.evidence.setting}",
                          highlight=False)
    verifier = Verifier.from_config(config)
    try:
        if single is not None:
            record = verifier.verify(single).to_dict(single)
            if as_json:
                print_json(record)
            else:
                console.print(render_verdict(record))
            return
        _run_batch(verifier, input_path, output_path, opts["concurrency"], as_json, quiet)
    finally:
        verifier.close()


def _same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one file (the same path, or links to one file)."""
    try:
        return a.expanduser().resolve() == b.expanduser().resolve() or (b.exists() and a.samefile(b))
    except OSError:
        return False


def _lines(path: Path) -> int:
    """Complete result lines in ``path`` (0 when it cannot be read)."""
    try:
        return path.read_bytes().count(b"\n")
    except OSError:
        return 0


# what a claims file may call the three labels (the datasets' own spellings included)
_LABEL_SPELLINGS = {"SUPPORTED": "SUPPORTED", "SUPPORTS": "SUPPORTED", "REFUTED": "REFUTED",
                    "REFUTES": "REFUTED",
                    "NOT_ENOUGH_INFO": "NOT_ENOUGH_INFO", "NOT ENOUGH INFO": "NOT_ENOUGH_INFO",
                    "NEI": "NOT_ENOUGH_INFO"}


def expected_label(meta: dict) -> str | None:
    """The label a claim's line names (its "label" key) as one of the three, or None when it names none
    (or something else, e.g. a dataset's own scale)."""
    value = meta.get("label")
    return _LABEL_SPELLINGS.get(value.strip().upper()) if isinstance(value, str) else None


def verdict_line(record: dict, expected: str | None) -> Text:
    """One line of a batch: id, verdict (with ✓ / ✗ against the line's label when it names one), the passages
    the verdict cites, the claim."""
    label = record["label"]
    parts: list = [(f"{control_safe(record['id'])}  ", "bold"), (label, LABEL_STYLE.get(label, "bold"))]
    if expected is not None:
        parts.append(("  ✓" if expected == label else f"  ✗ (the line says {expected})",
                      "green" if expected == label else "red"))
    # a line says nothing of a missing one
    if record.get("confidence") is not None or record.get("abstained"):
        parts += confidence_text(record)
    cited = ", ".join(control_safe(ev["passage_id"]) for ev in record["evidence"])
    parts += ["  ", (f"[{cited}]" if cited else "[no passage cited]", "cyan" if cited else "dim")]
    if record.get("grounding") == "ungrounded":
        parts.append(("  ungrounded", "yellow"))
    parts += ["  ", control_safe(record["claim"])]
    return Text.assemble(*parts)


def _run_batch(verifier, input_path: Path, output_path: Path, concurrency, as_json: bool,
               quiet: bool = False) -> None:
    loaded = verifier.load_claims(input_path)
    for bad in loaded.rejected:
        err_console.print(f"[yellow]skipped[/] {terminal_safe(str(bad))}", highlight=False, soft_wrap=True)
    written = [0]
    expected = {c.id: expected_label(c.meta) for c in loaded.claims}
    agree = [0, 0]  # verdicts that agree with their line's label, verdicts whose line names one

    def on_result(record: dict) -> None:
        written[0] += 1
        want = expected.get(record["id"])
        if want is not None:
            agree[0] += want == record["label"]
            agree[1] += 1
        if as_json:
            print_json(record)
        elif not quiet:
            console.print(verdict_line(record, want), highlight=False, soft_wrap=True)

    interrupt.keep(lambda: f"{written[0]} results written this run, {_lines(output_path)} in {output_path} "
                           "in all; "
                   "run the same command again to resume")
    try:
        stats = verifier.verify_many(loaded, out=output_path, concurrency=concurrency, progress=not as_json,
                                     on_result=on_result)
    except (EndpointError, OutputError, ClusterError) as exc:
        st = getattr(exc, "stats", None)
        kept = f"; {st.done} results written this run, all kept in {output_path}" if st else ""
        fail(f"{exc}{kept}", exc.hint if isinstance(exc, (OutputError,
                                                          ClusterError)) else endpoint_stop_hint(exc))
        return
    for cid, why in stats.failed:
        err_console.print(f"[red]failed[/] claim {terminal_safe(str(cid))}: {terminal_safe(why)}",
                          highlight=False, soft_wrap=True)
    if agree[1]:
        (err_console if as_json else console).print(
            f"{agree[0]} of {agree[1]} verdicts written this run agree with the label their line names",
                                                    highlight=False)
    (err_console if as_json else console).print(
        f"{stats.done} written, {stats.skipped} already done, {len(stats.failed)} failed, "
        f"{len(stats.rejected)} bad lines → {terminal_safe(str(output_path))}  "
        f"({stats.claims_per_min:.1f} claims/min, {stats.tokens_per_s:.0f} tokens/s)", highlight=False)
    if stats.failed:
        err_console.print("[dim]hint:[/] run the same command again to retry the failed claims")


COMMANDS = [verify]
