"""Baseline ``rag``: retrieve the top-k passages for the claim, then judge with cited passage ids.

The judge lists the ids of the passages it relies on. With ``constrain_citations`` (default) the
output schema enumerates the ids of the passages shown, so constrained decoding can only produce
real ids; either way ids are looked up among the passages shown (exact dictionary lookup) and any id
not among them is ignored.

With ``select`` the method has the three steps of the pre-LLM fact-checking pipeline, as the Trification
paper's introduction describes it (../shared/papers/trification.txt, Section 1: "(1) document retrieval
..., (2) sentence selection ..., and (3) veracity prediction", citing Hanselowski et al., 2018 among
others): retrieval, then a ``rag.select`` call that keeps
the retrieved passages about what the claim names (its schema enumerates the shown ids, at least
one), then the judge on the kept passages only. A small model otherwise bridges the claim through a
passage that merely shares a word with it (a canal "connected to the Baltic Sea" read as the Danube
flowing into it). If the selection never validates, the judge sees every retrieved passage (traced).
``select=auto`` selects only when the passages come from an index (open evidence): a claim's gold
evidence is the benchmark's already-selected evidence, every passage of which the claim needs (on gold
evidence, selection dropped the bridge pages multi-hop claims need; benchmarks/BENCHMARKS.md).

With ``quotes=show|check`` the judge also quotes, for each passage it relies on, the words its label rests
on, and the program checks that they are in the passage (:mod:`veracity.pipeline.grounding`; ``check``
retries once, then turns an ungrounded verdict into NOT_ENOUGH_INFO). ``off`` (the default until the rule
in benchmarks/BENCHMARKS.md is measured) leaves the judge exactly as it was.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from pydantic import BaseModel, Field

from veracity.pipeline.grounding import (QUOTE_MODES, QUOTE_RETRY, ask_quoting, quoted, quoting,
                                         ungrounded_explanation)
from veracity.pipeline.confidence import ConfidenceRule
from veracity.pipeline.labels import THREE_WAY, LabelSpace
from veracity.pipeline.methods.base import MethodContext, MethodSpec
from veracity.pipeline.params import MethodParams, param
from veracity.pipeline.roles import (Fallback, LabelName, Role, cited_evidence, citing, dated_claim,
                                     format_passages)
from veracity.pipeline.types import Claim, Evidence, Label, Verdict


@dataclass
class RagParams(MethodParams):
    k: int = param(5, min=1, max=100, help="passages retrieved for the claim")
    passage_max_words: int = param(150, min=1, max=5000, help="words of each passage shown to the judge")
    constrain_citations: bool = param(True, help="the judge's schema enumerates the shown passage ids")
    select: str = param("auto", choices=("false", "true", "auto"),
                        help="before judging, the model keeps only the passages about what the claim names "
                             "(the "
                             "pipeline's evidence-selection step) and the judge sees those; auto: only when "
                             "the "
                             "passages come from an index, not with the claim's gold evidence")
    quotes: str = param("off", choices=QUOTE_MODES,
                        help="the judge quotes the words of each cited passage its label rests on; show: the "
                             "quotes are located and shown; check: also retried once when one is not in its "
                             "passage, then NOT_ENOUGH_INFO (binary: REFUTED), marked ungrounded")


# -- role: rag.judge ---------------------------------------------------------------------------
class RagJudgement(BaseModel):
    explanation: str = Field(max_length=600,
                             description="one or two sentences of reasoning grounded in the passages")
    label: LabelName
    cited_passages: list[Annotated[str, Field(max_length=160)]] = Field(max_length=5,
                                                                        description="ids of the passages the "
                                                                                    "verdict relies on, e.g. "
                                                                                    "'Title#0'")


RagQuotedJudgement = quoted(RagJudgement, "RagQuotedJudgement",  # with quotes=show|check
                            "for each passage the verdict relies on, the words the label rests on, copied "
                            "exactly")


def rag_system(space: LabelSpace = THREE_WAY, quoting: bool = False) -> str:
    """The judge's instructions; the labels offered are those of the run's label space. ``quoting``
    (quotes=show|check): the judge quotes instead of listing passage ids."""
    options = space.options("the passages show it is true", "they show it is false", "they do not settle it")
    relied = ("for each passage you relied on, the id and the words your label rests on, copied exactly from "
              "that passage" if quoting else "the ids of the passages you relied on")
    return (
        "You are a careful fact-checker. You get numbered Wikipedia passages, each headed by its id in "
        f"square brackets, then a claim. Decide from the passages whether the claim is true: {options}. "
        f"Give a short explanation, the label, and {relied}. "
        "Reply in JSON."
    )


RAG_SYSTEM = rag_system(THREE_WAY)


def passages_then_claim(claim: Claim, passages: list[Evidence], max_words: int) -> list[dict[str, str]]:
    """The user turn of both rag roles: the passages first, the claim last."""
    return [{"role": "user", "content": f"Passages:\n{format_passages(passages, max_words=max_words)}\n\n"
                                        f"{dated_claim(claim)}"}]


JUDGE = Role("rag.judge", turns=(QUOTE_RETRY,), output=RagJudgement, render=passages_then_claim,
             instructions=rag_system, max_tokens=320,
             confidence="label",
             summary="judges the claim from the retrieved passages and cites the ones it relies on",
             fallback=Fallback(None, "no verdict: NOT_ENOUGH_INFO (binary: the binary rule)"))


# -- role: rag.select (with --param select=true) -------------------------------------------------------
class RagSelection(BaseModel):
    relevant_passages: list[Annotated[str, Field(max_length=160)]] = Field(
        max_length=100, description="ids of the passages about the people, places or things the claim names")


SELECT_SYSTEM = (
    "You are a careful fact-checker. You get numbered Wikipedia passages, each headed by its id in square "
    "brackets, then a claim. Pick the passages that are about the people, places or things the claim names "
    "and "
    "say something that bears on whether it is true; leave out passages that only share a word with it. "
    "Reply in JSON."
)


SELECT = Role("rag.select", output=RagSelection, render=passages_then_claim, instructions=SELECT_SYSTEM,
              max_tokens=160,
              summary="keeps the retrieved passages about what the claim names (with select=true)",
              fallback=Fallback(None, "no selection: the judge sees every retrieved passage"),
              extra={"paper": "the selection step of the pre-LLM pipeline (Trification §1)"})


async def select_passages(ctx: MethodContext, claim: Claim, passages: list[Evidence],
                          max_words: int) -> list[Evidence]:
    """The passages the selection keeps, in retrieval order (all of them after a failed selection)."""
    ids = [e.passage_id for e in passages]
    out = await SELECT(ctx, claim=claim, passages=passages, max_words=max_words,
                       output=citing(RagSelection, ids, field="relevant_passages", at_most=len(ids),
                                     at_least=1))
    if out is None:
        return passages
    chosen = {pid.strip() for pid in out.relevant_passages}
    kept = [e for e in passages if e.passage_id in chosen] or passages
    ctx.trace.event("rag.selected", kept=[e.passage_id for e in kept],
                    dropped=[e.passage_id for e in passages if e not in kept])
    return kept


def selects(select: str, ctx: MethodContext) -> bool:
    """Whether this claim's passages go through selection. ``auto``: when they come from an index (open
    evidence), where distractors sit beside the passages the claim is about; not with the claim's gold
    evidence, which is already the selected evidence of the benchmark (every passage of it is needed)."""
    if select == "auto":
        return ctx.tools.source.retriever not in ("gold", "none")
    return select == "true"


# -- the method --------------------------------------------------------------------------------
async def verify_rag(claim: Claim, ctx: MethodContext) -> Verdict:
    p = ctx.params
    passages = await ctx.tools.search(claim.text, p.k, role="rag.retrieve")
    if selects(p.select, ctx) and len(passages) > 1:  # evidence selection (module docstring)
        passages = await select_passages(ctx, claim, passages, p.passage_max_words)
    space = ctx.label_space  # binary: the schema and the prompt offer SUPPORTED / REFUTED only
    if p.quotes != "off":
        return await judge_with_quotes(claim, ctx, passages)
    out = await JUDGE(ctx, claim=claim, passages=passages, max_words=p.passage_max_words, space=space,
                      output=citing(space.narrow(RagJudgement), [e.passage_id for e in passages],
                                    p.constrain_citations))
    if out is None:  # the reply never validated: a traced fallback verdict, like the agentic methods
        reason = "No verdict: the judge's reply did not validate."
        return Verdict(label=space.undecided(ctx.trace, reason, path="rag.judge"), explanation=reason,
                       evidence=[], trace=ctx.trace, method="rag")
    return Verdict(label=Label(out.label), explanation=out.explanation,
                   evidence=cited_evidence(out.cited_passages, passages), trace=ctx.trace, method="rag")


async def judge_with_quotes(claim: Claim, ctx: MethodContext, passages: list[Evidence]) -> Verdict:
    """The judge with quotes=show|check: cited passages are those its quotes come from, in order."""
    p, space = ctx.params, ctx.label_space
    g = await ask_quoting(ctx, JUDGE, p.quotes, passages, claim=claim, passages=passages,
                          max_words=p.passage_max_words, space=space, quoting=True,
                          output=quoting(space.narrow(RagQuotedJudgement), [e.passage_id for e in passages],
                                         p.constrain_citations))
    if g is None:
        reason = "No verdict: the judge's reply did not validate."
        return Verdict(label=space.undecided(ctx.trace, reason, path="rag.judge"), explanation=reason,
                       evidence=[], trace=ctx.trace, method="rag", quotes=[], grounding="ungrounded")
    evidence = cited_evidence([q.passage_id for q in g.quotes], passages)
    if g.replaced is not None:
        return Verdict(label=g.replaced, explanation=ungrounded_explanation(g), evidence=evidence,
                       trace=ctx.trace, method="rag", quotes=g.quotes, grounding=g.grounding)
    return Verdict(label=Label(g.reply.label), explanation=g.reply.explanation, evidence=evidence,
                   trace=ctx.trace,
                   method="rag", quotes=g.quotes, grounding=g.grounding)


SPEC = MethodSpec(
    name="rag",
    fn=verify_rag,
    params_cls=RagParams,
    summary="Retrieve the top-k passages for the claim, then judge with citations.",
    roles=(JUDGE, SELECT),
    confidence=ConfidenceRule(("rag.judge",), summary="the judge's label probability (its last call: with "
                                                      "quotes=check, the retry)"),
)
