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

from veracity.pipeline.labels import THREE_WAY, LabelSpace
from veracity.pipeline.methods.base import MethodContext, MethodSpec
from veracity.pipeline.params import MethodParams, param
from veracity.pipeline.roles import Fallback, LabelName, Role, cited_evidence, citing, dated_claim, format_passages
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


def rag_system(space: LabelSpace = THREE_WAY) -> str:
    """The judge's instructions; the labels offered are those of the run's label space."""
    options = space.options("the passages show it is true", "they show it is false", "they do not settle it")
    return (
        "You are a careful fact-checker. You get numbered Wikipedia passages, each headed by its id in "
        f"square brackets, then a claim. Decide from the passages whether the claim is true: {options}. "
        "Give a short explanation, the label, and the ids of the passages you relied on. "
        "Reply in JSON."
    )


RAG_SYSTEM = rag_system(THREE_WAY)


def rag_messages(claim: Claim, passages: list[Evidence], max_words: int,
                 space: LabelSpace = THREE_WAY) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": rag_system(space)},
        {"role": "user", "content": f"Passages:\n{format_passages(passages, max_words=max_words)}\n\n"
                                    f"{dated_claim(claim)}"},
    ]


JUDGE = Role("rag.judge", output=RagJudgement, render=rag_messages, instructions=RAG_SYSTEM, max_tokens=320,
             summary="judges the claim from the retrieved passages and cites the ones it relies on",
             fallback=Fallback(None, "no verdict: NOT_ENOUGH_INFO (binary: the binary rule)"))


# -- the method --------------------------------------------------------------------------------
async def verify_rag(claim: Claim, ctx: MethodContext) -> Verdict:
    p = ctx.params
    passages = await ctx.tools.search(claim.text, p.k, role="rag.retrieve")
    space = ctx.label_space  # binary: the schema and the prompt offer SUPPORTED / REFUTED only
    out = await JUDGE(ctx, claim=claim, passages=passages, max_words=p.passage_max_words, space=space,
                      output=citing(space.narrow(RagJudgement), [e.passage_id for e in passages],
                                    p.constrain_citations))
    if out is None:  # the reply never validated: a traced fallback verdict, like the agentic methods
        reason = "No verdict: the judge's reply did not validate."
        return Verdict(label=space.undecided(ctx.trace, reason, path="rag.judge"), explanation=reason,
                       evidence=[], trace=ctx.trace, method="rag")
    return Verdict(label=Label(out.label), explanation=out.explanation,
                   evidence=cited_evidence(out.cited_passages, passages), trace=ctx.trace, method="rag")


SPEC = MethodSpec(
    name="rag",
    fn=verify_rag,
    params_cls=RagParams,
    summary="Retrieve the top-k passages for the claim, then judge with citations.",
    roles=(JUDGE,),
)
