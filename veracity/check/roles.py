"""The check stage's two declared roles: atomic claims per sentence, and each claim's check-worthiness.

``check.extractor`` (one call per sentence): the sentence's atomic claims, each decontextualised (pronouns
and elliptic references resolved from the whole text). The decomposition follows Factcheck-Bench (Wang et
al. 2023, arXiv 2311.09000, §3 "decomposition" and "decontextualisation": a sentence becomes atomic claims
that stand on their own) and FActScore (Min et al. 2023, §3.1: a generation is broken into atomic facts,
each a short sentence conveying one piece of information); the instructions reuse ZoFia's claim extractor
(§4.1.3, eq. 8; prompt B.3: "do not use pronouns; write explicit nouns", "do not fabricate claims").
The whole text comes first in the prompt and the sentence last, so the sentences of one text share a
cached prefix. A reply that never validates (cut at its budget twice: the client retries a truncated
reply once with twice the budget) falls back to the sentence itself as one claim, traced and counted.

``check.worthiness`` (with ``worthiness=true``, one call per claim the opinion rule of
:mod:`veracity.check.opinions` leaves; off by default, the rule alone sorting): Factcheck-Bench's
check-worthiness categories (§3, the
"checkworthiness" step: factual claim / opinion / not a claim; the annotated file spells them
``factual``, ``opinion``, ``not_a_claim``). Only factual claims are verified. A reply that never validates
falls back to ``factual`` (the claim is verified rather than silently dropped), traced and counted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, Field

from veracity.pipeline.methods.zofia.keywords import split_sentences
from veracity.pipeline.params import MethodParams, param
from veracity.pipeline.roles import Fallback, Role

Message = dict[str, str]
MAX_EXTRACTED_CLAIM_CHARS = 200  # one atomic claim: a short sentence
# Factcheck-Bench's annotators wrote 2.2 claims per sentence on average (661 / 311). The bound also bounds the
# reply: 6 claims of at most 200 characters fit the role's 320 tokens, so a reply is never cut and retried at
# twice the budget (what made extractor calls meet the request timeout on the loaded reference machine)
MAX_CLAIMS_PER_SENTENCE = 6


def _user(text: str) -> list[Message]:
    """The user turn; the system message is the role's declared instructions (one prompt per role)."""
    return [{"role": "user", "content": text}]


# -- role: check.extractor --------------------------------------------------------------------------
class AtomicClaims(BaseModel):
    # on llama.cpp the client writes the reply's opening and the model only the claims (structured.py)
    reply_prefill: ClassVar[bool] = True
    # at least one: a sentence that states nothing (a question, a greeting) comes back as itself and
    # check.worthiness calls it not_a_claim, so no factual sentence is dropped silently by an empty reply
    claims: list[Annotated[str, Field(min_length=1, max_length=MAX_EXTRACTED_CLAIM_CHARS)]] = Field(
        min_length=1, max_length=MAX_CLAIMS_PER_SENTENCE,
        description="the sentence's atomic claims, each a short self-contained declarative sentence")


