"""What the web app's routers share: the per-app context, the one-line JSON error, the checks-in-flight
cap."""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Callable

from fastapi.responses import JSONResponse, StreamingResponse

from veracity.errors import (DataError, EndpointError, IndexDirError, LLMOutputError, OutputError,
                             VeracityError)
from veracity.pipeline.types import MAX_CLAIM_CHARS

STATIC = Path(__file__).parent / "static"


@dataclass
class WebConfig:
    """What ``veracity web`` configures. ``verifier`` is the run configuration every check and job starts from
    (:class:`~veracity.pipeline.config.VerifierConfig`: endpoint, model, claims in flight per job, LLM
    requests
    in flight, settings; a request adds its method, parameters and label space); None: the defaults, with
    ``home`` as the settings' home. ``llm`` replaces the model client (tests: the scripted stand-in);
    ``searcher`` is an open index (None: methods that need one answer 400)."""

    home: Path
    searcher: Any = None
    verifier: Any = None
    llm: Any = None
    token: str | None = None
    cors_origins: tuple[str, ...] = ()
    host: str = "127.0.0.1"  # the address served: the Host header must name it (see guard.host_allowed)
    allowed_hosts: tuple[str, ...] = ()  # more names a Host header may carry (a reverse proxy's)
    max_body_bytes: int = 8 * 1024 * 1024
    max_claim_chars: int = MAX_CLAIM_CHARS
    max_checks: int = 4
    max_jobs: int = 8
    model_health: Callable[[], dict[str, Any]] | None = None
    index_dir: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.token is not None:  # the token's one check, for `veracity web` and the Python API alike
            check_token(self.token)
        if self.verifier is None:
            from veracity.config import Settings
            from veracity.pipeline.config import VerifierConfig

            self.verifier = VerifierConfig(settings=Settings(home=self.home))

    @property
    def endpoint(self) -> str | None:
        return self.verifier.endpoint.url


MIN_TOKEN_CHARS = 16
MIN_TOKEN_DISTINCT = 8  # different characters in a token ("aaaaaaaaaaaaaaaa" has one)
MIN_TOKEN_BITS = 64  # length x log2(the alphabet its character classes span)
MIN_TOKEN_STEPS = 4  # different steps between neighbouring characters ("abcdefghijklmnop" has one)


def token_bits(token: str) -> float:
    """An upper estimate of a token's entropy: its length times log2 of the alphabet its character classes
    span (lower case 26, upper case 26, digits 10, anything else 33)."""
    import math

    pool = (26 * any(c.islower() for c in token) + 26 * any(c.isupper() for c in token)
            + 10 * any(c.isdigit() for c in token) + 33 * any(not c.isalnum() for c in token))
    return len(token) * math.log2(pool) if pool > 1 else 0.0


def check_token(token: str) -> None:
    """A bearer token a guesser cannot walk through (ConfigError otherwise, before anything starts): at least
    16 characters without whitespace, at least 8 different characters, an estimated 64 bits or more, and no
    simple pattern (fewer than 4 different steps between neighbours: ``abcd...``, ``a1b2c3...``)."""
    from veracity.errors import ConfigError

    hint = "generate one: `veracity web --new-token > FILE`, then --token-file FILE"
    if not token or any(c.isspace() for c in token):
        raise ConfigError("the token is empty or holds whitespace", hint=hint)
    if len(token) < MIN_TOKEN_CHARS:
        raise ConfigError(f"the token has {len(token)} characters, fewer than {MIN_TOKEN_CHARS}", hint=hint)
    distinct = len(set(token))
    if distinct < MIN_TOKEN_DISTINCT:
        raise ConfigError(f"the token has {distinct} different characters, fewer than {MIN_TOKEN_DISTINCT}: "
                          "too easy to guess", hint=hint)
    bits = token_bits(token)
    if bits < MIN_TOKEN_BITS:
        raise ConfigError(f"the token carries at most {bits:.0f} bits, fewer than {MIN_TOKEN_BITS}: too easy "
                          "to "
                          "guess", hint=hint)
    steps = {ord(b) - ord(a) for a, b in zip(token, token[1:], strict=False)}
    if len(steps) < MIN_TOKEN_STEPS:
        raise ConfigError("the token is a simple pattern (its characters follow each other in "
                          f"{len(steps)} kinds of step): too easy to guess", hint=hint)


