"""Text -> sentences -> atomic claims -> check-worthiness: the check stage before verification.

Sentences come from deterministic code (ZoFia's sentence splitter, :func:`~veracity.pipeline.methods.zofia.
keywords.split_sentences`: character spans, abbreviations and initials kept inside a sentence), never from
the model. Then one ``check.extractor`` call per sentence (on llama-server streamed, and cut where the reply
starts copying other sentences: :class:`CopyCut`), the model-free opinion rule per claim, and with
``worthiness=true`` one ``check.worthiness`` call per claim the rule leaves (:mod:`veracity.check.roles`),
all of a text's sentences in flight together. The result, an
:class:`Extraction`, is plain JSON (stored before any claim is verified, so a killed batch never extracts a
text twice) with its trace (every LLM call, and the fallbacks taken, counted in ``fallbacks``).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from veracity.check.guard import (check_claim, is_another_sentences, replaces, where, unresolved_description,
                                  unresolved_reference, without_near_duplicates)
from veracity.check.opinions import opinion_rule, sentence_rule
from veracity.check.split import resolve_references, split_claims
from veracity.check.roles import (MAX_CLAIMS_PER_SENTENCE, EXTRACTOR, WORTHINESS, CheckParams,
                                  guard_retry_prompt)
from veracity.pipeline.methods.base import MethodContext
from veracity.pipeline.methods.zofia.keywords import split_sentences
from veracity.pipeline.types import Trace
from veracity.serving.client import usage_scope
from veracity.serving.gate import EXTRACTION, request_priority


@dataclass
class ExtractedClaim:
    id: str  # "<text id>#s<sentence>c<claim>", 1-based: the claim's id in the claims results file
    text: str
    category: str  # factual | opinion | not_a_claim

    @property
    def factual(self) -> bool:
        return self.category == "factual"


@dataclass
class Sentence:
    index: int  # 1-based
    start: int  # character offsets in the text
    end: int
    text: str
    claims: list[ExtractedClaim] = field(default_factory=list)


@dataclass
class Extraction:
    text_id: str
    text: str
    sentences: list[Sentence]
    fallbacks: dict[str, int]  # role -> replies that never validated (the declared fallback was used)
    trace: dict[str, Any]
    # claims the sentence guard (veracity.check.guard) refused even after the one re-ask:
    # {"sentence": n, "claim": text, "reason": why}
    dropped: list[dict[str, Any]] = field(default_factory=list)

    @property
    def claims(self) -> list[ExtractedClaim]:
        return [c for s in self.sentences for c in s.claims]

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.text_id, "text": self.text,
                "sentences": [asdict(s) for s in self.sentences],
                "fallbacks": self.fallbacks, "dropped": self.dropped, "trace": self.trace}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Extraction":
        sentences = [Sentence(s["index"], s["start"], s["end"], s["text"],
                              [ExtractedClaim(**c) for c in s["claims"]]) for s in d["sentences"]]
        return cls(str(d["id"]), d["text"], sentences, dict(d.get("fallbacks") or {}), d.get("trace") or {},
                   list(d.get("dropped") or []))


GUARD_EVENT = "check.claim_outside_sentence"  # claims the guard refused (before the re-ask)
GUARD_DROPPED_EVENT = "check.claims_dropped"  # what the re-ask could not fix: dropped and counted
# no claim of a sentence passed: the sentence itself is checked
GUARD_SENTENCE_EVENT = "check.sentence_as_claim"
# the whole sentence states nothing to check (veracity.check.opinions.sentence_rule): no extractor call
SENTENCE_RULE_EVENT = "check.sentence_rule"
# an extractor reply ended where it began copying another sentence (CopyCut)
CUT_EVENT = "check.reply_cut"


def text_id(text: str) -> str:
    """A text's default id: the first 12 hex digits of its sha1 (as a claim's default id)."""
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]


def sentences_of(text: str) -> list[Sentence]:
    """The text's sentences, numbered from 1, with their character spans (deterministic)."""
    return [Sentence(i, s, e, t) for i, (s, e, t) in enumerate(split_sentences(text), 1)]


