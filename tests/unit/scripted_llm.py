"""The one stand-in LLM for unit tests, and an in-memory searcher.

:class:`ScriptedLLM` implements the contract of :class:`veracity.serving.client.LLMClient`:
``await generate(messages, OutputModel, *, role, temperature=None, max_tokens=None, seed=None)`` returns an
instance of ``OutputModel``, a reply that does not validate raises ``LLMOutputError``, and every call
records a :class:`UsageRecord` in ``llm.usage`` and in the current ``usage_scope()`` (so traces get
their llm_calls), exactly like the real client.

The script maps a role to:

- a list of replies, used in order (FIFO). When it runs out the call fails, unless ``repeat_last=True``
  (then the last reply repeats). An entry may be a callable of the messages.
- a callable ``(messages) -> reply``, or ``(messages, output_model, call_index) -> reply``.

A reply is an instance of the output model (or of the model a method narrowed per call, re-validated
against the narrowed schema as constrained decoding would ensure), a ``dict`` validated against the
output model (``LLMOutputError`` when it does not fit), or an exception instance, which is raised.
Unscripted roles fail the test. ``fail(role, messages)`` runs before each reply and may raise (e.g.
``EndpointError``) to simulate faults; ``delay`` (seconds, or a callable of the :class:`Call`) makes
calls overlap. Every call is in ``calls`` with its start / end sequence numbers, so tests can check
ordering and concurrency.
"""

from __future__ import annotations

import asyncio
import inspect
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

from pydantic import BaseModel, ValidationError

from veracity.errors import LLMOutputError
from veracity.serving.client import UsageRecord, record_usage


@dataclass
class Call:
    role: str
    messages: list[dict[str, str]]
    output_model: type
    reply: Any = None
    max_tokens: int | None = None
    temperature: float | None = None
    seed: int | None = None
    start_seq: int = 0
    end_seq: int | None = None

    @property
    def prompt(self) -> str:
        return "\n".join(m["content"] for m in self.messages)


def _arity(fn: Callable) -> int:
    try:
        return len([p for p in inspect.signature(fn).parameters.values()
                    if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)])
    except (TypeError, ValueError):
        return 1


