"""Trification: a planned SEARCH / REFINE / THINK / JUDGE verification graph, run concurrently and modified
when evidence is missing.

``roles.py`` declares the planner, the graph modifier and the four node roles; ``method.py`` holds the
parameters and the algorithm (the paper's Algorithm 1); ``graph.py`` the plan models, the validation
rules and the repairs.
"""

from __future__ import annotations

from veracity.pipeline.methods.base import MethodSpec
from veracity.pipeline.methods.trification.stats import run_statistics
from veracity.pipeline.methods.trification.graph import (
    NODE_TYPES,
    NodeSpec,
    PlanNode,
    VerificationPlan,
    VerificationPlanNoRefine,
    VerificationPlanSearchJudge,
    count_types,
    descendants,
    find_cycle,
    plan_model_for,
    prefix_subgraph,
    repair_plan,
    specs_from_plan,
    structural_repair,
    validate_plan,
)
from veracity.pipeline.methods.trification.method import (
    JUDGE_AGGREGATIONS,
    GraphRun,
    NodeRun,
    TrificationParams,
    label_from_judges,
    merge_evidence,
    request_plan,
    resolved,
    verify_trification,
)
from veracity.pipeline.methods.trification.roles import (
    JUDGE,
    MODIFY,
    PLANNER,
    REFINE,
    ROLES,
    SEARCH,
    SYNTHESIZE,
    THINK,
    JudgeResult,
    RefinedInput,
    SearchQueries,
    SearchSynthesis,
    ThinkResult,
    estimate_tokens,
    modify_turn,
    planner_example,
    planner_turn,
    planner_system,
    select_evidence,
)

SPEC = MethodSpec(
    name="trification",
    fn=verify_trification,
    params_cls=TrificationParams,
    summary="Trification: a planned SEARCH/REFINE/THINK/JUDGE graph run concurrently, modified when evidence is missing.",
    roles=ROLES,
    paper="trification.txt",
    run_statistics=run_statistics,
)

__all__ = ["JUDGE", "JUDGE_AGGREGATIONS", "MODIFY", "NODE_TYPES", "PLANNER", "REFINE", "SEARCH", "SPEC",
           "SYNTHESIZE", "THINK", "GraphRun", "JudgeResult", "NodeRun", "NodeSpec", "PlanNode", "RefinedInput",
           "SearchQueries", "SearchSynthesis", "ThinkResult", "estimate_tokens", "planner_example", "resolved",
           "select_evidence",
           "TrificationParams", "VerificationPlan", "VerificationPlanNoRefine", "VerificationPlanSearchJudge",
           "count_types", "descendants", "find_cycle", "label_from_judges", "merge_evidence", "modify_turn",
           "plan_model_for", "planner_turn", "planner_system", "prefix_subgraph", "repair_plan",
           "request_plan", "specs_from_plan", "structural_repair", "validate_plan", "verify_trification"]