async def extract(text: str, llm: Any, *, tid: str | None = None, params: CheckParams | None = None,
                  on_event: Callable[[dict[str, Any]], None] | None = None,
                  on_sentence: Callable[[Sentence], None] | None = None) -> Extraction:
    """Sentences, their atomic claims and each claim's check-worthiness. ``on_event`` hears each role call
    (started / finished / failed) and one ``check.sentence`` event per sentence with its claims;
    ``on_sentence(sentence)`` is called as each sentence's claims are final (in the order they finish), so
    that they can be verified while later sentences are still being extracted."""
    params = params or CheckParams()
    tid = tid or text_id(text)
    trace = Trace(listener=on_event)
    sentences = sentences_of(text)
    t0 = time.perf_counter()
    dropped: list[dict[str, Any]] = []

    async def one(sentence: Sentence) -> None:
        # one context per sentence: each request's seed derives from "<text id>#s<n>", the role and the call's
        # index within the sentence, so it does not depend on how the sentences' calls interleave
        ctx = MethodContext(llm=llm, tools=None, trace=trace, params=params,  # type: ignore[arg-type]
                            seed=getattr(llm, "seed", None), claim_id=f"{tid}#s{sentence.index}")
        ruled = sentence_rule(sentence.text)
        cats: list[str] = []
        # an instruction, advice, the writer on itself: shown, not extracted, not checked
        if ruled is not None:
            trace.event(SENTENCE_RULE_EVENT, sentence=sentence.index, category=ruled[0], why=ruled[1])
            texts, cats = [" ".join(sentence.text.split())], [ruled[0]]
        else:
            texts, lost = await claims_in_sentence(ctx, text, sentence, trace)
            dropped.extend(lost)
        for claim in texts[len(cats):]:
            cat, _why = await worthiness_of(claim, sentence.text, llm, params, ctx=ctx,
                                            trace_info={"sentence": sentence.index, "claim": claim})
            cats.append(cat)
        sentence.claims = [ExtractedClaim(f"{tid}#s{sentence.index}c{j}", c, cat)
                           for j, (c, cat) in enumerate(zip(texts, cats, strict=True), 1)]
        trace.notify("check.sentence", sentence=sentence.index,
                     claims=[asdict(c) for c in sentence.claims])
        if on_sentence is not None:
            on_sentence(sentence)

    trace.notify("check.sentences", id=tid,
                 sentences=[{"index": s.index, "start": s.start, "end": s.end,
                             "text": s.text} for s in sentences])
    # extraction's requests go before verification's waiting beside them in the client (verification waits on
    # the claims extraction gives)
    with usage_scope() as sink, request_priority(EXTRACTION):
        trace.llm_calls = sink
        await share_text_prefix(llm, text, sentences, trace)
        await asyncio.gather(*(one(s) for s in sentences))
    trace.llm_calls = list(sink)
    trace.timings["total_s"] = round(time.perf_counter() - t0, 4)
    fallbacks = {EXTRACTOR.name: 0, WORTHINESS.name: 0}
    for ev in trace.events:
        if ev.get("role") in fallbacks:
            fallbacks[ev["role"]] += 1
    dropped.sort(key=lambda d: d["sentence"])
    return Extraction(tid, text, sentences, fallbacks, trace.to_dict(), dropped)


PREFIX_EVENT = "check.prefix_shared"  # the text's extractor prefix copied into the server's idle slots


async def share_text_prefix(llm: Any, text: str, sentences: list[Sentence], trace: Trace) -> None:
    """Before a text's extractor calls go out together: its prompt prefix (the instructions and the whole
    text, which every sentence's call shares) processed once and copied into the server's idle slots
    (:meth:`~veracity.serving.client.LLMClient.share_prefix`; llama-server only), instead of each of the
    calls processing it anew in an empty slot. Only where two or more sentences go to the extractor."""
    share = getattr(llm, "share_prefix", None)
    asked = [s for s in sentences if sentence_rule(s.text) is None]
    if share is None or len(asked) < 2:
        return
    shared = await share(EXTRACTOR.messages(text=text, sentence=asked[0].text))
    if shared:
        trace.event(PREFIX_EVENT, **shared)


