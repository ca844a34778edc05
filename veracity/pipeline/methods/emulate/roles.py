"""EMULATE's seven agents (§3, "A Novel Multi-Agent Framework"), each with its prompt next to its output
model.

Every agent gets one system prompt (:data:`EMULATE_SYSTEM`) and one user message that puts the shared
part first (evidence collected so far, the claim, the new page) and the agent's task last, so the
agents judging one page share a prompt prefix on the server. Every role's ``instructions`` are that
system prompt (what is sent); its task, the end of its user turn, is listed as the role's ``task``. The paper
runs every agent at temperature 1 (§4, Implementation); the roles declare
no temperature, so a run uses the client's (0 unless configured), and ``--param ROLE.temperature=1`` sets
the paper's per role: the paper configs (``benchmarks/configs/emulate-*.toml``) set 1.0 for all seven, and
each request then carries its own seed (:data:`veracity.pipeline.roles.SEED_RULE`).

When a reply never validates, the agent's fallback is traced (``emulate.agent_failed``) and the
algorithm goes on with a conservative answer: the claim text as the only query, search order kept,
the page taken as self-contained but not helpful, the evidence as not sufficient, no additional
queries, and no verdict (NOT_ENOUGH_INFO) from the Classifier.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field

from veracity.pipeline.grounding import QUOTE_RETRY, quoted
from veracity.pipeline.methods.emulate.search import Page, SearchResult
from veracity.pipeline.roles import Fallback, Role, dated_claim, format_passages
from veracity.pipeline.tools import SourceIdentity
from veracity.pipeline.types import Claim

MAX_TOKENS = 256  # completion budget of every EMULATE agent (--param ROLE.max_tokens=N overrides one role)

Reasoning = Annotated[str, Field(max_length=400)]

EMULATE_SYSTEM = (
    "You are one member of a team that checks whether an atomic claim is true by searching a "
    "Wikipedia index and reading pages, as a careful person would. Do exactly the task given at the "
    "end of the message. Reply in JSON."
)


def evidence_block(bank: list[Page], max_words: int | None = None) -> str:
    """The memory bank as the agents see it: one ``Page: title`` block per page, then its passages."""
    if not bank:
        return "Evidence collected so far: (none)"
    return "Evidence collected so far:\n" + "\n\n".join(
        f"Page: {p.title}\n{format_passages(p.passages, max_words=max_words)}" for p in bank
    )


def emulate_turn(claim: Claim, bank: list[Page], task: str, *, page: Page | None = None,
                 extra: str | None = None) -> list[dict[str, str]]:
    """The user turn of every agent: evidence so far, the claim, the new page (if any), extra context (if
    any), then the agent's task (the system message, :data:`EMULATE_SYSTEM`, is the same for all)."""
    parts = [evidence_block(bank), dated_claim(claim)]
    if page is not None:
        parts.append(f"New page: {page.title}\n{format_passages(page.passages)}")
    if extra:
        parts.append(extra)
    parts.append(task)
    return [{"role": "user", "content": "\n\n".join(parts)}]


# -- output models -------------------------------------------------------------------------------
class QueryList(BaseModel):  # InitialQueryGen, AdditionalQueryGen
    queries: list[Annotated[str, Field(max_length=120)]] = Field(max_length=3,
                                                                 description="short search queries, most "
                                                                             "useful first")


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


# Classifier with quotes=show|check (veracity's switch, not the paper's)
QuotedClassification = quoted(Classification, "QuotedClassification",
                              "for each passage the label rests on, the words it rests on, copied exactly")


# -- (1) emulate.initial_query_gen: claim -> initial search queries -----------------------------------
TASK_INITIAL_QUERIES = ("Task: write up to 3 short search queries whose results would show whether the claim "
                        "is true or false.")


def initial_query_gen_turn(claim: Claim) -> list[dict[str, str]]:
    return emulate_turn(claim, [], TASK_INITIAL_QUERIES)


