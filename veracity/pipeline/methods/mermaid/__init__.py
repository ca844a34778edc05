"""MERMAID (arXiv 2601.22361): decomposer + evidence memory + ReAct executor.

``roles.py`` declares the three roles, ``method.py`` holds the parameters and the algorithm,
``memory.py`` the evidence memory and the run state that opens it (:class:`MermaidState`).
"""

from __future__ import annotations

from veracity.pipeline.confidence import ConfidenceRule
from veracity.pipeline.methods.base import MethodSpec
from veracity.pipeline.methods.mermaid.stats import run_statistics
from veracity.pipeline.methods.mermaid.memory import EvidenceMemory, MermaidState
from veracity.pipeline.methods.mermaid.method import MermaidParams, entity_keys, verify_mermaid
from veracity.pipeline.methods.mermaid.roles import (DECOMPOSER, EXECUTOR, FINAL, ROLES, Decomposition,
                                                     FinalVerdict, ReactStep, Triplet)

SPEC = MethodSpec(
    name="mermaid",
    fn=verify_mermaid,
    params_cls=MermaidParams,
    summary="MERMAID: decomposer + evidence memory + ReAct executor (T_max=5).",
    roles=ROLES,
    confidence=ConfidenceRule(("mermaid.executor", "mermaid.final"),
                              summary="the label probability of the call that gave the verdict: the "
                                      "finishing "
                                      "ReAct step, or the forced final answer"),
    state_cls=MermaidState,
    paper="mermaid.txt",
    run_statistics=run_statistics,
)

__all__ = ["DECOMPOSER", "EXECUTOR", "FINAL", "SPEC", "Decomposition", "EvidenceMemory", "FinalVerdict",
           "MermaidParams", "MermaidState", "ReactStep", "Triplet", "entity_keys", "verify_mermaid"]
