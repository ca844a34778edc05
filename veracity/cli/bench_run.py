"""`veracity bench run` (a method over a dataset, scored) and `veracity bench compare` (runs side by side)."""

from __future__ import annotations

import time
from pathlib import Path

import click
from rich.table import Table

from veracity.cli import interrupt
from veracity.cli._common import (RegistryHelp, config_options, console, datasets_listed, err_console, fail,
                                  methods_listed, print_json)
from veracity.cli.verify import backend_options
from veracity.config import load_settings
from veracity.errors import RESTART_HINT, ConfigError, EndpointError
from veracity.terminal import terminal_safe


# bench run's run settings: VerifierConfig fields (generated options, no defaults: a --config file and the
# dataset supply what a flag leaves out), with bench's wording, in four groups among its own flags
_RUN_HELP = {
    "method": lambda: f"{methods_listed()}.",
    "labels": "Label space of the verdicts (default: the dataset's, see `veracity bench datasets`; another "
              "one is "
              "run with a warning).",
    "evidence": "Evidence setting: open (the index, default), gold (each claim's own gold passages only; no "
                "index "
                "needed: hover, feverous-s, or a jsonl:PATH file with an \"evidence\" list per line) or none "
                "(closed book: searches return nothing).",
    "index": "Index directory (default: $VERACITY_INDEX or the demo index); read with --evidence open only.",
    "params": "Method parameter, repeatable.",
    "concurrency": "Claims in flight (default: $VERACITY_CONCURRENCY or 16).",
    "llm_concurrency": "LLM requests in flight (default: $VERACITY_LLM_CONCURRENCY or 256, vLLM's default "
                       "--max-num-seqs).",
    "endpoint": "OpenAI-compatible endpoint (default: the managed local server).",
    "model": "Model name on the endpoint.",
}


def _run_options(*names: str):
    return config_options(*names, help={n: _RUN_HELP[n] for n in names if n in _RUN_HELP}, defaults=False)


def _verify_ablations(fn):
    """verify's flag per ablation (--no-memory, --static, ...): one name per option across commands."""
    from veracity.cli.verify import _ablation_options

    return _ablation_options(fn)


@click.command("run")
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="TOML config (see benchmarks/configs/); flags given here override it.")
@click.option("--dataset", default=None, cls=RegistryHelp,
              help_from=lambda: f"{datasets_listed()}, or jsonl:PATH.")
@_run_options("method")
@click.option("--variant", default=None,
              help="Dataset variant (label convention / release), e.g. bingcheck's binary-fire.")
@click.option("--hops", default=None, help="HoVer only: comma-separated hop counts to keep, e.g. 2 or 3,4.")
@click.option("--limit", type=int, default=None, help="Claims to run (a seeded sample when --seed is given).")
@click.option("--seed", type=int, default=None, help="Sampling seed for --limit (default 0).")
@click.option("--sample", default=None, metavar="random|balanced",
              help="How --limit draws its claims: random "
              "(default) or balanced (class-balanced, and hop-balanced on HoVer; seeded).")
@click.option("--order", default=None, metavar="sample|dataset",
              help="Order the claims are run in: sample (as "
              "drawn, default) or dataset (the dataset file's order; with --concurrency 1 a method's run "
              "state, "
              "MERMAID's memory, carries each claim's evidence to the next, as in MERMAID's memory setting).")
@click.option("--label-map", default=None,
              help="ORIG=LABEL,... (LABEL: SUPPORTED, REFUTED, NOT_ENOUGH_INFO or drop).")
@_run_options("labels", "evidence", "index", "min_confidence", "calibration")
@click.option("--data-dir", default=None, help="Folder with the datasets in their official layout "
              "(default: $VERACITY_DATA_DIR).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Run directory (default: bench-results/<dataset>-<method>-<time>); an existing run "
                   "resumes.")
@click.option("--ablation", "ablations", multiple=True, hidden=True,
              help="The old spelling of the ablation flags: --ablation no-memory is --no-memory.")
@_verify_ablations
@_run_options("params", "concurrency", "llm_concurrency")
@click.option("--allow-leakage", is_flag=True, default=None,
              help="Run even if the index may be newer than the dataset "
              "(the report says so).")