INITIAL_QUERY_GEN = Role(
    "emulate.initial_query_gen", output=QueryList, render=initial_query_gen_turn,
    instructions=EMULATE_SYSTEM, max_tokens=MAX_TOKENS,
    summary="InitialQueryGen: search queries for the claim",
    # None: the method searches the claim text itself
    fallback=Fallback(None, "the claim text as the only query"),
    extra={"paper": "§3 (1) InitialQueryGen", "task": TASK_INITIAL_QUERIES},
)


# -- (2) emulate.search_rank: query + results (title, source, section, snippet) -> order ---------------
# §3 (2): results of "a title, a URL, and a snippet", sorted "based on relevance and credibility"; a person
# infers credibility from the URL (§3). Offline there is no URL: every result comes from the same local
# index, whose identity (source files, dump date) is shown once, and each result names its article and the
# place of the matching passage in it. Credibility can then only mean how authoritative the article and
# passage are for the claim (the article about the claim's subject over one that mentions it in passing);
# it cannot rank one publisher above another.
TASK_SEARCH_RANK = ("Task: order the search results by how relevant and credible they are for verifying the "
                    "claim with this query. All results come from the same source (shown above), so judge "
                    "credibility by the article and passage: the article about the claim's subject, and its "
                    "opening, are more authoritative than a passing mention. Reply with the result numbers, "
                    "best first.")


def search_rank_turn(claim: Claim, query: str, results: list[SearchResult],
                         source: SourceIdentity | None = None) -> list[dict[str, str]]:
    where = f"Source of every result: {source.describe()}\n" if source is not None else ""
    listing = "\n".join(f"{i}. Title: {r.title}\n   Section: {r.section}\n   Snippet: {r.snippet}"
                         for i, r in enumerate(results, 1))
    return emulate_turn(claim, [], TASK_SEARCH_RANK,
                        extra=f"Query: {query}\n{where}Search results:\n{listing}")


SEARCH_RANK = Role(
    "emulate.search_rank", output=Ranking, render=search_rank_turn,
    instructions=EMULATE_SYSTEM, max_tokens=MAX_TOKENS,
    summary="SearchRank: orders a query's results (title, source, section, snippet) by relevance and "
            "credibility",
    # an empty ranking keeps the search order (unmentioned results follow in search order)
    fallback=Fallback(Ranking(ranking=[]), "search order kept"),
    extra={"paper": "§3 (2) SearchRank; Table 3 RM-SR ablation", "task": TASK_SEARCH_RANK},
)


# -- (3) emulate.self_contained_check: is the new page comprehensible (alone or with the evidence)? ----
TASK_SELF_CONTAINED = ("Task: is the new page comprehensible on its own or together with the evidence "
                       "collected so far (it does not depend on missing context to be understood)? "
                       "Answer self_contained true or false.")


def self_contained_check_turn(claim: Claim, bank: list[Page], page: Page) -> list[dict[str, str]]:
    return emulate_turn(claim, bank, TASK_SELF_CONTAINED, page=page)


SELF_CONTAINED_CHECK = Role(
    "emulate.self_contained_check", output=SelfContained, render=self_contained_check_turn,
    instructions=EMULATE_SYSTEM, max_tokens=MAX_TOKENS,
    summary="SelfContainedCheck: is the new page comprehensible on its own or with the evidence so far",
    fallback=Fallback(SelfContained(reasoning="", self_contained=True), "treated as self-contained"),
    extra={"paper": "§3 (3) SelfContainedCheck; Table 3 RM-SCC ablation", "task": TASK_SELF_CONTAINED},
)


# -- (4) emulate.det_helpful: does the new page add helpful information? -------------------------------
TASK_HELPFUL = ("Task: does the new page give information that is not already in the collected evidence "
                "and that helps decide whether the claim is true? Answer helpful true or false.")


def det_helpful_turn(claim: Claim, bank: list[Page], page: Page) -> list[dict[str, str]]:
    return emulate_turn(claim, bank, TASK_HELPFUL, page=page)


DET_HELPFUL = Role(
    "emulate.det_helpful", output=Helpful, render=det_helpful_turn,
    instructions=EMULATE_SYSTEM, max_tokens=MAX_TOKENS,
    summary="DetHelpful: does the new page add information that helps decide the claim",
    fallback=Fallback(Helpful(reasoning="", helpful=False), "treated as not helpful"),
    extra={"paper": "§3 (4) DetHelpful", "task": TASK_HELPFUL},
)


