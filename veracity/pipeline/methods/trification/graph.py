"""Trification's verification graph: the planner's output models, plan validation and repairs.

A plan is the planner's ``reasoning`` (Table 4 lets it think before the JSON; the field comes first so the
thinking precedes the nodes under constrained decoding) and a flat list of nodes (Trification §3.2): ``id``,
``type`` (SEARCH / REFINE / THINK / JUDGE), ``input``, ``hint`` and ``dependencies`` (parent ids). A plan is
executed only when it validates:

- every id is unique (and non-empty);
- every dependency names a node of the plan (or, for a sub-graph, a node already in the graph);
- the graph is acyclic (a node depending on itself is a cycle);
- roots (nodes without dependencies) are SEARCH nodes (Table 4: "Root nodes ... should be search node";
  REFINE / THINK / JUDGE "MUST have dependencies");
- a REFINE node has at most one parent (§3.3: "we constrain REFINE nodes to have at most one parent");
- there is at least one JUDGE node (the verdict comes from JUDGE nodes);
- the plan has at most ``max_nodes`` nodes (the node budget);
- node types allowed by the ablation (``no_refine`` / ``no_refine_think``) only.

:func:`repair_plan` applies only fixes that cannot change what the plan means: whitespace around ids,
repeated dependencies, and dependencies that name no node at all (a dangling id carries no information;
if dropping it leaves a non-SEARCH root, validation still rejects the plan).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Iterable, Literal

from pydantic import BaseModel, Field, create_model

from veracity.pipeline.types import Evidence

NodeType = Literal["SEARCH", "REFINE", "THINK", "JUDGE"]
NODE_TYPES: tuple[str, ...] = ("SEARCH", "REFINE", "THINK", "JUDGE")


# -- the planner's output models (one per ablation, so the server's schema enforces the node types) --
# Table 4: "Before writing the JSON, you can think as long as needed." Constrained decoding allows no text
# outside the JSON, so the thinking is a ``reasoning`` field placed BEFORE the node list (the server emits
# properties in schema order); ``plan_reasoning_chars`` bounds it (0: no field).
PLAN_REASONING_CHARS = 1000
REASONING_DESCRIPTION = ("think first: the entities, numbers and dates of the paragraph to verify, what must "
                         "be "
                         "searched, what is ambiguous and needs a REFINE, and how the steps connect")


class PlanNode(BaseModel):
    id: str = Field(max_length=16,
                    description="unique id: s_1, s_2 for SEARCH, r_1 for REFINE, t_1 for THINK, "
                                "j_1 for JUDGE")
    type: Literal["SEARCH", "REFINE", "THINK", "JUDGE"]
    input: str = Field(max_length=200,
                       description="the query (SEARCH) or the statement to process; empty if a REFINE parent "
                                   "sets it")
    hint: str = Field(max_length=160,
                      description="why this node is needed and how it connects to the other nodes")
    dependencies: list[Annotated[str, Field(max_length=16)]] = Field(
        max_length=8, description="ids of the parent nodes; empty only for SEARCH roots")


class PlanNodeNoRefine(BaseModel):
    id: str = Field(max_length=16, description="unique id: s_1, s_2 for SEARCH, t_1 for THINK, j_1 for JUDGE")
    type: Literal["SEARCH", "THINK", "JUDGE"]
    input: str = Field(max_length=200, description="the query (SEARCH) or the statement to process")
    hint: str = Field(max_length=160,
                      description="why this node is needed and how it connects to the other nodes")
    dependencies: list[Annotated[str, Field(max_length=16)]] = Field(
        max_length=8, description="ids of the parent nodes; empty only for SEARCH roots")


class PlanNodeSearchJudge(BaseModel):
    id: str = Field(max_length=16, description="unique id: s_1, s_2 for SEARCH, j_1 for JUDGE")
    type: Literal["SEARCH", "JUDGE"]
    input: str = Field(max_length=200, description="the query (SEARCH) or the statement to judge")
    hint: str = Field(max_length=160,
                      description="why this node is needed and how it connects to the other nodes")
    dependencies: list[Annotated[str, Field(max_length=16)]] = Field(
        max_length=8, description="ids of the parent nodes; empty only for SEARCH roots")


# node lists are bounded so a reply fits the planner's max_tokens; max_nodes is checked after
class VerificationPlan(BaseModel):
    reasoning: str = Field(max_length=PLAN_REASONING_CHARS, description=REASONING_DESCRIPTION)
    nodes: list[PlanNode] = Field(max_length=24)


class VerificationPlanNoRefine(BaseModel):
    reasoning: str = Field(max_length=PLAN_REASONING_CHARS, description=REASONING_DESCRIPTION)
    nodes: list[PlanNodeNoRefine] = Field(max_length=24)


class VerificationPlanSearchJudge(BaseModel):
    reasoning: str = Field(max_length=PLAN_REASONING_CHARS, description=REASONING_DESCRIPTION)
    nodes: list[PlanNodeSearchJudge] = Field(max_length=24)


# the same without the reasoning field (plan_reasoning_chars = 0)
class VerificationPlanNodes(BaseModel):
    nodes: list[PlanNode] = Field(max_length=24)


class VerificationPlanNoRefineNodes(BaseModel):
    nodes: list[PlanNodeNoRefine] = Field(max_length=24)


class VerificationPlanSearchJudgeNodes(BaseModel):
    nodes: list[PlanNodeSearchJudge] = Field(max_length=24)


_BOUNDED: dict[tuple[type[BaseModel], int | None, int], type[BaseModel]] = {}


def plan_model_for(allowed_types: Iterable[str], max_nodes: int | None = None,
                   reasoning_chars: int = PLAN_REASONING_CHARS) -> type[BaseModel]:
    """The planner's output model for the allowed node types.

    With ``max_nodes`` the schema itself caps the node list at the budget, so constrained decoding closes
    the JSON after ``max_nodes`` nodes instead of letting a small model add nodes until the token budget
    runs out (SmolLM2 did that on 3 of 10 HoVer claims with the 24-node cap). ``reasoning_chars`` bounds
    the ``reasoning`` field written before the nodes (Table 4's thinking before the JSON); 0 drops it.
    """
    allowed = set(allowed_types)
    think = reasoning_chars > 0
    if allowed == set(NODE_TYPES):
        base = VerificationPlan if think else VerificationPlanNodes
    elif allowed == {"SEARCH", "THINK", "JUDGE"}:
        base = VerificationPlanNoRefine if think else VerificationPlanNoRefineNodes
    elif allowed == {"SEARCH", "JUDGE"}:
        base = VerificationPlanSearchJudge if think else VerificationPlanSearchJudgeNodes
    else:
        raise ValueError(f"no plan model for node types {sorted(allowed)}")
    if reasoning_chars < 0:
        raise ValueError(f"reasoning_chars must be at least 0, got {reasoning_chars}")
    if max_nodes is not None and max_nodes < 1:
        raise ValueError(f"max_nodes must be at least 1, got {max_nodes}")
    if max_nodes is None and reasoning_chars in (0, PLAN_REASONING_CHARS):
        return base
    key = (base, max_nodes, reasoning_chars)
    if key not in _BOUNDED:
        fields: dict = {}
        if think:  # overriding a field keeps its place: reasoning stays before nodes
            fields["reasoning"] = (str, Field(max_length=reasoning_chars, description=REASONING_DESCRIPTION))
        if max_nodes is not None:
            fields["nodes"] = (base.model_fields["nodes"].annotation, Field(max_length=max_nodes))
        suffix = (f"Max{max_nodes}" if max_nodes is not None else "") + (f"R{reasoning_chars}" if think
                                                                         else "")
        _BOUNDED[key] = create_model(f"{base.__name__}{suffix}", __base__=base, **fields)
    return _BOUNDED[key]


# -- the graph the executor works on ------------------------------------------------------------
@dataclass
class NodeSpec:
    id: str
    type: str
    input: str
    hint: str
    dependencies: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"id": self.id, "type": self.type, "input": self.input, "hint": self.hint,
                "dependencies": list(self.dependencies)}


def specs_from_plan(plan: BaseModel) -> list[NodeSpec]:
    return [NodeSpec(n.id, n.type, n.input, n.hint, list(n.dependencies)) for n in plan.nodes]  # type: ignore[attr-defined]


def repair_plan(nodes: list[NodeSpec], external_ids: Iterable[str] = ()) -> tuple[list[NodeSpec], list[str]]:
    """Meaning-preserving fixes. Returns the repaired copy and a list of what was fixed."""
    fixes: list[str] = []
    out = [NodeSpec(n.id.strip(), n.type, n.input.strip(), n.hint.strip(),
                    [d.strip() for d in n.dependencies])
           for n in nodes]
    for old, new in zip(nodes, out, strict=True):
        if old.id != new.id:
            fixes.append(f"stripped whitespace around id {new.id!r}")
    known = {n.id for n in out} | set(external_ids)
    for n in out:
        seen: list[str] = []
        for d in n.dependencies:
            if d in seen:
                fixes.append(f"{n.id}: dropped repeated dependency {d!r}")
                continue
            if d not in known:
                fixes.append(f"{n.id}: dropped dependency {d!r} that names no node")
                continue
            seen.append(d)
        n.dependencies = seen
    return out, fixes


def structural_repair(nodes: list[NodeSpec], *, max_nodes: int, allowed_types: Iterable[str] = NODE_TYPES,
                      external_ids: Iterable[str] = (), judge_input: str = "",
                      id_prefix: str = "") -> tuple[list[NodeSpec], list[str]]:
    """Best-effort fixes for a plan that breaks the graph rules, in the way small models usually break them.

    Applied only when :func:`repair_plan` was not enough (the caller validates the result again and falls
    back to re-planning if it is still invalid). Each fix is listed for the trace:

    0. a node reusing an earlier node's id gets a fresh id (``s_1`` -> ``s_1_2``; dependencies naming the id
       keep meaning the first node with it);
    1. a node that repeats an earlier node (same type, input and dependencies) is dropped and edges to it
       point to the earlier one; when the graph has a cycle, edges to the node itself or to nodes listed
       after it are dropped (the list order is read as the execution order);
    2. a plan over the node budget keeps its first nodes (one slot is kept for a JUDGE if it has none);
    3. a THINK / REFINE / JUDGE node with no parent gets the node listed just before it as its parent (a
       flat list is read as a chain; edges only point backwards, so no cycle is introduced);
    4. a first node that is not a SEARCH gets a SEARCH of ``judge_input`` (the claim) as its parent;
    5. a plan with no JUDGE gets one that depends on every node nothing else depends on, judging
       ``judge_input`` (the claim).
    """
    fixes: list[str] = []
    external = set(external_ids)
    out = [NodeSpec(n.id, n.type, n.input, n.hint, list(n.dependencies)) for n in nodes]
    # 0. ids used more than once
    taken = {n.id for n in out} | external
    seen_ids: set[str] = set()
    renamed: list[str] = []
    for n in out:
        if n.id in seen_ids:
            k, fresh = 2, f"{n.id}_2"
            while fresh in taken:
                k += 1
                fresh = f"{n.id}_{k}"
            renamed.append(f"{n.id} -> {fresh}")
            n.id = fresh
            taken.add(fresh)
        seen_ids.add(n.id)
    if renamed:
        fixes.append(f"gave fresh ids to nodes reusing an id: {', '.join(renamed)}")
    # 1. repeated nodes
    kept: list[NodeSpec] = []
    alias: dict[str, str] = {}
    signature: dict[tuple, str] = {}
    for n in out:
        sig = (n.type, n.input.casefold(), tuple(alias.get(d, d) for d in n.dependencies))
        if sig in signature:
            alias[n.id] = signature[sig]
            continue
        signature.setdefault(sig, n.id)
        kept.append(n)
    if alias:
        fixes.append(f"dropped {len(alias)} node(s) repeating an earlier one: {', '.join(alias)}")
    for n in kept:
        deps: list[str] = []
        for d in n.dependencies:
            d = alias.get(d, d)
            if d != n.id and d not in deps:
                deps.append(d)
        n.dependencies = deps
    out = kept
    if find_cycle(out) is not None:
        position = {n.id: i for i, n in enumerate(out)}
        for i, n in enumerate(out):
            forward = [d for d in n.dependencies if position.get(d, -1) >= i]
            if forward:
                n.dependencies = [d for d in n.dependencies if d not in forward]
                fixes.append(f"{n.id}: dropped dependencies on itself or later nodes ({', '.join(forward)}) "
                             "to break a cycle")
    # 2. node budget
    allowed = set(allowed_types)
    need_judge = "JUDGE" in allowed and not any(n.type == "JUDGE" for n in out[:max_nodes])
    budget = max_nodes - 1 if need_judge else max_nodes
    if len(out) > budget:
        fixes.append(f"kept the first {budget} of {len(out)} nodes (budget {max_nodes})")
        out = out[:budget]
        ids = {n.id for n in out} | external
        for n in out:
            n.dependencies = [d for d in n.dependencies if d in ids]
    # 3. parentless non-SEARCH nodes: chain to the node listed before
    for i, n in enumerate(out):
        if not n.dependencies and n.type != "SEARCH" and i > 0:
            n.dependencies = [out[i - 1].id]
            fixes.append(f"{n.id}: {n.type} had no parent; it now depends on {out[i - 1].id}, listed before "
                         "it")
    # a first node that is not a SEARCH has nothing to read: a SEARCH of the claim goes before it
    if out and not out[0].dependencies and out[0].type != "SEARCH" and "SEARCH" in allowed:
        ids = {n.id for n in out} | external
        sid, k = f"{id_prefix}search", 1
        while sid in ids:
            k += 1
            sid = f"{id_prefix}search{k}"
        out.insert(0, NodeSpec(sid, "SEARCH", (judge_input or out[0].input)[:200],
                               "added by repair: evidence for the first node, which had no parent", []))
        out[1].dependencies = [sid]
        fixes.append(f"{out[1].id}: the first node was a {out[1].type} with no parent; added SEARCH {sid} "
                     "before it")
    # 4. a JUDGE
    if "JUDGE" in allowed and out and not any(n.type == "JUDGE" for n in out):
        used = {d for n in out for d in n.dependencies}
        sinks = [n.id for n in out if n.id not in used]
        ids = {n.id for n in out} | external
        jid, k = f"{id_prefix}judge", 1
        while jid in ids:
            k += 1
            jid = f"{id_prefix}judge{k}"
        out.append(NodeSpec(jid, "JUDGE", (judge_input or out[-1].input)[:200],
                            "added by repair: judges the claim on the evidence of the whole graph", sinks))
        fixes.append(f"added JUDGE {jid} over {', '.join(sinks)} (the plan had none)")
    return out, fixes


def find_cycle(nodes: list[NodeSpec]) -> list[str] | None:
    """One dependency cycle among ``nodes`` (as a list of ids), or None when the graph is acyclic."""
    deps = {n.id: [d for d in n.dependencies] for n in nodes}
    WHITE, GREY, BLACK = 0, 1, 2
    colour = {i: WHITE for i in deps}
    stack: list[str] = []

    def visit(u: str) -> list[str] | None:
        colour[u] = GREY
        stack.append(u)
        for v in deps.get(u, []):
            if v not in colour:
                continue  # external or dangling: not part of a cycle here
            if colour[v] == GREY:
                return stack[stack.index(v):] + [v]
            if colour[v] == WHITE:
                found = visit(v)
                if found:
                    return found
        stack.pop()
        colour[u] = BLACK
        return None

    for n in deps:
        if colour[n] == WHITE:
            found = visit(n)
            if found:
                return found
    return None


def validate_plan(nodes: list[NodeSpec], *, max_nodes: int, allowed_types: Iterable[str] = NODE_TYPES,
                  external_ids: Iterable[str] = ()) -> list[str]:
    """Every rule the plan breaks, one readable line each (empty list: the plan is executable).

    ``external_ids`` are nodes already in the graph that a sub-graph may depend on.
    """
    errors: list[str] = []
    allowed = set(allowed_types)
    external = set(external_ids)
    if not nodes:
        return ["the plan has no nodes"]
    if len(nodes) > max_nodes:
        errors.append(f"the plan has {len(nodes)} nodes, more than the budget of {max_nodes}")
    ids = [n.id for n in nodes]
    if any(not i for i in ids):
        errors.append("a node has an empty id")
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        errors.append(f"ids used more than once: {', '.join(dupes)}")
    clash = sorted(set(ids) & external)
    if clash:
        errors.append(f"ids already used in the graph: {', '.join(clash)}")
    known = set(ids) | external
    for n in nodes:
        if n.type not in allowed:
            errors.append(f"{n.id}: node type {n.type} is not allowed here (allowed: "
                          f"{', '.join(sorted(allowed))})")
        missing = [d for d in n.dependencies if d not in known]
        if missing:
            errors.append(f"{n.id}: depends on unknown node(s) {', '.join(missing)}")
        if not n.dependencies and n.type != "SEARCH":
            errors.append(f"{n.id}: a root node must be a SEARCH node, not {n.type} (give it dependencies)")
        if n.type == "REFINE" and len(n.dependencies) > 1:
            errors.append(f"{n.id}: a REFINE node may have at most one parent, it has {len(n.dependencies)}")
    cycle = find_cycle(nodes)
    if cycle:
        errors.append(f"the graph has a cycle: {' -> '.join(cycle)}")
    if not any(n.type == "JUDGE" for n in nodes):
        errors.append("the plan has no JUDGE node")
    return errors


def descendants(nodes: Iterable[NodeSpec], root: str) -> set[str]:
    """Ids of every node reachable from ``root`` along dependency edges (parent -> child)."""
    children: dict[str, list[str]] = {}
    for n in nodes:
        for d in n.dependencies:
            children.setdefault(d, []).append(n.id)
    out: set[str] = set()
    todo = list(children.get(root, []))
    while todo:
        c = todo.pop()
        if c not in out:
            out.add(c)
            todo.extend(children.get(c, []))
    return out


def prefix_subgraph(nodes: list[NodeSpec], prefix: str, external_ids: Iterable[str]) -> list[NodeSpec]:
    """Rename a sub-graph's ids to ``prefix + id`` (dependencies on existing graph nodes are kept)."""
    external = set(external_ids)
    own = {n.id for n in nodes}
    return [
        NodeSpec(prefix + n.id, n.type, n.input, n.hint,
                 [prefix + d if d in own and d not in external else d for d in n.dependencies])
        for n in nodes
    ]


