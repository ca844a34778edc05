"""Trification's roles: the planner (Table 4), the graph modifier (§3.4) and one role per node type
(A.2, "Prompts for SEARCH / REFINE / THINK / JUDGE node"), each prompt next to its output model.

The planner and the modifier share one system prompt (:func:`planner_system`, listing only the node
types the ablation allows) and reply with a verification plan; the plan's output model depends on the
allowed node types and on the node budget, so the method narrows it per call with
``output=plan_model_for(allowed, max_nodes)``. A re-plan extends the planner's conversation with the
invalid plan and the validation errors (:func:`replan_feedback`), passed as ``messages=``.

No role here declares a fallback: the method handles an invalid reply itself, because what it does
depends on the graph (see :mod:`.method`): an invalid plan is traced as a ``trification.plan`` attempt
and re-planned; a SEARCH / REFINE / THINK node does the least it can (``trification.agent_failed``);
a JUDGE node ends with status ``error``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BaseModel, Field

from veracity.pipeline.methods.trification.graph import NODE_TYPES, VerificationPlan
from veracity.pipeline.roles import Role, format_passages
from veracity.pipeline.types import Claim, Evidence

if TYPE_CHECKING:  # pragma: no cover
    from veracity.pipeline.methods.trification.method import NodeRun

Message = dict[str, str]

PLAN_MAX_TOKENS = 1536  # completion budget of a planner / modifier call (12 nodes of typical length fit)
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
    """The planner's system prompt, describing the node types ``allowed`` (the ablations drop some)."""
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


def planner_messages(claim: Claim, allowed: tuple[str, ...], max_nodes: int) -> list[Message]:
    dated = f" (stated on {claim.date})" if claim.date else ""
    return [
        {"role": "system", "content": planner_system(allowed)},
        {"role": "user", "content": f"Paragraph{dated}: {claim.text}\n\nUse at most {max_nodes} nodes."},
    ]


def replan_feedback(errors: list[str]) -> str:
    """The user turn after an invalid plan: the rules it breaks, then the request for a corrected one."""
    return ("This verification graph is invalid and was not executed:\n- " + "\n- ".join(errors)
            + "\nWrite a corrected verification graph that follows every rule.")


PLANNER = Role(
    "trification.planner", output=VerificationPlan, render=planner_messages, instructions=planner_system(NODE_TYPES),
    max_tokens=PLAN_MAX_TOKENS,
    summary="writes the verification graph (output narrowed per call to the allowed node types and max_nodes); "
            "an invalid reply counts as an invalid plan and is re-planned (max_replans)",
    extra={"paper": "§3.2; Table 4"},
    on_invalid="re-plan with the error fed back (max_replans); no valid plan: NOT_ENOUGH_INFO",
)


