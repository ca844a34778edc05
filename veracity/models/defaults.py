"""Defaults that follow the user, kept in ``<home>/defaults.json``: the model and the engine that commands
use without ``--model`` / ``--engine``.

``veracity models prepare NAME`` makes the first model prepared the default; ``veracity models default
NAME`` changes it; ``veracity engines default NAME`` sets the engine. Precedence: the flag, then the
environment (``VERACITY_MODEL`` / ``VERACITY_ENGINE``), then this file, then the hardware's default
(:func:`veracity.serving.engine_choice.choose_engine`: vLLM where a GPU is seen; llama.cpp on a machine
without one, for every model that has a GGUF, unless llama.cpp is neither installed nor buildable there)."""

from __future__ import annotations

import json
from pathlib import Path

from veracity.config import Settings
from veracity.errors import ConfigError, ModelError

ENGINE_NAMES = ("vllm", "llama.cpp")


def _file(settings: Settings) -> Path:
    return settings.home / "defaults.json"


def load_defaults(settings: Settings) -> dict[str, str]:
    path = _file(settings)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}",
                          hint="delete it and set the defaults again "
                               "(`veracity models default NAME`)") from exc
    return {k: v for k, v in data.items() if isinstance(v, str)} if isinstance(data, dict) else {}


def _save(settings: Settings, data: dict[str, str]) -> None:
    path = _file(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2))
    tmp.replace(path)


def set_default_model(settings: Settings, name: str) -> None:
    """Make ``name`` (a prepared model) the default; a ModelError naming the prepare command otherwise."""
    from veracity.models.prepared import load_prepared
    from veracity.models.registry import get_model
    from veracity.models.registry import MODELS

    if name not in load_prepared(settings):
        if name not in MODELS:
            get_model(name)  # unknown: raises with the list of known models
        raise ModelError(f"model {name} is not prepared", hint=f"run `veracity models prepare {name}` first")
    _save(settings, {**load_defaults(settings), "model": name})


def set_default_engine(settings: Settings, name: str) -> None:
    if name not in ENGINE_NAMES:
        raise ConfigError(f"unknown engine {name!r}", hint=f"choose one of {', '.join(ENGINE_NAMES)}")
    _save(settings, {**load_defaults(settings), "engine": name})


def remember_first_model(settings: Settings, name: str) -> bool:
    """After ``models prepare NAME``: NAME becomes the default when none is set. Returns whether it did."""
    if load_defaults(settings).get("model"):
        return False
    _save(settings, {**load_defaults(settings), "model": name})
    return True


def default_model(settings: Settings) -> str:
    """The model a command uses without ``--model``."""
    if settings.model:
        return settings.model
    chosen = load_defaults(settings).get("model")
    if chosen:
        return chosen
    from veracity.models.prepared import load_prepared

    prepared = sorted(load_prepared(settings).values(), key=lambda p: p.prepared_at)
    if prepared:  # prepared before defaults were kept: the first one, as if it had been recorded
        return prepared[0].name
    from veracity.serving.hardware import default_model_for_hardware

    return default_model_for_hardware()
