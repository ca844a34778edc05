"""MERMAID's roles: the Decomposer, the Executor (one call per ReAct step) and the Executor's forced final
verdict, each with its prompt next to its output model.

The executor and the final verdict share one conversation: the method keeps it (system prompt, the
opening below, then one assistant step and one user observation per step) and passes it as
``messages=``, so each step's prompt extends the previous one and the server's prefix cache reuses it.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field

from veracity.pipeline.grounding import QUOTE_RETRY, quoted
from veracity.pipeline.labels import THREE_WAY, LabelSpace
from veracity.pipeline.roles import Fallback, LabelName, Role, Turn, format_passages
from veracity.pipeline.types import Claim, Evidence

MAX_TOKENS = 384  # completion budget of every MERMAID call (--param ROLE.max_tokens=N overrides one role)

Short = Annotated[str, Field(max_length=160)]


# -- role: mermaid.decomposer (§3.1: claim -> triplets, topical keywords and domain) --------------------
class Triplet(BaseModel):
    subject: Short
    relation: Short
    object: Short
    attributions: list[Short] = Field(max_length=3,
                                      description="qualifiers of the fact: time, place, quantity, source")


class Decomposition(BaseModel):
    triplets: list[Triplet] = Field(max_length=4, description="the atomic facts the claim asserts")
    keywords: list[Short] = Field(max_length=6,
                                  description="topical keywords: named entities and domain terms")
    # §3.1: D_c identifies "key entities, relations, and domain information"
    domain: Short = Field(description="the claim's domain or topic area, e.g. film, politics, sports, "
                                      "medicine")


DECOMPOSER_SYSTEM = (
    "You break a claim into the atomic facts that must be checked. For each fact give a triplet: "
    "subject, relation, object, and attributions (qualifiers such as time, place, quantity or source; "
    "empty list if none). Then list topical keywords: the named entities and domain terms of the "
    "claim. Then name the claim's domain (its topic area, e.g. film, politics, sports, medicine). "
    "Use the claim's own words for entities. Reply in JSON."
)


def decomposer_turn(claim: Claim) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"Claim: {claim.text}"}]


DECOMPOSER = Role(
    "mermaid.decomposer", output=Decomposition, render=decomposer_turn, instructions=DECOMPOSER_SYSTEM,
    max_tokens=MAX_TOKENS,
                  summary="breaks the claim into (subject, relation, object, attributions) triplets, "
                                   "keywords and its domain",
    # the claim is still checked, as with --no-decomposer
    fallback=Fallback(None, "no decomposition: claim text only", event="mermaid.decomposition"),
    extra={"paper": "§3.1"},
)


# -- role: mermaid.executor (ReAct: Thought -> Action -> Observation, at most T_max steps) -------------
class ReactStep(BaseModel):
    thought: str = Field(max_length=500, description="what is known so far and what is still missing")
    action: Literal["search", "open_page", "finish"]
    argument: str = Field(max_length=200,
                          description="search: the query; open_page: an exact article title; finish: empty")
    label: LabelName | None = Field(description="finish only: the verdict; null otherwise")
    cited_passages: list[Short] = Field(max_length=5,
                                        description="finish only: ids of the passages the verdict relies on")


# quotes=show|check (veracity's switch; the paper's executor cites nothing)
QuotedReactStep = quoted(ReactStep, "QuotedReactStep",
                         "finish only: for each passage the verdict relies on, the "
                                                       "words the label rests on, copied exactly")


def executor_system(space: LabelSpace = THREE_WAY, quoting: bool = False) -> str:
    """The executor's instructions (also the system prompt of the forced final verdict); the labels
    offered at ``finish`` are those of the run's label space. ``quoting`` (quotes=show|check): the verdict
    quotes the passages instead of citing their ids."""
    options = space.options("the evidence shows the claim is true", "it shows it is false",
                            "it does not settle it")
    cite = ("for each passage (shown in square brackets) that the verdict relies on, give its id and the "
            "words "
            "the label rests on, copied exactly from it" if quoting else
            "cite the ids of the passages (shown in square brackets) that the verdict relies on")
    return (
        "You verify a claim against a Wikipedia index by reasoning and acting in steps. At each step write "
        "a thought (what is known, what is missing), then choose one action:\n"
        "- search: argument is a search query; you observe the best matching passages.\n"
        "- open_page: argument is an exact article title; you observe that article's passages.\n"
        f"- finish: give the label ({options}) and {cite}.\n"
        "Finish as soon as the evidence settles the claim. Reply in JSON."
    )


EXECUTOR_SYSTEM = executor_system(THREE_WAY)


def executor_opening(claim: Claim, decomposition: Decomposition | None, recalled: list[Evidence],
                     t_max: int, max_words: int) -> str:
    parts = []
    if recalled:
        parts.append("Evidence recalled from memory (gathered while checking earlier claims):\n"
                     + format_passages(recalled, max_words=max_words))
    if decomposition is not None:
        lines = [f"- ({t.subject} | {t.relation} | {t.object})"
                 + (f" [{'; '.join(t.attributions)}]" if t.attributions else "")
                 for t in decomposition.triplets]
        parts.append("Facts to check:\n" + ("\n".join(lines) or "- (none)")
                     + f"\nKeywords: {', '.join(decomposition.keywords) or '(none)'}"
                     + f"\nDomain: {decomposition.domain.strip() or '(not named)'}")
    dated = f" (made on {claim.date})" if claim.date else ""
    parts.append(f"Claim{dated}: {claim.text}")
    parts.append(f"Step 1 of at most {t_max}: choose an action.")
    return "\n\n".join(parts)


def executor_turn(claim: Claim, decomposition: Decomposition | None, recalled: list[Evidence],
                  t_max: int, max_words: int) -> list[dict[str, str]]:
    """The conversation's opening user turn; the method appends each step and its observation."""
    return [{"role": "user", "content": executor_opening(claim, decomposition, recalled, t_max, max_words)}]


