"""Trification: a planned SEARCH / REFINE / THINK / JUDGE verification graph, run concurrently and modified
when evidence is missing.

``roles.py`` declares the planner, the graph modifier and the four node roles; ``method.py`` holds the
parameters and the algorithm (the paper's Algorithm 1); ``graph.py`` the plan models, the validation
rules and the repairs.
"""

from __future__ import annotations

from veracity.pipeline.methods.base import MethodSpec
from veracity.pipeline.methods.trification.method import TrificationParams, verify_trification
from veracity.pipeline.methods.trification.roles import ROLES
from veracity.pipeline.methods.trification.stats import run_statistics

SPEC = MethodSpec(
    name="trification",
    fn=verify_trification,
    params_cls=TrificationParams,
    summary="Trification: a planned SEARCH/REFINE/THINK/JUDGE graph run concurrently, modified when evidence "
            "is missing.",
    roles=ROLES,
    paper="trification.txt",
    run_statistics=run_statistics,
)

__all__ = ["SPEC"]
