"""The local backend: ``concurrency`` claims in flight in this process, each result handed to the sink as it
finishes. A claim whose method fails (e.g. the model's reply never validates) is listed as failed and not
written (a rerun retries it); an ``EndpointError`` or an ``OutputError`` stops the run at once, in-flight
claims dropped, and is raised."""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any, Callable, Iterable

from veracity.errors import EndpointError, OutputError
from veracity.pipeline.engine import Engine
from veracity.pipeline.results import ResultSink, RunStats, ServedModel, claim_failure
from veracity.pipeline.types import Claim, Verdict


Listener = Callable[[Claim], Callable[[dict[str, Any]], None] | None]  # a claim's on_event, or None


class ClaimFeed:
    """Claims that arrive while :func:`verify_each`'s workers run (``veracity check`` verifies a sentence's
    claims while later sentences are still being extracted): :meth:`put` adds claims at the end, in order;
    :meth:`close` says no more will come. A worker waiting on an empty, open feed waits; on a closed one it
    stops."""

    def __init__(self) -> None:
        self._items: deque[Claim] = deque()
        self._closed = False
        self._wake = asyncio.Event()

    def put(self, claims: Iterable[Claim]) -> None:
        if self._closed:
            raise RuntimeError("claims put into a closed feed")
        self._items.extend(claims)
        self._wake.set()

    def close(self) -> None:
        self._closed = True
        self._wake.set()

    async def next(self) -> Claim | None:
        """The next claim in order, waiting while the feed is empty and open; None once it is closed and
        empty."""
        while True:
            if self._items:
                return self._items.popleft()
            if self._closed:
                return None
            self._wake.clear()
            await self._wake.wait()


async def verify_each(engine: Engine, llm: Any, claims: Iterable[Claim] | ClaimFeed, concurrency: int, *,
                      accept: Callable[[Claim, Verdict], None], reject: Callable[[Claim, str], None],
                      listener: Listener | None = None) -> None:
    """THE worker loop: ``concurrency`` workers take ``claims`` in order and run each on ``engine`` with the
    open client ``llm``; ``accept(claim, verdict)`` gets each verdict, ``reject(claim, why)`` each claim whose
    method failed (the others go on). An ``EndpointError`` (or an ``OutputError`` from ``accept``) stops every
    worker at once, in-flight claims dropped, and is raised. ``listener(claim)`` may give a claim's
    ``on_event`` (its trace's steps as they happen). ``claims`` may be a :class:`ClaimFeed` still being
    filled: then ``concurrency`` workers wait for its claims until it is closed."""
    feed = claims if isinstance(claims, ClaimFeed) else None
    queue: deque[Claim] = deque() if feed is not None else deque(claims)  # type: ignore[arg-type]
    stop: list[EndpointError | OutputError] = []  # what ends the whole run (the others stop at their claim)
    tasks: list[asyncio.Task] = []

    def halt(exc: EndpointError | OutputError) -> None:
        if not stop:
            stop.append(exc)
            me = asyncio.current_task()
            for t in tasks:
                if t is not me:
                    t.cancel()

    async def take() -> Claim | None:
        if feed is not None:
            return await feed.next()
        return queue.popleft() if queue else None

    async def worker() -> None:
        while not stop:
            claim = await take()
            if claim is None or stop:
                return
            try:
                verdict = await engine.verify(claim, llm, on_event=listener(claim) if listener else None)
            except EndpointError as exc:
                halt(exc)
                return
            except Exception as exc:  # a bug in one claim's run must not sink the batch
                reject(claim, claim_failure(exc))
                continue
            try:
                accept(claim, verdict)
            except OutputError as exc:  # disk full, file size limit, ...: stop; a torn line is cut on resume
                halt(exc)
                return

    try:
        workers = concurrency if feed is not None else min(concurrency, len(queue))
        tasks.extend(asyncio.create_task(worker()) for _ in range(workers))
        outcomes = await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        for t in tasks:
            t.cancel()
    if stop:
        raise stop[0]
    for outcome in outcomes:  # e.g. an on_result callback that raised: surface it, results stay written
        if isinstance(outcome, BaseException) and not isinstance(outcome, asyncio.CancelledError):
            raise outcome


async def arun(engine: Engine, pending: list[Claim], sink: ResultSink, concurrency: int) -> RunStats:
    """A batch's claims through :func:`verify_each` into ``sink`` (the results file and its statistics)."""
    async with engine.client() as llm:
        sink.open(ServedModel.of(llm))
        await verify_each(engine, llm, pending, concurrency, accept=lambda c, v: sink.accept(v.to_dict(c)),
                          reject=lambda c, why: sink.reject(c.id, why))
    return sink.stats


def run(engine: Engine, pending: list[Claim], sink: ResultSink, concurrency: int) -> RunStats:
    return asyncio.run(arun(engine, pending, sink, concurrency))


__all__ = ["arun", "run", "verify_each"]