def count_types(nodes: Iterable[NodeSpec]) -> dict[str, int]:
    counts = {t: 0 for t in NODE_TYPES}
    for n in nodes:
        counts[n.type] = counts.get(n.type, 0) + 1
    return counts


# the run record of one node while the graph executes (method.py's GraphRun keeps one per node; the
# roles render from it)
@dataclass
class NodeRun:
    spec: NodeSpec
    status: str = "pending"  # pending | running | done | failed | skipped | error
    input: str = ""  # the input it ran on (after refinement)
    output: str = ""
    evidence: list[Evidence] = field(default_factory=list)  # own + propagated
    shown: list[Evidence] = field(default_factory=list)  # the passages its prompt showed (evidence budget)
    queries: list[str] = field(default_factory=list)  # SEARCH only: the queries searched
    synthesized: bool = False  # SEARCH only: output is the synthesis of its passages (§3.2)
    finished: int = 0  # order in which nodes finished (1, 2, ...); 0 while not finished
    label: str | None = None  # JUDGE only
    # JUDGE only: its reply's Supports / Refutes / Uncertain probabilities
    label_probs: dict[str, float] | None = None
    quotes: list[Any] | None = None  # JUDGE only, quotes=show|check: its quotes, located
    grounding: str | None = None  # JUDGE only, quotes=show|check: grounded / ungrounded
    insufficient: bool = False  # THINK said the evidence is insufficient / JUDGE said Uncertain
    origin: str = "initial"  # "initial" or "modification N"
