"""Trification: a planned verification graph (SEARCH / REFINE / THINK / JUDGE nodes), run concurrently.

Reads like the paper (Trification, §3 and Algorithm 1):

1. **Plan** (Table 4 prompt): the planner writes the verification graph as a flat list of nodes. A plan is
   repaired where a fix cannot change its meaning, validated (``trification_graph.validate_plan``);
   when invalid, the usual small-model mistakes are repaired structurally (``structural_repair``: a flat
   list read as a chain, repeats dropped, trimmed to the node budget, a JUDGE added; every fix is in the
   trace; ``structural_repair = false`` turns this off) and, if still invalid, re-planned with the
   validation errors fed back (``max_replans`` times). An invalid plan is never executed; if none
   validates the claim gets NOT_ENOUGH_INFO with the reason in the trace.
2. **Execute** (§3.3): every node starts as soon as all its parents have finished; ready nodes run
   concurrently. Before a node runs, its parents' evidence and outputs are propagated to it, and if a
   parent is a REFINE node the node's input is replaced by the refined input.
   SEARCH: the model writes queries, each is searched on the local index (top-k, the paper's Wiki
   strategy with k = 10). REFINE: resolves ambiguous references from its parent's evidence. THINK:
   reasons over the evidence and says whether it suffices. JUDGE: Supports / Refutes / Uncertain.
3. **Modify** (§3.4, dynamic mode, the default): a THINK that finds the evidence insufficient or a JUDGE
   that says Uncertain is marked failed, its not-yet-run descendants are skipped, and the planner writes
   a sub-graph (which may depend on finished nodes, to reuse their evidence) that is merged into the
   graph while execution goes on. At most ``max_modifications`` (3) times; after that results stand as
   in static mode (§4.3).
4. **Label**: the verdict comes from the JUDGE nodes that stand at the end: REFUTED if any refutes,
   SUPPORTED if all support, otherwise (an Uncertain judge remains) ``uncertain_label`` — by default
   REFUTED, the paper's JUDGE rule "SUPPORTS if the evidence confirms the declaration otherwise
   REFUTES" (§3.2) on its two-label benchmarks.

The trace records every plan (valid or not, with its errors), the graph initially and after each
modification, each node's start / finish, and the per-claim statistics of the paper's Table 2
(graph modifications; SEARCH / THINK / REFINE / JUDGE node counts in the initial and the final graph).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from veracity.errors import LLMOutputError
from veracity.pipeline.methods.base import MethodContext, MethodSpec
from veracity.pipeline.methods.trification_graph import (
    NODE_TYPES,
    NodeSpec,
    count_types,
    descendants,
    plan_model_for,
    prefix_subgraph,
    repair_plan,
    structural_repair,
    specs_from_plan,
    validate_plan,
)
from veracity.pipeline.tools import format_passages
from veracity.pipeline.types import Claim, Evidence, Label, Verdict


@dataclass
class TrificationParams:
    static: bool = False  # --static: execute the first valid graph once, no modification (paper's static mode)
    max_modifications: int = 3  # graph modifications in dynamic mode (paper §4.3: up to 3)
    max_nodes: int = 12  # node budget of one plan / sub-graph; a larger plan is rejected and re-planned
    max_replans: int = 2  # re-plans with the validation errors fed back, after the first plan
    structural_repair: bool = True  # chain parentless nodes, drop repeats, trim to budget, add a JUDGE (traced)
    k: int = 10  # passages per search query (paper: top-10 paragraphs)
    max_queries: int = 3  # queries a SEARCH node may issue
    prompt_passages: int = 10  # passages shown to a THINK / REFINE / JUDGE node (propagated evidence)
    passage_max_words: int = 120  # words of each passage shown
    no_refine: bool = False  # ablation "w/o REFINE" (Table 1)
    no_refine_think: bool = False  # ablation "w/o REFINE and THINK" (Table 1)
    uncertain_label: str = "REFUTED"  # label when a JUDGE is still Uncertain at the end (paper: not confirmed -> REFUTES)
    plan_max_tokens: int = 1536  # completion budget of a planner call (12 nodes of typical length fit)
    node_max_tokens: int = 320  # completion budget of a node call

    def allowed_types(self) -> tuple[str, ...]:
        if self.no_refine_think:
            return ("SEARCH", "JUDGE")
        if self.no_refine:
            return ("SEARCH", "THINK", "JUDGE")
        return NODE_TYPES


# ================================ roles: prompts next to their output models ================================

# -- role: trification.planner (Table 4) --------------------------------------------------------
_NODE_TYPE_TEXT = {
    "SEARCH": "SEARCH (ids s_1, s_2, ...): performs a search. Root nodes must be SEARCH nodes; a SEARCH node "
              "may also sit in the middle of the graph. Its input is a query string naming the information "
              "needed by the following steps.",
    "REFINE": "REFINE (ids r_1, ...): its input is a part of the paragraph that contains ambiguous pronouns or "
              "entities; it rewrites that input without ambiguity using the results of its parent. It MUST have "
              "exactly one dependency (usually a SEARCH node).",
    "THINK": "THINK (ids t_1, ...): intermediate reasoning. Its input states which information of the paragraph "
             "is checked; it combines the information of all its dependencies and reasons about the input. "
             "It MUST have dependencies. Its input is empty if it depends on a REFINE node (the refined text "
             "becomes its input).",
    "JUDGE": "JUDGE (ids j_1, ...): judges its input against the evidence of its dependencies: SUPPORT, REFUTE "
             "or NOT CERTAIN. It MUST have dependencies. Its input is empty if it depends on a REFINE node.",
}


def planner_system(allowed: tuple[str, ...]) -> str:
    types = "\n".join(f"{i + 1}. {_NODE_TYPE_TEXT[t]}" for i, t in enumerate(t for t in NODE_TYPES if t in allowed))
    refine_rule = (
        "- SEARCH, THINK and JUDGE inputs MUST be understandable on their own. If one contains an ambiguous "
        "reference or an unclear time, put a REFINE node before it (SEARCH -> REFINE -> this node).\n"
        if "REFINE" in allowed else
        "- Every node input MUST be understandable on its own: write full names, no pronouns.\n"
    )
    return (
        "You are an expert at analyzing paragraphs and creating a structured verification graph for "
        "fact-checking. Given a paragraph, generate a verification graph that exactly represents the logical "
        "structure of how to verify it. The verification focuses on the entities, statistics, and temporal "
        "information.\n\n"
        "The graph must capture every logical reasoning step needed to verify the input, track the "
        "dependencies between steps, and be a Directed Acyclic Graph.\n\n"
        "Each node has: id (unique), type, input, hint (why the node is needed and how it connects to the "
        "other nodes), dependencies (ids of the nodes that must finish before this node).\n\n"
        f"Node types:\n{types}\n\n"
        "Graph rules:\n"
        "- The graph must be acyclic and may have several root nodes; every root node is a SEARCH node.\n"
        f"{refine_rule}"
        "- Nodes that are not SEARCH nodes MUST have dependencies.\n"
        "- Several nodes may lead into one node when their information must be combined, compared, or "
        "reasoned about together.\n"
        "- The graph must contain at least one JUDGE node; the JUDGE nodes decide the verdict.\n"
        "- Cover every piece of information in the paragraph (entities, numbers, dates); do not assume, "
        "search first. Each step is self-contained and unique; avoid redundant steps. Keep the graph small.\n"
        "Reply in JSON."
    )


def planner_messages(claim: Claim, allowed: tuple[str, ...], max_nodes: int) -> list[dict[str, str]]:
    dated = f" (stated on {claim.date})" if claim.date else ""
    return [
        {"role": "system", "content": planner_system(allowed)},
        {"role": "user", "content": f"Paragraph{dated}: {claim.text}\n\nUse at most {max_nodes} nodes."},
    ]


def replan_feedback(errors: list[str]) -> str:
    return ("This verification graph is invalid and was not executed:\n- " + "\n- ".join(errors)
            + "\nWrite a corrected verification graph that follows every rule.")


# -- role: trification.modify (§3.4: a new sub-graph for a failed THINK / JUDGE) ------------------
def modify_messages(claim: Claim, allowed: tuple[str, ...], max_nodes: int, failed: "NodeRun",
                    reusable: list["NodeRun"]) -> list[dict[str, str]]:
    listing = "\n".join(
        f"- {r.spec.id} ({r.spec.type}) input: {r.input or r.spec.input} | result: {_short(r.output, 40)}"
        for r in reusable
    ) or "(none)"
    return [
        {"role": "system", "content": planner_system(allowed)},
        {"role": "user", "content": (
            f"Paragraph: {claim.text}\n\n"
            f"While verifying it, node {failed.spec.id} ({failed.spec.type}) failed because the evidence was "
            f"insufficient.\nIts input: {failed.input}\nIts hint: {failed.spec.hint}\n"
            f"Its result: {failed.output}\n\n"
            f"Finished nodes you may depend on to reuse their information (use their ids):\n{listing}\n\n"
            "Write a new sub-graph with an alternative verification strategy that seeks the missing "
            "information and ends in a JUDGE node. Give new nodes new ids (not those listed above). "
            f"Use at most {max_nodes} nodes."
        )},
    ]


# -- role: trification.search (A.2 "Prompts for SEARCH Node") ------------------------------------
class SearchQueries(BaseModel):
    queries: list[Annotated[str, Field(max_length=160)]] = Field(max_length=5, description="search queries, each a natural sentence")


SEARCH_SYSTEM = (
    "You are an expert at analyzing text for finding relevant information using a search engine. Given a "
    "text and a hint about what information we need from the text, write search queries to be executed "
    "against a search engine so that the required information is obtained. Make each query a natural "
    "sentence. Reply in JSON."
)


# -- role: trification.refine (A.2 "Prompts for REFINE node") ------------------------------------
class RefinedInput(BaseModel):
    new_input: str = Field(max_length=300, description="the input rewritten without ambiguous references, pronouns or unclear entities")


REFINE_SYSTEM = (
    "You are a fact-checking expert that excels at analyzing a text. You are given an input that contains "
    "ambiguous references, pronouns, or unclear entities. A search was performed beforehand to resolve "
    "them. Analyze the input and the search results, then write a new input that resolves the ambiguity. "
    "The new input MUST have a similar meaning to the original input, without any ambiguous references, "
    "pronouns, or unclear entities. Reply in JSON."
)


# -- role: trification.think (A.2 "Prompts for THINK node") --------------------------------------
class ThinkResult(BaseModel):
    explanation: str = Field(max_length=600, description="the input examined against the evidence, and their logical relationship")
    evidence_sufficient: bool = Field(description="false when the evidence cannot answer the input")


THINK_SYSTEM = (
    "You are a fact-checking expert that excels at analyzing a claim and understanding the current stance "
    "based on provided evidence. You are in the middle of the verification process. You are given the "
    "claim, an input derived from it, and a hint explaining how this input helps to verify the claim. "
    "Analyze the claim, the input and the hint, examine the input against the evidence, and give your "
    "stance: explain the input and the logical relationship between the input and the evidence. If the "
    "evidence does not let you answer the input, say so and set evidence_sufficient to false. Reply in JSON."
)


# -- role: trification.judge (A.2 "Prompts for JUDGE node") --------------------------------------
class JudgeResult(BaseModel):
    explanation: str = Field(max_length=600, description="the logical relationship between the claim, the input and the evidence")
    label: Literal["Supports", "Refutes", "Uncertain"]


JUDGE_SYSTEM = (
    "You are a fact-checking expert that excels at analyzing a claim and understanding the current stance "
    "based on provided evidence. You are at the end of the verification process and examine the "
    "truthfulness of the input. You are given an input derived from the claim and a hint explaining how "
    "it helps to verify the claim. Examine the input, with the help of the hint and the context, against "
    "the evidence and give your label:\n"
    "1. Supports: you are confident that all information in the input is true.\n"
    "2. Refutes: you are confident that the information contradicts the evidence.\n"
    "3. Uncertain: you are not certain how to label it.\n"
    "Give the explanation first, then the label. Reply in JSON."
)


# ================================ the graph executor ================================

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


def _short(text: str, words: int) -> str:
    w = text.split()
    return " ".join(w[:words]) + (" ..." if len(w) > words else "")


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
        self._record_graph("initial")

    # -- trace helpers ---------------------------------------------------------------------------
    def _record_graph(self, phase: str) -> None:
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
                             input=r.input, output=_short(r.output, 60), label=r.label,
                             evidence=[e.passage_id for e in r.evidence[: self.p.prompt_passages]], t=self._t())

    async def _fallback(self, r: NodeRun, exc: LLMOutputError) -> None:
        """A SEARCH / REFINE / THINK node whose reply never validates does the least it can instead of
        blocking its descendants (a THINK error used to skip the JUDGE below it and end in NOT_ENOUGH_INFO):
        SEARCH searches its input as the query, REFINE passes its input on, THINK concludes nothing."""
        if r.spec.type == "SEARCH":
            hits = await self.ctx.tools.search(r.input, self.p.k, role="trification.search")
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

    def _context(self, r: NodeRun, parents: list[NodeRun]) -> str:
        outs = "\n".join(f"[{p.spec.id}] ({p.spec.type}) {p.output}" for p in parents
                         if p.spec.type != "SEARCH" and p.output) or "(none)"
        passages = format_passages(r.evidence[: self.p.prompt_passages], max_words=self.p.passage_max_words)
        return f"Evidence:\n{passages}\n\nResults of the previous steps:\n{outs}"

    async def _search(self, r: NodeRun, parents: list[NodeRun]) -> None:
        prior = "\n".join(f"[{p.spec.id}] {p.output}" for p in parents if p.spec.type != "SEARCH" and p.output)
        msgs = [
            {"role": "system", "content": SEARCH_SYSTEM},
            {"role": "user", "content": f"Text: {r.input}\nHint: {r.spec.hint}"
                                        + (f"\nKnown so far:\n{prior}" if prior else "")
                                        + f"\nWrite at most {self.p.max_queries} queries."},
        ]
        out = await self.ctx.llm.generate(msgs, SearchQueries, role="trification.search",
                                          max_tokens=self.p.node_max_tokens)
        queries = [q.strip() for q in out.queries if q.strip()][: self.p.max_queries] or [r.input]
        results = await asyncio.gather(*(self.ctx.tools.search(q, self.p.k, role="trification.search")
                                         for q in queries))
        own = merge_evidence(list(results))
        r.evidence = merge_evidence([own, r.evidence])
        r.output = f"searched {len(queries)} quer{'y' if len(queries) == 1 else 'ies'}: " + " | ".join(queries)

    async def _refine(self, r: NodeRun, parents: list[NodeRun]) -> None:
        msgs = [
            {"role": "system", "content": REFINE_SYSTEM},
            {"role": "user", "content": f"{self._context(r, parents)}\n\nInput: {r.input}\nHint: {r.spec.hint}"},
        ]
        out = await self.ctx.llm.generate(msgs, RefinedInput, role="trification.refine",
                                          max_tokens=self.p.node_max_tokens)
        r.output = out.new_input.strip() or r.input

    async def _think(self, r: NodeRun, parents: list[NodeRun]) -> None:
        msgs = [
            {"role": "system", "content": THINK_SYSTEM},
            {"role": "user", "content": f"{self._context(r, parents)}\n\nClaim: {self.claim.text}\n"
                                        f"Input: {r.input}\nHint: {r.spec.hint}"},
        ]
        out = await self.ctx.llm.generate(msgs, ThinkResult, role="trification.think",
                                          max_tokens=self.p.node_max_tokens)
        r.output = out.explanation
        r.insufficient = not out.evidence_sufficient

    async def _judge(self, r: NodeRun, parents: list[NodeRun]) -> None:
        msgs = [
            {"role": "system", "content": JUDGE_SYSTEM},
            {"role": "user", "content": f"{self._context(r, parents)}\n\nClaim: {self.claim.text}\n"
                                        f"Input: {r.input}\nHint: {r.spec.hint}"},
        ]
        out = await self.ctx.llm.generate(msgs, JudgeResult, role="trification.judge",
                                          max_tokens=self.p.node_max_tokens)
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
        msgs = modify_messages(self.claim, self.p.allowed_types(), self.p.max_nodes, failed, reusable)
        specs = await request_plan(self.ctx, msgs, role="trification.modify", external_ids=external,
                                   prefix=f"m{n}.", phase=f"modification {n}", claim_text=self.claim.text)
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
        self._record_graph(f"modification {n}")
        return True

    # -- the verdict -------------------------------------------------------------------------------
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


async def request_plan(ctx: MethodContext, messages: list[dict[str, str]], *, role: str,
                       external_ids: list[str] = (), prefix: str = "", phase: str = "plan",
                       claim_text: str = "") -> list[NodeSpec] | None:
    """Plan, repair, validate; re-plan with the errors fed back. The valid plan's nodes, or None."""
    p: TrificationParams = ctx.params
    allowed = p.allowed_types()
    model = plan_model_for(allowed, p.max_nodes)
    msgs = list(messages)
    for attempt in range(p.max_replans + 1):
        try:
            plan = await ctx.llm.generate(msgs, model, role=role, max_tokens=p.plan_max_tokens)
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
                                                  external_ids=external_ids, judge_input=claim_text, id_prefix=prefix)
            still = validate_plan(fixed, max_nodes=p.max_nodes, allowed_types=allowed, external_ids=external_ids)
            ctx.trace.event("trification.plan", phase=phase, attempt=attempt, valid=not still, errors=still,
                            repairs=structural, structural_repair=True, nodes=[s.to_dict() for s in fixed])
            if not still:
                return fixed
        msgs = msgs + [{"role": "assistant", "content": plan.model_dump_json()},
                       {"role": "user", "content": replan_feedback(errors)}]
    return None


