"""EMULATE (Hong, Luo, Wan): seven agents that emulate how a person checks a claim on the web.

Figure 1's algorithm box has garbled indentation (its ``else`` branches do not line up with the
scenarios (a)-(d) of section 3). This module reads it as follows, agents in CamelCase::

    memory_bank, not_self_contained = [], []
    query_queue = InitialQueryGen(c)
    while query_queue and queries_made < MAX_SEARCH_QUERIES:
        query = query_queue.pop(0)
        ranked = SearchRank(query, SearchEngine(query))[:MAX_SEARCH_RESULTS_PER_QUERY]
        for result in ranked:
            if SelfContainedCheck(c, memory_bank, result):
                if DetHelpful(c, memory_bank, result):
                    memory_bank.append(result)
                    if SufficientEvidence(c, memory_bank):          # scenario (a)
                        return Classifier(c, memory_bank)
                    else:                                            # scenario (b)
                        query_queue = AdditionalQueryGen(c, memory_bank) + query_queue
                        break
                else:                                                # scenario (c): next result
                    continue
            else:                                                    # scenario (d): defer
                not_self_contained.append(result)
    for result in not_self_contained:        # the memory bank may now make a deferred page usable
        if SufficientEvidence(c, memory_bank + [result]):
            return Classifier(c, memory_bank + [result])
    return Classifier(c, memory_bank)

On the local index (:mod:`.search`): the search engine is ``search(query, k=search_k)``; its passages
are grouped by article, so a "search result" is an article with its title, the place of its best passage
in the article and a snippet (the first ``snippet_words`` words of that passage); SearchRank also sees the
source identity (index source files and dump date) where the paper's results have a URL. The "web page"
behind a result is the article's passages from ``open_page(title)``, cut to ``page_tokens`` tokens
(estimated as characters / 4; 533 ≈ 400 words). Articles already read for this claim are
dropped from later result lists (``skip_seen_pages``), as a person would not reopen a page.
The Classifier judges from the memory bank only (§3 (6)); ``use_knowledge=True`` lets it fall back on
the model's own knowledge where the evidence is silent.
SearchRank returns an ordering of result numbers; numbers out of range and repeats are ignored and
results it did not mention follow in search order. EMULATE is binary: True -> SUPPORTED,
False -> REFUTED, in either label space (the paper's Classifier has two labels); only a classifier reply
that never validates gives NOT_ENOUGH_INFO, or in the binary label space the binary rule's REFUTED.
Ablations (Table 3): ``search_rank=False`` keeps search order,
``self_contained_check=False`` treats every page as self-contained.

The seven agents are the roles of :mod:`.roles`; an agent whose reply never validates falls back to a
conservative answer (traced as ``emulate.agent_failed``) and the algorithm goes on.
"""

from __future__ import annotations

from dataclasses import dataclass

from veracity.pipeline.grounding import QUOTE_MODES, ask_quoting, quoting, ungrounded_explanation
from veracity.pipeline.methods.base import MethodContext
from veracity.pipeline.methods.emulate.roles import (ADDITIONAL_QUERY_GEN, CLASSIFIER, DET_HELPFUL,
                                                     INITIAL_QUERY_GEN, SEARCH_RANK, SELF_CONTAINED_CHECK,
                                                     SUFFICIENT_EVIDENCE, QuotedClassification)
from veracity.pipeline.methods.emulate.search import Page, apply_ranking, open_result, search_engine
from veracity.pipeline.params import MethodParams, param
from veracity.pipeline.types import Claim, Evidence, Label, Verdict


