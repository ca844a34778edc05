"""Stand-ins for unit tests: a scripted LLM with the LLMClient contract and an in-memory searcher.

``ScriptedLLM({"emulate.classifier": [Classification(...)], "mermaid.executor": fn})`` answers each
role from its queue (FIFO; an entry may be a function of the messages) or from a function of the
messages. It refuses unscripted roles and exhausted queues, checks that every reply is an instance of
the output model the caller asked for, records every call, and reports usage to the current
``usage_scope()`` exactly like the real client, so traces get their llm_calls.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

from veracity.serving.client import UsageRecord, _current_sink


@dataclass
class Call:
    role: str
    messages: list[dict[str, str]]
    output_model: type
    reply: Any
    max_tokens: int | None = None

    @property
    def prompt(self) -> str:
        return "\n".join(m["content"] for m in self.messages)


class ScriptedLLM:
    model = "scripted-llm"

    def __init__(self, script: dict[str, Any] | None = None, *, fail: Callable[[str, list], None] | None = None):
        self.script: dict[str, Any] = {}
        for role, entry in (script or {}).items():
            self.script[role] = deque(entry) if isinstance(entry, (list, tuple)) else entry
        self.fail = fail  # called before each reply: may raise (e.g. EndpointError) to simulate faults
        self.calls: list[Call] = []

    async def generate(self, messages, output_model, *, role, temperature=None, max_tokens=None):
        await asyncio.sleep(0)  # let other claims run, like a real network call
        if self.fail is not None:
            self.fail(role, messages)
        if role not in self.script:
            raise AssertionError(f"ScriptedLLM: role {role!r} was not scripted (scripted: {sorted(self.script)})")
        entry = self.script[role]
        if isinstance(entry, deque):
            if not entry:
                raise AssertionError(f"ScriptedLLM: script for {role!r} is exhausted")
            reply = entry.popleft()
            if callable(reply) and not hasattr(reply, "model_dump"):
                reply = reply(messages)
        else:
            reply = entry(messages)
        if not isinstance(reply, output_model) and isinstance(reply, output_model.__mro__[1]):
            # a method narrowed a role's model per call (e.g. citations restricted to the shown ids):
            # the reply must validate against the narrowed schema, as constrained decoding would ensure
            reply = output_model.model_validate(reply.model_dump())
        if not isinstance(reply, output_model):
            raise TypeError(f"ScriptedLLM: {role} asked for {output_model.__name__}, script gave {type(reply).__name__}")
        self.calls.append(Call(role, list(messages), output_model, reply, max_tokens))
        prompt_tokens = sum(len(m["content"].split()) for m in messages)
        rec = UsageRecord(role=role, model=self.model, prompt_tokens=prompt_tokens,
                          completion_tokens=len(reply.model_dump_json().split()), latency_s=0.0)
        sink = _current_sink.get()
        if sink is not None:
            sink.append(rec)
        return reply

    def roles(self) -> list[str]:
        return [c.role for c in self.calls]

    def count(self, role: str) -> int:
        return sum(1 for c in self.calls if c.role == role)

    def of(self, role: str) -> list[Call]:
        return [c for c in self.calls if c.role == role]


@dataclass(frozen=True)
class Hit:
    passage_id: str
    title: str
    text: str
    score: float


@dataclass
class FakeSearcher:
    """The Searcher contract over a dict ``title -> [passage texts]``.

    ``search`` ranks passages by word overlap with the query; ``scripted`` maps a query to the exact
    list of titles to return (their first passages), for tests that need a fixed result list.
    """

    articles: dict[str, list[str]]
    scripted: dict[str, list[str]] = field(default_factory=dict)
    manifest: dict = field(default_factory=lambda: {"name": "fake-index"})
    queries: list[str] = field(default_factory=list)
    opened: list[str] = field(default_factory=list)

    def _passages(self, title: str) -> list[Hit]:
        return [Hit(f"{title}#{i}", title, text, 1.0) for i, text in enumerate(self.articles.get(title, []))]

    def search(self, query: str, k: int = 10, mode: str = "hybrid", exclude_titles=(), exclude_patterns=()) -> list[Hit]:
        self.queries.append(query)
        if query in self.scripted:
            return [self._passages(t)[0] for t in self.scripted[query] if t not in exclude_titles][:k]
        words = set(query.lower().split())
        scored = []
        for title in self.articles:
            if title in exclude_titles:
                continue
            for hit in self._passages(title):
                overlap = len(words & set(f"{hit.title} {hit.text}".lower().split()))
                if overlap:
                    scored.append(Hit(hit.passage_id, hit.title, hit.text, float(overlap)))
        scored.sort(key=lambda h: -h.score)
        return scored[:k]

    def open_page(self, title: str) -> list[Hit]:
        self.opened.append(title)
        return self._passages(title)