# -- role: trification.modify (§3.4: a new sub-graph for a failed THINK / JUDGE) ------------------
def modify_messages(claim: Claim, allowed: tuple[str, ...], max_nodes: int, failed: NodeRun,
                    reusable: list[NodeRun]) -> list[Message]:
    listing = "\n".join(
        f"- {r.spec.id} ({r.spec.type}) input: {r.input or r.spec.input} | result: {shorten(r.output, 40)}"
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


MODIFY = Role(
    "trification.modify", output=VerificationPlan, render=modify_messages, instructions=planner_system(NODE_TYPES),
    max_tokens=PLAN_MAX_TOKENS,
    summary="writes a sub-graph for a THINK / JUDGE that found the evidence insufficient (output narrowed like "
            "the planner's); an invalid reply is re-planned, and with no valid sub-graph the node's result stands",
    extra={"paper": "§3.4; Algorithm 1"},
    on_invalid="no modification: results stand as in static mode",
)


# -- what a node sees of its parents (§3.3: evidence propagation) ---------------------------------
def node_context(node: NodeRun, parents: list[NodeRun], shown: list[Evidence], max_words: int) -> str:
    """The passages shown to a node (its propagated evidence) and its parents' results (SEARCH parents
    contribute their evidence only)."""
    outs = "\n".join(f"[{p.spec.id}] ({p.spec.type}) {p.output}" for p in parents
                     if p.spec.type != "SEARCH" and p.output) or "(none)"
    passages = format_passages(shown, max_words=max_words)
    return f"Evidence:\n{passages}\n\nResults of the previous steps:\n{outs}"


# -- role: trification.search (A.2 "Prompts for SEARCH Node") ------------------------------------
class SearchQueries(BaseModel):
    queries: list[Annotated[str, Field(max_length=160)]] = Field(max_length=5, description="search queries, each a natural sentence")


SEARCH_SYSTEM = (
    "You are an expert at analyzing text for finding relevant information using a search engine. Given a "
    "text and a hint about what information we need from the text, write search queries to be executed "
    "against a search engine so that the required information is obtained. Make each query a natural "
    "sentence. Reply in JSON."
)


def search_messages(node: NodeRun, parents: list[NodeRun], max_queries: int) -> list[Message]:
    prior = "\n".join(f"[{p.spec.id}] {p.output}" for p in parents if p.spec.type != "SEARCH" and p.output)
    return [
        {"role": "system", "content": SEARCH_SYSTEM},
        {"role": "user", "content": f"Text: {node.input}\nHint: {node.spec.hint}"
                                    + (f"\nKnown so far:\n{prior}" if prior else "")
                                    + f"\nWrite at most {max_queries} queries."},
    ]


SEARCH = Role(
    "trification.search", output=SearchQueries, render=search_messages, instructions=SEARCH_SYSTEM,
    max_tokens=NODE_MAX_TOKENS,
    summary="SEARCH node: writes the queries searched on the index; an invalid reply searches the node's input",
    extra={"paper": "§3.2 SEARCH node; A.2"},
    on_invalid="the node searches its own input",
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


def refine_messages(node: NodeRun, parents: list[NodeRun], shown: list[Evidence], max_words: int) -> list[Message]:
    return [
        {"role": "system", "content": REFINE_SYSTEM},
        {"role": "user", "content": f"{node_context(node, parents, shown, max_words)}\n\n"
                                    f"Input: {node.input}\nHint: {node.spec.hint}"},
    ]


REFINE = Role(
    "trification.refine", output=RefinedInput, render=refine_messages, instructions=REFINE_SYSTEM,
    max_tokens=NODE_MAX_TOKENS,
    summary="REFINE node: rewrites its input without ambiguous references; an invalid reply passes the input on",
    extra={"paper": "§3.2 REFINE node; A.2"},
    on_invalid="the input is passed on unrefined",
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


def think_messages(claim: Claim, node: NodeRun, parents: list[NodeRun], shown: list[Evidence],
                   max_words: int) -> list[Message]:
    return [
        {"role": "system", "content": THINK_SYSTEM},
        {"role": "user", "content": f"{node_context(node, parents, shown, max_words)}\n\nClaim: {claim.text}\n"
                                    f"Input: {node.input}\nHint: {node.spec.hint}"},
    ]


THINK = Role(
    "trification.think", output=ThinkResult, render=think_messages, instructions=THINK_SYSTEM,
    max_tokens=NODE_MAX_TOKENS,
    summary="THINK node: reasons over the propagated evidence and says whether it suffices; an invalid reply "
            "concludes nothing and the evidence passes on",
    extra={"paper": "§3.2 THINK node; A.2"},
    on_invalid="the node concludes nothing; its children still run",
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


def judge_messages(claim: Claim, node: NodeRun, parents: list[NodeRun], shown: list[Evidence],
                   max_words: int) -> list[Message]:
    return [
        {"role": "system", "content": JUDGE_SYSTEM},
        {"role": "user", "content": f"{node_context(node, parents, shown, max_words)}\n\nClaim: {claim.text}\n"
                                    f"Input: {node.input}\nHint: {node.spec.hint}"},
    ]


JUDGE = Role(
    "trification.judge", output=JudgeResult, render=judge_messages, instructions=JUDGE_SYSTEM,
    max_tokens=NODE_MAX_TOKENS,
    summary="JUDGE node: Supports / Refutes / Uncertain on the propagated evidence; an invalid reply ends the "
            "node with status error (other JUDGEs may still rule)",
    extra={"paper": "§3.2 JUDGE node; A.2"},
    on_invalid="the node ends in error; other JUDGE nodes decide",
)

ROLES: tuple[Role, ...] = (PLANNER, MODIFY, SEARCH, REFINE, THINK, JUDGE)
