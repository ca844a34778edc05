"""Trification's roles: the planner (Table 4), the graph modifier (§3.4) and one role per node type
(A.2, "Prompts for SEARCH / REFINE / THINK / JUDGE node"), each prompt next to its output model.

The planner and the modifier share one system prompt (:func:`planner_system`, listing only the node
types the ablation allows) and reply with a verification plan; the plan's output model depends on the
allowed node types and on the node budget, so the method narrows it per call with
``output=plan_model_for(allowed, max_nodes)``. A re-plan extends the planner's conversation with the
invalid plan and the validation errors (:func:`replan_feedback`), passed as ``messages=``.

A SEARCH node makes two calls: ``search`` writes its queries, ``synthesize`` summarizes the passages they
found (§3.2); what a node's prompt shows of its parents' passages is chosen by :func:`select_evidence`
(a token budget split fairly among the parents).

No role here declares a fallback: the method handles an invalid reply itself, because what it does
depends on the graph (see :mod:`.method`): an invalid plan is traced as a ``trification.plan`` attempt
and re-planned; a SEARCH / REFINE / THINK node does the least it can (``trification.agent_failed``; a
failed synthesis leaves the passages without a summary); a JUDGE node ends with status ``error``.
"""

from __future__ import annotations

import json
import math
from typing import Annotated, Literal

from pydantic import BaseModel, Field, create_model

from veracity.pipeline.grounding import QUOTE_RETRY, quoted
from veracity.pipeline.methods.trification.graph import NODE_TYPES, NodeRun, VerificationPlan
from veracity.pipeline.roles import Role, Turn, format_passages
from veracity.pipeline.types import Claim, Evidence


Message = dict[str, str]

PLAN_MAX_TOKENS = 1792  # completion budget of a planner / modifier call: 12 nodes of typical length (1536)
# plus the reasoning written before them (plan_reasoning_chars = 1000 characters, about 256 tokens)
NODE_MAX_TOKENS = 320  # completion budget of a node call (--param ROLE.max_tokens=N overrides one role)


def shorten(text: str, words: int) -> str:
    """The first ``words`` words of ``text`` (`` ...`` when cut)."""
    w = text.split()
    return " ".join(w[:words]) + (" ..." if len(w) > words else "")


# -- role: trification.planner (§3.2, Table 4) ----------------------------------------------------
_NODE_TYPE_TEXT = {
    "SEARCH": "SEARCH (ids s_1, s_2, ...): performs a search. Root nodes must be SEARCH nodes; a SEARCH node "
              "may also sit in the middle of the graph. Its input is a query string naming the information "
              "needed by the following steps.",
    "REFINE": "REFINE (ids r_1, ...): its input is a part of the paragraph that contains ambiguous pronouns "
              "or "
              "entities; it rewrites that input without ambiguity using the results of its parent. It MUST "
              "have "
              "exactly one dependency (usually a SEARCH node).",
    "THINK": "THINK (ids t_1, ...): intermediate reasoning. Its input states which information of the "
             "paragraph "
             "is checked; it combines the information of all its dependencies and reasons about the input. "
             "It MUST have dependencies. Its input is empty if it depends on a REFINE node (the refined text "
             "becomes its input).",
    "JUDGE": "JUDGE (ids j_1, ...): judges its input against the evidence of its dependencies: SUPPORT, "
             "REFUTE "
             "or NOT CERTAIN. It MUST have dependencies. Its input is empty if it depends on a REFINE node.",
}


# Table 4's output-format example, aligned with the schema (its keys "hints" / "natural_language" /
# "statement" are the node fields hint / input; its dangling dependency "tc_1" is s_1). One per ablation:
# the example only uses the node types the schema allows.
_EXAMPLE_NODES = {
    "SEARCH": [
        {"id": "s_1", "type": "SEARCH", "input": "[query_search]",
         "hint": "To verify the paragraph, we need to know the exact number of ...", "dependencies": []},
        {"id": "s_2", "type": "SEARCH", "input": "[query_search]",
         "hint": "To verify the paragraph, we also need to know the time period of ...",
         "dependencies": ["s_1"]},
    ],
    "REFINE": [
        {"id": "r_1", "type": "REFINE", "input": "input text",
         "hint": "Since the input says 'that period' we need to search the correct time period and replace "
                 "the "
                 "text with the correct period", "dependencies": ["s_2"]},
    ],
    "THINK": [
        {"id": "t_1", "type": "THINK", "input": "",
         "hint": "To understand the input, we need the information of the number and the time period",
         "dependencies": ["s_1", "r_1"]},
    ],
    "JUDGE": [
        {"id": "j_1", "type": "JUDGE", "input": "input text",
         "hint": "Based on the information obtained from the dependency nodes, we now can verify the "
                 "factuality "
                 "of the input text", "dependencies": ["t_1"]},
    ],
}


