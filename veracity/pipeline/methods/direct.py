"""Baseline ``direct``: the model alone, closed-book. One role, no tools, no evidence."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from pydantic import BaseModel, Field

from veracity.pipeline.confidence import ConfidenceRule
from veracity.pipeline.labels import THREE_WAY, LabelSpace
from veracity.pipeline.methods.base import MethodContext, MethodSpec
from veracity.pipeline.params import MethodParams
from veracity.pipeline.roles import Fallback, LabelName, Role, dated_claim
from veracity.pipeline.types import Claim, Label, Verdict


@dataclass
class DirectParams(MethodParams):
    # the judge's budget and temperature are role settings: --param judge.max_tokens=N
    not_applicable: ClassVar[dict[str, str]] = {
        "quotes": "direct reads no passages (closed book), so its verdict has nothing to quote; "
                  "use --method rag, whose judge quotes the passages it cites"}


# -- role: direct.judge ------------------------------------------------------------------------
class DirectJudgement(BaseModel):
    explanation: str = Field(max_length=600, description="one or two sentences of reasoning")
    label: LabelName


def direct_system(space: LabelSpace = THREE_WAY) -> str:
    """The judge's instructions; the labels offered are those of the run's label space."""
    return (
        "You are a careful fact-checker. Decide whether the claim is true using only what you know. "
        f"Answer {space.options('it is true', 'it is false', 'you cannot tell')}. "
        "First give a short explanation, then the label. Reply in JSON."
    )


DIRECT_SYSTEM = direct_system(THREE_WAY)


def direct_turn(claim: Claim) -> list[dict[str, str]]:
    """The user turn: the claim (with its date)."""
    return [{"role": "user", "content": dated_claim(claim)}]


JUDGE = Role("direct.judge", output=DirectJudgement, render=direct_turn, instructions=direct_system,
             max_tokens=256, summary="judges the claim from the model's own knowledge", confidence="label",
             fallback=Fallback(None, "no verdict: NOT_ENOUGH_INFO (binary: the binary rule)"))


# -- the method --------------------------------------------------------------------------------
async def verify_direct(claim: Claim, ctx: MethodContext) -> Verdict:
    space = ctx.label_space  # binary: the schema and the prompt offer SUPPORTED / REFUTED only
    out = await JUDGE(ctx, claim=claim, space=space, output=space.narrow(DirectJudgement))
    if out is None:  # the reply never validated: a traced fallback verdict, like the agentic methods
        reason = "No verdict: the judge's reply did not validate."
        return Verdict(label=space.undecided(ctx.trace, reason, path="direct.judge"), explanation=reason,
                       evidence=[], trace=ctx.trace, method="direct")
    return Verdict(label=Label(out.label), explanation=out.explanation, evidence=[], trace=ctx.trace,
                   method="direct")


SPEC = MethodSpec(
    name="direct",
    fn=verify_direct,
    params_cls=DirectParams,
    summary="The model alone, closed-book (no retrieval).",
    roles=(JUDGE,),
    needs_index=False,
    confidence=ConfidenceRule(("direct.judge",), summary="the judge's label probability"),
)