class ScriptedLLM:
    model = "scripted-llm"
    base_url = "scripted://"
    temperature = 0.0
    seed = 0

    def __init__(self, script: dict[str, Any] | None = None, *, fail: Callable[[str, list],
                                                                               None] | None = None,
                 repeat_last: bool = False, delay: float | Callable[[Call], float] = 0.0,
                 probs: Callable[[str, Any], dict[str, float] | None] | None = None, streams: bool = True):
        self.script: dict[str, Any] = {}
        for role, entry in (script or {}).items():
            self.script[role] = deque(entry) if isinstance(entry, (list, tuple)) else entry
        self.fail = fail
        self.repeat_last = repeat_last
        self.delay = delay
        # a deciding role's call (confidence_field): probs(role, reply) -> its label distribution, recorded as
        # a
        # real endpoint's would be (veracity.serving.confidence.LabelProbs.to_dict); None: no logprobs
        self.probs = probs
        # streams=True: a reply asked for with cut_when is cut as the client cuts a streamed one
        # (llama-server); False: cut_when is ignored, as on an engine whose replies are read whole (vLLM)
        self.streams = streams
        self.cuts: list[tuple[str, str, str]] = []  # (role, the reply when it was cut, what was kept)
        self.calls: list[Call] = []
        self.usage: list[UsageRecord] = []
        self._seq = 0
        self._per_role: dict[str, int] = {}

    def _next(self) -> int:
        self._seq += 1
        return self._seq

    def _reply(self, role: str, messages: list, output_model: type, index: int) -> Any:
        if role not in self.script:
            raise AssertionError(f"ScriptedLLM: role {role!r} was not scripted (scripted: "
                                 f"{sorted(self.script)})")
        entry = self.script[role]
        if isinstance(entry, deque):
            if not entry:
                raise AssertionError(f"ScriptedLLM: script for {role!r} is exhausted")
            reply = entry[0] if (self.repeat_last and len(entry) == 1) else entry.popleft()
            if callable(reply) and not isinstance(reply, (BaseModel, BaseException)) and not isinstance(reply,
                                                                                                        type):
                reply = reply(messages)
            return reply
        return entry(messages, output_model, index) if _arity(entry) >= 3 else entry(messages)

    async def generate(self, messages, output_model, *, role, temperature=None, max_tokens=None, seed=None,
                       usage_sink=None, confidence_field=None, cut_when=None):
        call = Call(role, list(messages), output_model, None, max_tokens, temperature, seed, self._next())
        self.calls.append(call)
        index = self._per_role.get(role, 0)
        self._per_role[role] = index + 1
        d = self.delay(call) if callable(self.delay) else self.delay
        await asyncio.sleep(d or 0)  # let other claims run, like a real network call
        try:
            if self.fail is not None:
                self.fail(role, messages)
            reply = self._reply(role, messages, output_model, index)
            if isinstance(reply, BaseException):
                raise reply
            try:
                if isinstance(reply, dict):
                    reply = output_model.model_validate(reply)
                elif not isinstance(reply, output_model) and (
                        isinstance(reply, output_model.__mro__[1])
                        or any(isinstance(reply, base) for base in output_model.__mro__[2:]
                               if base.__name__ == output_model.__name__)):
                    # a method narrowed a role's model per call (e.g. citations restricted to the shown
                    # ids, labels to the binary space; a narrowing of a narrowing keeps the name): the
                    # reply must validate against the narrowed schema
                    reply = output_model.model_validate(reply.model_dump())
            except ValidationError as exc:
                self._record(role, messages, "{}", usage_sink)
                raise LLMOutputError(f"{role}: the reply did not validate against {output_model.__name__}: "
                                     f"{exc}",
                                     role=role) from exc
            if not isinstance(reply, output_model):
                raise TypeError(f"ScriptedLLM: {role} asked for {output_model.__name__}, script gave "
                                f"{type(reply).__name__}")
            if cut_when is not None and self.streams:
                # as the client streams a prefilled reply: the reply handed over as it grows, a character at
                # a time, and cut where cut_when says
                raw = reply.model_dump_json()
                for end in range(1, len(raw) + 1):
                    cut = cut_when(raw[:end])
                    if cut is not None:
                        reply = output_model.model_validate_json(cut)
                        self.cuts.append((role, raw[:end], cut))
                        break
            call.reply = reply
            self._record(role, messages, reply.model_dump_json(), usage_sink)
            if confidence_field and self.probs is not None:
                dist = self.probs(role, reply)
                if dist is not None:
                    self.usage[-1].label_probs = {"field": confidence_field, "probs": dist, "mass": 1.0,
                                                  "chosen": getattr(reply, confidence_field)}
            return reply
        finally:
            call.end_seq = self._next()

    def _record(self, role: str, messages: list, content: str, sink: list | None = None) -> None:
        rec = UsageRecord(role=role, model=self.model,
                          prompt_tokens=sum(len(m["content"].split()) for m in messages),
                          completion_tokens=len(content.split()), latency_s=0.0)
        self.usage.append(rec)
        record_usage(rec, sink)

    # -- inspection ------------------------------------------------------------------------------------
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
    score: float = 1.0


