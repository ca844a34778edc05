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

On the local index: the search engine is ``search(query, k=search_k)``; its passages are grouped by
article, so a "search result" is an article with its title and a snippet (the first ``snippet_words``
words of its best passage), and the "web page" behind it is the article's passages from
``open_page(title)``, capped at ``page_max_words`` words. Articles already read for this claim are
dropped from later result lists (``skip_seen_pages``), as a person would not reopen a page.
SearchRank returns an ordering of result numbers; numbers out of range and repeats are ignored and
results it did not mention follow in search order. EMULATE is binary: True -> SUPPORTED,
False -> REFUTED. Ablations: ``search_rank=False`` keeps search order, ``self_contained_check=False``
treats every page as self-contained.

Prompts put the shared part first (instructions, evidence collected so far, the claim, the page) and
the agent's task last, so the agents judging one page share a prompt prefix on the server.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from veracity.pipeline.methods.base import MethodContext, MethodSpec, unless_invalid
from veracity.pipeline.tools import format_passages
from veracity.pipeline.types import Claim, Evidence, Label, Verdict


@dataclass
class EmulateParams:
    max_search_queries: int = 4  # MAX_SEARCH_QUERIES (paper default)
    max_search_results_per_query: int = 2  # MAX_SEARCH_RESULTS_PER_QUERY (paper default)
    search_k: int = 10  # passages the search engine returns per query (grouped into articles)
    snippet_words: int = 30  # words of the snippet SearchRank sees per result
    page_max_words: int = 400  # words of an article shown as its "web page"
    search_rank: bool = True  # ablation --no-search-rank: False (keep search order)
    self_contained_check: bool = True  # ablation --no-self-contained-check: False (all self-contained)
    skip_seen_pages: bool = True  # drop articles already read for this claim from later result lists
    max_tokens: int = 256  # completion budget per agent call


@dataclass
class SearchResult:
    title: str
    snippet: str
    first_hit: Evidence


@dataclass
class Page:
    title: str
    passages: list[Evidence] = field(default_factory=list)


# -- output models of the seven agents -----------------------------------------------------------
Reasoning = Annotated[str, Field(max_length=400)]


class QueryList(BaseModel):  # InitialQueryGen, AdditionalQueryGen
    queries: list[Annotated[str, Field(max_length=120)]] = Field(max_length=3, description="short search queries, most useful first")


class Ranking(BaseModel):  # SearchRank
    ranking: list[int] = Field(max_length=10, description="result numbers, most relevant and credible first")


class SelfContained(BaseModel):  # SelfContainedCheck
    reasoning: Reasoning
    self_contained: bool


class Helpful(BaseModel):  # DetHelpful
    reasoning: Reasoning
    helpful: bool


class Sufficient(BaseModel):  # SufficientEvidence
    reasoning: Reasoning
    sufficient: bool


class Classification(BaseModel):  # Classifier
    explanation: Annotated[str, Field(max_length=600)]
    label: Literal["True", "False"]


EMULATE_SYSTEM = (
    "You are one member of a team that checks whether an atomic claim is true by searching a "
    "Wikipedia index and reading pages, as a careful person would. Do exactly the task given at the "
    "end of the message. Reply in JSON."
)

TASK_INITIAL_QUERIES = ("Task: write up to 3 short search queries whose results would show whether the claim "
                        "is true or false.")
TASK_SEARCH_RANK = ("Task: order the search results by how relevant and credible they are for verifying the "
                    "claim with this query. Reply with the result numbers, best first.")
TASK_SELF_CONTAINED = ("Task: is the new page comprehensible on its own or together with the evidence "
                       "collected so far (it does not depend on missing context to be understood)? "
                       "Answer self_contained true or false.")
TASK_HELPFUL = ("Task: does the new page give information that is not already in the collected evidence "
                "and that helps decide whether the claim is true? Answer helpful true or false.")
TASK_SUFFICIENT = ("Task: is the evidence collected so far sufficient to decide whether the claim is true "
                   "or false? Answer sufficient true or false.")
TASK_CLASSIFY = ("Task: based on the evidence collected so far (and your knowledge where it is silent), is "
                 "the claim True or False? Give a short explanation, then the label.")
