"""The data that flows through every method: Claim -> method -> Verdict (+ Trace)."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any, Callable


class Label(str, Enum):
    SUPPORTED = "SUPPORTED"
    REFUTED = "REFUTED"
    NOT_ENOUGH_INFO = "NOT_ENOUGH_INFO"


MAX_CLAIM_CHARS = 20_000  # news articles (ZoFia) included; longer inputs are refused with a clear error


@dataclass
class Claim:
    id: str
    text: str
    date: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class Evidence:
    passage_id: str
    title: str
    text: str
    score: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ToolCall:
    tool: str  # "search" | "open_page" | "memory"
    query: str
    hits: list[str]  # passage ids returned
    latency_s: float
    role: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Trace:
    """Everything a method did for one claim.

    ``listener`` (optional, never serialised) is called with one dict per step as it happens: every
    :meth:`event`, each role call started / finished / failed (from :class:`~veracity.pipeline.roles.Role`)
    and each tool call with its hits (from :class:`~veracity.pipeline.tools.Tools`). The web app streams
    these as server-sent events; a listener must not block (e.g. ``queue.put_nowait``)."""

    llm_calls: list[Any] = field(default_factory=list)  # veracity.serving.client.UsageRecord
    tool_calls: list[ToolCall] = field(default_factory=list)
    memory_hits: list[dict[str, Any]] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    # method-specific steps (ReAct steps, graph, ...)
    events: list[dict[str, Any]] = field(default_factory=list)
    started_at: float = field(default_factory=time.time)
    listener: Callable[[dict[str, Any]], None] | None = field(default=None, repr=False, compare=False)
    _steps: int = field(default=0, repr=False, compare=False)

    def event(self, kind: str, **data: Any) -> None:
        self.events.append({"kind": kind, **data})
        self.notify(kind, **data)

    def notify(self, kind: str, **data: Any) -> None:
        """Tell the listener (if any) about one step; nothing is recorded in the trace itself."""
        if self.listener is not None:
            self.listener({"kind": kind, "t": round(time.time() - self.started_at, 4), **data})

    def next_step(self) -> int:
        """A number for one role call, pairing its started / finished notifications."""
        self._steps += 1
        return self._steps

    def to_dict(self) -> dict[str, Any]:
        calls = [c.to_dict() if hasattr(c, "to_dict") else c for c in self.llm_calls]
        return {
            "llm_calls": calls,
            "tool_calls": [t.to_dict() for t in self.tool_calls],
            "memory_hits": self.memory_hits,
            "timings": self.timings,
            "events": self.events,
            "summary": self.summary(),
        }

    def summary(self) -> dict[str, Any]:
        calls = [c.to_dict() if hasattr(c, "to_dict") else c for c in self.llm_calls]
        return {
            "llm_calls": len(calls),
            "prompt_tokens": sum(c["prompt_tokens"] for c in calls),
            "completion_tokens": sum(c["completion_tokens"] for c in calls),
            "tool_calls": len(self.tool_calls),
            "memory_hits": len(self.memory_hits),
        }


@dataclass
class Verdict:
    label: Label
    explanation: str
    evidence: list[Evidence] = field(default_factory=list)
    trace: Trace = field(default_factory=Trace)
    method: str = ""
    # with --param quotes=show|check (veracity.pipeline.quotes): the quotes the verdict rests on, and
    # "grounded" / "ungrounded"; None when the method did not quote (the result has neither key then)
    quotes: list[Any] | None = None  # veracity.pipeline.quotes.Quote
    grounding: str | None = None
    # the verdict's own probability for its label (veracity.pipeline.confidence): from the deciding call's
    # token logprobs, through the calibration map when one is applied; None when the engine gave none
    confidence: float | None = None
    label_probs: dict[str, float] | None = None  # the distribution over the run's labels it comes from
    raw_confidence: float | None = None  # before the calibration map (set only when a map was applied)
    raw_label_probs: dict[str, float] | None = None
    # --min-confidence: below it the verdict is NOT_ENOUGH_INFO, marked abstained, with the label it would
    # give
    abstained: bool = False
    abstained_label: Label | None = None

    def to_dict(self, claim: Claim | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if claim is not None:
            out.update({"id": claim.id, "claim": claim.text})
            # a benchmark's claim: its gold label beside the verdict
            if claim.meta.get("gold_label") is not None:
                out["gold"] = claim.meta["gold_label"]
        out.update(
            {
                "label": self.label.value,
                "explanation": self.explanation,
                "method": self.method,
                "evidence": [e.to_dict() for e in self.evidence],
            }
        )
        if self.quotes is not None:
            out["quotes"] = [q.to_dict() for q in self.quotes]
            out["grounding"] = self.grounding
            if claim is not None:  # do the quotes mention the claim's subject and key terms?
                from veracity.pipeline.words import quote_terms

                out["quote_terms"] = quote_terms(claim.text, self.quotes)
        out["confidence"] = self.confidence
        if self.label_probs is not None:
            out["label_probs"] = self.label_probs
        if self.raw_label_probs is not None:
            out["raw_confidence"] = self.raw_confidence
            out["raw_label_probs"] = self.raw_label_probs
        if self.abstained:
            out["abstained"] = True
            out["abstained_label"] = self.abstained_label.value if self.abstained_label else None
        out["trace"] = self.trace.to_dict()
        return out
