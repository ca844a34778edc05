"""Trification: a planned verification graph (SEARCH / REFINE / THINK / JUDGE nodes), run concurrently.

The paper's Algorithm 1 (Dynamic Tree Planner), which :func:`verify_trification` and :class:`GraphRun`
follow::

    Input: claim C            Output: label
    generate a DAG verification plan G
    concurrently execute the nodes of G in topological order
    for each node v in G:
        v_input = Combine(v's own input, outputs of Parents(v))
        if type(v) = SEARCH:  output(v) <- Search(v_input)
        if type(v) = REFINE:  output(v) <- Refine(v_input)
        if type(v) = THINK:   output(v) <- Reason(v_input)
            if evidence insufficient: mark v failed; generate sub-graph G_sub from v; G <- G u G_sub
        if type(v) = JUDGE:   output(v) <- Judge(v_input)
            if evidence insufficient: mark v failed; generate sub-graph G_sub from v; G <- G u G_sub
    Output: label = SUPPORTS / REFUTES

Here, step by step (the roles are in :mod:`.roles`, the graph rules in :mod:`.graph`):

1. **Plan** (§3.2, Table 4 prompt): the planner writes the verification graph as a flat list of nodes
   (:func:`request_plan`). A plan is repaired where a fix cannot change its meaning, then validated
   (:func:`~.graph.validate_plan`); when invalid, the usual small-model mistakes are repaired structurally
   (:func:`~.graph.structural_repair`: a flat list read as a chain, repeats dropped, trimmed to the node
   budget, a JUDGE added; every fix is in the trace; ``structural_repair = false`` turns this off) and,
   if still invalid, re-planned with the validation errors fed back (``max_replans`` times). An invalid
   plan is never executed; if none validates the claim gets NOT_ENOUGH_INFO with the reason in the trace.
2. **Execute** (§3.3): every node starts as soon as all its parents have finished; ready nodes run
   concurrently. Before a node runs, its parents' evidence and outputs are propagated to it, and if a
   parent is a REFINE node the node's input is replaced by the refined input.
   SEARCH: the model writes queries, each is searched on the local index (top-k, the paper's Wiki
   strategy with k = 10). REFINE: resolves ambiguous references from its parent's evidence. THINK:
   reasons over the evidence and says whether it suffices. JUDGE: Supports / Refutes / Uncertain.
   A node whose reply never validates does not block the graph: SEARCH searches its input as the query,
   REFINE passes its input on, THINK concludes nothing (each traced as ``trification.agent_failed``); a
   JUDGE ends with status ``error`` and other JUDGEs may still rule.
3. **Modify** (§3.4, dynamic mode, the default): a THINK that finds the evidence insufficient or a JUDGE
   that says Uncertain is marked failed, its not-yet-run descendants are skipped, and the modifier writes
   a sub-graph (which may depend on finished nodes, to reuse their evidence) that is merged into the
   graph while execution goes on. At most ``max_modifications`` (3) times; after that results stand as
   in static mode (§4.3).
4. **Label** (:func:`label_from_judges`): the verdict comes from the JUDGE nodes that stand at the end:
   REFUTED if any refutes, SUPPORTED if all support, otherwise (an Uncertain judge remains)
   ``uncertain_label`` — by default REFUTED, the paper's JUDGE rule "SUPPORTS if the evidence confirms
   the declaration otherwise REFUTES" (§3.2) on its two-label benchmarks. The JUDGE nodes keep the
   paper's Supports / Refutes / Uncertain in either label space; in the binary space ``uncertain_label``
   must be SUPPORTED or REFUTED (checked before the run), and a claim with no valid plan or no finished
   JUDGE gets the binary rule's REFUTED (:mod:`veracity.pipeline.labels`, traced as ``label_space.forced``)
   instead of NOT_ENOUGH_INFO.

The trace records every plan (valid or not, with its errors), the graph initially and after each
modification, each node's start / finish, and the per-claim statistics of the paper's Table 2
(graph modifications; SEARCH / THINK / REFINE / JUDGE node counts in the initial and the final graph).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from veracity.errors import ConfigError, LLMOutputError
from veracity.pipeline.labels import LabelSpace
from veracity.pipeline.methods.base import MethodContext
from veracity.pipeline.methods.trification.graph import (
    NODE_TYPES,
    NodeSpec,
    count_types,
    descendants,
    plan_model_for,
    prefix_subgraph,
    repair_plan,
    specs_from_plan,
    structural_repair,
    validate_plan,
)
from veracity.pipeline.methods.trification.roles import (
    JUDGE,
    MODIFY,
    PLANNER,
    REFINE,
    SEARCH,
    THINK,
    replan_feedback,
    shorten,
)
from veracity.pipeline.params import MethodParams, param
from veracity.pipeline.roles import Role
from veracity.pipeline.types import Claim, Evidence, Label, Verdict


@dataclass
class TrificationParams(MethodParams):
    static: bool = param(False, help="execute the first valid graph once, no modification (ablation --static)",
                         paper="§4.3: static mode, the graph executed once without modification")
    max_modifications: int = param(3, min=0, max=20, help="graph modifications in dynamic mode",
                                   paper="§4.3: the graph can undergo up to 3 modifications")
    max_nodes: int = param(12, min=1, max=50,
                           help="node budget of one plan / sub-graph (the plan schema caps the node list at it)")
    max_replans: int = param(2, min=0, max=10, help="re-plans with the validation errors fed back, after the first plan")
    structural_repair: bool = param(True, help="repair an invalid plan structurally before re-planning: chain "
                                               "parentless nodes, drop repeats, trim to budget, add a JUDGE (traced)")
    k: int = param(10, min=1, max=100, help="passages per search query",
                   paper="§4.3: the Wiki strategy fetches the top-10 paragraphs")
    max_queries: int = param(3, min=1, max=5, help="queries a SEARCH node may issue (its schema allows 5)")
    prompt_passages: int = param(10, min=1, max=100,
                                 help="passages shown to a THINK / REFINE / JUDGE node (its propagated evidence)")
    passage_max_words: int = param(120, min=1, max=5000, help="words of each passage shown")
    no_refine: bool = param(False, help="no REFINE nodes (ablation --no-refine)", paper="Table 1: w/o REFINE")
    no_refine_think: bool = param(False, help="no REFINE and no THINK nodes (ablation --no-refine-think)",
                                  paper="Table 1: w/o REFINE and THINK")
    uncertain_label: str = param("REFUTED", choices=("REFUTED", "NOT_ENOUGH_INFO", "SUPPORTED"),
                                 help="label when a JUDGE is still Uncertain at the end",
                                 paper="§3.2: JUDGE says SUPPORTS if the evidence confirms the declaration, "
                                       "otherwise REFUTES")

    def check(self) -> None:
        """Cross-field rules; :meth:`MethodSpec.make_params` runs this before any server is contacted."""
        if self.uncertain_label not in Label.__members__:
            raise ConfigError(f"trification uncertain_label {self.uncertain_label!r} is not a label",
                              hint="use REFUTED (paper), NOT_ENOUGH_INFO or SUPPORTED")

    def check_labels(self, space: LabelSpace) -> None:
        """The final label must lie in the run's label space: in the binary space an Uncertain JUDGE
        cannot end in NOT_ENOUGH_INFO (:meth:`MethodSpec.check_label_space` runs this before any server is
        contacted)."""
        if self.uncertain_label not in space:
            raise ConfigError(f"trification uncertain_label {self.uncertain_label} is not in the {space.name} "
                              f"label space ({' / '.join(space.values())})",
                              hint="use --param uncertain_label=REFUTED (the paper's rule), or --labels 3way")

    def allowed_types(self) -> tuple[str, ...]:
        if self.no_refine_think:
            return ("SEARCH", "JUDGE")
        if self.no_refine:
            return ("SEARCH", "THINK", "JUDGE")
        return NODE_TYPES


# ================================ 1. plan ================================
async def request_plan(ctx: MethodContext, role: Role, claim: Claim, *, external_ids: list[str] = (),
                       prefix: str = "", phase: str = "plan", **inputs: Any) -> list[NodeSpec] | None:
    """Plan (``role``: the planner or the modifier), repair, validate; re-plan with the errors fed back.

    The valid plan's nodes, or None. ``inputs`` are the role's render inputs besides the claim, the
    allowed node types and the node budget. A reply that never validates is an invalid plan attempt
    (traced as ``trification.plan`` with the error), not a role fallback: the next attempt follows."""
    p: TrificationParams = ctx.params
    allowed = p.allowed_types()
    model = plan_model_for(allowed, p.max_nodes)
    msgs = role.messages(claim=claim, allowed=allowed, max_nodes=p.max_nodes, **inputs)
    for attempt in range(p.max_replans + 1):
        try:
            plan = await role(ctx, output=model, messages=msgs)
        except LLMOutputError as exc:
            ctx.trace.event("trification.plan", phase=phase, attempt=attempt, valid=False,
                            errors=[f"the reply did not validate: {exc}"], nodes=[])
            continue
        raw = specs_from_plan(plan)
        specs, fixes = repair_plan(raw, external_ids)
        if prefix:
            specs = prefix_subgraph(specs, prefix, external_ids)
        errors = validate_plan(specs, max_nodes=p.max_nodes, allowed_types=allowed, external_ids=external_ids)
        ctx.trace.event("trification.plan", phase=phase, attempt=attempt, valid=not errors, errors=errors,
                        repairs=fixes, nodes=[s.to_dict() for s in specs])
        if not errors:
            return specs
        if p.structural_repair:
            fixed, structural = structural_repair(specs, max_nodes=p.max_nodes, allowed_types=allowed,
                                                  external_ids=external_ids, judge_input=claim.text,
                                                  id_prefix=prefix)
            still = validate_plan(fixed, max_nodes=p.max_nodes, allowed_types=allowed, external_ids=external_ids)
            ctx.trace.event("trification.plan", phase=phase, attempt=attempt, valid=not still, errors=still,
                            repairs=structural, structural_repair=True, nodes=[s.to_dict() for s in fixed])
            if not still:
                return fixed
        msgs = msgs + [{"role": "assistant", "content": plan.model_dump_json()},
                       {"role": "user", "content": replan_feedback(errors)}]
    return None


# ================================ 2.-3. execute, modify ================================
@dataclass
class NodeRun:
    spec: NodeSpec
    status: str = "pending"  # pending | running | done | failed | skipped | error
    input: str = ""  # the input it ran on (after refinement)
    output: str = ""
    evidence: list[Evidence] = field(default_factory=list)  # own + propagated
    label: str | None = None  # JUDGE only
    insufficient: bool = False  # THINK said the evidence is insufficient / JUDGE said Uncertain
    origin: str = "initial"  # "initial" or "modification N"


def merge_evidence(lists: list[list[Evidence]]) -> list[Evidence]:
    """Round-robin over the parents' evidence lists, without repeats: every parent is represented early."""
    out: list[Evidence] = []
    seen: set[str] = set()
    for i in range(max((len(x) for x in lists), default=0)):
        for lst in lists:
            if i < len(lst) and lst[i].passage_id not in seen:
                seen.add(lst[i].passage_id)
                out.append(lst[i])
    return out