@dataclass
class EmulateParams(MethodParams):
    max_search_queries: int = param(4, min=1, max=50,
                                    help="most search queries per claim (MAX_SEARCH_QUERIES)",
                                    paper="§4 Implementation: MAX_SEARCH_QUERIES = 4")
    max_search_results_per_query: int = param(2, min=1, max=100,
                                              help="results read per query (MAX_SEARCH_RESULTS_PER_QUERY)",
                                              paper="§4 Implementation: MAX_SEARCH_RESULTS_PER_QUERY = 2")
    search_k: int = param(10, min=1, max=100,
                          help="passages the search engine returns per query (grouped into articles)",
                          paper="not stated (§4: serper.dev result lists; offline: the local index)")
    snippet_words: int = param(30, min=1, max=1000, help="words of the snippet SearchRank sees per result",
                               paper="not stated (§3 (2): a result has a title, a URL and a snippet)")
    page_tokens: int = param(533, min=1, max=100000,
                             help="tokens of an article shown as its web page (estimated as characters / 4; "
                                  "533 ≈ 400 words)",
                             paper="not stated (§3: the agents read the web page)")
    use_knowledge: bool = param(False,
                                help="the Classifier may use the model's own knowledge where the evidence is "
                                            "silent (false: the evidence bank only)",
                                paper="§3 (6): the Classifier classifies from the claim and the evidence set")
    search_rank: bool = param(True, help="rank results with SearchRank (ablation --no-search-rank: false, "
                                         "search order kept)", paper="Table 3: RM-SR")
    self_contained_check: bool = param(True,
                                       help="run SelfContainedCheck (ablation --no-self-contained-check: "
                                                  "false, every page self-contained)",
                                       paper="Table 3: RM-SCC")
    skip_seen_pages: bool = param(True,
                                  help="drop articles already read for this claim from later result lists",
                                  paper="not stated (a person does not reopen a page, §3)")
    quotes: str = param("off", choices=QUOTE_MODES,
                        help="the Classifier quotes the words of each passage its label rests on (veracity's "
                             "switch, "
                             "not the paper's); show: located and shown; check: retried once when a quote is "
                             "not "
                             "in its passage, then NOT_ENOUGH_INFO (binary: REFUTED), marked ungrounded",
                        paper="not in the paper (issue 31)")


async def classify(ctx: MethodContext, claim: Claim, bank: list[Page], reason: str) -> Verdict:
    """Classifier(c, bank) as a verdict: True -> SUPPORTED, False -> REFUTED; no valid reply ->
    NOT_ENOUGH_INFO
    (binary label space: the binary rule's REFUTED, traced as ``label_space.forced``)."""
    evidence = [e for pg in bank for e in pg.passages]
    if ctx.params.quotes != "off":
        return await classify_quoting(ctx, claim, bank, evidence, reason)
    out = await CLASSIFIER(ctx, claim=claim, bank=bank, use_knowledge=ctx.params.use_knowledge)
    if out is None:
        explanation = "No verdict: the classifier's reply did not validate."
        return Verdict(label=ctx.label_space.undecided(ctx.trace, explanation, path="emulate.classifier"),
                       explanation=explanation, evidence=evidence, trace=ctx.trace, method="emulate")
    ctx.trace.event("emulate.classify", reason=reason, label=out.label, pages=[pg.title for pg in bank])
    return Verdict(label=Label.SUPPORTED if out.label == "True" else Label.REFUTED,
                   explanation=out.explanation,
                   evidence=evidence, trace=ctx.trace, method="emulate")


def _as_label(reply) -> str:
    return Label.SUPPORTED.value if reply.label == "True" else Label.REFUTED.value


async def classify_quoting(ctx: MethodContext, claim: Claim, bank: list[Page], evidence: list[Evidence],
                           reason: str) -> Verdict:
    """The Classifier with quotes=show|check (veracity's switch): its True / False rests on quotes from the
    memory bank's passages, checked as rag's are; check retries a mismatch once, then the label space's "not
    supported" label (NOT_ENOUGH_INFO; binary: REFUTED), marked ungrounded."""
    p, space = ctx.params, ctx.label_space
    g = await ask_quoting(ctx, CLASSIFIER, p.quotes, evidence, claim=claim, bank=bank,
                          use_knowledge=p.use_knowledge,
                          quoting=True, output=quoting(QuotedClassification,
                                                       [e.passage_id for e in evidence]),
                          label_of=_as_label, fallback="False")
    if g is None:
        explanation = "No verdict: the classifier's reply did not validate."
        return Verdict(label=space.undecided(ctx.trace, explanation, path="emulate.classifier"),
                       explanation=explanation, evidence=evidence, trace=ctx.trace, method="emulate",
                       quotes=[],
                       grounding="ungrounded")
    ctx.trace.event("emulate.classify", reason=reason, label=g.reply.label, pages=[pg.title for pg in bank])
    if g.replaced is not None:
        return Verdict(label=g.replaced, explanation=ungrounded_explanation(g), evidence=evidence,
                       trace=ctx.trace, method="emulate", quotes=g.quotes, grounding=g.grounding)
    return Verdict(label=Label(_as_label(g.reply)), explanation=g.reply.explanation, evidence=evidence,
                   trace=ctx.trace, method="emulate", quotes=g.quotes, grounding=g.grounding)