_ID_PREFIX = {"SEARCH": "s", "REFINE": "r", "THINK": "t", "JUDGE": "j"}


def planner_example(allowed: tuple[str, ...]) -> dict:
    """Table 4's example graph restricted to ``allowed``: a dropped node's children depend on its parents."""
    nodes = [dict(n, dependencies=list(n["dependencies"])) for t in NODE_TYPES for n in _EXAMPLE_NODES[t]]
    parents = {n["id"]: n["dependencies"] for n in nodes}
    kept_ids = {n["id"] for n in nodes if n["type"] in allowed}
    out = []
    for n in nodes:
        if n["type"] not in allowed:
            continue
        deps: list[str] = []
        todo = list(n["dependencies"])
        while todo:
            d = todo.pop(0)
            if d not in kept_ids:
                todo = parents[d] + todo
            elif d not in deps:
                deps.append(d)
        out.append({**n, "dependencies": deps})
    if "REFINE" not in allowed:  # without REFINE nothing sets an empty input
        out = [{**n, "input": n["input"] or "input text"} for n in out]
    return {"reasoning": "The paragraph states a number and a time period; both must be searched, and "
                         "'that period' is ambiguous ...", "nodes": out}


def planner_system(allowed: tuple[str, ...] = NODE_TYPES, reasoning: bool = True) -> str:
    """The planner's system prompt (Table 4), describing the node types ``allowed`` (the ablations drop
    some). ``reasoning``: the schema has the ``reasoning`` field to think in before the nodes."""
    refine = "REFINE" in allowed
    texts = [_NODE_TYPE_TEXT[t] for t in NODE_TYPES if t in allowed]
    if not refine:  # no sentence about a node type the schema forbids
        texts = [t.replace(" Its input is empty if it depends on a REFINE node (the refined text becomes its "
                           "input).", "")
                  .replace(" Its input is empty if it depends on a REFINE node.", "") for t in texts]
    types = "\n".join(f"{i + 1}. {t}" for i, t in enumerate(texts))
    ids = ", ".join(f"{_ID_PREFIX[t]}_1" + (f", {_ID_PREFIX[t]}_2" if t == "SEARCH" else "") + f" for {t}"
                    for t in NODE_TYPES if t in allowed)
    refine_rule = (
        "- SEARCH, THINK and JUDGE inputs MUST be understandable on their own. If one contains an ambiguous "
        "reference or an unclear time, put a REFINE node before it; if necessary, a SEARCH node before the "
        "REFINE node.\n"
        if refine else
        "- Every node input MUST be understandable on its own: write full names, no pronouns.\n"
    )
    clarity = (
        "5. Clarity: no ambiguous pronouns, vague references or incomplete names; state each entity's "
        "complete "
        "name. If a node's input refers to something ambiguous (a pronoun, a vague reference to an entity or "
        "event, an unclear time), you MUST resolve it with a REFINE node first, one of two ways:\n"
        "   - search is required: (SEARCH) -> (REFINE) -> (this node)\n"
        "   - search is not required: (REFINE) -> (this node)\n"
        "   For instance, a SEARCH input \"... Donald Trump's falsifying business records case\" is still "
        "vague: "
        "first SEARCH \"Donald Trump's cases on falsifying business records\", then REFINE the input, then "
        "SEARCH the refined input.\n"
        if refine else
        "5. Clarity: no ambiguous pronouns, vague references or incomplete names; state each entity's "
        "complete "
        "name.\n"
    )
    think = ("Before the nodes, think as long as needed in the \"reasoning\" field: the information to "
             "verify, "
             "what to search, what is ambiguous, how the steps connect. Then write the nodes.\n"
             if reasoning else "")
    example = planner_example(allowed)
    if not reasoning:
        example = {"nodes": example["nodes"]}
    return (
        "You are an expert at analyzing paragraphs and creating a structured verification graph for "
        "fact-checking. Given a paragraph that contains multiple sentences, generate a JSON verification "
        "graph "
        "that exactly represents the logical structure of how to verify it. The verification focuses on the "
        "entities, statistics, and temporal information.\n\n"
        "The graph must capture every logical reasoning step needed to verify the input, track the "
        "dependencies between steps, and be a Directed Acyclic Graph.\n"
        f"{think}\n"
        "Each node has: id (unique), type, input, hint (why the node is needed and how it connects to the "
        "other nodes), dependencies (ids of the nodes that must finish before this node).\n\n"
        f"Node types:\n{types}\n\n"
        "Graph rules:\n"
        "- The graph must be acyclic and may have several root nodes; every root node is a SEARCH node, to "
        "provide information for the later steps.\n"
        f"{refine_rule}"
        "- A SEARCH node is not always a root: minimize the SEARCH nodes at the root to minimize the number "
        "of "
        "search operations.\n"
        "- Nodes that are not SEARCH nodes MUST have dependencies.\n"
        "- Several nodes may lead into one node (node combination) if and only if there is a logical "
        "relationship between them, such as:\n"
        "  * Combination: combining several pieces of information into one node.\n"
        "  * Comparison: comparing information from the parent nodes.\n"
        "  * Causality: a cause-effect relationship between the parent nodes and this node.\n"
        "  * Inductivity: this node is a general conclusion from specific information of the parent nodes.\n"
        "  * Deductivity: this node is specific information derived from general information of the parent "
        "nodes.\n"
        "- The graph must contain at least one JUDGE node; the JUDGE nodes decide the verdict.\n\n"
        "Critical requirements:\n"
        "1. Contextual and temporal understanding: understand the context and the time of the input; focus "
        "on "
        "the factuality of statistics, numbers, entities and times. When the paragraph does not state a time "
        "or a statistic explicitly, search for it. List all the information that needs to be verified: it "
        "becomes the starting nodes of the graph.\n"
        "2. Complete coverage: verify every piece of information in the input; do not assume: if something "
        "is not clear, search first. Edges send evidence from SEARCH nodes, or combine information from "
        "several nodes for intermediate reasoning.\n"
        "3. Coherent and structural: each node is a self-contained step that, when verified, logically "
        "contributes to proving or disproving the claim.\n"
        "4. Uniqueness and non-redundancy: each step gives unique information; avoid redundant steps.\n"
        f"{clarity}\n"
        f"Output format (an example; ids: {ids}):\n"
        f"{json.dumps(example)}\n"
        "Reply in JSON."
    )