TASK_ADDITIONAL_QUERIES = ("Task: the evidence collected so far is not yet sufficient. Write up to 3 short "
                           "search queries that would find the missing information.")


def _evidence_block(bank: list[Page], max_words: int | None = None) -> str:
    if not bank:
        return "Evidence collected so far: (none)"
    return "Evidence collected so far:\n" + "\n\n".join(
        f"Page: {p.title}\n{format_passages(p.passages, max_words=max_words)}" for p in bank
    )


def _messages(claim: Claim, bank: list[Page], task: str, *, page: Page | None = None,
              extra: str | None = None) -> list[dict[str, str]]:
    dated = f" (made on {claim.date})" if claim.date else ""
    parts = [_evidence_block(bank), f"Claim{dated}: {claim.text}"]
    if page is not None:
        parts.append(f"New page: {page.title}\n{format_passages(page.passages)}")
    if extra:
        parts.append(extra)
    parts.append(task)
    return [{"role": "system", "content": EMULATE_SYSTEM}, {"role": "user", "content": "\n\n".join(parts)}]


# -- helpers on the local index ---------------------------------------------------------------
def group_results(hits: list[Evidence], snippet_words: int, skip: set[str]) -> list[SearchResult]:
    """Passages -> one result per article (search order), snippet from its best passage."""
    out: dict[str, SearchResult] = {}
    for h in hits:
        if h.title in out or h.title in skip:
            continue
        out[h.title] = SearchResult(h.title, " ".join(h.text.split()[:snippet_words]), h)
    return list(out.values())


def apply_ranking(order: list[int], n: int) -> list[int]:
    """0-based indices: the 1-based numbers in ``order`` that are in range, first mention wins, then the rest."""
    picked: list[int] = []
    for num in order:
        if 1 <= num <= n and (num - 1) not in picked:
            picked.append(num - 1)
    return picked + [i for i in range(n) if i not in picked]


async def open_result(ctx: MethodContext, result: SearchResult) -> Page:
    """The result's "web page": the article's passages, capped at ``page_max_words`` words."""
    passages = await ctx.tools.open_page(result.title, role="emulate.open_page") or [result.first_hit]
    budget = ctx.params.page_max_words
    shown: list[Evidence] = []
    for ev in passages:
        if budget <= 0:
            break
        words = ev.text.split()
        if len(words) > budget:
            ev = Evidence(ev.passage_id, ev.title, " ".join(words[:budget]) + " ...", ev.score)
        shown.append(ev)
        budget -= len(words)
    return Page(result.title, shown)


