"""MERMAID (arXiv 2601.22361): decomposition, evidence memory, and a ReAct executor.

The algorithm, top to bottom::

    D_c  = Decomposer(c)                       # triplets (subject, relation, object, attributions),
    keywords, domain
    M_c  = memory.recall(entities(D_c), c)     # warm start: evidence stored by earlier claims
    for t in 1 .. T_max:                       # Executor, ReAct: Thought -> Action -> Observation
        step = Executor(c, D_c, M_c, history)
        if step.action == finish: break
        observation = search(step.argument) | open_page(step.argument)
    if no finish (or finish without a label): verdict = Executor.final(c, D_c, M_c, history)   #
    forced_verdict
    memory.store(observed passages, under the names in entities(D_c) and in c; keywords(D_c) where they occur)

Roles (:mod:`.roles`): ``mermaid.decomposer``, ``mermaid.executor`` (one call per step),
``mermaid.final`` (forced verdict after T_max steps). The executor conversation grows by appending
(assistant step, user observation) turns, so each step's prompt extends the previous one and the
server's prefix cache reuses it. The memory is the run's state (:class:`.memory.MermaidState`, at
``STATE_DIR/memory/evidence.sqlite``), shared by the run's claims. Ablations: ``decomposer=False`` (the
executor sees the raw claim only; memory recall uses stored keys found in the claim text) and
``memory=False`` (no recall, no update). ``semantic_memory`` adds embedding-similarity recall (the
paper's open question).

Settings mermaid.txt does not state, each a documented parameter: what one observation shows
(``search_k`` passages per search, ``page_max_passages`` per open_page, ``passage_max_words`` words per
passage), and the extra call that forces a verdict when T_max steps end without one (``forced_verdict``;
false: the claim gets NOT_ENOUGH_INFO, or the binary rule's REFUTED, with no further call). Memory carries
evidence between claims only in the order they finish: a run in dataset order with one claim in flight
(``bench run --order dataset --concurrency 1``, the memory configs) lets every claim recall what the
claims before it stored; with many claims in flight, claims running together cannot see each other's
evidence.

``quotes`` (veracity's switch, off in the paper configs: MERMAID's executor cites passage ids and quotes
nothing): with ``show`` / ``check`` the verdict (the finish step, or the forced final verdict) quotes, for
each
passage it relies on, the words its label rests on, checked against the observed passages as rag's are
(:mod:`veracity.pipeline.grounding`); in ``check`` a mismatch is retried once as ``mermaid.final`` in the same
conversation, and an ungrounded verdict becomes NOT_ENOUGH_INFO (binary: REFUTED).
"""

from __future__ import annotations

from dataclasses import dataclass

from veracity.pipeline.grounding import QUOTE_MODES, check_reply, quoting, ungrounded_explanation
from veracity.pipeline.methods.base import MethodContext
from veracity.pipeline.methods.mermaid.memory import name_spans
from veracity.pipeline.methods.mermaid.roles import (DECOMPOSER, EXECUTOR, FINAL, Decomposition, FinalVerdict,
                                                     QuotedFinalVerdict, QuotedReactStep, ReactStep,
                                                     OBSERVATION)
from veracity.pipeline.params import MethodParams, param
from veracity.pipeline.roles import cited_evidence, citing, format_passages
from veracity.pipeline.types import Claim, Evidence, Label, Verdict