def planner_turn(claim: Claim, max_nodes: int) -> list[Message]:
    dated = f" (stated on {claim.date})" if claim.date else ""
    return [{"role": "user", "content": f"Paragraph{dated}: {claim.text}\n\nUse at most {max_nodes} nodes."}]


def replan_feedback(errors: list[str]) -> str:
    """The user turn after an invalid plan: the rules it breaks, then the request for a corrected one."""
    return ("This verification graph is invalid and was not executed:\n- " + "\n- ".join(errors)
            + "\nWrite a corrected verification graph that follows every rule.")


REPLAN = Turn("replan", replan_feedback, {"errors": ["{rule broken}"]},
              when="after a plan that breaks the graph's rules (the plan itself is the assistant turn before "
                   "it)")


PLANNER = Role(
    "trification.planner", turns=(REPLAN,), output=VerificationPlan, render=planner_turn,
               instructions=planner_system,
    max_tokens=PLAN_MAX_TOKENS,
    summary="writes the verification graph (output narrowed per call to the allowed node types and "
            "max_nodes); "
            "an invalid reply counts as an invalid plan and is re-planned (max_replans)",
    extra={"paper": "§3.2; Table 4"},
    on_invalid="re-plan with the error fed back (max_replans); no valid plan: NOT_ENOUGH_INFO",
)