async def sufficient(ctx: MethodContext, claim: Claim, bank: list[Page]) -> bool:
    """SufficientEvidence(c, bank); a reply that never validates counts as not sufficient."""
    out = await SUFFICIENT_EVIDENCE(ctx, claim=claim, bank=bank)
    if out is None:
        return False
    ctx.trace.event("emulate.sufficient", pages=[pg.title for pg in bank], sufficient=out.sufficient)
    return out.sufficient


async def verify_emulate(claim: Claim, ctx: MethodContext) -> Verdict:
    p: EmulateParams = ctx.params
    trace = ctx.trace
    memory_bank: list[Page] = []
    not_self_contained: list[Page] = []
    seen: set[str] = set()

    first = await INITIAL_QUERY_GEN(ctx, claim=claim)
    query_queue = [q for q in first.queries if q.strip()] if first is not None else [claim.text]
    trace.event("emulate.queries", source="initial", queries=list(query_queue))
    queries_made = 0

    while query_queue and queries_made < p.max_search_queries:
        query = query_queue.pop(0)
        queries_made += 1
        results = await search_engine(ctx, query, skip=seen if p.skip_seen_pages else set())
        if p.search_rank and len(results) > 1:
            rank = await SEARCH_RANK(ctx, claim=claim, query=query, results=results, source=ctx.tools.source)
            results = [results[i] for i in apply_ranking(rank.ranking, len(results))]
        ranked = results[: p.max_search_results_per_query]
        trace.event("emulate.search", query=query, ranked=[r.title for r in ranked])

        for result in ranked:
            page = await open_result(ctx, result)
            seen.add(result.title)
            self_contained = (not p.self_contained_check
                              or (await SELF_CONTAINED_CHECK(ctx, claim=claim, bank=memory_bank,
                                                             page=page)).self_contained)
            if self_contained:
                helpful = (await DET_HELPFUL(ctx, claim=claim, bank=memory_bank, page=page)).helpful
                trace.event("emulate.page", title=page.title, self_contained=True, helpful=helpful)
                if helpful:
                    memory_bank.append(page)
                    if await sufficient(ctx, claim, memory_bank):  # (a) done
                        return await classify(ctx, claim, memory_bank, "sufficient")
                    # (b) helpful but not enough: more queries, to the front of the queue
                    more = await ADDITIONAL_QUERY_GEN(ctx, claim=claim, bank=memory_bank)
                    new = [q for q in more.queries if q.strip()]
                    query_queue[:0] = new
                    trace.event("emulate.queries", source="additional", queries=new)
                    break
                continue  # (c) not helpful: next result
            # (d) not self-contained: defer
            trace.event("emulate.page", title=page.title, self_contained=False)
            not_self_contained.append(page)

    trace.event("emulate.loop_end", queries_made=queries_made, queue_left=len(query_queue),
                deferred=[pg.title for pg in not_self_contained])
    for page in not_self_contained:  # a deferred page may be usable with the memory bank as it is now
        candidate = memory_bank + [page]
        if await sufficient(ctx, claim, candidate):
            return await classify(ctx, claim, candidate, "deferred page made the evidence sufficient")
    return await classify(ctx, claim, memory_bank, "evidence collected so far")