@dataclass
class MermaidParams(MethodParams):
    t_max: int = param(5, min=1, max=50, help="most ReAct steps of the executor",
                       paper="Method Summary: T_max = 5 steps")
    search_k: int = param(5, min=1, max=100, help="passages per search action (observation limit)",
                          paper="not stated (the paper's MCP tools return their own result lists)")
    page_max_passages: int = param(6, min=1, max=100,
                                   help="passages of an article shown per open_page action "
                                                           "(observation limit)", paper="not stated")
    passage_max_words: int = param(120, min=1, max=5000, help="words of each passage in an observation "
                                                              "(observation limit)", paper="not stated")
    forced_verdict: bool = param(True, help="when T_max steps end without a verdict, one more executor call "
                                            "forces one (false: NOT_ENOUGH_INFO, binary: REFUTED, no call)",
                                 paper="not stated (§3: the executor gives the verdict within T_max steps)")
    memory: bool = param(True, help="evidence memory shared across claims (ablation --no-memory: false)",
                         paper="§4.2-4.3: memory and its ablation")
    decomposer: bool = param(True, help="decompose the claim first (ablation --no-decomposer: false)",
                             paper="§3.1; §4.3 ablation")
    semantic_memory: bool = param(False, help="also recall stored evidence by embedding similarity",
                                  paper="Limitations: keyword-only recall (the open question)")
    similarity_threshold: float = param(0.45, min=0.0, max=1.0,
                                        help="cosine threshold of semantic recall (all-MiniLM-L6-v2 "
                                             "paraphrases "
                                             "score ~0.45-0.6)")
    memory_k: int = param(5, min=0, max=100, help="most passages recalled from memory per claim")
    constrain_citations: bool = param(True, help="schemas enumerate the ids of the passages observed so far")
    quotes: str = param("off", choices=QUOTE_MODES,
                        help="the verdict quotes the words of each passage its label rests on (veracity's "
                             "switch, "
                             "not the paper's); show: located and shown; check: retried once when a quote is "
                             "not "
                             "in its passage, then NOT_ENOUGH_INFO (binary: REFUTED), marked ungrounded")


def step_model(space, observed: list[str], p: MermaidParams) -> type:
    """The executor's output model for one step: citations (or quotes) limited to the passages observed."""
    if p.quotes != "off":
        return quoting(space.narrow(QuotedReactStep), observed, p.constrain_citations)
    return citing(space.narrow(ReactStep), observed, p.constrain_citations)


async def quoted_verdict(ctx: MethodContext, finish, messages: list[dict[str, str]], observed: dict[str,
                                                                                                    Evidence],
                         steps_done: int) -> tuple:
    """With quotes=show|check: the finish step's verdict, or the forced one (``forced_verdict``), its quotes
    checked against the observed passages; in check mode a mismatch is retried once as mermaid.final.
    Returns (label, explanation, cited ids, quotes, grounding)."""
    p, space, trace = ctx.params, ctx.label_space, ctx.trace
    shown = list(observed.values())
    final_model = quoting(space.narrow(QuotedFinalVerdict), list(observed), p.constrain_citations)
    if finish is not None and finish.label is not None:
        g = await check_reply(ctx, finish, EXECUTOR, p.quotes, shown, sent=messages[:-1], retry_role=FINAL,
                              output=final_model)
    elif not p.forced_verdict:
        explanation = f"No verdict within {p.t_max} steps (forced_verdict is off)."
        trace.event("mermaid.no_verdict", steps=steps_done, t_max=p.t_max)
        return space.undecided(trace, explanation,
                               path="mermaid.no_verdict").value, explanation, [], [], "ungrounded"
    else:
        sent = [*messages, *FINAL.render()]
        reply = await FINAL(ctx, messages=sent, output=final_model,
                            trace_info={"forced_after_steps": steps_done})
        if reply is None:
            error = trace.events[-1].get("error")
            explanation = f"No verdict: the model's final answer did not validate ({error})."
            return (space.undecided(trace, explanation, path="mermaid.final").value, explanation, [], [],
                    "ungrounded")
        trace.event("mermaid.final", forced_after_steps=steps_done)
        g = await check_reply(ctx, reply, FINAL, p.quotes, shown, sent=sent, retry_role=FINAL,
                              output=final_model)
    cited = [q.passage_id for q in g.quotes]
    if g.replaced is not None:
        return g.replaced.value, ungrounded_explanation(g), cited, g.quotes, g.grounding
    said = getattr(g.reply, "explanation", None) or g.reply.thought
    return g.reply.label, said, cited, g.quotes, g.grounding


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
    for raw in [t.subject for t in d.triplets] + [t.object for t in d.triplets] + (list(d.keywords)
                                                                                   if keywords else []):
        for name in name_spans(raw):
            if not any(w.casefold() in lower_only for w in name.split() if w[:1].isupper()):
                keys.append(name)
    return list(dict.fromkeys(keys))


