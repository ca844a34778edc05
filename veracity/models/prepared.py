"""The record of prepared models: ``<models_dir>/prepared.json`` (name -> path + provenance), read by the
model defaults, the server and ``doctor``, written by :mod:`veracity.models.prepare`. A module of its own
below both, so that the defaults (which need the record) and preparing (which sets the first default) do
not import each other."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from veracity.config import Settings
from veracity.errors import ModelError


@dataclass
class PreparedModel:
    name: str
    path: Path
    source: str
    prepared_at: float
    verified: str | None = None  # output of the verification generation
    timings: dict[str, float] = field(default_factory=dict)  # wall seconds of each preparation step
    gguf: str | None = None  # the GGUF it was prepared from, kept for llama.cpp (which serves it as is)

    def to_dict(self) -> dict:
        out = {"name": self.name, "path": str(self.path), "source": self.source,
               "prepared_at": self.prepared_at, "verified": self.verified}
        if self.timings:
            out["timings"] = self.timings
        if self.gguf:
            out["gguf"] = self.gguf
        return out


def _registry_file(settings: Settings) -> Path:
    return settings.models_dir / "prepared.json"


def load_prepared(settings: Settings) -> dict[str, PreparedModel]:
    path = _registry_file(settings)
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ModelError(f"cannot read {path}: {exc}",
                         hint="delete the file and prepare the models again") from exc
    return {
        name: PreparedModel(name, Path(d["path"]), d.get("source", ""), d.get("prepared_at", 0.0),
                            d.get("verified"),
                            d.get("timings") or {}, d.get("gguf"))
        for name, d in data.items()
    }


def _save_prepared(settings: Settings, prepared: dict[str, PreparedModel]) -> None:
    path = _registry_file(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({k: v.to_dict() for k, v in prepared.items()}, indent=2))
    tmp.replace(path)


def prepared_path(settings: Settings, name: str) -> Path | None:
    """Where the prepared weights of ``name`` are, if they are still there."""
    entry = load_prepared(settings).get(name)
    if entry and (entry.path / "config.json").exists():
        return entry.path
    return None


__all__ = ["PreparedModel", "load_prepared", "prepared_path"]