async def worthiness_of(claim: str, sentence: str, llm: Any, params: CheckParams, *,
                        ctx: MethodContext | None = None,
                        claim_id: str = "worthiness", trace_info: dict[str, Any] | None = None) -> tuple[str,
                                                                                                         str]:
    """A claim's check-worthiness (factual / opinion / not_a_claim) and why: the model-free rule of
    :mod:`veracity.check.opinions` first, then ``check.worthiness`` (with ``params.worthiness`` and a model);
    without either, factual."""
    ruled = opinion_rule(claim, sentence)
    if ruled is not None:
        if ctx is not None:
            ctx.trace.event("check.opinion_rule", category=ruled[0], why=ruled[1], **(trace_info or {}))
        return ruled
    if not params.worthiness or llm is None:
        return "factual", "verified (check-worthiness not asked)"
    if ctx is None:
        ctx = MethodContext(llm=llm, tools=None, trace=Trace(), params=params,  # type: ignore[arg-type]
                            seed=getattr(llm, "seed", None), claim_id=claim_id)
    w = await WORTHINESS(ctx, claim=claim, sentence=sentence, trace_info=trace_info or {"claim": claim})
    return w.category, "check.worthiness"


def text_before(text: str, sentence: Sentence) -> str:
    """The text before ``sentence``: its span when it has one, else where its words first occur (a gold
    sentence given without offsets); "" when they do not."""
    if sentence.end > sentence.start:
        return text[:sentence.start]
    at = where(sentence.text, text)
    return text[:at] if at > 0 else ""


def _unique(claims: list[str]) -> list[str]:
    return list(dict.fromkeys(" ".join(c.split()) for c in claims if c.strip()))  # no empty or repeated claim


def complete_claims(reply: str) -> list[str]:
    """The claims of an extractor reply so far (``{"claims": ["A", "B", "C...``) whose closing quote has
    come."""
    at = reply.find("[")
    out: list[str] = []
    if at < 0:
        return out
    decode = json.JSONDecoder().raw_decode
    i, n = at + 1, len(reply)
    while True:
        while i < n and reply[i] in " \t\r\n,":
            i += 1
        if i >= n or reply[i] != '"':
            return out
        try:
            value, i = decode(reply, i)
        except ValueError:  # the string is not closed yet
            return out
        out.append(value)


class CopyCut:
    """An extractor reply's ``cut_when`` (:meth:`~veracity.serving.client.LLMClient.generate`): the reply ends
    at its first claim that is another sentence's altogether (another sentence of the text word for word, or
    without one content word of its own: :func:`~veracity.check.guard.is_another_sentences`), kept as the
    last claim so that the guard refuses it and the re-ask names it. A small model that starts copying the
    text goes on through its other sentences: on the 150-word text (BENCHMARKS.md, issue 44 point 5) two
    replies copied five and seven sentences, about 300 of the extractor's 655 generated tokens, every one
    then dropped by the guard."""

    def __init__(self, sentence: str, text: str):
        self.sentence, self.text = sentence, text
        self.seen = 0  # complete claims already read
        self.at: str | None = None  # the claim the reply was cut after

    def __call__(self, reply: str) -> str | None:
        claims = complete_claims(reply)
        new, self.seen = claims[self.seen:], len(claims)
        for k, claim in enumerate(new):
            if is_another_sentences(check_claim(claim, self.sentence, self.text)):
                self.at = claim
                return json.dumps({"claims": claims[:len(claims) - len(new) + k + 1]})
        return None