class GraphRun:
    """One claim's graph: node states, the scheduler, and the dynamic modifications."""

    def __init__(self, claim: Claim, ctx: MethodContext, specs: list[NodeSpec]):
        self.claim = claim
        self.ctx = ctx
        self.p: TrificationParams = ctx.params
        self.nodes: dict[str, NodeRun] = {s.id: NodeRun(s) for s in specs}
        self.initial_counts = count_types(specs)
        self.modifications = 0  # sub-graphs merged
        self.modification_requests = 0  # sub-graph requests made (capped by max_modifications)
        self.t0 = time.perf_counter()
        self.record_graph("initial")

    # -- trace helpers ---------------------------------------------------------------------------
    def record_graph(self, phase: str) -> None:
        self.ctx.trace.event("trification.graph", phase=phase,
                             nodes=[{**r.spec.to_dict(), "status": r.status, "origin": r.origin}
                                    for r in self.nodes.values()])

    def _t(self) -> float:
        return round(time.perf_counter() - self.t0, 6)

    # -- scheduling (§3.3: a node runs as soon as all its parents have finished) --------------------
    def _ready(self) -> list[NodeRun]:
        ready = []
        for r in self.nodes.values():
            if r.status != "pending":
                continue
            parents = [self.nodes[d] for d in r.spec.dependencies]
            if all(p.status == "done" for p in parents):
                ready.append(r)
        return ready

    def _skip_blocked(self) -> None:
        """A pending node with a failed / skipped / errored parent can never run: skip it."""
        changed = True
        while changed:
            changed = False
            for r in self.nodes.values():
                if r.status == "pending" and any(self.nodes[d].status in ("failed", "skipped", "error")
                                                 for d in r.spec.dependencies):
                    r.status = "skipped"
                    self.ctx.trace.event("trification.node_skip", id=r.spec.id, t=self._t())
                    changed = True

    async def run(self) -> None:
        running: dict[asyncio.Task, NodeRun] = {}
        try:
            while True:
                self._skip_blocked()
                for r in self._ready():
                    r.status = "running"
                    self.ctx.trace.event("trification.node_start", id=r.spec.id, type=r.spec.type, t=self._t())
                    running[asyncio.create_task(self._run_node(r))] = r
                if not running:
                    break
                done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    r = running.pop(task)
                    task.result()  # transport errors propagate: the runner keeps results already written
        finally:
            for task in running:
                task.cancel()

    # -- one node (Algorithm 1's loop body) ------------------------------------------------------
    async def _run_node(self, r: NodeRun) -> None:
        parents = [self.nodes[d] for d in r.spec.dependencies]
        # 1. evidence propagation
        r.evidence = merge_evidence([p.evidence for p in parents])
        # 2. input refinement: a REFINE parent's output replaces the node's input
        refined = [p.output for p in parents if p.spec.type == "REFINE" and p.output]
        r.input = " ".join(refined) if refined else (r.spec.input or self.claim.text)
        # One guard for every node type instead of per-role fallbacks: what a node does after an invalid
        # reply needs the graph (SEARCH still searches, a JUDGE errs), and the event names the node.
        try:
            if r.spec.type == "SEARCH":
                await self._search(r, parents)
            elif r.spec.type == "REFINE":
                await self._refine(r, parents)
            elif r.spec.type == "THINK":
                await self._think(r, parents)
            else:
                await self._judge(r, parents)
        except LLMOutputError as exc:
            if r.spec.type != "JUDGE":
                await self._fallback(r, exc)
            else:  # no label to fall back on: the node errs, other JUDGEs may still rule
                r.status = "error"
                r.output = f"error: {exc}"
                self.ctx.trace.event("trification.node_end", id=r.spec.id, type=r.spec.type, status="error",
                                     error=str(exc), t=self._t())
                return
        failed_by_modification = False
        if r.insufficient and not self.p.static and r.spec.type in ("THINK", "JUDGE"):
            failed_by_modification = await self._modify(r)
        r.status = "failed" if failed_by_modification else "done"
        self.ctx.trace.event("trification.node_end", id=r.spec.id, type=r.spec.type, status=r.status,
                             input=r.input, output=shorten(r.output, 60), label=r.label,
                             evidence=[e.passage_id for e in r.evidence[: self.p.prompt_passages]], t=self._t())

    async def _fallback(self, r: NodeRun, exc: LLMOutputError) -> None:
        """A SEARCH / REFINE / THINK node whose reply never validates does the least it can instead of
        blocking its descendants (a THINK error used to skip the JUDGE below it and end in NOT_ENOUGH_INFO):
        SEARCH searches its input as the query, REFINE passes its input on, THINK concludes nothing."""
        if r.spec.type == "SEARCH":
            hits = await self.ctx.tools.search(r.input, self.p.k, role=SEARCH.name)
            r.evidence = merge_evidence([hits, r.evidence])
            r.output = f"searched 1 query: {r.input}"
            fallback = "searched the node's input as the query"
        elif r.spec.type == "REFINE":
            r.output = r.input
            fallback = "the input passes on unrefined"
        else:
            r.output = ""
            r.insufficient = False
            fallback = "no conclusion; the evidence passes on"
        self.ctx.trace.event("trification.agent_failed", id=r.spec.id, type=r.spec.type, error=str(exc),
                             fallback=fallback, t=self._t())

    def _shown(self, r: NodeRun) -> dict[str, Any]:
        """The propagated evidence a node is shown, as render inputs."""
        return {"shown": r.evidence[: self.p.prompt_passages], "max_words": self.p.passage_max_words}

    async def _search(self, r: NodeRun, parents: list[NodeRun]) -> None:
        out = await SEARCH(self.ctx, node=r, parents=parents, max_queries=self.p.max_queries)
        queries = [q.strip() for q in out.queries if q.strip()][: self.p.max_queries] or [r.input]
        results = await asyncio.gather(*(self.ctx.tools.search(q, self.p.k, role=SEARCH.name) for q in queries))
        own = merge_evidence(list(results))
        r.evidence = merge_evidence([own, r.evidence])
        r.output = f"searched {len(queries)} quer{'y' if len(queries) == 1 else 'ies'}: " + " | ".join(queries)

    async def _refine(self, r: NodeRun, parents: list[NodeRun]) -> None:
        out = await REFINE(self.ctx, node=r, parents=parents, **self._shown(r))
        r.output = out.new_input.strip() or r.input

    async def _think(self, r: NodeRun, parents: list[NodeRun]) -> None:
        out = await THINK(self.ctx, claim=self.claim, node=r, parents=parents, **self._shown(r))
        r.output = out.explanation
        r.insufficient = not out.evidence_sufficient

    async def _judge(self, r: NodeRun, parents: list[NodeRun]) -> None:
        out = await JUDGE(self.ctx, claim=self.claim, node=r, parents=parents, **self._shown(r))
        r.output = out.explanation
        r.label = out.label
        r.insufficient = out.label == "Uncertain"

    # -- §3.4 graph modification -------------------------------------------------------------------
    async def _modify(self, failed: NodeRun) -> bool:
        """Ask for a sub-graph for ``failed`` and merge it. True when merged (the node is then failed)."""
        if self.modification_requests >= self.p.max_modifications:
            self.ctx.trace.event("trification.modification_capped", id=failed.spec.id,
                                 cap=self.p.max_modifications)
            return False
        self.modification_requests += 1
        n = self.modification_requests
        # nodes the sub-graph may reuse: finished ones that do not descend from the failed node
        below = descendants([x.spec for x in self.nodes.values()], failed.spec.id)
        reusable = [x for x in self.nodes.values()
                    if x.status == "done" and x.spec.id not in below and x.spec.id != failed.spec.id]
        external = [x.spec.id for x in reusable]
        specs = await request_plan(self.ctx, MODIFY, self.claim, external_ids=external, prefix=f"m{n}.",
                                   phase=f"modification {n}", failed=failed, reusable=reusable)
        if specs is None:
            self.ctx.trace.event("trification.modification_failed", id=failed.spec.id, request=n)
            return False
        # the failed node's pending descendants are skipped; the sub-graph takes over
        for d in below:
            if self.nodes[d].status == "pending":
                self.nodes[d].status = "skipped"
                self.ctx.trace.event("trification.node_skip", id=d, t=self._t())
        for s in specs:
            self.nodes[s.id] = NodeRun(s, origin=f"modification {n}")
        self.modifications += 1
        self.ctx.trace.event("trification.modification", failed=failed.spec.id, request=n,
                             added=[s.id for s in specs])
        failed.status = "failed"
        self.record_graph(f"modification {n}")
        return True

    # -- the JUDGE nodes that stand, and the Table 2 statistics -----------------------------------
    def final_judges(self) -> list[NodeRun]:
        return [r for r in self.nodes.values() if r.spec.type == "JUDGE" and r.status == "done"]

    def stats(self) -> dict[str, Any]:
        executed = [r.spec for r in self.nodes.values()]
        return {
            "graph_modifications": self.modifications,
            "modification_requests": self.modification_requests,
            "initial_nodes": self.initial_counts,
            "final_nodes": count_types(executed),
            "statuses": {s: sum(1 for r in self.nodes.values() if r.status == s)
                         for s in ("done", "failed", "skipped", "error", "pending")},
        }


