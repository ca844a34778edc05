"""Several OpenAI-compatible endpoints serving one model, behind one
:class:`~veracity.serving.client.LLMClient`.

``--endpoint`` (``$VERACITY_ENDPOINT``, ``Verifier(endpoint=...)``) takes one URL or a comma-separated
list. The pool decides which endpoint each request goes to:

- **least outstanding requests**: a request goes to the live endpoint with the fewest requests in flight
  (ties: the one that was given the fewest so far), so a slower or busier server gets less;
- **per-claim affinity**: the calls of one claim (an :func:`affinity_scope`, opened per claim by the runner)
  stay on the endpoint its first call went to, as long as that endpoint lives: a claim's prompts share
  their prefixes (instructions, evidence), and vLLM's prefix cache only hits on the server that saw them;
- **health**: a connection failure marks an endpoint down at once when a quick ``GET /v1/models`` confirms
  it; the client then sends the request again to a live endpoint (no claim is lost, and the runner writes
  each claim once, so none is duplicated). A background check (``GET /v1/models`` every
  ``health_interval_s``) re-admits a down endpoint once it serves the model again; an endpoint that comes
  back serving another model stays out. A probe that times out on an endpoint busy with our requests does
  not mark it down (a loaded CPU server can take longer than the probe allows to answer it).

When every endpoint is down, requests still go out (to the endpoint tried least recently) under the client's
retry budget, each in turn, so a server that recovers within it is found again; after that the client raises
one
``EndpointError`` naming every endpoint, and the runner stops with the results written so far kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import sys
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import httpx

from veracity.config import split_endpoints

Notify = Callable[[str], None]

# The affinity key of the current task (a claim being verified); asyncio tasks copy the context, so a
# method's parallel agents share their claim's key.
_affinity_key: contextvars.ContextVar[str | None] = contextvars.ContextVar("veracity_affinity", default=None)

AFFINITY_SLOTS = 4096  # claims remembered (least recently used dropped): far more than are ever in flight


@contextlib.contextmanager
def affinity_scope(key: str | None) -> Iterator[None]:
    """Keep the requests made inside the block on one endpoint of a pool (``key``: e.g. the claim id)."""
    token = _affinity_key.set(key)
    try:
        yield
    finally:
        _affinity_key.reset(token)


def current_affinity() -> str | None:
    return _affinity_key.get()


def _say(message: str) -> None:
    print(f"veracity: {message}", file=sys.stderr, flush=True)


@dataclass(eq=False)
class Member:
    """One endpoint of a pool and what the pool knows about it."""

    url: str  # base URL ending in /v1
    alive: bool = True
    outstanding: int = 0  # requests in flight now
    assigned: int = 0  # requests sent so far
    completed: int = 0  # replies received (any status)
    failed: int = 0  # requests that failed in transport
    down_since: float | None = None
    last_tried: float = 0.0  # when a request last went to it (monotonic clock)
    reason: str | None = None  # why it is down
    models: list[str] = field(default_factory=list)

    def stats(self) -> dict[str, Any]:
        return {"url": self.url, "alive": self.alive, "assigned": self.assigned, "completed": self.completed,
                "failed": self.failed, "outstanding": self.outstanding, "reason": self.reason}


class EndpointPool:
    """The endpoints of one client: choice, affinity, health. Not thread-safe (one event loop)."""

    def __init__(self, endpoint: str | list[str], *, health_interval_s: float = 5.0,
                 probe_timeout_s: float = 3.0, notify: Notify | None = None):
        urls = split_endpoints(",".join(endpoint) if isinstance(endpoint, list) else endpoint)
        self.members = [Member(u) for u in urls]
        self.health_interval_s = health_interval_s
        self.probe_timeout_s = probe_timeout_s
        self.notify = notify or _say
        self.model: str | None = None  # the model every member must serve (set by the client's start)
        self.failovers = 0  # requests sent again to another endpoint after theirs went down
        self.readmissions = 0
        self._affinity: OrderedDict[str, Member] = OrderedDict()
        self._task: asyncio.Task | None = None

    def __len__(self) -> int:
        return len(self.members)

    @property
    def urls(self) -> list[str]:
        return [m.url for m in self.members]

    @property
    def display(self) -> str:
        """The endpoints as one string (the single URL for a pool of one; comma-separated otherwise)."""
        return ",".join(self.urls)

    def live(self) -> list[Member]:
        return [m for m in self.members if m.alive]

    # -- choice ---------------------------------------------------------------------------------------
    def choose(self, key: str | None = None) -> Member:
        """The endpoint for the next request of affinity ``key`` (see the module docstring)."""
        live = self.live()
        if key is not None:
            pinned = self._affinity.get(key)
            if pinned is not None and pinned.alive:
                self._affinity.move_to_end(key)
                return pinned
        if live:
            member = min(live, key=lambda m: (m.outstanding, m.assigned, self.members.index(m)))
        else:  # all down: try each in turn (a server that came back is found by its answer)
            member = min(self.members, key=lambda m: (m.last_tried, self.members.index(m)))
        if key is not None and member.alive:
            self._affinity[key] = member
            self._affinity.move_to_end(key)
            while len(self._affinity) > AFFINITY_SLOTS:
                self._affinity.popitem(last=False)
        return member

    @contextlib.contextmanager
    def request(self, member: Member) -> Iterator[None]:
        """Count one request in flight on ``member`` for the duration of the block."""
        member.outstanding += 1
        member.assigned += 1
        member.last_tried = time.monotonic()
        try:
            yield
        finally:
            member.outstanding -= 1

    # -- health ---------------------------------------------------------------------------------------
    def mark_down(self, member: Member, reason: str) -> None:
        if not member.alive:
            return
        member.alive = False
        member.down_since = time.time()
        member.reason = reason
        n = len(self.live())
        if len(self.members) > 1:
            self.notify(f"model endpoint {member.url} is down ({reason}); "
                        + (f"its requests go to the {n} live one(s)" if n
                           else "no endpoint is live, retrying"))

    def mark_up(self, member: Member) -> None:
        if member.alive:
            return
        was = member.down_since
        member.alive = True
        member.down_since = None
        member.reason = None
        self.readmissions += 1
        if len(self.members) > 1:
            after = f" after {time.time() - was:.0f} s" if was else ""
            self.notify(f"model endpoint {member.url} is back{after}; it takes requests again")

    async def models_at(self, http: httpx.AsyncClient, member: Member,
                        timeout: float | None = None) -> list[str] | str:
        """The models ``member`` serves (``GET /v1/models``), or a short reason why it did not answer."""
        try:
            resp = await http.get(member.url + "/models", timeout=timeout or self.probe_timeout_s)
        except httpx.HTTPError as exc:
            return type(exc).__name__
        if resp.status_code >= 400:
            return f"HTTP {resp.status_code} to GET /models"
        try:
            return [m["id"] for m in resp.json().get("data", [])]
        except (ValueError, KeyError, TypeError, AttributeError):
            return "not an OpenAI model list"

    async def check(self, http: httpx.AsyncClient, member: Member) -> bool:
        """Probe ``member`` once; mark it down or re-admit it. True when it serves the pool's model."""
        busy_before, assigned_before = member.outstanding > 0, member.assigned
        got = await self.models_at(http, member)
        if isinstance(got, str):
            busy = busy_before or member.outstanding > 0 or member.assigned != assigned_before
            if got == httpx.ReadTimeout.__name__ and member.alive and busy:
                # busy, not down: it took the connection and was decoding our requests at some point of the
                # probe (on a loaded CPU a probe can wait longer than probe_timeout_s, and the requests it
                # waited behind may have finished by the time it gives up); a dead server refuses the
                # connection, and a hung one is found by its requests' own timeouts (confirm_down)
                return True
            self.mark_down(member, got)
            return False
        member.models = got
        if self.model is not None and self.model not in got:
            self.mark_down(member, f"serves {', '.join(got) or 'no model'}, not {self.model}")
            return False
        self.mark_up(member)
        return True

    async def confirm_down(self, http: httpx.AsyncClient, member: Member, problem: str) -> bool:
        """After a transport error on ``member``: is it down? (a quick probe; a slow but live server is
        not)"""
        member.failed += 1
        if not member.alive:
            return True
        got = await self.models_at(http, member)
        if isinstance(got, str) or (self.model is not None and self.model not in got):
            self.mark_down(member, problem if isinstance(got, str) else f"serves {', '.join(got)}")
            return True
        return False

    def start_health_checks(self, http: httpx.AsyncClient) -> None:
        """Probe every endpoint every ``health_interval_s`` in the background (a pool of one needs none)."""
        if self._task is None and len(self.members) > 1 and self.health_interval_s > 0:
            self._task = asyncio.create_task(self._health_loop(http))

    async def _health_loop(self, http: httpx.AsyncClient) -> None:
        while True:
            await asyncio.sleep(self.health_interval_s)
            await asyncio.gather(*(self.check(http, m) for m in self.members), return_exceptions=True)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None

    def stats(self) -> dict[str, Any]:
        return {"endpoints": [m.stats() for m in self.members], "failovers": self.failovers,
                "readmissions": self.readmissions}

    def down_summary(self) -> str:
        return "; ".join(f"{m.url}: {m.reason or 'no answer'}" for m in self.members)