# The rules below: decontextualisation as in Factcheck-Bench (Wang et al. 2023, §3: each claim stands on its
# own, a pronoun or a reference replaced by what it names) and FActScore's atomic facts (Min et al. 2023,
# §3.1: one piece of information each, a short sentence); ZoFia's extractor prompt (B.3: "do not use
# pronouns ... replace all pronouns with explicit nouns", "do not fabricate claims"); a list split into one
# claim per item as Factcheck-GPT's annotated file does ("found in fields, meadows, forests" -> four
# claims). Issue 44 (BENCHMARKS.md) read where seed 11's extracted claims missed the annotators': 12 kept a
# pronoun ("They won the tournament in 1986"), 10 a short description where the annotators wrote the name
# ("The race" for "The 1932 Australian Grand Prix"), 6 were fragments ("held on a dirt track circuit"), 12
# came from instructions, advice or the writer speaking of itself, which the annotators gave no claim. The
# worked example is invented (no name of a benchmark's text), so the model cannot carry a real text's fact
# from it.
EXTRACTOR_SYSTEM = (
    "You split one sentence of a text into atomic claims for fact-checking. An atomic claim is a short, "
    "complete declarative sentence, with a subject and a verb, that states exactly one piece of "
    "information.\n"
    "Rules:\n"
    "1. Cover everything the sentence states, and nothing else: do not fabricate claims, do not add facts "
    "from other sentences, never copy another sentence of the text. Keep the sentence's own words; do not "
    "paraphrase.\n"
    "2. Every claim must be understood without the text. Replace each pronoun (it, they, he, she, its, "
    "their, this, these) and each short description of something named earlier (the race, the paper, the "
    "company, the city) with the full name the text gives it, usually in the sentence before or in the "
    "text's first sentence.\n"
    "3. Split lists and joined statements: one claim per item.\n"
    "4. Never return a fragment such as \"held in 1990\" or \"in the north\".\n"
    "5. A question, a greeting, an instruction or advice to the reader, or the writer speaking of itself "
    "states no fact: return the sentence unchanged as the only item.\n"
    "Example. Text: \"The Harbour Cup is a rowing race in Lisbon. It was first held in 1952, and the race "
    "is rowed over 8 km and 12 km.\" Sentence: \"It was first held in 1952, and the race is rowed over 8 km "
    "and 12 km.\" Claims: [\"The Harbour Cup was first held in 1952.\", \"The Harbour Cup is rowed over 8 "
    "km.\", \"The Harbour Cup is rowed over 12 km.\"]\n"
    "Reply in JSON."
)


def context_of(text: str, sentence: str) -> tuple[str, str]:
    """The text's first sentence and the sentence just before ``sentence`` (each "" when there is none, or
    when ``sentence`` is not found in ``text``): shown to the extractor beside the sentence, where a small
    model reads the name a pronoun refers to (Factcheck-Bench's annotators decontextualise from the
    preceding context)."""
    at = text.find(sentence.strip())
    if at <= 0:
        return "", ""
    before = [t for _, _, t in split_sentences(text[:at])]
    if not before:
        return "", ""
    return (before[0] if len(before) > 1 else ""), before[-1]


def extractor_messages(text: str, sentence: str) -> list[Message]:
    # the whole text first (the sentences of one text share a cached prefix), the sentence's context and the
    # sentence last
    first, previous = context_of(text, sentence)
    context = (f"The text's first sentence:\n{first}\n\n" if first else "") + (
        f"The sentence before it:\n{previous}\n\n" if previous else "")
    return _user(f"Text:\n{text}\n\n{context}Sentence to split:\n{sentence}")


def _sentence_as_claim(text: str, sentence: str) -> AtomicClaims:
    # the declared fallback (not re-validated: may be long)
    return AtomicClaims.model_construct(claims=[sentence])


def guard_retry_prompt(failing: dict[str, str]) -> str:
    """The one re-ask after the sentence guard refused claims (claim -> why): fix or leave out each."""
    lines = "\n".join(f"- {c} ({why})" for c, why in failing.items())
    return ("These claims do not stay in the sentence to split:\n" + lines + "\nRewrite each one using only "
            "the words of the sentence, with a pronoun or a short description replaced by the full name the "
            "text gives it, or leave it out. Reply with the rewritten claims only.")


EXTRACTOR = Role(
    "check.extractor", output=AtomicClaims, render=extractor_messages, instructions=EXTRACTOR_SYSTEM,
    max_tokens=320,
    summary="a sentence's atomic, decontextualised claims (the whole text as context)",
    extra={"paper": "Factcheck-Bench §3 (decomposition, decontextualisation); FActScore §3.1; ZoFia §4.1.3, "
                    "B.3"},
    fallback=Fallback(_sentence_as_claim, "the sentence itself is verified as one claim",
                      event="check.extractor_failed"),
)