# -- (5) emulate.sufficient_evidence: is the memory bank enough to classify? ---------------------------
TASK_SUFFICIENT = ("Task: is the evidence collected so far sufficient to decide whether the claim is true "
                   "or false? Answer sufficient true or false.")


def sufficient_evidence_turn(claim: Claim, bank: list[Page]) -> list[dict[str, str]]:
    return emulate_turn(claim, bank, TASK_SUFFICIENT)


SUFFICIENT_EVIDENCE = Role(
    "emulate.sufficient_evidence", output=Sufficient, render=sufficient_evidence_turn,
    instructions=EMULATE_SYSTEM, max_tokens=MAX_TOKENS,
    summary="SufficientEvidence: is the evidence collected so far enough to classify the claim",
    # None: not sufficient (and no emulate.sufficient event)
    fallback=Fallback(None, "treated as not sufficient"),
    extra={"paper": "§3 (5) SufficientEvidence", "task": TASK_SUFFICIENT},
)


# -- (6) emulate.classifier: claim + memory bank -> True / False -------------------------------------
# §3 (6): "Given a claim and the evidence set, outputs a classification label": the evidence decides.
# use_knowledge=True lets the model fall back on its own knowledge where the evidence is silent.
TASK_CLASSIFY = ("Task: based only on the evidence collected so far, is the claim True or False? Give a "
                 "short "
                 "explanation, then the label.")
TASK_CLASSIFY_KNOWLEDGE = ("Task: based on the evidence collected so far (and your knowledge where it is "
                           "silent), "
                           "is the claim True or False? Give a short explanation, then the label.")


TASK_QUOTE = (" Then, for each passage the label rests on, give its id (shown in square brackets) and the "
              "words "
              "it rests on, copied exactly from it.")


def classifier_turn(claim: Claim, bank: list[Page], use_knowledge: bool = False,
                    quoting: bool = False) -> list[dict[str, str]]:
    """``quoting`` (quotes=show|check): the task also asks for the quotes the label rests on."""
    task = TASK_CLASSIFY_KNOWLEDGE if use_knowledge else TASK_CLASSIFY
    return emulate_turn(claim, bank, task + (TASK_QUOTE if quoting else ""))


CLASSIFIER = Role(
    "emulate.classifier", turns=(QUOTE_RETRY,), output=Classification, render=classifier_turn,
    instructions=EMULATE_SYSTEM, max_tokens=MAX_TOKENS, confidence="label",
    summary="Classifier: True or False from the evidence collected (True -> SUPPORTED, False -> REFUTED; "
            "use_knowledge=true: the model's knowledge where the evidence is silent)",
    # None: the method returns NOT_ENOUGH_INFO with the evidence collected
    fallback=Fallback(None, "no verdict: NOT_ENOUGH_INFO"),
    extra={"paper": "§3 (6) Classifier", "task": TASK_CLASSIFY},
)


# -- (7) emulate.additional_query_gen: helpful but not sufficient -> queries for what is missing -------
TASK_ADDITIONAL_QUERIES = ("Task: the evidence collected so far is not yet sufficient. Write up to 3 short "
                           "search queries that would find the missing information.")


def additional_query_gen_turn(claim: Claim, bank: list[Page]) -> list[dict[str, str]]:
    return emulate_turn(claim, bank, TASK_ADDITIONAL_QUERIES)


ADDITIONAL_QUERY_GEN = Role(
    "emulate.additional_query_gen", output=QueryList, render=additional_query_gen_turn,
    instructions=EMULATE_SYSTEM, max_tokens=MAX_TOKENS,
    summary="AdditionalQueryGen: queries for the information still missing",
    fallback=Fallback(QueryList(queries=[]), "no additional queries"),
    extra={"paper": "§3 (7) AdditionalQueryGen", "task": TASK_ADDITIONAL_QUERIES},
)

ROLES = (INITIAL_QUERY_GEN, SEARCH_RANK, SELF_CONTAINED_CHECK, DET_HELPFUL, SUFFICIENT_EVIDENCE, CLASSIFIER,
         ADDITIONAL_QUERY_GEN)
