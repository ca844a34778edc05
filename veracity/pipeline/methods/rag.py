"""Baseline ``rag``: retrieve the top-k passages for the claim, then judge with cited passage ids.

The judge lists the ids of the passages it relies on. With ``constrain_citations`` (default) the
output schema enumerates the ids of the passages shown, so constrained decoding can only produce
real ids; either way ids are looked up among the passages shown (exact dictionary lookup) and any id
not among them is ignored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import BaseModel, Field, create_model

from veracity.pipeline.methods.base import MethodContext, MethodSpec
from veracity.pipeline.methods.direct import LabelName
from veracity.pipeline.tools import format_passages
from veracity.pipeline.types import Claim, Evidence, Label, Verdict


@dataclass
class RagParams:
    k: int = 5  # passages retrieved for the claim
    passage_max_words: int = 150  # words of each passage shown to the judge
    max_tokens: int = 320  # completion budget of the judge call
    constrain_citations: bool = True  # the schema enumerates the shown passage ids


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
    dated = f" (made on {claim.date})" if claim.date else ""
    return [
        {"role": "system", "content": RAG_SYSTEM},
        {"role": "user", "content": f"Passages:\n{format_passages(passages, max_words=max_words)}\n\n"
                                    f"Claim{dated}: {claim.text}"},
    ]


def citing(model: type[BaseModel], ids: list[str], enabled: bool = True) -> type[BaseModel]:
    """``model`` with ``cited_passages`` restricted to ``ids`` (an enum in the JSON schema).

    With no ids the list must be empty. The subclass keeps the model's name, so the server sees the
    same schema name; ``enabled=False`` returns ``model`` unchanged."""
    if not enabled:
        return model
    unique = tuple(dict.fromkeys(ids))
    item = Literal[unique] if unique else str  # type: ignore[valid-type]
    field = model.model_fields["cited_passages"]
    return create_model(model.__name__, __base__=model, __module__=model.__module__,
                        cited_passages=(list[item], Field(max_length=5 if unique else 0, description=field.description)))


def cited_evidence(ids: list[str], shown: list[Evidence]) -> list[Evidence]:
    """The passages among ``shown`` whose ids the model cited, in citation order, without repeats."""
    by_id = {e.passage_id: e for e in shown}
    out: list[Evidence] = []
    for pid in ids:
        ev = by_id.get(pid.strip())
        if ev is not None and ev not in out:
            out.append(ev)
    return out


async def verify_rag(claim: Claim, ctx: MethodContext) -> Verdict:
    p = ctx.params
    passages = await ctx.tools.search(claim.text, p.k, role="rag.retrieve")
    out = await ctx.llm.generate(rag_messages(claim, passages, p.passage_max_words),
                                 citing(RagJudgement, [e.passage_id for e in passages], p.constrain_citations),
                                 role="rag.judge", max_tokens=p.max_tokens)
    return Verdict(label=Label(out.label), explanation=out.explanation,
                   evidence=cited_evidence(out.cited_passages, passages), trace=ctx.trace, method="rag")


SPEC = MethodSpec(
    name="rag",
    fn=verify_rag,
    params_cls=RagParams,
    summary="Retrieve the top-k passages for the claim, then judge with citations.",
)
