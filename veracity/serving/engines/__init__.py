"""Serving engines: one interface (:class:`~veracity.serving.engines.base.ServingEngine`), one module per
engine.

The launcher, state files, process groups and replicas (``veracity.serving.launch`` / ``replicas``) are
the same for every engine; an engine only says whether it is installed, what it serves a model from,
the argv and environment that start it, and how a replica is bound to its cores."""

from __future__ import annotations

from veracity.errors import ConfigError
from veracity.serving.engines.base import ServingEngine
from veracity.serving.engines.llamacpp import LLAMA_CPP
from veracity.serving.engines.vllm import VLLM
from veracity.serving.spec import ServerSpec

ENGINES: dict[str, ServingEngine] = {VLLM.name: VLLM, LLAMA_CPP.name: LLAMA_CPP}


def get_engine(name: str) -> ServingEngine:
    try:
        return ENGINES[name]
    except KeyError:
        raise ConfigError(f"unknown engine {name!r}", hint=f"choose one of {', '.join(ENGINES)}") from None


def check_spec(spec: ServerSpec) -> ServingEngine:
    """The engine ``spec`` names, after every check of the spec (an unknown engine first): one line each."""
    engine = get_engine(spec.engine)
    spec.validate()
    return engine
