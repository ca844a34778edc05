"""MERMAID (arXiv 2601.22361): decomposition, evidence memory, and a ReAct executor.

The algorithm, top to bottom::

    D_c  = Decomposer(c)                       # triplets (subject, relation, object, attributions) + keywords
    M_c  = memory.recall(entities(D_c), c)     # warm start: evidence stored by earlier claims
    for t in 1 .. T_max:                       # Executor, ReAct: Thought -> Action -> Observation
        step = Executor(c, D_c, M_c, history)
        if step.action == finish: break
        observation = search(step.argument) | open_page(step.argument)
    if no finish (or finish without a label): verdict = Executor.final(c, D_c, M_c, history)
    memory.store(observed passages, under the names in entities(D_c) and in c; keywords(D_c) where they occur)

Roles: ``mermaid.decomposer``, ``mermaid.executor`` (one call per step), ``mermaid.final`` (forced
verdict after T_max steps). The executor conversation grows by appending (assistant step, user
observation) turns, so each step's prompt extends the previous one and the server's prefix cache
reuses it. Ablations: ``decomposer=False`` (the executor sees the raw claim only; memory recall uses
stored keys found in the claim text) and ``memory=False`` (no recall, no update). ``semantic_memory``
adds embedding-similarity recall (the paper's open question).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from veracity.errors import LLMOutputError
from veracity.pipeline.memory import EvidenceMemory, name_spans
from veracity.pipeline.methods.base import MethodContext, MethodSpec
from veracity.pipeline.methods.direct import LabelName
from veracity.pipeline.methods.rag import cited_evidence, citing
from veracity.pipeline.tools import format_passages
from veracity.pipeline.types import Claim, Evidence, Label, Verdict


@dataclass
class MermaidParams:
    t_max: int = 5  # most ReAct steps (paper: T_max = 5)
    search_k: int = 5  # passages per search action
    page_max_passages: int = 6  # passages of an article shown per open_page action
    passage_max_words: int = 120  # words of each passage in an observation
    memory: bool = True  # ablation --no-memory: False
    decomposer: bool = True  # ablation --no-decomposer: False
    semantic_memory: bool = False  # also recall stored evidence by embedding similarity
    similarity_threshold: float = 0.45  # cosine threshold of semantic recall (all-MiniLM-L6-v2 paraphrases score ~0.45-0.6)
    memory_k: int = 5  # most passages recalled from memory per claim
    memory_path: str | None = None  # SQLite file (default: ~/.veracity/memory/evidence.sqlite)
    max_tokens: int = 384  # completion budget per call
    constrain_citations: bool = True  # schemas enumerate the ids of the passages observed so far


# -- role: mermaid.decomposer ------------------------------------------------------------------
Short = Annotated[str, Field(max_length=160)]


class Triplet(BaseModel):
    subject: Short
    relation: Short
    object: Short
    attributions: list[Short] = Field(max_length=3, description="qualifiers of the fact: time, place, quantity, source")


class Decomposition(BaseModel):
    triplets: list[Triplet] = Field(max_length=4, description="the atomic facts the claim asserts")
    keywords: list[Short] = Field(max_length=6, description="topical keywords: named entities and domain terms")


DECOMPOSER_SYSTEM = (
    "You break a claim into the atomic facts that must be checked. For each fact give a triplet: "
    "subject, relation, object, and attributions (qualifiers such as time, place, quantity or source; "
    "empty list if none). Then list topical keywords: the named entities and domain terms of the "
    "claim. Use the claim's own words for entities. Reply in JSON."
)


def decomposer_messages(claim: Claim) -> list[dict[str, str]]:
    return [{"role": "system", "content": DECOMPOSER_SYSTEM}, {"role": "user", "content": f"Claim: {claim.text}"}]


def entity_keys(d: Decomposition | None, claim_text: str = "", keywords: bool = True) -> list[str]:
    """The memory keys of a decomposition: the names in its subjects, objects and keywords.

    Memory is keyed by entity (MERMAID §3.2), so a key is a name (:func:`name_spans`): "The mother of
    Naushad" gives "Naushad", "the song" gives nothing. A name word the claim itself writes only in lower
    case is a common noun the model capitalised ("Film" for "the film") and is dropped as well.
    """
    if d is None:
        return []
    claim_words = claim_text.split()
    lower_only = {w.casefold().strip(".,;:!?\"'()") for w in claim_words} - {
        w.casefold().strip(".,;:!?\"'()") for w in claim_words if w[:1].isupper()}
    keys: list[str] = []
    for raw in [t.subject for t in d.triplets] + [t.object for t in d.triplets] + (list(d.keywords) if keywords else []):
        for name in name_spans(raw):
            if not any(w.casefold() in lower_only for w in name.split() if w[:1].isupper()):
                keys.append(name)
    return list(dict.fromkeys(keys))


# -- role: mermaid.executor --------------------------------------------------------------------
class ReactStep(BaseModel):
    thought: str = Field(max_length=500, description="what is known so far and what is still missing")
    action: Literal["search", "open_page", "finish"]
    argument: str = Field(max_length=200, description="search: the query; open_page: an exact article title; finish: empty")
    label: LabelName | None = Field(description="finish only: the verdict; null otherwise")
    cited_passages: list[Short] = Field(max_length=5, description="finish only: ids of the passages the verdict relies on")


class FinalVerdict(BaseModel):
    explanation: str = Field(max_length=600, description="short reasoning grounded in the observed passages")
    label: LabelName
    cited_passages: list[Short] = Field(max_length=5, description="ids of the passages the verdict relies on")


EXECUTOR_SYSTEM = (
    "You verify a claim against a Wikipedia index by reasoning and acting in steps. At each step write "
    "a thought (what is known, what is missing), then choose one action:\n"
    "- search: argument is a search query; you observe the best matching passages.\n"
    "- open_page: argument is an exact article title; you observe that article's passages.\n"
    "- finish: give the label (SUPPORTED if the evidence shows the claim is true, REFUTED if it shows "
    "it is false, NOT_ENOUGH_INFO if it does not settle it) and cite the ids of the passages "
    "(shown in square brackets) that the verdict relies on.\n"
    "Finish as soon as the evidence settles the claim. Reply in JSON."
)

FINAL_PROMPT = "No steps are left. Give your final verdict now from the passages observed so far."


def executor_opening(claim: Claim, decomposition: Decomposition | None, recalled: list[Evidence],
                     t_max: int, max_words: int) -> str:
    parts = []
    if recalled:
        parts.append("Evidence recalled from memory (gathered while checking earlier claims):\n"
                     + format_passages(recalled, max_words=max_words))
    if decomposition is not None:
        lines = [f"- ({t.subject} | {t.relation} | {t.object})"
                 + (f" [{'; '.join(t.attributions)}]" if t.attributions else "") for t in decomposition.triplets]
        parts.append("Facts to check:\n" + ("\n".join(lines) or "- (none)")
                     + f"\nKeywords: {', '.join(decomposition.keywords) or '(none)'}")
    dated = f" (made on {claim.date})" if claim.date else ""
    parts.append(f"Claim{dated}: {claim.text}")
    parts.append(f"Step 1 of at most {t_max}: choose an action.")
    return "\n\n".join(parts)


# -- the method --------------------------------------------------------------------------------
def get_memory(ctx: MethodContext) -> EvidenceMemory:
    """The run's evidence memory (one per run, shared by its claims), opened on first use."""
    mem = ctx.shared.get("mermaid.memory")
    if mem is None:
        p = ctx.params
        mem = EvidenceMemory(p.memory_path, namespace=ctx.shared.get("index_namespace", "default"),
                             semantic=p.semantic_memory, similarity_threshold=p.similarity_threshold,
                             encoder=ctx.shared.get("encoder"))
        ctx.shared["mermaid.memory"] = mem
    return mem