# -- role: check.worthiness ---------------------------------------------------------------------------
# The reply names a kind, and the kind maps to Factcheck-Bench's category. The names the model chooses
# between are not the annotation file's: with ``factual`` / ``opinion`` / ``not_a_claim`` as the enum, the
# reference model (qwen2.5-coder-1.5b) answered ``not_a_claim`` for false statements ("The Nile empties into
# the Red Sea", "Paris is the capital of Germany") and so dropped from verification the claims a checker
# exists to catch: it read "not a claim" as "not right" (BENCHMARKS.md, issue 32: 96 of 170 gold factual
# claims sorted out on seed 7). The kinds say what is asked — does the text assert something checkable —
# without a word that can be read as a verdict.
Kind = Literal["checkable_statement", "opinion", "no_statement"]
CATEGORY_OF: dict[str, str] = {"checkable_statement": "factual", "opinion": "opinion",
                               "no_statement": "not_a_claim"}


class CheckWorthiness(BaseModel):
    # on llama.cpp the client writes ``{"kind": "`` and the model only the kind (structured.py)
    reply_prefill: ClassVar[bool] = True
    kind: Kind = Field(description="checkable_statement: asserts something about the world that evidence can "
                       "confirm or refute, true or false; opinion: a judgement, preference or prediction; "
                       "no_statement: asserts nothing (a question, greeting, instruction)")

    @property
    def category(self) -> str:
        """Factcheck-Bench's category: factual, opinion or not_a_claim."""
        return CATEGORY_OF[self.kind]


WORTHINESS_SYSTEM = (
    "You sort claims for a fact-checker by what kind of sentence they are, not by whether they are true. "
    "Answer checkable_statement when the claim asserts something about the world that evidence could "
    "confirm or refute (names, dates, numbers, places, events, properties), whether it is true or false: "
    "a wrong statement is still a checkable statement; opinion when it is a judgement, a preference, a "
    "feeling or a prediction; no_statement when it asserts nothing at all (a question, a greeting, an "
    "instruction). A claim taken from a sentence that gives the writer's view (I think, in my opinion) is an "
    "opinion. Reply in JSON."
)


def worthiness_messages(claim: str, sentence: str | None = None) -> list[Message]:
    # the sentence the claim came from: "I think" and "should" are often dropped from the claim itself
    if sentence and " ".join(sentence.split()) != " ".join(claim.split()):
        return _user(f"Sentence: {sentence}\nClaim: {claim}")
    return _user(f"Claim: {claim}")


WORTHINESS = Role(
    "check.worthiness", output=CheckWorthiness, render=worthiness_messages, instructions=WORTHINESS_SYSTEM,
    max_tokens=32,
    summary="factual claim / opinion / not a claim (Factcheck-Bench); only factual claims are verified",
    extra={"paper": "Factcheck-Bench §3 (check-worthiness)"},
    fallback=Fallback(CheckWorthiness.model_construct(kind="checkable_statement"),
                      "factual: the claim is verified anyway", event="check.worthiness_failed"),
)

ROLES: tuple[Role, ...] = (EXTRACTOR, WORTHINESS)


@dataclass
class CheckParams(MethodParams):
    """The check stage's settings (``veracity check --param``); the roles' budgets are
    ``extractor.max_tokens`` and
    ``worthiness.max_tokens``."""

    # off by default: on the opinion set's held-out part the model changed none of the 73 decisions the rule
    # left to it (BENCHMARKS.md, issue 44 point 2: 41/47 opinions skipped, 66/67 facts kept, with or without
    # it), at one call per claim, about a tenth of a 150-word text's check on a 2-core machine (issue 44
    # point 5)
    worthiness: bool = param(False, help="also ask check.worthiness (the model) for each claim the opinion "
                             "rule leaves; false: the rule alone sorts opinions and non-statements, the rest "
                             "is verified (one call fewer per claim)",
                             paper="Factcheck-Bench §3: only check-worthy (factual) claims are verified")
    gamma: int = param(10, min=0, max=1000, help="FActScore's length penalty: a text with fewer than gamma "
                       "verified claims is scored times exp(1 - gamma / n); 0: no penalty",
                       paper="FActScore (Min et al. 2023), the package's --gamma, default 10")
