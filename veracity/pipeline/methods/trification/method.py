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

1. **Plan** (§3.2, Table 4 prompt): the planner first reasons (a ``reasoning`` field before the nodes,
   ``plan_reasoning_chars``: Table 4 lets it think before the JSON), then writes the verification graph as a
   flat list of nodes (:func:`request_plan`). A plan is repaired where a fix cannot change its meaning, then
   validated
   (:func:`~.graph.validate_plan`); when invalid, the usual small-model mistakes are repaired structurally
   (:func:`~.graph.structural_repair`: a flat list read as a chain, repeats dropped, trimmed to the node
   budget, a JUDGE added; every fix is in the trace; ``structural_repair = false`` turns this off) and,
   if still invalid, re-planned with the validation errors fed back (``max_replans`` times). An invalid
   plan is never executed; if none validates the claim gets NOT_ENOUGH_INFO with the reason in the trace.
2. **Execute** (§3.3): every node starts as soon as all its parents have finished; ready nodes run
   concurrently. Before a node runs, its parents' evidence and outputs are propagated to it, and if a
   parent is a REFINE node the node's input is replaced by the refined input. Its prompt shows the
   passages within ``evidence_tokens`` (a token budget split fairly among the parents, each keeping its
   top-ranked passages: :func:`~.roles.select_evidence`) and its parents' results.
   SEARCH: the model writes queries, each is searched on the local index (top-k, the paper's Wiki
   strategy with k = 10), and the node synthesizes what it retrieved (role ``synthesize``,
   ``search_synthesis``; §3.2); the synthesis is its result. REFINE: resolves ambiguous references from
   its parent's evidence. THINK: reasons over the evidence and says whether it suffices. JUDGE: Supports
   / Refutes / Uncertain.
   A node whose reply never validates does not block the graph: SEARCH searches its input as the query,
   REFINE passes its input on, THINK concludes nothing (each traced as ``trification.agent_failed``); a
   JUDGE ends with status ``error`` and other JUDGEs may still rule.