def observation_message(observation: str, t: int, t_max: int) -> dict[str, str]:
    """The user turn after step ``t``: what the action returned, and the next step's prompt."""
    follow = f"Step {t + 1} of at most {t_max}: choose an action." if t < t_max else ""
    return {"role": "user", "content": f"Observation:\n{observation}\n\n{follow}".rstrip()}


OBSERVATION = Turn("observation", observation_message, {"observation": "{observation}", "t": 1, "t_max": 5},
                   when="after each search / open_page step: what it returned, then the next step's prompt")


EXECUTOR = Role(
    "mermaid.executor", turns=(OBSERVATION, QUOTE_RETRY), output=ReactStep, render=executor_turn,
                instructions=executor_system,
    max_tokens=MAX_TOKENS, confidence="label",
                summary="one ReAct step: a thought, then search, open_page or finish with a verdict",
    # the loop ends; the verdict is forced from what was observed
    fallback=Fallback(None, "step abandoned: the verdict is forced from the passages observed",
                      event="mermaid.step"),
)


# -- role: mermaid.final (the Executor's verdict, forced after T_max steps) ------------------------------
class FinalVerdict(BaseModel):
    explanation: str = Field(max_length=600, description="short reasoning grounded in the observed passages")
    label: LabelName
    cited_passages: list[Short] = Field(max_length=5, description="ids of the passages the verdict relies on")


QuotedFinalVerdict = quoted(FinalVerdict, "QuotedFinalVerdict",  # quotes=show|check
                            "for each passage the verdict relies on, the words the label rests on, copied "
                            "exactly")


FINAL_PROMPT = "No steps are left. Give your final verdict now from the passages observed so far."


def final_turn() -> list[dict[str, str]]:
    """The request for a verdict. The method sends it after the executor's conversation so far, which
    opens with the same system message (the executor's instructions)."""
    return [{"role": "user", "content": FINAL_PROMPT}]


FINAL = Role(
    "mermaid.final", turns=(QUOTE_RETRY,), output=FinalVerdict, render=final_turn,
             instructions=executor_system,
    max_tokens=MAX_TOKENS, confidence="label",
    summary="the executor's verdict when T_max steps end without one (the conversation, then: "
             + FINAL_PROMPT + ")",
    # no checkable verdict: say so instead of failing the claim (binary labels: the binary rule, REFUTED)
    fallback=Fallback(None, "no verdict: NOT_ENOUGH_INFO", event="mermaid.final"),
)

ROLES = (DECOMPOSER, EXECUTOR, FINAL)