def new_token() -> str:
    """A fresh bearer token: 32 random bytes, URL-safe (43 characters, 256 bits), checked like any other."""
    import secrets

    while True:
        token = secrets.token_urlsafe(32)
        try:
            check_token(token)
        except Exception:  # noqa: BLE001 - a draw that looks like a pattern (vanishingly rare): draw again
            continue
        return token


class TooBusy(Exception):
    def __init__(self, message: str, retry_after: int):
        super().__init__(message)
        self.retry_after = retry_after


class Checks:
    """The cap on checks in flight (single claims, streamed or not)."""

    def __init__(self, limit: int):
        self.limit = limit
        self.running = 0

    def take(self) -> Callable[[], None]:
        """Take a slot (TooBusy beyond the limit); returns its release, which acts once."""
        if self.running >= self.limit:
            raise TooBusy(f"{self.running} checks are running, the limit is {self.limit}", retry_after=5)
        self.running += 1
        done = [False]

        def release() -> None:
            if not done[0]:
                done[0] = True
                self.running -= 1

        return release

    @contextlib.contextmanager
    def slot(self):
        release = self.take()
        try:
            yield
        finally:
            release()


@dataclass
class WebContext:
    """One app's shared pieces, handed to every router factory (``routes/*.py``: ``router(ctx) ->
    APIRouter``).

    ``verifier_for(method, labels, params)`` gives the app's Verifier for a request; ``runner`` is the job
    runner, set while the app is up (its lifespan)."""

    config: WebConfig
    settings: Any
    store: Any
    metrics: Any
    checks: Checks
    verifier_for: Callable[[str, str, dict[str, Any]], Any]
    shared: dict[str, Any] = field(default_factory=dict)

    @property
    def runner(self) -> Any:
        return self.shared["runner"]


def status_of(exc: VeracityError) -> int:
    if isinstance(exc, EndpointError):
        return 503
    if isinstance(exc, (OutputError, LLMOutputError)):
        return 500
    if isinstance(exc, IndexDirError):
        return 400
    if isinstance(exc, DataError):
        return 422
    return 400


def error(status: int, message: str, hint: str | None = None, headers: dict[str,
                                                                            str]
          | None = None) -> JSONResponse:
    """The one error shape: ``{"error": one line, "hint": what to do}``."""
    body: dict[str, Any] = {"error": " ".join(str(message).split())}
    if hint:
        body["hint"] = " ".join(str(hint).split())
    return JSONResponse(body, status_code=status, headers=headers)


def sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False, default=str)}\n\n".encode("utf-8")


def sse_response(task: "asyncio.Task[Any]", queue: "asyncio.Queue[tuple[str, dict[str, Any]]]",
                 start: dict[str, Any], finish: Callable[[Any], tuple[str, dict[str, Any]]],
                 failed: Callable[[], None] | None = None) -> StreamingResponse:
    """The one server-sent-events stream of a running ``task``: ``start``, then each ``(event, data)`` the
    task puts on ``queue`` as it happens (drained when it ends), then ``finish(result)``'s event, or an
    ``error`` event (``failed`` is called first). A client that goes away cancels the task."""

    async def events() -> AsyncIterator[bytes]:
        try:
            yield sse("start", start)
            while True:
                getter = asyncio.ensure_future(queue.get())
                done, _ = await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
                if getter in done:
                    yield sse(*getter.result())
                    continue
                getter.cancel()
                while not queue.empty():
                    yield sse(*queue.get_nowait())
                break
            try:
                result = task.result()
            except VeracityError as exc:
                if failed is not None:
                    failed()
                yield sse("error", {"error": str(exc), "hint": exc.hint, "status": status_of(exc)})
                return
            except Exception as exc:
                if failed is not None:
                    failed()
                yield sse("error", {"error": f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}",
                                    "status": 500})
                return
            yield sse(*finish(result))
        finally:
            if not task.done():  # the client went away: stop the work
                task.cancel()

    return StreamingResponse(events(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})


def version() -> str:
    from veracity import __version__

    return __version__
