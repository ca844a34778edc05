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

# The method a run uses when none is named (CLI, Python API, web API and page): the one
# benchmarks/BENCHMARKS.md measures best with the reference model (qwen2.5-coder-1.5b-instruct; "Every method
# beyond HoVer gold": rag leads with gold evidence and is within two claims of the best open cell, at 1/6 to
# 1/30 of the agentic methods' tokens). Change it here, with the measurement that justifies it.
DEFAULT_METHOD = "rag"


# Ablations of the papers, by flag name: (method, parameter, value, help). One table drives
# `veracity verify --FLAG` and `veracity bench run --ablation FLAG`.
ABLATIONS: dict[str, tuple[str, str, object, str]] = {
    "no-memory": ("mermaid", "memory", False, "MERMAID ablation: no evidence memory."),
    "no-decomposer": ("mermaid", "decomposer", False, "MERMAID ablation: no claim decomposition."),
    "no-search-rank": ("emulate", "search_rank", False,
                       "EMULATE ablation: keep search order (no SearchRank)."),
    "no-self-contained-check": ("emulate", "self_contained_check", False,
                                "EMULATE ablation: treat every page as self-contained."),
    "static": ("trification", "static", True,
               "Trification: run the first valid graph once (no modification)."),
    "no-refine": ("trification", "no_refine", True, "Trification ablation: no REFINE nodes."),
    "no-refine-think": ("trification", "no_refine_think", True,
                        "Trification ablation: no REFINE and no THINK nodes."),
    "no-wiki": ("zofia", "no_wiki", True, "ZoFia ablation: no Wikipedia entry retrieval."),
    "no-web": ("zofia", "no_web", True,
               "ZoFia ablation: no conjunctive keyword retrieval (the open-web stand-in)."),
    "no-linguist": ("zofia", "no_linguist", True, "ZoFia ablation: no linguist agent."),
    "no-expert": ("zofia", "no_expert", True, "ZoFia ablation: no domain-expert agent."),
    "no-claim-verification": ("zofia", "no_claim_verification", True,
                              "ZoFia ablation: no claim extraction + verification."),
    "no-debate": ("zofia", "no_debate", True,
                  "ZoFia ablation: one judge call instead of the pro/con debate."),
}


def ablation_params(method: str, names: "list[str] | tuple[str, ...]") -> dict[str, object]:
    """Parameter overrides for ablation flags (``"no-memory"`` or ``"--no-memory"``) of ``method``."""
    out: dict[str, object] = {}
    for raw in names:
        name = raw.strip().lstrip("-")
        if name not in ABLATIONS:
            raise ConfigError(f"unknown ablation {raw!r}",
                              hint="known: " + ", ".join(f"{k} ({v[0]})" for k, v in ABLATIONS.items()))
        owner, param, value, _ = ABLATIONS[name]
        if owner != method:
            raise ConfigError(f"--{name} is an ablation of {owner}, not of {method}",
                              hint=f"ablations of {method}: "
                                   + (", ".join(k for k, v in ABLATIONS.items() if v[0] == method) or "none"))
        out[param] = value
    return out


def get_method(name: str) -> MethodSpec:
    """The method called ``name``; a ConfigError naming the known ones otherwise."""
    try:
        return METHODS[name]
    except KeyError:
        raise ConfigError(f"unknown method {name!r}", hint=f"choose one of: {', '.join(METHODS)}") from None


__all__ = ["ABLATIONS", "DEFAULT_METHOD", "METHODS", "ablation_params", "MethodContext", "MethodSpec",
           "get_method"]
