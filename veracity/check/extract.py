"""Text -> sentences -> atomic claims -> check-worthiness: the check stage before verification.

Sentences come from deterministic code (ZoFia's sentence splitter, :func:`~veracity.pipeline.methods.zofia.
keywords.split_sentences`: character spans, abbreviations and initials kept inside a sentence), never from
the model. Then one ``check.extractor`` call per sentence and one ``check.worthiness`` call per claim
(:mod:`veracity.check.roles`), all of a text's sentences in flight together. The result, an
:class:`Extraction`, is plain JSON (stored before any claim is verified, so a killed batch never extracts a
text twice) with its trace (every LLM call, and the fallbacks taken, counted in ``fallbacks``).
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from veracity.check.roles import EXTRACTOR, WORTHINESS, CheckParams
from veracity.pipeline.methods.base import MethodContext
from veracity.pipeline.methods.zofia.keywords import split_sentences
from veracity.pipeline.types import Trace
from veracity.serving.client import usage_scope


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

    @property
    def claims(self) -> list[ExtractedClaim]:
        return [c for s in self.sentences for c in s.claims]

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.text_id, "text": self.text,
                "sentences": [asdict(s) for s in self.sentences],
                "fallbacks": self.fallbacks, "trace": self.trace}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Extraction":
        sentences = [Sentence(s["index"], s["start"], s["end"], s["text"],
                              [ExtractedClaim(**c) for c in s["claims"]]) for s in d["sentences"]]
        return cls(str(d["id"]), d["text"], sentences, dict(d.get("fallbacks") or {}), d.get("trace") or {})


def text_id(text: str) -> str:
    """A text's default id: the first 12 hex digits of its sha1 (as a claim's default id)."""
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]


def sentences_of(text: str) -> list[Sentence]:
    """The text's sentences, numbered from 1, with their character spans (deterministic)."""
    return [Sentence(i, s, e, t) for i, (s, e, t) in enumerate(split_sentences(text), 1)]


async def extract(text: str, llm: Any, *, tid: str | None = None, params: CheckParams | None = None,
                  on_event: Callable[[dict[str, Any]], None] | None = None) -> Extraction:
    """Sentences, their atomic claims and each claim's check-worthiness. ``on_event`` hears each role call
    (started / finished / failed) and one ``check.sentence`` event per sentence with its claims."""
    params = params or CheckParams()
    tid = tid or text_id(text)
    trace = Trace(listener=on_event)
    sentences = sentences_of(text)
    t0 = time.perf_counter()

    async def one(sentence: Sentence) -> None:
        # one context per sentence: each request's seed derives from "<text id>#s<n>", the role and the call's
        # index within the sentence, so it does not depend on how the sentences' calls interleave
        ctx = MethodContext(llm=llm, tools=None, trace=trace, params=params,  # type: ignore[arg-type]
                            seed=getattr(llm, "seed", None), claim_id=f"{tid}#s{sentence.index}")
        out = await EXTRACTOR(ctx, text=text, sentence=sentence.text,
                              trace_info={"sentence": sentence.index})
        texts = list(dict.fromkeys(" ".join(c.split()) for c in out.claims if c.strip()))  # no empty or repeated claim
        cats: list[str] = []
        for claim in texts:
            if params.worthiness:
                w = await WORTHINESS(ctx, claim=claim, trace_info={"sentence": sentence.index, "claim": claim})
                cats.append(w.category)
            else:
                cats.append("factual")
        sentence.claims = [ExtractedClaim(f"{tid}#s{sentence.index}c{j}", c, cat)
                           for j, (c, cat) in enumerate(zip(texts, cats, strict=True), 1)]
        trace.notify("check.sentence", sentence=sentence.index,
                     claims=[asdict(c) for c in sentence.claims])

    trace.notify("check.sentences", id=tid,
                 sentences=[{"index": s.index, "start": s.start, "end": s.end, "text": s.text} for s in sentences])
    with usage_scope() as sink:
        trace.llm_calls = sink
        await asyncio.gather(*(one(s) for s in sentences))
    trace.llm_calls = list(sink)
    trace.timings["total_s"] = round(time.perf_counter() - t0, 4)
    fallbacks = {EXTRACTOR.name: 0, WORTHINESS.name: 0}
    for ev in trace.events:
        if ev.get("role") in fallbacks:
            fallbacks[ev["role"]] += 1
    return Extraction(tid, text, sentences, fallbacks, trace.to_dict())