@_run_options("endpoint", "model")
@click.option("--json", "as_json", is_flag=True, help="Print metrics.json instead of tables.")
@backend_options
def run_cmd(config_path, dataset, method, variant, hops, limit, seed, sample, order, label_map, data_dir,
            out_dir,
            ablations, allow_leakage, endpoint, model, as_json, backend, ray_address, ray_actors,
            **run) -> None:
    """Run a method over a benchmark dataset and score it (accuracy, F1, confusion, cost).

    Predictions (with traces), run.json (model, server flags, index manifest, method parameters, dataset
    hash, versions), metrics.json and report.md (with plots) go into the run directory. Running the
    same command again resumes an interrupted run.

    \b
    Examples:
      veracity bench run --dataset hover --method mermaid --limit 50 --index ~/.veracity/indexes/hover-mix
      veracity bench run --dataset hover --hops 3 --method trification --static --limit 20
      veracity bench run --config benchmarks/configs/emulate-factool-kbqa.toml --out runs/emulate-kbqa
      veracity bench run --dataset fever --method rag --labels binary --limit 20
      veracity bench run --dataset hover --method rag --evidence gold --limit 50
      veracity bench run --dataset feverous-s --method direct --evidence none --limit 50
      veracity bench run --dataset hover --method rag --limit 200 --backend ray --ray-address auto

    The verdicts are in the dataset's label space (binary: SUPPORTED / REFUTED for HoVer, FEVEROUS-S, ...;
    3way for FEVER) unless --labels (or `labels` in the config) says otherwise. The evidence setting
    (--evidence, `evidence` in the config) is recorded in run.json and shown by reports and `bench compare`;
    with gold, claims whose gold evidence is incomplete are left out of the sample (the report says how many).
    """
    from veracity.bench.config import RunConfig, load_config
    from veracity.bench.run import bench_run
    from veracity.cli.verify import parse_params

    flags = [k.removeprefix("ablation_").replace("_", "-") for k in list(run) if k.startswith("ablation_")]
    ablations = tuple(dict.fromkeys([*ablations,
                                     *(f for f in flags if run.pop(f"ablation_{f.replace('-', '_')}"))]))

    hop_list = None
    if hops:
        try:
            hop_list = [int(h) for h in hops.split(",") if h.strip()]
        except ValueError:
            raise click.BadParameter(f"{hops!r} is not a comma-separated list of hop counts",
                                     param_hint="--hops")
    # the run settings (``run``: the generated options, RUN_KEYS of veracity.bench.config) as they came;
    # --param as a table, added to a config file's
    given = {"dataset": dataset, "method": method, "variant": variant, "hops": hop_list, "limit": limit,
             "seed": seed,
             "sample": sample, "order": order, "label_map": label_map, "allow_leakage": allow_leakage,
             "ablations": list(ablations) or None, **run, "params": parse_params(run["params"]) or None}
    if config_path is None and (not dataset or not method):
        raise click.UsageError("give --dataset and --method (or --config FILE)")
    # the run settings are checked once, by the VerifierConfig the RunConfig holds (backend first)
    settings = load_settings(endpoint=endpoint, model=model)
    backend_given = {"backend": backend, "ray_address": ray_address, "ray_actors": ray_actors}
    if config_path is not None:
        cfg = load_config(config_path, settings=settings, **backend_given, **given)
    else:
        cfg = RunConfig.of(settings=settings, **backend_given, **given)
    given_out = out_dir is not None
    out_dir = out_dir or Path("bench-results") / (f"{cfg.dataset.replace(':', '-').replace('/', '_')}-"
                                                  f"{cfg.method}-{time.strftime('%Y%m%d-%H%M%S')}")
    err_console.print(f"run directory: {terminal_safe(out_dir)}", highlight=False)
    interrupt.keep(lambda: _run_kept(out_dir, given_out))
    try:
        metrics = bench_run(cfg, out_dir, settings=settings, data_dir=data_dir, progress=not as_json,
                            on_warning=lambda msg: err_console.print("[yellow]warning:[/] "
                                                                     f"{terminal_safe(msg)}", highlight=False,
                                                                     soft_wrap=True))
    except EndpointError as exc:
        fail(str(exc), exc.hint or RESTART_HINT)
        return
    if as_json:
        print_json(metrics)
        return
    _print_summary(metrics, out_dir)
    for cid, why in metrics.get("failed", []):
        err_console.print(f"[red]failed[/] claim {terminal_safe(cid)}: {terminal_safe(why)}", highlight=False,
                          soft_wrap=True)
    if metrics.get("failed"):
        err_console.print("[dim]hint:[/] run the same command again to retry the failed claims")


def _run_kept(out_dir: Path, given_out: bool) -> str:
    """What an interrupted run keeps: its predictions so far; resuming needs the same run directory."""
    from veracity.bench.manifest import PREDICTIONS_FILE

    path = out_dir / PREDICTIONS_FILE
    n = sum(1 for line in path.open("rb") if line.strip()) if path.exists() else 0
    again = "the same command" if given_out else f"the same command with --out {out_dir}"
    return f"{n} predictions kept in {path}; run {again} to resume"