async def verify_mermaid(claim: Claim, ctx: MethodContext) -> Verdict:
    p = ctx.params
    trace = ctx.trace

    # 1. Decomposer
    decomposition: Decomposition | None = None
    if p.decomposer:
        try:
            decomposition = await ctx.llm.generate(decomposer_messages(claim), Decomposition,
                                                   role="mermaid.decomposer", max_tokens=p.max_tokens)
            trace.event("mermaid.decomposition", **decomposition.model_dump())
        except LLMOutputError as exc:  # the claim is still checked, as with --no-decomposer
            trace.event("mermaid.decomposition", error=str(exc), fallback="no decomposition: claim text only")
    keys = entity_keys(decomposition, claim.text)

    # 2. Memory recall (warm start)
    recalled: list[Evidence] = []
    memory = get_memory(ctx) if p.memory else None
    if memory is not None:
        hits = memory.recall(keys, claim.text, k=p.memory_k)
        recalled = [h.evidence for h in hits]
        trace.memory_hits.extend(h.to_dict() for h in hits)
        trace.event("mermaid.recall", keys=keys, passage_ids=[e.passage_id for e in recalled])

    # 3. Executor ReAct loop
    observed: dict[str, Evidence] = {e.passage_id: e for e in recalled}
    gathered: dict[str, Evidence] = {}  # passages the tools returned for this claim
    messages = [
        {"role": "system", "content": EXECUTOR_SYSTEM},
        {"role": "user", "content": executor_opening(claim, decomposition, recalled, p.t_max, p.passage_max_words)},
    ]
    finish: ReactStep | None = None
    for t in range(1, p.t_max + 1):
        try:
            step = await ctx.llm.generate(messages, citing(ReactStep, list(observed), p.constrain_citations),
                                          role="mermaid.executor", max_tokens=p.max_tokens)
        except LLMOutputError as exc:  # end the loop; the verdict is forced from what was observed
            trace.event("mermaid.step", t=t, action="abandoned", error=str(exc))
            break
        messages.append({"role": "assistant", "content": step.model_dump_json()})
        if step.action == "finish":
            trace.event("mermaid.step", t=t, thought=step.thought, action="finish", label=step.label)
            finish = step
            break
        if step.action == "search":
            passages = await ctx.tools.search(step.argument, p.search_k, role="mermaid.executor")
            empty = f"No passages match the query {step.argument!r}."
        else:
            passages = (await ctx.tools.open_page(step.argument, role="mermaid.executor"))[: p.page_max_passages]
            empty = f"No article is titled {step.argument!r}; use search to find titles."
        for e in passages:
            observed.setdefault(e.passage_id, e)
            gathered.setdefault(e.passage_id, e)
        trace.event("mermaid.step", t=t, thought=step.thought, action=step.action, argument=step.argument,
                    hits=[e.passage_id for e in passages])
        observation = format_passages(passages, max_words=p.passage_max_words) if passages else empty
        follow = f"Step {t + 1} of at most {p.t_max}: choose an action." if t < p.t_max else ""
        messages.append({"role": "user", "content": f"Observation:\n{observation}\n\n{follow}".rstrip()})

    if finish is not None and finish.label is not None:
        label, explanation, cited = finish.label, finish.thought, finish.cited_passages
    else:  # T_max reached, or finish without a label: force the verdict
        messages.append({"role": "user", "content": FINAL_PROMPT})
        steps_done = len([m for m in messages if m["role"] == "assistant"])
        try:
            final = await ctx.llm.generate(messages, citing(FinalVerdict, list(observed), p.constrain_citations),
                                           role="mermaid.final", max_tokens=p.max_tokens)
            label, explanation, cited = final.label, final.explanation, final.cited_passages
            trace.event("mermaid.final", forced_after_steps=steps_done)
        except LLMOutputError as exc:  # no checkable verdict: say so instead of failing the claim
            label, cited = Label.NOT_ENOUGH_INFO.value, []
            explanation = f"No verdict: the model's final answer did not validate ({exc})."
            trace.event("mermaid.final", forced_after_steps=steps_done, error=str(exc))

    # 4. Memory update
    if memory is not None and gathered:
        # anchors: the names among the triplets' subjects / objects, and the names the claim itself mentions
        # (so memory works when the decomposition is missing or names nothing)
        entities = list(dict.fromkeys(entity_keys(decomposition, claim.text, keywords=False) + name_spans(claim.text)))
        new = memory.store(gathered.values(), keys, entities=entities)
        trace.event("mermaid.memory_update", stored=len(gathered), new=new)

    return Verdict(label=Label(label), explanation=explanation,
                   evidence=cited_evidence(cited, list(observed.values())), trace=trace, method="mermaid")


SPEC = MethodSpec(
    name="mermaid",
    fn=verify_mermaid,
    params_cls=MermaidParams,
    summary="MERMAID: decomposer + evidence memory + ReAct executor (T_max=5).",
)