async def claims_in_sentence(ctx: MethodContext, text: str, sentence: Sentence,
                              trace: Trace) -> tuple[list[str], list[dict[str, Any]]]:
    """The extractor's claims for ``sentence`` that pass the sentence guard; the ones that fail are re-asked
    once (the failures named, in the same conversation), and whatever still fails is dropped (returned as
    ``{"sentence", "claim", "reason"}``). A claim that starts with a pronoun, or with a short description of
    something the text named before ("The race was ..."), is re-asked with the others and kept when the
    re-ask gives no claim that replaces it (a pronoun then named from the text where its subject agrees,
    :mod:`veracity.check.split`, which also splits a claim left as its sentence); near-duplicates are dropped
    and counted. A sentence left with no
    claim is checked as itself. A sentence that as a whole states nothing to check
    (:func:`~veracity.check.opinions.sentence_rule`) gets no claim and no model call: ``([], [])``."""
    ruled = sentence_rule(sentence.text)
    if ruled is not None:
        trace.event(SENTENCE_RULE_EVENT, sentence=sentence.index, category=ruled[0], why=ruled[1])
        return [], []
    info = {"sentence": sentence.index}
    before = text_before(text, sentence)
    sent = EXTRACTOR.messages(text=text, sentence=sentence.text)
    cut = CopyCut(sentence.text, text)
    first = await EXTRACTOR(ctx, messages=sent, trace_info=info, text=text, sentence=sentence.text,
                            cut_when=cut)
    if cut.at is not None:
        trace.event(CUT_EVENT, sentence=sentence.index, attempt=1, at=cut.at)
    claims = _unique(list(first.claims))
    verdicts = {c: check_claim(c, sentence.text, text) for c in claims}
    kept = [c for c in claims if verdicts[c].ok]
    failing = {c: verdicts[c].reason for c in claims if not verdicts[c].ok}
    # not decontextualised: re-asked with the others, but not dropped (a claim with "It" is still the
    # sentence's)
    unresolved = {c: f"starts with {w!r}: write the name it refers to in the text"
                  for c in kept if (w := unresolved_reference(c))}
    unresolved.update({c: f"starts with {d!r}: write the full name the text gives it before"
                       for c in kept if c not in unresolved and (d := unresolved_description(c, before))})
    lost: list[dict[str, Any]] = []
    if failing or unresolved:
        trace.event(GUARD_EVENT, sentence=sentence.index, attempt=1,
                    claims=[{"claim": c, "reason": r} for c, r in {**failing, **unresolved}.items()])
        again = [*sent, {"role": "assistant", "content": first.model_dump_json()},
                 {"role": "user", "content": guard_retry_prompt({**failing, **unresolved})}]
        fell_back = sum(1 for e in trace.events if e.get("kind") == EXTRACTOR.fallback.event)  # type: ignore[union-attr]
        cut = CopyCut(sentence.text, text)
        second = await EXTRACTOR(ctx, messages=again, trace_info={**info, "retry": "sentence_guard"},
                                 text=text, sentence=sentence.text, cut_when=cut)
        if cut.at is not None:
            trace.event(CUT_EVENT, sentence=sentence.index, attempt=2, at=cut.at)
        if sum(1 for e in trace.events if e.get("kind") == EXTRACTOR.fallback.event) == fell_back:  # type: ignore[union-attr]
            for c in _unique(list(second.claims)):
                v = check_claim(c, sentence.text, text)
                if v.ok and c not in kept:
                    old = next((u for u in unresolved if u in kept and replaces(c, u)), None)
                    if old is not None:
                        kept[kept.index(old)] = c  # the same claim with its referent named, in its place
                    else:
                        kept.append(c)
                elif not v.ok and c not in failing:
                    lost.append({"sentence": sentence.index, "claim": c, "reason": v.reason})
        lost = [{"sentence": sentence.index, "claim": c, "reason": r} for c, r in failing.items()] + lost
    # a pronoun the re-ask left named from the text, and a claim left as its sentence (a list's number, a
    # citation, "While A, B") split, both without a model
    kept = split_claims(resolve_references(kept, sentence.text, text, before), sentence.text, text)
    kept, repeated = without_near_duplicates(kept)
    lost += [{"sentence": sentence.index, "claim": c, "reason": "repeats another claim of the sentence"}
             for c in repeated]
    # nothing of the sentence left: the sentence itself is checked (as the extractor's fallback does), split
    # as a claim would be
    if not kept:
        kept = split_claims([" ".join(sentence.text.split())], sentence.text, text)
        trace.event(GUARD_SENTENCE_EVENT, sentence=sentence.index)
    # the splitter can give a sentence more claims than the extractor may (a list split per item): the ones
    # past the limit are dropped and counted like the guard's, never lost silently
    kept, over = kept[:MAX_CLAIMS_PER_SENTENCE], kept[MAX_CLAIMS_PER_SENTENCE:]
    lost += [{"sentence": sentence.index, "claim": c,
              "reason": f"over the limit of {MAX_CLAIMS_PER_SENTENCE} claims a sentence"} for c in over]
    if lost or unresolved:
        trace.event(GUARD_DROPPED_EVENT, sentence=sentence.index, dropped=[d["claim"] for d in lost],
                    kept=kept)
    return kept, lost
