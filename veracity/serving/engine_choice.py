"""Which engine a managed server runs, and why: the user's choice (``--engine``, ``VERACITY_ENGINE``,
``veracity engines default``), else the hardware's (:func:`choose_engine`). Above the engines and the
model defaults, which it reads, so that neither imports the other."""

from __future__ import annotations

import os
from dataclasses import dataclass

from veracity.config import Settings
from veracity.errors import ConfigError, ServerError
from veracity.models.defaults import ENGINE_NAMES, default_model, load_defaults


@dataclass(frozen=True)
class EngineChoice:
    """The engine a managed server of ``model`` runs, and why: ``by`` is who chose it ("flag", "env",
    "defaults" (``veracity engines default``) or "hardware")."""

    name: str
    why: str
    by: str

    @property
    def label(self) -> str:
        return "vLLM" if self.name == "vllm" else self.name

    def line(self) -> str:
        """The line commands print first, e.g. "engine llama.cpp (no GPU seen; `--engine vllm` to change)"."""
        return f"engine {self.label} ({self.why})"


def choose_engine(settings: Settings, model: str | None = None, flag: str | None = None, *,
                  change: str = "`veracity engines default vllm`",
                  has_gguf: bool | None = None) -> EngineChoice:
    """The engine for a managed server of ``model`` (the default model when None), and why.

    The user's choice first (``flag``, ``VERACITY_ENGINE``, ``veracity engines default``), else the
    hardware's: vLLM where a GPU is seen; without a GPU llama.cpp when the model has a GGUF (llama.cpp
    serves it as it is: no conversion, seconds to start, a quarter of the memory; BENCHMARKS.md "Measured
    on a quiet machine"), vLLM when it has none or when llama.cpp is neither installed nor buildable here.
    ``change`` names how the user changes it, in the reason's words; ``has_gguf`` says whether the model
    comes as a GGUF where that is known from elsewhere (``models prepare NAME --from FILE.gguf``: NAME is
    not registered yet), instead of looking the name up."""
    if flag:
        if flag not in ENGINE_NAMES:
            raise ConfigError(f"unknown engine {flag!r}", hint=f"choose one of {', '.join(ENGINE_NAMES)}")
        return EngineChoice(flag, f"--engine {flag}", "flag")
    env = os.environ.get("VERACITY_ENGINE")
    if env:
        if env not in ENGINE_NAMES:
            raise ConfigError(f"VERACITY_ENGINE={env!r} names no engine",
                              hint=f"use one of {', '.join(ENGINE_NAMES)}")
        return EngineChoice(env, f"VERACITY_ENGINE={env}", "env")
    chosen = load_defaults(settings).get("engine")
    if chosen in ENGINE_NAMES:
        return EngineChoice(chosen, f"set with `veracity engines default {chosen}`", "defaults")
    return _hardware_choice(settings, model, change, has_gguf)


def _hardware_choice(settings: Settings, model: str | None, change: str,
                     has_gguf: bool | None = None) -> EngineChoice:
    from veracity.serving import hardware

    if hardware.gpu_seen():
        return EngineChoice("vllm", "a GPU is seen; `--engine llama.cpp` to change", "hardware")
    name = model or default_model(settings)
    if not (model_has_gguf(settings, name) if has_gguf is None else has_gguf):
        return EngineChoice("vllm", f"no GPU seen, but {name} has no GGUF for llama.cpp", "hardware")
    from veracity.serving.engines.llamacpp import binary_missing
    from veracity.serving.engines.llamacpp_install import can_build

    if binary_missing(settings):
        cannot = can_build()
        if cannot:
            return EngineChoice("vllm",
                                f"no GPU seen, but llama.cpp is not installed and cannot be built here: "
                                f"{cannot} (Debian: apt-get install cmake g++)", "hardware")
    return EngineChoice("llama.cpp", f"no GPU seen; {change} to change", "hardware")


def require_vllm(choice: EngineChoice) -> None:
    """vLLM installed, or one line saying it is not, with the pip command that installs it, before anything
    slow (a conversion for vLLM, a server start). vLLM is an optional extra: the README's CPU set-up serves
    with llama.cpp and installs none. Where the hardware rule fell back to vLLM because llama.cpp cannot be
    built, the hint names the compiler too."""
    from veracity.serving import hardware

    if choice.name != "vllm" or hardware.vllm_variant()[0] is not None:
        return
    hint = hardware.vllm_install_hint()
    if choice.by == "hardware" and "cannot be built" in choice.why:
        hint = f"Debian: apt-get install cmake g++ (then llama.cpp serves it), or {hint}"
    raise ServerError(f"the engine is vLLM ({choice.why}), but vLLM is not installed", hint=hint)


def model_has_gguf(settings: Settings, name: str) -> bool:
    """Whether llama.cpp can serve ``name``: a .gguf path, a model prepared from a GGUF, or a registry
    model published as one."""
    if name.endswith(".gguf"):
        return True
    from veracity.models.prepared import load_prepared
    from veracity.models.registry import MODELS

    entry = load_prepared(settings).get(name)
    if entry is not None and entry.gguf:
        return True
    info = MODELS.get(name)
    if info is not None and (info.cpu_default or info.gguf is not None):
        # prepared from local safetensors (--from DIR) instead: there is no GGUF
        return entry is None or not entry.source.startswith("local directory")
    return False


def default_engine(settings: Settings, model: str | None = None) -> str:
    """The engine a managed server of ``model`` runs without ``--engine`` (:func:`choose_engine`)."""
    return choose_engine(settings, model).name


def hardware_engine(settings: Settings, model: str | None = None) -> str:
    """The hardware's engine for ``model``, the user's choices left out (see :func:`choose_engine`)."""
    return _hardware_choice(settings, model, "`veracity engines default vllm`").name
