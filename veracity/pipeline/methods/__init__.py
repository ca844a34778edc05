"""The registry of verification methods: ``METHODS[name]`` is a :class:`MethodSpec`.

Adding a method is one import and one entry below.
"""

from __future__ import annotations

from veracity.errors import ConfigError
from veracity.pipeline.methods.base import MethodContext, MethodSpec
from veracity.pipeline.methods.direct import SPEC as DIRECT
from veracity.pipeline.methods.emulate import SPEC as EMULATE
from veracity.pipeline.methods.mermaid import SPEC as MERMAID
from veracity.pipeline.methods.rag import SPEC as RAG
from veracity.pipeline.methods.trification import SPEC as TRIFICATION
from veracity.pipeline.methods.zofia import SPEC as ZOFIA

METHODS: dict[str, MethodSpec] = {
    "direct": DIRECT,
    "rag": RAG,
    "mermaid": MERMAID,
    "emulate": EMULATE,
    "trification": TRIFICATION,
    "zofia": ZOFIA,
}


def get_method(name: str) -> MethodSpec:
    """The method called ``name``; a ConfigError naming the known ones otherwise."""
    try:
        return METHODS[name]
    except KeyError:
        raise ConfigError(f"unknown method {name!r}", hint=f"choose one of: {', '.join(METHODS)}") from None


__all__ = ["METHODS", "MethodContext", "MethodSpec", "get_method"]