def _print_summary(metrics: dict, out_dir: Path) -> None:
    s = metrics.get("scores") or {}
    e = metrics.get("efficiency") or {}
    run = metrics.get("run", {})
    ls = metrics.get("label_space") or {}
    title = (f"{run.get('method')} on {run.get('dataset')} ({ls.get('name', '3way')} labels, "
             f"{run.get('evidence', 'open')} evidence) — "
             f"{metrics['n_predicted']}/{metrics['n_claims']} claims")
    table = Table(title=title)
    nei_allowed = ls.get("nei_allowed", True)
    # the NEI rate whenever NOT_ENOUGH_INFO is allowed (3way); in binary the share of verdicts the rule forced
    for col in ("acc", "macro-F1", "w-F1", "NEI" if nei_allowed else "forced", "calls/claim", "tok/claim",
                "tools/claim", "claims/min"):
        table.add_column(col, justify="right")
    if s:
        table.add_row(f"{s['accuracy']:.3f}", f"{s['macro_f1']:.3f}", f"{s['weighted_f1']:.3f}",
                      f"{s['nei_rate']:.2f}" if nei_allowed else f"{ls.get('forced_rate', 0.0):.2f}",
                      f"{e['llm_calls_per_claim']:.1f}", f"{e['tokens_per_claim']:.0f}",
                      f"{e['tool_calls_per_claim']:.1f}",
                      f"{e['claims_per_min']:.2f}")
    console.print(table)
    leak = run.get("leakage") or {}
    if leak.get("checked") and leak.get("index_newer"):
        console.print("[yellow]leakage guard:[/] the index may be newer than the dataset (allowed by "
                      "--allow-leakage)")
    console.print(f"report: {terminal_safe(out_dir / 'report.md')}", highlight=False)


@click.command("compare")
@click.argument("runs", nargs=-1, required=True, type=click.Path(file_okay=False, exists=True,
                                                                 path_type=Path))
@click.option("--markdown", "as_markdown", is_flag=True, help="Print a markdown table (for BENCHMARKS.md).")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the markdown table here.")
@click.option("--json", "as_json", is_flag=True,
              help="Print a JSON list: per run its settings and unformatted "
              "scores and efficiency figures.")
def compare_cmd(runs, as_markdown, out, as_json) -> None:
    """One table across benchmark runs: accuracy, F1, NEI rate and cost per claim.

    \b
    Examples:
      veracity bench compare bench-results/hover-*
      veracity bench compare runs/mermaid runs/mermaid-no-memory --markdown --out compare.md
    """
    from veracity.bench.compare import COMPARE_COLUMNS, compare_markdown, compare_records, compare_rows

    if as_markdown and as_json:
        raise click.UsageError("pass --markdown or --json, not both")
    if as_json and out is None:
        print_json(compare_records(list(runs)))
        return
    rows = compare_rows(list(runs))
    md = compare_markdown(rows)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(md + "\n", encoding="utf-8")
    if as_json:
        print_json(compare_records(list(runs)))
        return
    if as_markdown:
        click.echo(md)
        return
    table = Table(title=f"{len(rows)} benchmark runs")
    for col in COMPARE_COLUMNS:
        table.add_column(col, justify="left" if col in ("run", "dataset", "method") else "right")
    for r in rows:
        table.add_row(*(r[c] for c in COMPARE_COLUMNS))
    console.print(table)




@click.command("calibrate")
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the stored map as JSON.")
def calibrate_cmd(run_dirs, as_json) -> None:
    """Fit the confidence calibration map of a model, method and label space on bench runs of a dev split.

    One temperature, fitted to the runs' verdict probabilities and gold labels (least negative
    log-likelihood),
    stored beside the model ($VERACITY_HOME/models/<model>/calibration/<method>-<labels>.json) with the split
    it
    was fitted on; `verify`, `check`, `bench run` and the web app apply it by default (--calibration off does
    not) and `bench run` records it in run.json. Fit on a dev split, judge on another.

    \b
    Example:
      veracity bench run --dataset feverous-s --method rag --evidence gold --limit 40 --seed 1 --out runs/dev
      veracity bench calibrate runs/dev
    """
    from veracity.bench.calibrate import calibrate_runs

    for d in run_dirs:
        if not (d / "run.json").exists():
            raise ConfigError(f"{d} is not a bench run directory (no run.json)",
                              hint="pass the --out directory of a finished `veracity bench run`")
    settings = load_settings()
    m, path, summary = calibrate_runs(run_dirs, settings.home)
    if as_json:
        print_json({"path": str(path), **m.to_dict(), "summary": summary})
        return
    console.print(f"temperature {m.temperature} for {m.model} · {m.method} · {m.labels}, fitted on "
                  f"{summary['n']} "
                  f"verdicts (NLL {m.nll_before} -> {m.nll_after}; ECE {summary['ece_before']} -> "
                  f"{summary['ece_after']})", highlight=False)
    console.print(f"stored in {path}", highlight=False)


COMMANDS = [run_cmd, compare_cmd, calibrate_cmd]