3. **Modify** (§3.4, dynamic mode, the default): a THINK that finds the evidence insufficient or a JUDGE
   that says Uncertain is marked failed, its not-yet-run descendants are skipped, and the modifier writes
   a sub-graph (which may depend on finished nodes, to reuse their evidence) that is merged into the
   graph while execution goes on. At most ``max_modifications`` (3) times. A THINK / JUDGE still
   insufficient after that no longer modifies the graph; if at the end no JUDGE stands or one is still
   Uncertain, the process defaults to static mode (§4.3, ``cap_fallback = static``, traced as
   ``trification.static_fallback``): the initial graph is executed without modification, its finished
   nodes reused, and its JUDGEs decide (``cap_fallback = stand``: the dynamic graph's JUDGEs decide).
4. **Label** (:func:`label_from_judges`): the verdict comes from the JUDGE nodes that stand at the end.
   The paper does not say how several JUDGEs combine; ``judge_aggregation`` chooses (default
   ``all_supported``: REFUTED if any refutes, SUPPORTED if all support, otherwise (an Uncertain judge
   remains) ``uncertain_label`` — by default REFUTED, the paper's JUDGE rule "SUPPORTS if the evidence
   confirms
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
import dataclasses
import time
from dataclasses import dataclass
from typing import Any

from veracity.errors import ConfigError, LLMOutputError
from veracity.pipeline.confidence import aggregate
from veracity.pipeline.grounding import QUOTE_MODES, ask_quoting, quoting, ungrounded_explanation
from veracity.pipeline.labels import LabelSpace
from veracity.pipeline.methods.base import MethodContext
from veracity.pipeline.methods.trification.graph import (
    NodeRun,
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
    MAX_SEARCH_QUERIES,
    MODIFY,
    PLANNER,
    REFINE,
    SEARCH,
    SYNTHESIZE,
    THINK,
    QuotedJudgeResult,
    REPLAN,
    search_queries_model,
    select_evidence,
    shorten,
)
from veracity.pipeline.params import MethodParams, param
from veracity.pipeline.roles import Role
from veracity.pipeline.types import Claim, Evidence, Label, Verdict


@dataclass
class TrificationParams(MethodParams):
    static: bool = param(False,
                         help="execute the first valid graph once, no modification (ablation --static)",
                         paper="§4.3: static mode, the graph executed once without modification")
    max_modifications: int = param(3, min=0, max=20, help="graph modifications in dynamic mode",
                                   paper="§4.3: the graph can undergo up to 3 modifications")
    max_nodes: int = param(12, min=1, max=50,
                           help="node budget of one plan / sub-graph (the plan schema caps the node list at "
                                "it)")
    max_replans: int = param(2, min=0, max=10,
                             help="re-plans with the validation errors fed back, after the first plan")
    structural_repair: bool = param(True,
                                    help="repair an invalid plan structurally before re-planning: chain "
                                               "parentless nodes, drop repeats, trim to budget, add a JUDGE "
                                               "(traced)")
    k: int = param(10, min=1, max=100, help="passages per search query",
                   paper="§4.3: the Wiki strategy fetches the top-10 paragraphs")
    max_queries: int = param(3, min=1, max=MAX_SEARCH_QUERIES,
                             help="queries a SEARCH node may issue (its schema caps the list at it)")
    evidence_tokens: int = param(2000, min=50, max=100000,
                                 help="token budget (estimated: characters / 4) of the passages shown to a "
                                      "node, split fairly among its parents, each keeping its top-ranked "
                                      "passages",
                                 paper="§3.3: evidence propagates from every parent; the paper sets no "
                                       "budget")
    passage_max_words: int = param(120, min=1, max=5000, help="words of each passage shown")
    plan_reasoning_chars: int = param(1000, min=0, max=4000,
                                      help="characters of the planner's reasoning, written before the nodes "
                                           "(0: no reasoning field)",
                                      paper="Table 4: 'Before writing the JSON, you can think as long as "
                                            "needed'")
    search_synthesis: bool = param(True, help="a SEARCH node synthesizes what it retrieved "
                                              "(role synthesize); its children see the summary",
                                   paper="§3.2: the SEARCH node synthesizes the gathered information")
    cap_fallback: str = param("static", choices=("static", "stand"),
                              help="after max_modifications, an unresolved claim: 'static' re-runs the "
                                   "initial graph without modification (finished nodes reused) and takes its "
                                   "verdict; 'stand': the dynamic graph's JUDGEs decide",
                              paper="§4.3: unsuccessful after the maximum modifications, the process "
                                    "defaults to static mode")
    judge_aggregation: str = param("all_supported", choices=("all_supported", "majority", "last"),
                                   help="verdict from several JUDGE nodes: all_supported (any Refutes -> "
                                        "REFUTED, all Supports -> SUPPORTED, else uncertain_label), "
                                        "majority (more Supports or Refutes wins, a tie -> uncertain_label), "
                                        "last (the JUDGE that finished last)",
                                   paper="not specified (Algorithm 1 outputs one label)")
    quotes: str = param("off", choices=QUOTE_MODES,
                        help="each JUDGE node quotes the words of each passage its label rests on "
                             "(veracity's switch); show: located and shown; check: retried once when a "
                             "quote is not in its passage, then the JUDGE is Uncertain (the node failed: "
                             "modification may follow)",
                        paper="not in the paper (issue 31): A.2's JUDGE quotes nothing")
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
            raise ConfigError(f"trification uncertain_label {self.uncertain_label} is not in the "
                              f"{space.name} "
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
    model = plan_model_for(allowed, p.max_nodes, p.plan_reasoning_chars)
    msgs = role.messages(claim=claim, allowed=allowed, max_nodes=p.max_nodes,
                         reasoning=p.plan_reasoning_chars > 0, **inputs)
    for attempt in range(p.max_replans + 1):
        try:
            plan = await role(ctx, output=model, messages=msgs)
        except LLMOutputError as exc:
            ctx.trace.event("trification.plan", phase=phase, attempt=attempt, valid=False,
                            errors=[f"the reply did not validate: {exc}"], nodes=[], role=exc.role,
                            fallback="plan again" if attempt < p.max_replans else "no plan from this phase")
            continue
        reasoning = getattr(plan, "reasoning", None)
        raw = specs_from_plan(plan)
        specs, fixes = repair_plan(raw, external_ids)
        if prefix:
            specs = prefix_subgraph(specs, prefix, external_ids)
        errors = validate_plan(specs, max_nodes=p.max_nodes, allowed_types=allowed, external_ids=external_ids)
        ctx.trace.event("trification.plan", phase=phase, attempt=attempt, valid=not errors, errors=errors,
                        repairs=fixes, nodes=[s.to_dict() for s in specs],
                        **({"reasoning": reasoning} if reasoning is not None else {}))
        if not errors:
            return specs
        if p.structural_repair:
            fixed, structural = structural_repair(specs, max_nodes=p.max_nodes, allowed_types=allowed,
                                                  external_ids=external_ids, judge_input=claim.text,
                                                  id_prefix=prefix)
            still = validate_plan(fixed, max_nodes=p.max_nodes, allowed_types=allowed,
                                  external_ids=external_ids)
            ctx.trace.event("trification.plan", phase=phase, attempt=attempt, valid=not still, errors=still,
                            repairs=structural, structural_repair=True, nodes=[s.to_dict() for s in fixed])
            if not still:
                return fixed
        msgs = msgs + [{"role": "assistant", "content": plan.model_dump_json()},
                       {"role": "user", "content": REPLAN(errors)}]
    return None


# ================================ 2.-3. execute, modify ================================
def _judge_label(reply: Any) -> str:
    """A JUDGE's label as a verdict label, for the quote check (Uncertain settles nothing)."""
    return {"Supports": Label.SUPPORTED, "Refutes": Label.REFUTED}.get(reply.label,
                                                                       Label.NOT_ENOUGH_INFO).value


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

    def __init__(self, claim: Claim, ctx: MethodContext, specs: list[NodeSpec], *, static: bool | None = None,
                 phase: str | None = "initial"):
        self.claim = claim
        self.ctx = ctx
        self.p: TrificationParams = ctx.params
        # the static fallback runs static in a dynamic run
        self.static = self.p.static if static is None else static
        self.nodes: dict[str, NodeRun] = {s.id: NodeRun(s) for s in specs}
        self.initial_ids = [s.id for s in specs]
        self.initial_counts = count_types(specs)
        self.modifications = 0  # sub-graphs merged
        self.modification_requests = 0  # sub-graph requests made (capped by max_modifications)
        self.capped = False  # a THINK / JUDGE found the evidence insufficient after the last modification
        self.finish_counter = 0
        self.t0 = time.perf_counter()
        if phase:
            self.record_graph(phase)

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
                    self.ctx.trace.event("trification.node_start", id=r.spec.id, type=r.spec.type,
                                         t=self._t())
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
        # 1. evidence propagation: everything the parents hold passes on; the prompt shows each parent's
        # top-ranked passages within the node's token budget (evidence_tokens, split fairly per parent)
        r.evidence = merge_evidence([p.evidence for p in parents])
        if r.spec.type != "SEARCH":
            r.shown = select_evidence([p.evidence for p in parents], self.p.evidence_tokens,
                                      self.p.passage_max_words)
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
                self.finish_counter += 1
                r.finished = self.finish_counter
                r.output = f"error: {exc}"
                self.ctx.trace.event("trification.node_end", id=r.spec.id, type=r.spec.type, status="error",
                                     error=str(exc), role=exc.role,
                                     fallback="no label from this JUDGE; the others rule",
                                     t=self._t())
                return
        failed_by_modification = False
        if r.insufficient and not self.static and r.spec.type in ("THINK", "JUDGE"):
            failed_by_modification = await self._modify(r)
        r.status = "failed" if failed_by_modification else "done"
        self.finish_counter += 1
        r.finished = self.finish_counter
        self.ctx.trace.event("trification.node_end", id=r.spec.id, type=r.spec.type, status=r.status,
                             input=r.input, output=shorten(r.output, 60), label=r.label,
                             evidence=[e.passage_id for e in r.shown], t=self._t())

    async def _fallback(self, r: NodeRun, exc: LLMOutputError) -> None:
        """A SEARCH / REFINE / THINK node whose reply never validates does the least it can instead of
        blocking its descendants (a THINK error used to skip the JUDGE below it and end in NOT_ENOUGH_INFO):
        SEARCH searches its input as the query, REFINE passes its input on, THINK concludes nothing."""
        if r.spec.type == "SEARCH":
            await self._retrieve(r, [r.input])
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
        """The propagated evidence a node is shown (chosen in :meth:`_run_node`), as render inputs."""
        return {"shown": r.shown, "max_words": self.p.passage_max_words}

    async def _search(self, r: NodeRun, parents: list[NodeRun]) -> None:
        out = await SEARCH(self.ctx, node=r, parents=parents, max_queries=self.p.max_queries,
                           output=search_queries_model(self.p.max_queries))
        queries = [q.strip() for q in out.queries if q.strip()][: self.p.max_queries] or [r.input]
        await self._retrieve(r, queries)

    async def _retrieve(self, r: NodeRun, queries: list[str]) -> None:
        """Search each query (top-k), then synthesize the passages (§3.2: "The SEARCH node synthesizes the
        gathered information, ensuring that it aligns with the original query"); the synthesis is the node's
        output, which its children see beside the propagated passages."""
        results = await asyncio.gather(*(self.ctx.tools.search(q, self.p.k,
                                                               role=SEARCH.name) for q in queries))
        own = merge_evidence(list(results))
        r.queries = list(queries)
        r.evidence = merge_evidence([own, r.evidence])
        r.shown = select_evidence([own], self.p.evidence_tokens, self.p.passage_max_words)
        r.output = (f"searched {len(queries)} quer{'y' if len(queries) == 1 else 'ies'}: "
                    + " | ".join(queries))
        if not self.p.search_synthesis:
            return
        if not r.shown:  # nothing to synthesize: say so instead of asking the model
            r.output = f"the search found no passages ({r.output})"
            r.synthesized = True
            return
        try:
            out = await SYNTHESIZE(self.ctx, node=r, shown=r.shown, max_words=self.p.passage_max_words)
        except LLMOutputError as exc:
            self.ctx.trace.event("trification.agent_failed", id=r.spec.id, type=r.spec.type,
                                 role=SYNTHESIZE.name,
                                 error=str(exc), fallback="no summary; the children see the passages only",
                                 t=self._t())
            return
        if out.summary.strip():
            r.output = out.summary.strip()
            r.synthesized = True

    async def _refine(self, r: NodeRun, parents: list[NodeRun]) -> None:
        out = await REFINE(self.ctx, node=r, parents=parents, **self._shown(r))
        r.output = out.new_input.strip() or r.input

    async def _think(self, r: NodeRun, parents: list[NodeRun]) -> None:
        out = await THINK(self.ctx, claim=self.claim, node=r, parents=parents, **self._shown(r))
        r.output = out.explanation
        r.insufficient = not out.evidence_sufficient

    async def _judge(self, r: NodeRun, parents: list[NodeRun]) -> None:
        if self.p.quotes != "off":
            return await self._judge_quoting(r, parents)
        mine: list = []
        out = await JUDGE(self.ctx, claim=self.claim, node=r, parents=parents, usage_sink=mine,
                          **self._shown(r))
        got = mine[-1].label_probs if mine else None
        r.label_probs = dict(got["probs"]) if got else None
        r.output = out.explanation
        r.label = out.label
        r.insufficient = out.label == "Uncertain"

    async def _judge_quoting(self, r: NodeRun, parents: list[NodeRun]) -> None:
        """A JUDGE with quotes=show|check: its label rests on quotes from the passages it was shown; in check
        mode a mismatch is retried once, then the JUDGE is Uncertain (what A.2 says a JUDGE answers when it
        is not certain), so the node fails as any Uncertain JUDGE does (§3.4)."""
        g = await ask_quoting(self.ctx, JUDGE, self.p.quotes, r.shown, claim=self.claim, node=r,
                              parents=parents,
                              quoting=True, output=quoting(QuotedJudgeResult,
                                                           [e.passage_id for e in r.shown]),
                              label_of=_judge_label, fallback="Uncertain", **self._shown(r))
        r.quotes, r.grounding = g.quotes, g.grounding
        r.output, r.label = g.reply.explanation, g.reply.label
        if g.replaced is not None:  # Trification's own "not supported": an Uncertain JUDGE
            r.output, r.label = ungrounded_explanation(g), "Uncertain"
        r.insufficient = r.label == "Uncertain"

    # -- §3.4 graph modification -------------------------------------------------------------------
    async def _modify(self, failed: NodeRun) -> bool:
        """Ask for a sub-graph for ``failed`` and merge it. True when merged (the node is then failed)."""
        if self.modification_requests >= self.p.max_modifications:
            self.capped = True
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

    # -- §4.3: after the last modification, static mode -----------------------------------------------
    async def static_fallback(self, reason: str) -> "GraphRun":
        """The initial graph executed in static mode (§4.3: "Should verification remain unsuccessful after
        reaching the maximum number of modifications, the process defaults to static mode").

        Nodes of the initial graph that already ran keep their results (a THINK / JUDGE failed for a
        modification counts as finished with its result, as in static mode); the ones skipped below a
        failed node now run without modification. Returns the static graph; its JUDGEs decide."""
        fb = GraphRun(self.claim, self.ctx, [self.nodes[i].spec for i in self.initial_ids], static=True,
                      phase=None)
        fb.t0, fb.finish_counter = self.t0, self.finish_counter
        reused, rerun = [], []
        for i in self.initial_ids:
            old, new = self.nodes[i], fb.nodes[i]
            if old.status in ("done", "failed", "error"):
                for name in ("input", "output", "evidence", "shown", "label", "insufficient", "queries",
                             "synthesized", "finished"):
                    setattr(new, name, getattr(old, name))
                new.status = "error" if old.status == "error" else "done"
                reused.append(i)
            else:
                rerun.append(i)
        self.ctx.trace.event("trification.static_fallback", reason=reason, reused=reused, rerun=rerun,
                             modifications=self.modifications)
        await fb.run()
        fb.record_graph("static fallback")
        return fb

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
JUDGE_AGGREGATIONS = ("all_supported", "majority", "last")


def resolved(judges: list[NodeRun]) -> bool:
    """Verification succeeded: some JUDGE stands and none is still Uncertain."""
    return bool(judges) and all(j.label in ("Supports", "Refutes") for j in judges)


def label_from_judges(judges: list[NodeRun], uncertain_label: str, rule: str = "all_supported") -> Label:
    """The claim's label from the JUDGE nodes that stand. The paper does not say how several JUDGEs combine
    (Algorithm 1 outputs one label); ``rule`` (parameter ``judge_aggregation``):

    - ``all_supported`` (default): REFUTED if any JUDGE refutes, SUPPORTED if all support, otherwise
      ``uncertain_label``: every JUDGE checks a part of the claim and the claim holds only if all do
      (§3.2's JUDGE rule "SUPPORTS if the evidence confirms the declaration otherwise REFUTES");
    - ``majority``: more Supports than Refutes -> SUPPORTED, more Refutes -> REFUTED, a tie (Uncertain
      JUDGEs do not vote) -> ``uncertain_label``;
    - ``last``: the JUDGE that finished last (in dynamic mode usually the latest sub-graph's) decides;
      Uncertain -> ``uncertain_label``.
    """
    labels = [j.label for j in judges]
    if rule == "majority":
        sup, ref = labels.count("Supports"), labels.count("Refutes")
        return Label.SUPPORTED if sup > ref else Label.REFUTED if ref > sup else Label(uncertain_label)
    if rule == "last":
        last = max(judges, key=lambda j: j.finished).label if judges else None
        return {"Supports": Label.SUPPORTED, "Refutes": Label.REFUTED}.get(last or "", Label(uncertain_label))
    if rule != "all_supported":
        raise ValueError(f"unknown judge aggregation {rule!r}; known: {', '.join(JUDGE_AGGREGATIONS)}")
    if "Refutes" in labels:
        return Label.REFUTED
    if labels and all(x == "Supports" for x in labels):
        return Label.SUPPORTED
    return Label(uncertain_label)


# ================================ Algorithm 1 ================================
async def verify_trification(claim: Claim, ctx: MethodContext) -> Verdict:
    p: TrificationParams = ctx.params
    p.check_labels(ctx.label_space)  # the engine checked it already; a direct call is refused the same way
    ctx.trace.event("trification.mode", static=p.static, no_refine=p.no_refine,
                    no_refine_think=p.no_refine_think,
                    search_synthesis=p.search_synthesis, cap_fallback=p.cap_fallback,
                    judge_aggregation=p.judge_aggregation)
    # generate a DAG verification plan G
    t0 = time.perf_counter()
    specs = await request_plan(ctx, PLANNER, claim)
    ctx.trace.timings["trification.plan_s"] = time.perf_counter() - t0
    if specs is None:
        reason = f"the planner produced no valid verification graph in {p.max_replans + 1} attempts"
        ctx.trace.event("trification.no_plan", reason=reason)
        explanation = reason + "; nothing was executed"
        return Verdict(ctx.label_space.undecided(ctx.trace, explanation, path="trification.no_plan"),
                       explanation,
                       [], ctx.trace, "trification")
    # concurrently execute the nodes of G in topological order, modifying G where evidence is missing
    run = GraphRun(claim, ctx, specs)
    t1 = time.perf_counter()
    await run.run()
    ctx.trace.timings["trification.execute_s"] = time.perf_counter() - t1
    run.record_graph("final")
    stats = run.stats()
    # §4.3: still unresolved after the last allowed modification: static mode decides
    judges = run.final_judges()
    if run.capped and p.cap_fallback == "static" and not resolved(judges):
        reason = (f"after {run.modification_requests} modification(s) (the cap) "
                  + ("no JUDGE stands" if not judges else "a JUDGE is still Uncertain"))
        static_run = await run.static_fallback(reason)
        judges = static_run.final_judges()
        stats["static_fallback"] = {"judges": {j.spec.id: j.label for j in judges},
                                    "statuses": static_run.stats()["statuses"]}
    ctx.trace.event("trification.stats", **stats)
    # the label from the JUDGE nodes that stand
    if not judges:
        reason = "no JUDGE node finished (" + ", ".join(f"{k}={v}" for k,
                                                        v in stats["statuses"].items() if v) + ")"
        ctx.trace.event("trification.no_judge", reason=reason)
        return Verdict(ctx.label_space.undecided(ctx.trace, reason, path="trification.no_judge"), reason, [],
                       ctx.trace, "trification")
    label = label_from_judges(judges, p.uncertain_label, p.judge_aggregation)
    explanation = " ".join(f"[{j.spec.id}: {j.label}] {j.output}" for j in judges)
    evidence = merge_evidence([j.shown for j in judges])  # the passages the JUDGEs were shown
    if p.quotes != "off":  # the standing JUDGEs' quotes; ungrounded when one of them is
        quotes = [q for j in judges for q in (j.quotes or [])]
        grounding = "ungrounded" if any(j.grounding != "grounded" for j in judges) else "grounded"
        return Verdict(label, explanation, evidence, ctx.trace, "trification", quotes=quotes,
                       grounding=grounding)
    return Verdict(label, explanation, evidence, ctx.trace, "trification",
                   label_probs=judges_distribution(judges, p, ctx.label_space))


MAX_JUDGES_ENUMERATED = 8  # 3^8 combinations at most


def judges_distribution(judges: list[NodeRun], p: "TrificationParams",
                        space: LabelSpace) -> dict[str, float] | None:
    """The verdict's label distribution (veracity's addition, pipeline/confidence.py): the probability that
    :func:`label_from_judges` with the run's aggregation gives each label when every standing JUDGE answers
    independently from its own reply's Supports / Refutes / Uncertain probabilities. None when a JUDGE has
    none (no logprobs, a quoting JUDGE) or too many JUDGEs stand."""
    if not judges or len(judges) > MAX_JUDGES_ENUMERATED or any(j.label_probs is None for j in judges):
        return None

    def rule(values: list[str]) -> Label:
        return label_from_judges([dataclasses.replace(j, label=v) for j, v in zip(judges, values,
                                                                                  strict=True)],
                                 p.uncertain_label, p.judge_aggregation)

    return aggregate([j.label_probs or {} for j in judges], rule, space)
