"""Baseline ``direct``: the model alone, closed-book. One role, no tools, no evidence."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, Field

from veracity.pipeline.methods.base import MethodContext, MethodSpec
from veracity.pipeline.types import Claim, Label, Verdict

LabelName = Literal["SUPPORTED", "REFUTED", "NOT_ENOUGH_INFO"]


@dataclass
class DirectParams:
    max_tokens: int = 256  # completion budget of the judge call


# -- role: direct.judge ------------------------------------------------------------------------
class DirectJudgement(BaseModel):
    explanation: str = Field(max_length=600, description="one or two sentences of reasoning")
    label: LabelName


DIRECT_SYSTEM = (
    "You are a careful fact-checker. Decide whether the claim is true using only what you know. "
    "Answer SUPPORTED if it is true, REFUTED if it is false, NOT_ENOUGH_INFO if you cannot tell. "
    "First give a short explanation, then the label. Reply in JSON."
)


def direct_messages(claim: Claim) -> list[dict[str, str]]:
    dated = f" (made on {claim.date})" if claim.date else ""
    return [
        {"role": "system", "content": DIRECT_SYSTEM},
        {"role": "user", "content": f"Claim{dated}: {claim.text}"},
    ]


async def verify_direct(claim: Claim, ctx: MethodContext) -> Verdict:
    out = await ctx.llm.generate(direct_messages(claim), DirectJudgement, role="direct.judge",
                                 max_tokens=ctx.params.max_tokens)
    return Verdict(label=Label(out.label), explanation=out.explanation, evidence=[], trace=ctx.trace,
                   method="direct")


SPEC = MethodSpec(
    name="direct",
    fn=verify_direct,
    params_cls=DirectParams,
    summary="The model alone, closed-book (no retrieval).",
    needs_index=False,
)