def label_from_judges(judges: list[NodeRun], uncertain_label: str) -> Label:
    labels = [j.label for j in judges]
    if "Refutes" in labels:
        return Label.REFUTED
    if labels and all(x == "Supports" for x in labels):
        return Label.SUPPORTED
    return Label(uncertain_label)


async def verify_trification(claim: Claim, ctx: MethodContext) -> Verdict:
    p: TrificationParams = ctx.params
    if p.uncertain_label not in Label.__members__:
        from veracity.errors import ConfigError

        raise ConfigError(f"trification uncertain_label {p.uncertain_label!r} is not a label",
                          hint="use REFUTED (paper), NOT_ENOUGH_INFO or SUPPORTED")
    ctx.trace.event("trification.mode", static=p.static, no_refine=p.no_refine, no_refine_think=p.no_refine_think)
    t0 = time.perf_counter()
    specs = await request_plan(ctx, planner_messages(claim, p.allowed_types(), p.max_nodes),
                               role="trification.planner", claim_text=claim.text)
    ctx.trace.timings["trification.plan_s"] = time.perf_counter() - t0
    if specs is None:
        reason = f"the planner produced no valid verification graph in {p.max_replans + 1} attempts"
        ctx.trace.event("trification.no_plan", reason=reason)
        return Verdict(Label.NOT_ENOUGH_INFO, reason + "; nothing was executed", [], ctx.trace, "trification")
    run = GraphRun(claim, ctx, specs)
    t1 = time.perf_counter()
    await run.run()
    ctx.trace.timings["trification.execute_s"] = time.perf_counter() - t1
    run._record_graph("final")
    stats = run.stats()
    ctx.trace.event("trification.stats", **stats)
    judges = run.final_judges()
    if not judges:
        reason = "no JUDGE node finished (" + ", ".join(f"{k}={v}" for k, v in stats["statuses"].items() if v) + ")"
        ctx.trace.event("trification.no_judge", reason=reason)
        return Verdict(Label.NOT_ENOUGH_INFO, reason, [], ctx.trace, "trification")
    label = label_from_judges(judges, p.uncertain_label)
    explanation = " ".join(f"[{j.spec.id}: {j.label}] {j.output}" for j in judges)
    evidence = merge_evidence([j.evidence for j in judges])[: p.prompt_passages]
    return Verdict(label, explanation, evidence, ctx.trace, "trification")


SPEC = MethodSpec(
    name="trification",
    fn=verify_trification,
    params_cls=TrificationParams,
    summary="Trification: a planned SEARCH/REFINE/THINK/JUDGE graph run concurrently, modified when evidence is missing.",
)