async def verify_mermaid(claim: Claim, ctx: MethodContext) -> Verdict:
    p: MermaidParams = ctx.params
    trace = ctx.trace

    # 1. Decomposer (its fallback traces the error; the claim is then checked from its text alone)
    decomposition: Decomposition | None = None
    if p.decomposer:
        decomposition = await DECOMPOSER(ctx, claim=claim)
        if decomposition is not None:
            trace.event("mermaid.decomposition", **decomposition.model_dump())
    keys = entity_keys(decomposition, claim.text)

    # 2. Memory recall (warm start)
    recalled: list[Evidence] = []
    memory = ctx.state.memory  # None with --no-memory
    if memory is not None:
        hits = memory.recall(keys, claim.text, k=p.memory_k)
        recalled = [h.evidence for h in hits]
        trace.memory_hits.extend(h.to_dict() for h in hits)
        trace.event("mermaid.recall", keys=keys, passage_ids=[e.passage_id for e in recalled])

    # 3. Executor ReAct loop
    observed: dict[str, Evidence] = {e.passage_id: e for e in recalled}
    gathered: dict[str, Evidence] = {}  # passages the tools returned for this claim
    space = ctx.label_space  # binary: the finish label and the final verdict are SUPPORTED / REFUTED only
    quoted = p.quotes != "off"
    messages = EXECUTOR.messages(claim=claim, decomposition=decomposition, recalled=recalled, t_max=p.t_max,
                                 max_words=p.passage_max_words, space=space, quoting=quoted)
    finish: ReactStep | None = None
    for t in range(1, p.t_max + 1):
        step = await EXECUTOR(ctx, messages=messages, output=step_model(space, list(observed), p),
                              trace_info={"t": t, "action": "abandoned"})
        if step is None:  # the reply never validated (traced as an abandoned step): force the verdict
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
            passages = (await ctx.tools.open_page(step.argument,
                                                  role="mermaid.executor"))[: p.page_max_passages]
            empty = f"No article is titled {step.argument!r}; use search to find titles."
        for e in passages:
            observed.setdefault(e.passage_id, e)
            gathered.setdefault(e.passage_id, e)
        trace.event("mermaid.step", t=t, thought=step.thought, action=step.action, argument=step.argument,
                    hits=[e.passage_id for e in passages])
        observation = format_passages(passages, max_words=p.passage_max_words) if passages else empty
        messages.append(OBSERVATION(observation, t, p.t_max))

    steps_done = len([m for m in messages if m["role"] == "assistant"])
    quotes = grounding = None
    if quoted:
        label, explanation, cited, quotes, grounding = await quoted_verdict(ctx, finish, messages, observed,
                                                                            steps_done)
    elif finish is not None and finish.label is not None:
        label, explanation, cited = finish.label, finish.thought, finish.cited_passages
    elif not p.forced_verdict:  # no verdict within T_max steps, and no extra call to force one
        explanation = f"No verdict within {p.t_max} steps (forced_verdict is off)."
        trace.event("mermaid.no_verdict", steps=steps_done, t_max=p.t_max)
        label, cited = space.undecided(trace, explanation, path="mermaid.no_verdict").value, []
    else:  # T_max reached, or finish without a label: force the verdict
        final = await FINAL(ctx, messages=[*messages, *FINAL.render()],
                            output=citing(space.narrow(FinalVerdict), list(observed), p.constrain_citations),
                            trace_info={"forced_after_steps": steps_done})
        if final is not None:
            label, explanation, cited = final.label, final.explanation, final.cited_passages
            trace.event("mermaid.final", forced_after_steps=steps_done)
        else:  # no checkable verdict: say so (with the error FINAL's fallback just traced) instead of failing
            error = trace.events[-1].get("error")
            explanation = f"No verdict: the model's final answer did not validate ({error})."
            label, cited = space.undecided(trace, explanation, path="mermaid.final").value, []

    # 4. Memory update
    if memory is not None and gathered:
        # anchors: the names among the triplets' subjects / objects, and the names the claim itself mentions
        # (so memory works when the decomposition is missing or names nothing)
        entities = list(dict.fromkeys(entity_keys(decomposition, claim.text,
                                                  keywords=False) + name_spans(claim.text)))
        new = memory.store(gathered.values(), keys, entities=entities)
        trace.event("mermaid.memory_update", stored=len(gathered), new=new)

    return Verdict(label=Label(label), explanation=explanation,
                   evidence=cited_evidence(cited, list(observed.values())), trace=trace, method="mermaid",
                   quotes=quotes, grounding=grounding)
