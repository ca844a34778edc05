"""At most ``n`` holders at once, handed out by priority: the waiter with the lowest priority number first,
ties in the order they came.

The client (:class:`~veracity.serving.client.LLMClient`) holds one for its requests in flight. On
llama-server its size is the server's slots, so that no request waits in the server's own first-come queue
and a request of the check stage's extraction (:func:`request_priority` 0) goes before the verification
requests queued beside it (issue 44 point 5: extraction feeds verification, and its calls waited behind a
dozen verification requests in the server's queue).

Measured (BENCHMARKS.md, issue 44 point 5): a text's extractor calls kept to one or two at a time, so that
llama-server (which caches a prompt in one slot) processes the text's prefix fewer times, made extraction the
run's critical path (each call 25-50 s on a busy 2-core server) and the run slower; they go together.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import heapq
from typing import AsyncIterator, Iterator

# the priority of the requests made in this context: 0 goes before 1 (the default)
_PRIORITY: contextvars.ContextVar[int] = contextvars.ContextVar("veracity_request_priority", default=1)
EXTRACTION = 0  # the check stage's extraction: what verification waits on
DEFAULT = 1


def current_priority() -> int:
    return _PRIORITY.get()


@contextlib.contextmanager
def request_priority(priority: int) -> Iterator[None]:
    """Requests made inside the block (and in tasks created inside it) wait with ``priority``."""
    token = _PRIORITY.set(priority)
    try:
        yield
    finally:
        _PRIORITY.reset(token)


class Gate:
    """At most ``n`` holders (None or < 1: no limit); a freed place goes to the waiter of the lowest priority
    number, ties first come first served. A waiter cancelled while waiting keeps no place."""

    def __init__(self, n: int | None) -> None:
        self.n = n if isinstance(n, int) and n > 0 else None
        self.busy = 0
        self._waiting: list[tuple[int, int, asyncio.Future[None]]] = []
        self._arrived = 0

    @contextlib.asynccontextmanager
    async def held(self, priority: int | None = None) -> AsyncIterator[None]:
        prio = current_priority() if priority is None else priority
        if self.n is None or (self.busy < self.n and not self._waiting):
            self.busy += 1
        else:
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            heapq.heappush(self._waiting, (prio, self._arrived, fut))
            self._arrived += 1
            try:
                await fut  # the place is handed over with busy already counted
            except asyncio.CancelledError:
                if fut.done() and not fut.cancelled():
                    self._release()  # handed over as this waiter was cancelled: pass it on
                raise
        try:
            yield
        finally:
            self._release()

    def _hand_over(self) -> bool:
        while self._waiting:
            _, _, fut = heapq.heappop(self._waiting)
            if not fut.done():
                fut.set_result(None)
                return True
        return False

    def _release(self) -> None:
        if not self._hand_over():
            self.busy -= 1
