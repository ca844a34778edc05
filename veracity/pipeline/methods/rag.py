"""Baseline ``rag``: retrieve the top-k passages for the claim, then judge with cited passage ids.

The judge lists the ids of the passages it relies on. With ``constrain_citations`` (default) the
output schema enumerates the ids of the passages shown, so constrained decoding can only produce
real ids; either way ids are looked up among the passages shown (exact dictionary lookup) and any id
not among them is ignored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from pydantic import BaseModel, Field

from veracity.pipeline.methods.base import MethodContext, MethodSpec
from veracity.pipeline.params import MethodParams, param
from veracity.pipeline.roles import LabelName, Role, cited_evidence, citing, dated_claim, format_passages
from veracity.pipeline.types import Claim, Evidence, Label, Verdict


@dataclass
class RagParams(MethodParams):
    k: int = param(5, min=1, max=100, help="passages retrieved for the claim")
    passage_max_words: int = param(150, min=1, max=5000, help="words of each passage shown to the judge")
    constrain_citations: bool = param(True, help="the judge's schema enumerates the shown passage ids")


# -- role: rag.judge ---------------------------------------------------------------------------
class RagJudgement(BaseModel):
    explanation: str = Field(max_length=600, description="one or two sentences of reasoning grounded in the passages")
    label: LabelName
    cited_passages: list[Annotated[str, Field(max_length=160)]] = Field(max_length=5, description="ids of the passages the verdict relies on, e.g. 'Title#0'")


RAG_SYSTEM = (
    "You are a careful fact-checker. You get numbered Wikipedia passages, each headed by its id in "
    "square brackets, then a claim. Decide from the passages whether the claim is true: SUPPORTED if "
    "the passages show it is true, REFUTED if they show it is false, NOT_ENOUGH_INFO if they do not "
    "settle it. Give a short explanation, the label, and the ids of the passages you relied on. "
    "Reply in JSON."
)


def rag_messages(claim: Claim, passages: list[Evidence], max_words: int) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": RAG_SYSTEM},
        {"role": "user", "content": f"Passages:\n{format_passages(passages, max_words=max_words)}\n\n"
                                    f"{dated_claim(claim)}"},
    ]


JUDGE = Role("rag.judge", output=RagJudgement, render=rag_messages, instructions=RAG_SYSTEM, max_tokens=320,
             summary="judges the claim from the retrieved passages and cites the ones it relies on")


# -- the method --------------------------------------------------------------------------------
async def verify_rag(claim: Claim, ctx: MethodContext) -> Verdict:
    p = ctx.params
    passages = await ctx.tools.search(claim.text, p.k, role="rag.retrieve")
    out = await JUDGE(ctx, claim=claim, passages=passages, max_words=p.passage_max_words,
                      output=citing(RagJudgement, [e.passage_id for e in passages], p.constrain_citations))
    return Verdict(label=Label(out.label), explanation=out.explanation,
                   evidence=cited_evidence(out.cited_passages, passages), trace=ctx.trace, method="rag")


SPEC = MethodSpec(
    name="rag",
    fn=verify_rag,
    params_cls=RagParams,
    summary="Retrieve the top-k passages for the claim, then judge with citations.",
    roles=(JUDGE,),
)