# ================================ 4. label ================================
def label_from_judges(judges: list[NodeRun], uncertain_label: str) -> Label:
    labels = [j.label for j in judges]
    if "Refutes" in labels:
        return Label.REFUTED
    if labels and all(x == "Supports" for x in labels):
        return Label.SUPPORTED
    return Label(uncertain_label)


# ================================ Algorithm 1 ================================
async def verify_trification(claim: Claim, ctx: MethodContext) -> Verdict:
    p: TrificationParams = ctx.params
    p.check_labels(ctx.label_space)  # the engine checked it already; a direct call is refused the same way
    ctx.trace.event("trification.mode", static=p.static, no_refine=p.no_refine, no_refine_think=p.no_refine_think)
    # generate a DAG verification plan G
    t0 = time.perf_counter()
    specs = await request_plan(ctx, PLANNER, claim)
    ctx.trace.timings["trification.plan_s"] = time.perf_counter() - t0
    if specs is None:
        reason = f"the planner produced no valid verification graph in {p.max_replans + 1} attempts"
        ctx.trace.event("trification.no_plan", reason=reason)
        explanation = reason + "; nothing was executed"
        return Verdict(ctx.label_space.undecided(ctx.trace, explanation, path="trification.no_plan"), explanation,
                       [], ctx.trace, "trification")
    # concurrently execute the nodes of G in topological order, modifying G where evidence is missing
    run = GraphRun(claim, ctx, specs)
    t1 = time.perf_counter()
    await run.run()
    ctx.trace.timings["trification.execute_s"] = time.perf_counter() - t1
    run.record_graph("final")
    stats = run.stats()
    ctx.trace.event("trification.stats", **stats)
    # the label from the JUDGE nodes that stand
    judges = run.final_judges()
    if not judges:
        reason = "no JUDGE node finished (" + ", ".join(f"{k}={v}" for k, v in stats["statuses"].items() if v) + ")"
        ctx.trace.event("trification.no_judge", reason=reason)
        return Verdict(ctx.label_space.undecided(ctx.trace, reason, path="trification.no_judge"), reason, [],
                       ctx.trace, "trification")
    label = label_from_judges(judges, p.uncertain_label)
    explanation = " ".join(f"[{j.spec.id}: {j.label}] {j.output}" for j in judges)
    evidence = merge_evidence([j.evidence for j in judges])[: p.prompt_passages]
    return Verdict(label, explanation, evidence, ctx.trace, "trification")