@dataclass
class FakeSearcher:
    """The retriever contract over a dict ``title -> [passage texts]``.

    ``search`` ranks passages by shared lower-case words with the query (``strip_punctuation``: commas
    and periods ignored);
    ``scripted`` maps a query to the exact list of titles to return (their first passages), for tests
    that need a fixed result list. Every query is recorded in ``queries`` and ``calls`` (with k and the
    excluded titles), every opened title in ``opened``.
    """

    articles: dict[str, list[str]]
    scripted: dict[str, list[str]] = field(default_factory=dict)
    manifest: dict = field(default_factory=lambda: {"name": "fake-index"})
    queries: list[str] = field(default_factory=list)
    calls: list[tuple[str, int, tuple]] = field(default_factory=list)
    opened: list[str] = field(default_factory=list)
    strip_punctuation: bool = False

    def _passages(self, title: str) -> list[Hit]:
        return [Hit(f"{title}#{i}", title, text, 1.0) for i, text in enumerate(self.articles.get(title, []))]

    def _words(self, text: str) -> set[str]:
        text = text.lower()
        if self.strip_punctuation:
            text = text.replace(",", " ").replace(".", " ")
        return set(text.split())

    def search(self, query: str, k: int = 10, mode: str = "hybrid", exclude_titles=(),
               exclude_patterns=()) -> list[Hit]:
        self.queries.append(query)
        self.calls.append((query, k, tuple(exclude_titles)))
        if query in self.scripted:
            return [self._passages(t)[0] for t in self.scripted[query] if t not in exclude_titles][:k]
        words = set(query.lower().split())
        scored = []
        for title in self.articles:
            if title in exclude_titles:
                continue
            for hit in self._passages(title):
                overlap = len(words & self._words(f"{hit.title} {hit.text}"))
                if overlap:
                    scored.append(Hit(hit.passage_id, hit.title, hit.text, float(overlap)))
        scored.sort(key=lambda h: -h.score)
        return scored[:k]

    def open_page(self, title: str) -> list[Hit]:
        self.opened.append(title)
        return self._passages(title)


def keep_every_passage(messages, output_model, index):
    """A ``rag.select`` reply that keeps every passage it was shown (the ids its narrowed schema enumerates):
    for tests of the plumbing around ``rag``, whose default (``select=auto``) selects on index passages."""
    items = output_model.model_json_schema()["properties"]["relevant_passages"]["items"]
    ids = items.get("enum") or [items["const"]]
    return output_model.model_validate({"relevant_passages": ids})


async def run_claims(claims: Any, method: Any, llm: Any, searcher: Any, out: Any, *, concurrency: int = 4,
                     params: dict[str, Any] | None = None, state: Any = None, state_dir: Any = None,
                     label_space: Any = None, retriever_for: Any = None, evidence: str | None = None,
                     **batch: Any) -> Any:
    """A batch the way every caller runs one (a :class:`VerifierConfig`, its :class:`Engine`, then
    :func:`veracity.pipeline.batch.run_batch`) from the parts a unit test holds: a method name or a
    :class:`MethodSpec` of the test's own (registered for the call), the stand-in LLM, an in-memory searcher,
    a run state the test opened (left open). ``batch`` goes to ``run_batch`` (progress, on_result, ...)."""
    from veracity.pipeline.batch import run_batch
    from veracity.pipeline.config import VerifierConfig
    from veracity.pipeline.engine import Engine
    from veracity.pipeline.methods import METHODS

    spec = METHODS[method] if isinstance(method, str) else method
    added = METHODS.get(spec.name) is not spec
    previous = METHODS.get(spec.name)
    METHODS[spec.name] = spec
    try:
        config = VerifierConfig.of(
            method=spec.name, params=dict(params or {}), index=searcher, state_dir=state_dir,
            labels=getattr(label_space, "name", label_space) or "3way",
            evidence=evidence or ("custom" if retriever_for is not None else "open"))
        engine = Engine(config, llm=llm, retriever_for=retriever_for, state=state)
        try:
            return await run_batch(engine, list(claims), out, concurrency=concurrency,
                                   llm_concurrency=config.execution.llm_concurrency, **batch)
        finally:
            engine.close()
    finally:
        if added:
            if previous is None:
                METHODS.pop(spec.name, None)
            else:
                METHODS[spec.name] = previous


def script_every_verifier(monkeypatch, llm) -> None:
    """Every ``Verifier`` built during the test (``Verifier(**kw)`` and ``Verifier.from_config`` both go
    through ``_build``) talks to ``llm``: for commands run in-process through the CLI."""
    from veracity.pipeline import api

    real = api.Verifier._build

    def with_llm(self, *a, **kw):
        kw["llm"] = llm
        real(self, *a, **kw)

    monkeypatch.setattr(api.Verifier, "_build", with_llm)
