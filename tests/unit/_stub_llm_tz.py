"""A scripted stand-in LLM and searcher for the Trification / ZoFia unit tests.

``StubLLM(handlers)`` implements the project's LLM contract ``await generate(messages, OutputModel, *,
role, temperature=None, max_tokens=None)``. ``handlers`` maps a role to either a callable
``(messages, OutputModel, call_index) -> OutputModel | dict`` or a list of replies used in order (the last
one repeats). Every call is recorded in ``calls`` with its start / end sequence numbers, so tests can
check ordering and concurrency. ``delay`` (seconds, or a callable of the call) lets calls overlap.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Callable

from pydantic import BaseModel, ValidationError

from veracity.errors import LLMOutputError


@dataclass
class StubCall:
    role: str
    messages: list[dict[str, str]]
    output_model: type
    max_tokens: int | None
    start_seq: int
    end_seq: int | None = None
    reply: Any = None


class StubLLM:
    def __init__(self, handlers: dict[str, Any], *, delay: float | Callable[[StubCall], float] = 0.0):
        self.handlers = handlers
        self.delay = delay
        self.calls: list[StubCall] = []
        self._seq = 0
        self._per_role: dict[str, int] = {}

    def _next(self) -> int:
        self._seq += 1
        return self._seq

    def roles(self) -> list[str]:
        return [c.role for c in self.calls]

    async def generate(self, messages, output_model, *, role, temperature=None, max_tokens=None):
        call = StubCall(role, messages, output_model, max_tokens, self._next())
        self.calls.append(call)
        if role not in self.handlers:
            raise AssertionError(f"unexpected role {role}")
        i = self._per_role.get(role, 0)
        self._per_role[role] = i + 1
        h = self.handlers[role]
        if callable(h):
            reply = h(messages, output_model, i)
        else:
            reply = h[min(i, len(h) - 1)]
        d = self.delay(call) if callable(self.delay) else self.delay
        if d:
            await asyncio.sleep(d)
        else:
            await asyncio.sleep(0)
        if isinstance(reply, Exception):
            call.end_seq = self._next()
            raise reply
        try:  # like the real client: a reply that breaks the schema is an LLMOutputError
            value = reply if isinstance(reply, BaseModel) else output_model.model_validate(reply)
        except ValidationError as exc:
            call.end_seq = self._next()
            raise LLMOutputError(f"{role}: the reply did not validate: {exc}", role=role) from exc
        assert isinstance(value, output_model), f"{role}: handler returned {type(value).__name__}"
        call.reply = value
        call.end_seq = self._next()
        return value


@dataclass(frozen=True)
class StubHit:
    passage_id: str
    title: str
    text: str
    score: float = 1.0


@dataclass
class StubSearcher:
    """An in-memory 'index': pages {title: [passage texts]}; search ranks by shared lower-case words."""

    pages: dict[str, list[str]] = field(default_factory=dict)
    queries: list[tuple[str, int, tuple]] = field(default_factory=list)

    def _all(self) -> list[StubHit]:
        return [StubHit(f"{t}#{i}", t, x) for t, xs in self.pages.items() for i, x in enumerate(xs)]

    def search(self, query: str, k: int = 10, mode: str = "hybrid", exclude_titles=()) -> list[StubHit]:
        self.queries.append((query, k, tuple(exclude_titles)))
        q = set(query.lower().split())
        scored = []
        for h in self._all():
            if h.title in exclude_titles:
                continue
            s = len(q & set(f"{h.title} {h.text}".lower().replace(",", " ").replace(".", " ").split()))
            if s:
                scored.append(StubHit(h.passage_id, h.title, h.text, float(s)))
        scored.sort(key=lambda h: -h.score)
        return scored[:k]

    def open_page(self, title: str) -> list[StubHit]:
        return [StubHit(f"{title}#{i}", title, x) for i, x in enumerate(self.pages.get(title, []))]