# -- role: trification.modify (§3.4: a new sub-graph for a failed THINK / JUDGE) ------------------
def modify_turn(claim: Claim, max_nodes: int, failed: NodeRun, reusable: list[NodeRun]) -> list[Message]:
    listing = "\n".join(
        f"- {r.spec.id} ({r.spec.type}) input: {r.input or r.spec.input} | result: {shorten(r.output, 40)}"
        for r in reusable
    ) or "(none)"
    return [
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


MODIFY = Role(
    "trification.modify", output=VerificationPlan, render=modify_turn, instructions=planner_system,
    max_tokens=PLAN_MAX_TOKENS,
    summary="writes a sub-graph for a THINK / JUDGE that found the evidence insufficient (output narrowed "
            "like "
            "the planner's); an invalid reply is re-planned, and with no valid sub-graph the node's result "
            "stands",
    extra={"paper": "§3.4; Algorithm 1"},
    on_invalid="no modification: results stand as in static mode",
)


# -- what a node sees of its parents (§3.3: evidence propagation) ---------------------------------
def estimate_tokens(text: str) -> int:
    """Tokens of ``text`` as a prompt budget counts them: characters / 4, rounded up (the client has no
    tokenizer of the served model; English text averages about 4 characters per token)."""
    return math.ceil(len(text) / 4)


def passage_tokens(ev: Evidence, max_words: int) -> int:
    """What one passage costs in a node's prompt, as :func:`format_passages` renders it."""
    return estimate_tokens(format_passages([ev], max_words=max_words)) + 1  # + the blank line between blocks


def select_evidence(lists: list[list[Evidence]], budget: int, max_words: int) -> list[Evidence]:
    """The passages a node is shown: ``budget`` tokens split fairly among its parents' evidence lists.

    Each list is in its parent's rank order and keeps its top-ranked passages: every parent gets an equal
    share, a parent that needs less than its share passes the rest on to the others (repeated until no
    share is left or every list is exhausted), and a passage already chosen for one parent is free for
    the next. A list's first passage is always taken when its share cannot hold it whole (it is cut at
    render time by ``max_words``; the budget is an estimate, not a hard cap). Output: round-robin over the
    chosen passages of each parent, so every parent is represented early."""
    chosen: list[list[Evidence]] = [[] for _ in lists]
    pos = [0] * len(lists)
    seen: set[str] = set()
    left = budget
    active = [i for i, lst in enumerate(lists) if lst]
    while active and left > 0:
        share = max(left // len(active), 1)
        spent_round = 0
        for i in active:
            spent, lst = 0, lists[i]
            while pos[i] < len(lst):
                ev = lst[pos[i]]
                if ev.passage_id in seen:
                    pos[i] += 1
                    continue
                cost = passage_tokens(ev, max_words)
                if spent + cost > share and (spent or chosen[i]):
                    break  # this round's share is spent (a parent's first passage always goes in)
                seen.add(ev.passage_id)
                chosen[i].append(ev)
                spent += cost
                pos[i] += 1
            spent_round += spent
        left -= spent_round
        if spent_round == 0:
            break  # every remaining next passage is larger than a share
        active = [i for i in active if pos[i] < len(lists[i])]
    out: list[Evidence] = []
    for k in range(max((len(c) for c in chosen), default=0)):
        for c in chosen:
            if k < len(c):
                out.append(c[k])
    return out


def node_context(node: NodeRun, parents: list[NodeRun], shown: list[Evidence], max_words: int) -> str:
    """The passages shown to a node (its propagated evidence) and its parents' results. A SEARCH parent's
    result is its synthesis of what it retrieved (§3.2); without synthesis (``search_synthesis=false``)
    SEARCH parents contribute their evidence only."""
    outs = "\n".join(f"[{p.spec.id}] ({p.spec.type}) {p.output}" for p in parents
                     if (p.spec.type != "SEARCH" or p.synthesized) and p.output) or "(none)"
    passages = format_passages(shown, max_words=max_words)
    return f"Evidence:\n{passages}\n\nResults of the previous steps:\n{outs}"


# -- role: trification.search (A.2 "Prompts for SEARCH Node") ------------------------------------
MAX_SEARCH_QUERIES = 5  # the most queries a SEARCH node's schema allows (the max_queries parameter's range)


class SearchQueries(BaseModel):
    queries: list[Annotated[str, Field(max_length=160)]] = Field(max_length=MAX_SEARCH_QUERIES,
                                                                 description="search queries, each a natural "
                                                                             "sentence")


_QUERY_MODELS: dict[int, type[SearchQueries]] = {MAX_SEARCH_QUERIES: SearchQueries}


def search_queries_model(max_queries: int) -> type[SearchQueries]:
    """SEARCH's output model with the query list capped at ``max_queries``, so constrained decoding closes
    the list at the node's budget instead of letting a small model write queries that are then dropped (as
    :func:`~veracity.pipeline.methods.trification.graph.plan_model_for` caps the plan's nodes). SmolLM2 filled
    all five 160-character slots with digits on vLLM, 621 tokens, where two were asked for. The queries kept
    are those of the uncapped schema but for the last one's end: a token that closes a string and opens the
    next item (``",``) is refused at the cap, so there the model picks another (10 HoVer claims at
    max_queries=3, temperature 0: the same kept queries on 9, on the 10th the third ran on to its 160
    characters; SEARCH's completion tokens 968 instead of 1,487; BENCHMARKS.md)."""
    if not 1 <= max_queries <= MAX_SEARCH_QUERIES:
        raise ValueError(f"max_queries must be 1..{MAX_SEARCH_QUERIES}, got {max_queries}")
    if max_queries not in _QUERY_MODELS:
        _QUERY_MODELS[max_queries] = create_model(
            f"SearchQueriesAtMost{max_queries}", __base__=SearchQueries,
            queries=(list[Annotated[str, Field(max_length=160)]],
                     Field(max_length=max_queries, description="search queries, each a natural sentence")))
    return _QUERY_MODELS[max_queries]


SEARCH_SYSTEM = (
    "You are an expert at analyzing text for finding relevant information using a search engine. Given a "
    "text and a hint about what information we need from the text, write search queries to be executed "
    "against a search engine so that the required information is obtained. Make each query a natural "
    "sentence. Reply in JSON."
)


def search_turn(node: NodeRun, parents: list[NodeRun], max_queries: int) -> list[Message]:
    prior = "\n".join(f"[{p.spec.id}] {p.output}" for p in parents if p.spec.type != "SEARCH" and p.output)
    return [
        {"role": "user", "content": f"Text: {node.input}\nHint: {node.spec.hint}"
                                    + (f"\nKnown so far:\n{prior}" if prior else "")
                                    + f"\nWrite at most {max_queries} queries."},
    ]


SEARCH = Role(
    "trification.search", output=SearchQueries, render=search_turn, instructions=SEARCH_SYSTEM,
    max_tokens=NODE_MAX_TOKENS,
    summary="SEARCH node: writes the queries searched on the index; an invalid reply searches the node's "
            "input",
    extra={"paper": "§3.2 SEARCH node; A.2"},
    on_invalid="the node searches its own input",
)


# -- role: trification.synthesize (§3.2 SEARCH node: "synthesizes the gathered information") -----
class SearchSynthesis(BaseModel):
    summary: str = Field(max_length=600, description="what the passages say about the node's input, in the "
                                                     "terms of the query; 'not found' for what they do not "
                                                     "say")


SYNTHESIZE_SYSTEM = (
    "You are an expert at reading search results for fact-checking. Given a search input, a hint about what "
    "information the following verification steps need, and the passages a search returned, synthesize the "
    "gathered information: state what the passages say that answers the input, in line with the query, "
    "naming entities, numbers and dates exactly. Say plainly what the passages do not contain. Do not "
    "judge the claim. Reply in JSON."
)


def synthesize_turn(node: NodeRun, shown: list[Evidence], max_words: int) -> list[Message]:
    return [
        {"role": "user", "content": f"Passages:\n{format_passages(shown, max_words=max_words)}\n\n"
                                    f"Search input: {node.input}\nHint: {node.spec.hint}\n"
                                    f"Queries searched: {' | '.join(node.queries)}"},
    ]


SYNTHESIZE = Role(
    "trification.synthesize", output=SearchSynthesis, render=synthesize_turn, instructions=SYNTHESIZE_SYSTEM,
    max_tokens=NODE_MAX_TOKENS,
    summary="SEARCH node, after its searches: synthesizes the retrieved passages into the node's result, "
            "which "
            "its children see (search_synthesis); an invalid reply leaves the passages without a summary",
    extra={"paper": "§3.2 SEARCH node"},
    on_invalid="the node's result lists its queries; its children see the passages only",
)


# -- role: trification.refine (A.2 "Prompts for REFINE node") ------------------------------------
class RefinedInput(BaseModel):
    new_input: str = Field(max_length=300,
                           description="the input rewritten without ambiguous references, pronouns or "
                                       "unclear entities")


REFINE_SYSTEM = (
    "You are a fact-checking expert that excels at analyzing a text. You are given an input that contains "
    "ambiguous references, pronouns, or unclear entities. A search was performed beforehand to resolve "
    "them. Analyze the input and the search results, then write a new input that resolves the ambiguity. "
    "The new input MUST have a similar meaning to the original input, without any ambiguous references, "
    "pronouns, or unclear entities. Reply in JSON."
)


def refine_turn(node: NodeRun, parents: list[NodeRun], shown: list[Evidence],
                max_words: int) -> list[Message]:
    return [
        {"role": "user", "content": f"{node_context(node, parents, shown, max_words)}\n\n"
                                    f"Input: {node.input}\nHint: {node.spec.hint}"},
    ]


REFINE = Role(
    "trification.refine", output=RefinedInput, render=refine_turn, instructions=REFINE_SYSTEM,
    max_tokens=NODE_MAX_TOKENS,
    summary="REFINE node: rewrites its input without ambiguous references; an invalid reply passes the input "
            "on",
    extra={"paper": "§3.2 REFINE node; A.2"},
    on_invalid="the input is passed on unrefined",
)


# -- role: trification.think (A.2 "Prompts for THINK node") --------------------------------------
class ThinkResult(BaseModel):
    explanation: str = Field(max_length=600,
                             description="the input examined against the evidence, and their logical "
                                         "relationship")
    evidence_sufficient: bool = Field(description="false when the evidence cannot answer the input")


THINK_SYSTEM = (
    "You are a fact-checking expert that excels at analyzing a claim and understanding the current stance "
    "based on provided evidence. You are in the middle of the verification process. You are given the "
    "claim, an input derived from it, and a hint explaining how this input helps to verify the claim. "
    "Analyze the claim, the input and the hint, examine the input against the evidence, and give your "
    "stance: explain the input and the logical relationship between the input and the evidence. If the "
    "evidence does not let you answer the input, say so and set evidence_sufficient to false. Reply in JSON."
)


def think_turn(claim: Claim, node: NodeRun, parents: list[NodeRun], shown: list[Evidence],
                   max_words: int) -> list[Message]:
    return [
        {"role": "user",
         "content": f"{node_context(node, parents, shown, max_words)}\n\nClaim: {claim.text}\n"
                                    f"Input: {node.input}\nHint: {node.spec.hint}"},
    ]


THINK = Role(
    "trification.think", output=ThinkResult, render=think_turn, instructions=THINK_SYSTEM,
    max_tokens=NODE_MAX_TOKENS,
    summary="THINK node: reasons over the propagated evidence and says whether it suffices; an invalid reply "
            "concludes nothing and the evidence passes on",
    extra={"paper": "§3.2 THINK node; A.2"},
    on_invalid="the node concludes nothing; its children still run",
)


# -- role: trification.judge (A.2 "Prompts for JUDGE node") --------------------------------------
class JudgeResult(BaseModel):
    explanation: str = Field(max_length=600,
                             description="the logical relationship between the claim, the input and the "
                                         "evidence")
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


# quotes=show|check (veracity's switch; A.2's JUDGE quotes nothing)
QuotedJudgeResult = quoted(JudgeResult, "QuotedJudgeResult",
                           "for each passage the label rests on, the words it rests on, copied exactly")


JUDGE_QUOTE = ("For each passage your label rests on, also give its id (shown in square brackets) and the "
               "words it "
               "rests on, copied exactly from it.")


def judge_turn(claim: Claim, node: NodeRun, parents: list[NodeRun], shown: list[Evidence],
               max_words: int, quoting: bool = False) -> list[Message]:
    """``quoting`` (quotes=show|check): the turn ends asking for the quotes the label rests on."""
    return [
        {"role": "user",
         "content": f"{node_context(node, parents, shown, max_words)}\n\nClaim: {claim.text}\n"
                                    f"Input: {node.input}\nHint: {node.spec.hint}"
                                    + (f"\n\n{JUDGE_QUOTE}" if quoting else "")},
    ]


JUDGE = Role(
    "trification.judge", turns=(QUOTE_RETRY,), output=JudgeResult, render=judge_turn,
             instructions=JUDGE_SYSTEM,
    max_tokens=NODE_MAX_TOKENS, confidence="label",
    summary="JUDGE node: Supports / Refutes / Uncertain on the propagated evidence; an invalid reply ends "
            "the "
            "node with status error (other JUDGEs may still rule)",
    extra={"paper": "§3.2 JUDGE node; A.2"},
    on_invalid="the node ends in error; other JUDGE nodes decide",
)

ROLES: tuple[Role, ...] = (PLANNER, MODIFY, SEARCH, SYNTHESIZE, REFINE, THINK, JUDGE)