# -- the algorithm ----------------------------------------------------------------------------
async def verify_emulate(claim: Claim, ctx: MethodContext) -> Verdict:
    p = ctx.params
    llm, trace = ctx.llm, ctx.trace
    mt = p.max_tokens

    def agent(coro, role: str, fallback: str):
        """One agent call; a reply that never validates is recorded and the algorithm goes on with ``fallback``."""
        return unless_invalid(coro, trace, "emulate.agent_failed", agent=role, fallback=fallback)

    async def classifier(bank: list[Page], reason: str) -> Verdict:
        out = await agent(llm.generate(_messages(claim, bank, TASK_CLASSIFY), Classification,
                                       role="emulate.classifier", max_tokens=mt),
                          "emulate.classifier", "no verdict: NOT_ENOUGH_INFO")
        evidence = [e for pg in bank for e in pg.passages]
        if out is None:
            return Verdict(label=Label.NOT_ENOUGH_INFO, explanation="No verdict: the classifier's reply did not validate.",
                           evidence=evidence, trace=trace, method="emulate")
        trace.event("emulate.classify", reason=reason, label=out.label, pages=[pg.title for pg in bank])
        return Verdict(label=Label.SUPPORTED if out.label == "True" else Label.REFUTED, explanation=out.explanation,
                       evidence=evidence, trace=trace, method="emulate")

    async def sufficient(bank: list[Page]) -> bool:
        out = await agent(llm.generate(_messages(claim, bank, TASK_SUFFICIENT), Sufficient,
                                       role="emulate.sufficient_evidence", max_tokens=mt),
                          "emulate.sufficient_evidence", "treated as not sufficient")
        if out is None:
            return False
        trace.event("emulate.sufficient", pages=[pg.title for pg in bank], sufficient=out.sufficient)
        return out.sufficient

    memory_bank: list[Page] = []
    not_self_contained: list[Page] = []
    seen: set[str] = set()
    first = await agent(llm.generate(_messages(claim, [], TASK_INITIAL_QUERIES), QueryList,
                                     role="emulate.initial_query_gen", max_tokens=mt),
                        "emulate.initial_query_gen", "the claim text as the only query")
    query_queue = [q for q in first.queries if q.strip()] if first is not None else [claim.text]
    trace.event("emulate.queries", source="initial", queries=list(query_queue))
    queries_made = 0

    while query_queue and queries_made < p.max_search_queries:
        query = query_queue.pop(0)
        queries_made += 1
        hits = await ctx.tools.search(query, p.search_k, role="emulate.search")
        results = group_results(hits, p.snippet_words, seen if p.skip_seen_pages else set())
        if p.search_rank and len(results) > 1:
            listing = "\n".join(f"{i}. {r.title}: {r.snippet}" for i, r in enumerate(results, 1))
            rank = await agent(llm.generate(
                _messages(claim, [], TASK_SEARCH_RANK, extra=f"Query: {query}\nSearch results:\n{listing}"),
                Ranking, role="emulate.search_rank", max_tokens=mt), "emulate.search_rank", "search order kept")
            if rank is not None:
                results = [results[i] for i in apply_ranking(rank.ranking, len(results))]
        ranked = results[: p.max_search_results_per_query]
        trace.event("emulate.search", query=query, ranked=[r.title for r in ranked])

        for result in ranked:
            page = await open_result(ctx, result)
            seen.add(result.title)
            if p.self_contained_check:
                sc = await agent(llm.generate(_messages(claim, memory_bank, TASK_SELF_CONTAINED, page=page),
                                              SelfContained, role="emulate.self_contained_check", max_tokens=mt),
                                 "emulate.self_contained_check", "treated as self-contained")
                self_contained = sc.self_contained if sc is not None else True
            else:
                self_contained = True
            if self_contained:
                hp = await agent(llm.generate(_messages(claim, memory_bank, TASK_HELPFUL, page=page), Helpful,
                                              role="emulate.det_helpful", max_tokens=mt),
                                 "emulate.det_helpful", "treated as not helpful")
                helpful = hp.helpful if hp is not None else False
                trace.event("emulate.page", title=page.title, self_contained=True, helpful=helpful)
                if helpful:
                    memory_bank.append(page)
                    if await sufficient(memory_bank):  # (a) done
                        return await classifier(memory_bank, "sufficient")
                    # (b) helpful but not enough: more queries, to the front of the queue
                    more = await agent(llm.generate(_messages(claim, memory_bank, TASK_ADDITIONAL_QUERIES), QueryList,
                                                    role="emulate.additional_query_gen", max_tokens=mt),
                                       "emulate.additional_query_gen", "no additional queries")
                    new = [q for q in more.queries if q.strip()] if more is not None else []
                    query_queue[:0] = new
                    trace.event("emulate.queries", source="additional", queries=new)
                    break
                continue  # (c) not helpful: next result
            # (d) not self-contained: defer
            trace.event("emulate.page", title=page.title, self_contained=False)
            not_self_contained.append(page)

    trace.event("emulate.loop_end", queries_made=queries_made, queue_left=len(query_queue),
                deferred=[pg.title for pg in not_self_contained])
    for page in not_self_contained:
        candidate = memory_bank + [page]
        if await sufficient(candidate):
            return await classifier(candidate, "deferred page made the evidence sufficient")
    return await classifier(memory_bank, "evidence collected so far")


SPEC = MethodSpec(
    name="emulate",
    fn=verify_emulate,
    params_cls=EmulateParams,
    summary="EMULATE: seven agents emulating a person searching and reading (4 queries x 2 results).",
)
