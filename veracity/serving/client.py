"""Async client for any OpenAI-compatible endpoint, with schema-constrained generation.

The one LLM contract of the project::

    verdict = await llm.generate(messages, Verdict, role="emulate.classifier")

``generate`` sends the output model's JSON schema as ``response_format`` (the server constrains
decoding), validates the reply with pydantic, records a :class:`UsageRecord`, and retries transport
errors with exponential backoff. Nothing here parses free text.

``endpoint`` may be a comma-separated list of endpoints serving the same model: an
:class:`~veracity.serving.pool.EndpointPool` then spreads the requests (least outstanding, one claim's
calls on one endpoint), health-checks the endpoints and sends a dead endpoint's in-flight requests again
to a live one. Methods see no difference.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import hashlib
import json
import random
import sqlite3
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from veracity.config import split_endpoints
from veracity.errors import ConfigError, EndpointBusyError, EndpointError, LLMOutputError, PromptTooLongError
from veracity.serving.confidence import allowed_values, label_probs, top_logprobs_for
from veracity.serving.gate import Gate
from veracity.serving.pool import EndpointPool, Member, Notify, affinity_scope, current_affinity
from veracity.serving.structured import prefilled_form, response_format_for, schema_fingerprint

T = TypeVar("T", bound=BaseModel)
Message = dict[str, str]
# generate(cut_when=...): the reply so far -> the reply to keep (the rest not generated), or None to go on
CutWhen = Callable[[str], "str | None"]

RETRYABLE_STATUS = {408, 429, 500, 502, 503, 504}


@dataclass
class UsageRecord:
    """One ``generate`` call: who asked, what it cost, how long it took."""

    role: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    cache_hit: bool = False  # served from the on-disk response cache
    cached_prompt_tokens: int | None = None  # server prefix-cache hits, when the server reports them
    attempts: int = 1
    finish_reason: str | None = None
    started_at: float = field(default_factory=time.time)
    # a deciding role's call (``generate(confidence_field=...)``): the reply's distribution over the label
    # field's allowed values, from the engine's logprobs (veracity.serving.confidence.LabelProbs.to_dict);
    # None when not asked for or when the engine returned no logprobs
    label_probs: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# Usage records of the current task (a claim being verified). ``usage_scope()`` opens one; asyncio
# tasks copy the context, so concurrent claims each collect only their own calls.
_current_sink: contextvars.ContextVar[list[UsageRecord] | None] = contextvars.ContextVar(
    "veracity_usage_sink", default=None
)


@contextlib.contextmanager
def usage_scope() -> Iterator[list[UsageRecord]]:
    """Collect the usage records of every ``generate`` call made inside the ``with`` block."""
    sink: list[UsageRecord] = []
    token = _current_sink.set(sink)
    try:
        yield sink
    finally:
        _current_sink.reset(token)


def record_usage(rec: UsageRecord, sink: list[UsageRecord] | None = None) -> None:
    """Add one call's record to the current ``usage_scope()`` (the claim's) and to ``sink``, the list its
    caller passed to ``generate`` (a role's own step)."""
    scope = _current_sink.get()
    if scope is not None:
        scope.append(rec)
    if sink is not None:
        sink.append(rec)


class ResponseCache:
    """On-disk cache of replies keyed on (model, messages, schema, sampling parameters). SQLite, one file."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, content TEXT NOT NULL, "
            "prompt_tokens INTEGER, completion_tokens INTEGER, created REAL)"
        )
        try:  # the label distribution of a deciding role's reply (added later: older files gain the column)
            self._db.execute("ALTER TABLE replies ADD COLUMN label_probs TEXT")
        except sqlite3.OperationalError:
            pass

    @staticmethod
    def key(model: str, messages: list[Message], schema_fp: str, params: dict[str, Any]) -> str:
        blob = json.dumps({"m": model, "msg": messages, "s": schema_fp, "p": params}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()

    def get(self, key: str) -> tuple[str, int, int] | None:
        got = self.get_with_probs(key)
        return got[:3] if got else None

    def get_with_probs(self, key: str) -> tuple[str, int, int, dict[str, Any] | None] | None:
        with self._lock:
            row = self._db.execute(
                "SELECT content, prompt_tokens, completion_tokens, label_probs FROM replies WHERE key = ?",
                                   (key,)
            ).fetchone()
        return (row[0], row[1], row[2], json.loads(row[3]) if row[3] else None) if row else None

    def put(self, key: str, content: str, prompt_tokens: int, completion_tokens: int,
            label_probs: dict[str, Any] | None = None) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO replies (key, content, prompt_tokens, completion_tokens, created, "
                "label_probs) VALUES (?, ?, ?, ?, ?, ?)",
                (key, content, prompt_tokens, completion_tokens, time.time(),
                 json.dumps(label_probs) if label_probs else None),
            )

    def close(self) -> None:
        with self._lock:
            self._db.close()


def normalize_endpoint(endpoint: str) -> str:
    """``http://host:port`` or ``.../v1`` -> base URL ending in ``/v1`` (a malformed URL: ConfigError).
    For callers that talk to one endpoint only: a list of several is a ConfigError."""
    urls = split_endpoints(endpoint)
    if len(urls) > 1:
        raise ConfigError(f"this command measures one model endpoint, got {len(urls)}: {endpoint}",
                          hint="pass one of them with --endpoint (measure each on its own)")
    return urls[0]


__all__ = ["LLMClient", "UsageRecord", "ResponseCache", "record_usage", "usage_scope", "affinity_scope",
           "normalize_endpoint",
           "probe_endpoint"]


# the one slot file of share_prefix on a llama-server (in its --slot-save-path folder)
PREFIX_FILE = "veracity-prefix.bin"


class LLMClient:
    """Async, bounded-concurrency client for an OpenAI-compatible chat endpoint.

    Use as ``async with LLMClient(endpoint, model) as llm: ...`` or call :meth:`start` / :meth:`close`.
    ``endpoint``: one URL or a comma-separated list serving the same model (see :mod:`veracity.serving.pool`;
    ``health_interval_s`` paces its background health checks, ``notify`` receives its one-line notes).
    """

    def __init__(
        self,
        endpoint: str,
        model: str | None = None,
        *,
        api_key: str = "EMPTY",
        concurrency: int = 16,
        timeout_s: float = 300.0,
        max_retries: int = 4,
        backoff_s: float = 0.5,
        cache_path: Path | str | None = None,
        temperature: float = 0.0,
        seed: int | None = 0,
        max_tokens: int = 512,
        validation_retries: int = 1,
        transport: httpx.AsyncBaseTransport | None = None,
        min_tokens_per_s: float = 2.0,
        health_interval_s: float = 5.0,
        notify: Notify | None = None,
        logprobs: bool = True,
    ):
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        self.pool = EndpointPool(endpoint, health_interval_s=health_interval_s, notify=notify)
        self.base_url = self.pool.display  # the one URL, or the comma-separated list
        self.model = model
        self.api_key = api_key
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.temperature = temperature
        self.seed = seed
        self.max_tokens = max_tokens
        self.validation_retries = validation_retries
        # deciding roles ask for token logprobs (their label's confidence); False never asks
        self.logprobs = logprobs
        self._said_no_logprobs = False
        # who serves each endpoint (its /models entries' ``owned_by``): vLLM ("vllm") reports logprobs after
        # the schema's mask, so its deciding calls ask for fewer alternatives (confidence.top_logprobs_for)
        self._owners: dict[str, set[str]] = {}
        # a reply is awaited at least max_tokens / min_tokens_per_s seconds: a long structured reply that
        # decodes slowly in a full batch on a CPU server is not cut off by the flat timeout
        self.min_tokens_per_s = min_tokens_per_s
        self._transport = transport
        self.cache = ResponseCache(Path(cache_path)) if cache_path else None
        self.usage: list[UsageRecord] = []
        # the requests in flight: at most ``concurrency``, and on llama-server at most its slots (the others
        # wait here, by priority, rather than in the server's first-come queue: veracity.serving.gate)
        self._sem: Gate | None = None
        self._slots: dict[str, int] = {}  # llama-server's slots per endpoint (GET /props total_slots)
        self._no_slot_files: set[str] = set()  # llama-servers that refused to save a slot (share_prefix)
        self._share_lock: asyncio.Lock | None = None  # one share_prefix at a time: its save and restores
        self._http: httpx.AsyncClient | None = None
        self._started = False

    # -- lifecycle -----------------------------------------------------------------------------
    async def __aenter__(self) -> "LLMClient":
        await self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            self._http = httpx.AsyncClient(
                headers={"Authorization": f"Bearer {self.api_key}"},
                timeout=httpx.Timeout(self.timeout_s, connect=10.0),
                limits=httpx.Limits(max_connections=self.concurrency + 4,
                                    max_keepalive_connections=self.concurrency + 4),
                transport=self._transport,
            )
        return self._http

    async def _models_at(self, url: str) -> list[str]:
        """Model names ``url`` serves (``GET /v1/models``); an EndpointError when it does not answer.

        A server that accepts the connection but does not answer within 10 s is busy rather than gone (a
        llama-server whose HTTP threads all hold other clients' requests answers when one frees): it is given
        the request timeout before the command gives up, and the error then says it answered nothing."""
        try:
            try:
                resp = await self._client().get(url + "/models", timeout=10.0)
            except httpx.ReadTimeout:
                resp = await self._client().get(url + "/models", timeout=max(10.0, self.timeout_s))
        except httpx.ReadTimeout as exc:
            raise EndpointError(
                f"the model endpoint {url} accepted the connection but did not answer GET /models within "
                f"{max(10.0, self.timeout_s):.0f} s",
                hint="the server is busy or hung: see `veracity serve --status`, or raise "
                     "VERACITY_REQUEST_TIMEOUT_S",
            ) from exc
        except httpx.HTTPError as exc:
            raise EndpointError(
                f"cannot reach the model endpoint {url} ({type(exc).__name__})",
                hint="start a server with `veracity serve --detach`, or pass the right --endpoint",
            ) from exc
        if resp.status_code >= 400:
            raise EndpointError(
                f"endpoint {url} answered {resp.status_code} to GET /models",
                hint="check that it is an OpenAI-compatible server and that --api-key is right",
            )
        try:
            entries = resp.json().get("data", [])
            names = [m["id"] for m in entries]
            self._owners[url] = {str(m.get("owned_by")) for m in entries}
            return names
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise EndpointError(
                f"endpoint {url} did not return an OpenAI model list",
                hint="point --endpoint at an OpenAI-compatible server (vLLM: http://HOST:PORT/v1)",
            ) from exc

    @property
    def masks_first(self) -> bool:
        """Every endpoint of the pool is a vLLM server (whose logprobs come after the schema's mask), as
        its GET /models said; False while any is unknown or another engine."""
        return self._all_served_by("vllm")

    def _all_served_by(self, owner: str) -> bool:
        """Every endpoint of the pool said (GET /models ``owned_by``) that ``owner`` serves it."""
        return all(self._owners.get(m.url) == {owner} for m in self.pool.members)

    @property
    def continues_replies(self) -> bool:
        """Every endpoint of the pool is a llama-server (``owned_by`` "llamacpp"), which continues a final
        assistant message under a grammar: an output model that declares ``reply_prefill`` is then asked for
        with its opening prefilled (:func:`~veracity.serving.structured.prefilled_form`)."""
        return self._all_served_by("llamacpp")

    async def _server_slots(self) -> int | None:
        """The pool's llama-server slots together (each endpoint's ``GET /props`` ``total_slots``), or None
        when an endpoint is another engine or does not say."""
        urls = [m.url for m in self.pool.members]
        if not urls or not self.continues_replies:
            return None
        for url in urls:
            try:
                resp = await self._client().get(_server_root(url) + "/props", timeout=10.0)
                self._slots[url] = int(resp.json()["total_slots"])
            except (httpx.HTTPError, ValueError, KeyError, TypeError):
                return None
        return sum(self._slots[u] for u in urls) or None

    async def share_prefix(self, messages: list[Message]) -> dict[str, Any] | None:
        """Process ``messages``' prompt once and copy it into every other idle slot of each llama-server of
        the pool, so that the requests that begin with the same text (a text's extractor calls: the
        instructions and the whole text, then one sentence each) find it cached in whichever slot they get.

        llama-server caches a prompt in the one slot that processed it; four extractor calls sent at once to
        four empty slots each processed the same ~600-token prefix (about 24 s of a 2-core server's time on
        the 1.5B; BENCHMARKS.md, issue 44 point 5). Here: ``POST /apply-template``, ``POST /completion``
        (one token, the prompt cached), ``POST /slots/N?action=save`` then ``?action=restore`` into the other
        idle slots (``GET /slots``). Needs a server started with ``--slot-save-path`` (a managed llama-server
        is); another engine, one slot, or a server without it: nothing is done (None), and a server that
        refused is not asked again. One file per server (``veracity-prefix.bin``): the server runs its slot
        tasks one at a time, so a save is whole before any restore reads it; a prefix restored from another
        command's text only costs that text its cache hit. Returns ``{"slots": copies, "tokens": prompt
        tokens, "seconds": wall}`` when it copied."""
        if not self._started:
            await self.start()
        if not self.continues_replies or self._sem is None:
            return None
        t0 = time.perf_counter()
        copies, tokens = 0, 0
        if self._share_lock is None:
            self._share_lock = asyncio.Lock()
        async with self._share_lock:
            for member in self.pool.members:
                url = member.url
                if self._slots.get(url, 0) < 2 or url in self._no_slot_files:
                    continue
                root = _server_root(url)
                http = self._client()
                try:
                    async with self._sem.held():  # the priming request holds a slot like any request
                        prompt = (await http.post(root + "/apply-template", json={"messages": messages},
                                                  timeout=30.0)).json()["prompt"]
                        done = await http.post(root + "/completion", json={
                            "prompt": prompt, "n_predict": 1, "cache_prompt": True, "temperature": 0.0})
                        done.raise_for_status()
                        primed = done.json()
                    slot = int(primed["id_slot"])
                    saved = await http.post(f"{root}/slots/{slot}", params={"action": "save"},
                                            json={"filename": PREFIX_FILE}, timeout=30.0)
                    if saved.status_code in (400, 404, 501):  # no --slot-save-path, or no slot actions
                        self._no_slot_files.add(url)
                        continue
                    saved.raise_for_status()
                    idle = [int(s["id"]) for s in (await http.get(root + "/slots", timeout=10.0)).json()
                            if int(s["id"]) != slot and not s.get("is_processing")]
                    for other in idle:
                        back = await http.post(f"{root}/slots/{other}", params={"action": "restore"},
                                               json={"filename": PREFIX_FILE}, timeout=30.0)
                        if back.status_code == 200:
                            copies += 1
                    tokens = max(tokens, int(primed.get("tokens_evaluated") or 0))
                except (httpx.HTTPError, ValueError, KeyError, TypeError):
                    continue  # a speed-up only: whatever fails, the requests run as they would have
        if not copies:
            return None
        return {"slots": copies, "tokens": tokens, "seconds": round(time.perf_counter() - t0, 3)}

    async def served_models(self) -> list[str]:
        """Model names the (first) endpoint serves (``GET /v1/models``)."""
        return await self._models_at(self.pool.members[0].url)

    async def start(self) -> None:
        """Check that the endpoints are up and serve the requested model (or pick the one they serve)."""
        if self._started:
            return
        if len(self.pool) == 1:
            models = await self.served_models()
            if self.model is None:
                if not models:
                    raise EndpointError(f"endpoint {self.base_url} serves no model",
                                        hint="start vLLM with --model")
                self.model = models[0]
            elif self.model not in models:
                raise EndpointError(
                    f"endpoint {self.base_url} serves {', '.join(models) or 'no model'}, not {self.model}",
                    hint=f"pass --model {models[0]}" if models
                                    else "start the server with the model you want",
                )
        else:
            await self._start_pool()
        self.pool.model = self.model
        self._sem = Gate(min(self.concurrency, await self._server_slots() or self.concurrency))
        self._started = True
        self.pool.start_health_checks(self._client())

    async def _start_pool(self) -> None:
        """Probe every endpoint of the pool at once; refuse a pool whose endpoints serve different models or
        that has no live endpoint; start with the live ones (the others are re-admitted when they answer)."""
        members = self.pool.members
        found: list[list[str] | EndpointError] = await asyncio.gather(
            *(self._models_at(m.url) for m in members), return_exceptions=True)
        for got in found:  # anything but "did not answer" is a bug, not a dead endpoint
            if isinstance(got, BaseException) and not isinstance(got, EndpointError):
                raise got
        answering = [(m, got) for m, got in zip(members, found, strict=True) if isinstance(got, list)]
        if not answering:
            why = "; ".join(f"{m.url}: {_why(got)}" for m, got in zip(members, found, strict=True))
            raise EndpointError(
                f"none of the {len(members)} model endpoints answers ({why})",
                hint="start them (`veracity serve --replicas N --detach` starts a managed set), or fix "
                     "--endpoint",
            )
        served = "; ".join(f"{m.url} serves {', '.join(got) or 'no model'}" for m, got in answering)
        if self.model is None:
            common = set.intersection(*(set(got) for _, got in answering))
            if not common:
                raise EndpointError(
                    f"the model endpoints serve different models ({served})",
                    hint="list only endpoints that serve the same model (or pass --model NAME to pick one "
                         "all of them serve)",
                )
            self.model = next(name for name in answering[0][1] if name in common)
        else:
            wrong = [m.url for m, got in answering if self.model not in got]
            if wrong:
                raise EndpointError(
                    f"model endpoint{'s' if len(wrong) > 1 else ''} {', '.join(wrong)} "
                    f"serve{'' if len(wrong) > 1 else 's'} another model than {self.model} ({served})",
                    hint=f"list only endpoints that serve {self.model} in --endpoint, or pass the --model "
                         "they "
                         "all serve",
                )
        for m, got in zip(members, found, strict=True):
            if isinstance(got, list):
                m.models = got
            else:
                self.pool.mark_down(m, _why(got))
        down = [m.url for m in members if not m.alive]
        if down:
            self.pool.notify(f"starting with {len(members) - len(down)} of {len(members)} model endpoints; "
                             f"{', '.join(down)} will take requests once they serve {self.model}")

    async def close(self) -> None:
        await self.pool.stop()
        if self._http is not None:
            await self._http.aclose()
            self._http = None
        if self.cache is not None:
            self.cache.close()
            self.cache = None
        self._started = False

    # -- the contract -----------------------------------------------------------------------------
    async def generate(
        self,
        messages: list[Message],
        output_model: type[T],
        *,
        role: str,
        temperature: float | None = None,
        max_tokens: int | None = None,
        seed: int | None = None,
        usage_sink: list[UsageRecord] | None = None,
        confidence_field: str | None = None,
        cut_when: CutWhen | None = None,
    ) -> T:
        """Ask the model for an ``output_model`` instance; the server constrains decoding to its schema.
        Each request's :class:`UsageRecord` goes to ``self.usage``, the current ``usage_scope()`` and
        ``usage_sink`` when given. ``confidence_field`` (a deciding role's label field, an enum): the request
        also asks for token logprobs, and the record's ``label_probs`` holds the reply's distribution over
        the field's allowed values (:mod:`veracity.serving.confidence`; None when the engine gives none).
        Asking for logprobs leaves sampling, and the cache key, as they were.

        ``cut_when(reply so far)`` (a reply asked for with its opening prefilled, i.e. on llama-server): the
        reply is streamed and handed to it as it grows; when it returns a string, the rest of the reply is
        not generated (the stream is closed, and llama-server stops the request at once) and that string is
        the reply, validated as any other; its record's ``finish_reason`` is ``"cut"``. Elsewhere it is never
        called and the reply is read whole."""
        if not self._started:
            await self.start()
        assert self._sem is not None and self.model is not None
        params = {
            "temperature": self.temperature if temperature is None else temperature,
            "max_tokens": max_tokens or self.max_tokens,
            # a role passes its per-request seed (roles.SEED_RULE)
            "seed": self.seed if seed is None else seed,
        }
        schema_fp = schema_fingerprint(output_model)
        values = allowed_values(output_model,
                                confidence_field) if confidence_field and self.logprobs else None
        # llama.cpp: the reply's fixed opening sent as the assistant message it continues, a grammar for the
        # rest (never for a deciding call, whose logprobs are read over the schema's reply)
        form = prefilled_form(output_model) if not values and self.continues_replies else None
        sent = [*messages, {"role": "assistant", "content": form.opening}] if form else messages
        key = ResponseCache.key(self.model, sent, schema_fp, params) if self.cache else None
        if self.cache is not None and key is not None:
            hit = self.cache.get_with_probs(key)
            if hit is not None:
                content, pt, ct, probs = hit
                try:
                    value = output_model.model_validate_json(content)
                except ValidationError:
                    value = None  # a stale entry from an older schema: ask again
                if value is not None:
                    self._record(UsageRecord(role, self.model, pt, ct, 0.0, cache_hit=True, attempts=0,
                                             label_probs=probs if values else None), usage_sink)
                    return value

        last_error: ValidationError | None = None
        raw = ""
        attempts_total = 0
        for vtry in range(self.validation_retries + 1):
            body = {
                "model": self.model,
                "messages": messages,
                "response_format": response_format_for(output_model),
                **params,
            }
            if form is not None:
                del body["response_format"]
                body.update(messages=sent, grammar=form.grammar, continue_final_message=True,
                            add_generation_prompt=False)
            if values:  # reported only: the engine samples exactly as without them
                body["logprobs"] = True
                body["top_logprobs"] = top_logprobs_for(values, self.masks_first)
            if vtry > 0:  # a truncated reply: give it room
                body["max_tokens"] = params["max_tokens"] * 2
            t0 = time.perf_counter()
            cut = (lambda so_far, form=form: cut_when(form.reply(so_far))) \
                if cut_when is not None and form is not None else None
            data, attempts = await self._post_with_retries(body, cut)
            attempts_total += attempts
            latency = time.perf_counter() - t0
            choice = data["choices"][0]
            raw = choice.get("message", {}).get("content") or ""
            if form is not None:
                raw = form.reply(raw)
            usage = data.get("usage") or {}
            details = usage.get("prompt_tokens_details") or {}
            rec = UsageRecord(
                role=role,
                model=self.model,
                prompt_tokens=int(usage.get("prompt_tokens", 0)),
                completion_tokens=int(usage.get("completion_tokens", 0)),
                latency_s=latency,
                cached_prompt_tokens=details.get("cached_tokens") if isinstance(details, dict) else None,
                attempts=attempts_total,
                finish_reason=choice.get("finish_reason"),
            )
            self._record(rec, usage_sink)
            try:
                value = output_model.model_validate_json(raw)
            except ValidationError as exc:
                last_error = exc
                continue
            if values and confidence_field:
                rec.label_probs = self._label_probs(raw, choice, confidence_field, values)
            if self.cache is not None and key is not None:
                self.cache.put(key, raw, rec.prompt_tokens, rec.completion_tokens, rec.label_probs)
            return value
        first = last_error.errors()[0] if last_error and last_error.errors() else {}
        raise LLMOutputError(
            f"{role}: the reply did not validate against {output_model.__name__} "
            f"({first.get('type', 'invalid')} at {'.'.join(map(str, first.get('loc', ()))) or 'top level'})",
            hint="raise max_tokens, or check that the server honours response_format json_schema",
            raw=raw,
            role=role,
        )

    def _label_probs(self, raw: str, choice: dict[str, Any], field_name: str,
                     values: tuple[str, ...]) -> dict[str, Any] | None:
        """The reply's label distribution; an endpoint that returned no logprobs is told about once."""
        lp = choice.get("logprobs")
        if not (isinstance(lp, dict) and lp.get("content")):
            if not self._said_no_logprobs:
                self._said_no_logprobs = True
                self.pool.notify(f"endpoint {self.base_url} returned no token logprobs: verdicts carry no "
                                 "confidence (null)")
            return None
        got = label_probs(raw, lp, field_name, values)
        return got.to_dict() if got is not None else None

    def _record(self, rec: UsageRecord, sink: list[UsageRecord] | None = None) -> None:
        self.usage.append(rec)
        record_usage(rec, sink)

    def _timeout_for(self, body: dict[str, Any]) -> httpx.Timeout:
        """The read timeout of one completion: ``timeout_s``, or longer when the reply may be long."""
        max_tokens = body.get("max_tokens") or self.max_tokens
        read = max(self.timeout_s,
                   max_tokens / self.min_tokens_per_s) if self.min_tokens_per_s > 0 else self.timeout_s
        return httpx.Timeout(read, connect=10.0)

    async def _stream_completion(self, url: str, body: dict[str, Any],
                                 cut: Callable[[str], str | None]) -> httpx.Response:
        """POST one completion as a stream (llama-server's server-sent events), handing the reply so far to
        ``cut`` after each piece; returns the reply as the response a plain POST gives (``choices``, and
        ``usage`` from the server's per-token timings), cut short when ``cut`` returned a string. Closing the
        stream early closes the connection, on which llama-server cancels the request."""
        streamed = {**body, "stream": True, "timings_per_token": True,
                    "stream_options": {"include_usage": True}}
        content: list[str] = []
        finish: str | None = None
        usage: dict[str, Any] = {}
        timings: dict[str, Any] = {}
        cut_to: str | None = None
        async with self._client().stream("POST", url + "/chat/completions", json=streamed,
                                         timeout=self._timeout_for(body)) as resp:
            if resp.status_code >= 400:
                await resp.aread()
                return resp
            async for line in resp.aiter_lines():
                if not line.startswith("data:"):
                    continue
                payload = line[5:].strip()
                if payload == "[DONE]":
                    break
                try:
                    chunk = json.loads(payload)
                except ValueError:
                    chunk = None
                if not isinstance(chunk, dict):
                    raise _Retryable("a streamed reply with a malformed event")
                if isinstance(chunk.get("usage"), dict):
                    usage = chunk["usage"]
                if isinstance(chunk.get("timings"), dict):
                    timings = chunk["timings"]
                for choice in chunk.get("choices") or []:
                    piece = (choice.get("delta") or {}).get("content")
                    if piece:
                        content.append(piece)
                        cut_to = cut("".join(content))
                    finish = choice.get("finish_reason") or finish
                if cut_to is not None:
                    break
            else:
                if finish is None:  # the stream ended without its last event: cut off in transit
                    raise _Retryable("a streamed reply that ended early")
        if cut_to is not None:
            finish = "cut"
        if not usage or cut_to is not None:  # what the server's timings say was processed and generated
            cached = int(timings.get("cache_n") or 0)
            usage = {"prompt_tokens": cached + int(timings.get("prompt_n") or 0),
                     "completion_tokens": int(timings.get("predicted_n") or len(content)),
                     "prompt_tokens_details": {"cached_tokens": cached}}
        reply = cut_to if cut_to is not None else "".join(content)
        return httpx.Response(200, json={"choices": [{"index": 0, "finish_reason": finish,
                                                      "message": {"role": "assistant", "content": reply}}],
                                         "usage": usage})

    async def _post_with_retries(self, body: dict[str, Any], cut: Callable[[str], str | None] | None = None
                                 ) -> tuple[dict[str, Any], int]:
        """POST one completion; returns (reply, requests sent). Transport errors and retryable statuses are
        retried with backoff (``max_retries``); in a pool, a request whose endpoint turns out to be down
        goes at once to a live endpoint without using up that budget (bounded by the pool's size). With
        ``cut``: streamed (:meth:`_stream_completion`)."""
        assert self._sem is not None
        key = current_affinity()
        pool = self.pool
        attempt = 0  # requests sent
        tries = 0  # those counted against max_retries
        failovers_left = len(pool) * (self.max_retries + 1) if len(pool) > 1 else 0
        while True:
            attempt += 1
            tries += 1
            problem: str
            member: Member | None = None
            try:
                async with self._sem.held():
                    # after the wait: "outstanding" counts requests really in flight
                    member = pool.choose(key)
                    with pool.request(member):
                        resp = await (self._stream_completion(member.url, body, cut) if cut is not None
                                      else self._client().post(member.url + "/chat/completions", json=body,
                                                               timeout=self._timeout_for(body)))
                    member.completed += 1
                if resp.status_code < 400:
                    try:
                        data = resp.json()
                    except ValueError:
                        data = None
                    if isinstance(data, dict) and isinstance(data.get("choices"), list) and data["choices"]:
                        if not member.alive:  # it answered before the health check saw it come back
                            pool.mark_up(member)
                        return data, attempt
                    # a reply cut off in transit (or not a completion at all): as retryable as a 503
                    raise _Retryable(f"HTTP {resp.status_code} with a truncated or malformed body")
                if _rejects_json_schema(resp):
                    # a server without the OpenAI json_schema form (llama-cpp-python's own server answers
                    # 500): asking again cannot help, and the server is not down
                    raise EndpointError(
                        f"endpoint {member.url} does not accept response_format json_schema "
                        f"({resp.status_code}: "
                        f"{_error_detail(resp)})",
                        hint="veracity needs a server that constrains replies to a JSON schema: vLLM or "
                             "llama.cpp's "
                             "llama-server (`veracity serve --engine vllm|llama.cpp`)")
                if resp.status_code not in RETRYABLE_STATUS:
                    detail = _error_detail(resp)
                    if resp.status_code == 400 and "maximum context length" in detail:
                        # vLLM's answer to a prompt longer than --max-model-len: this claim's conversation
                        # outgrew the context; the endpoint is fine and the other claims go on
                        raise PromptTooLongError(
                            f"the prompt is longer than the server's context ({detail})",
                            hint="serve with a larger --max-model-len if the model allows it, or lower the "
                                 "method's budgets (e.g. fewer steps or passages)")
                    raise EndpointError(
                        f"endpoint {member.url} rejected the request ({resp.status_code}: {detail})",
                        hint="check the model name and that the server supports response_format json_schema",
                    )
                problem = f"HTTP {resp.status_code}"
            except (httpx.TransportError, httpx.TimeoutException) as exc:
                problem = type(exc).__name__
                if member is not None and len(pool) > 1 and failovers_left > 0 \
                        and await pool.confirm_down(self._client(), member, problem) and pool.live():
                    failovers_left -= 1  # its endpoint died with the request in flight: ask a live one now
                    pool.failovers += 1
                    tries -= 1
                    continue
            except _Retryable as exc:
                problem = str(exc)
            if tries > self.max_retries:
                if len(pool) > 1 and not pool.live():
                    raise EndpointError(
                        f"all {len(pool)} model endpoints are down ({pool.down_summary()})",
                        hint="start them again (`veracity serve --status` shows managed ones); results "
                             "written "
                             "so far are kept: run the same command again to resume",
                    )
                where = member.url if member is not None else self.base_url
                if problem == "ReadTimeout" and member is not None \
                        and isinstance(await pool.models_at(self._client(), member, timeout=10.0), list):
                    # alive but every try outlasted the timeout: a full batch decoding slowly (CPU), not a
                    # dead server; restarting would not help, fewer requests in flight or more time would
                    raise EndpointBusyError(
                        f"model endpoint {where} answers but did not finish a reply within "
                        f"{self._timeout_for(body).read:.0f} s, {attempt} times: it is overloaded",
                        hint="run fewer claims or requests at once (--concurrency, --llm-concurrency) or "
                             "allow "
                             f"longer replies (VERACITY_REQUEST_TIMEOUT_S, now {self.timeout_s:g}); results "
                             "written "
                             "so far are kept: run the same command again to resume",
                    )
                raise EndpointError(
                    f"model endpoint {where} failed {attempt} times ({problem})",
                    hint="is the server still running? `veracity serve --status` shows it; results written "
                         "so far are kept",
                )
            delay = self.backoff_s * (2 ** (tries - 1)) * (0.5 + random.random())
            await asyncio.sleep(min(delay, 30.0))


def _server_root(url: str) -> str:
    """A llama-server's own routes (/props, /slots, /completion) sit beside its OpenAI ones under /v1."""
    return url[:-3] if url.endswith("/v1") else url


class _Retryable(Exception):
    """A reply that is worth asking again for (internal to :meth:`LLMClient._post_with_retries`)."""


async def probe_endpoint(endpoint: str, model: str | None = None, *, api_key: str = "EMPTY") -> str:
    """The model ``endpoint`` serves (``model`` when given): one ``GET /models``, an EndpointError when the
    endpoint does not answer or serves another model. For callers that must know before writing anything."""
    client = LLMClient(endpoint, model, api_key=api_key)
    try:
        await client.start()
        assert client.model is not None
        return client.model
    finally:
        await client.close()


def _why(err: BaseException | list[str]) -> str:
    """Why an endpoint did not answer, short: the exception name the EndpointError carries, else its text."""
    if isinstance(err, EndpointError):
        cause = err.__cause__
        return type(cause).__name__ if cause is not None else str(err)
    return str(err)


def _rejects_json_schema(resp: httpx.Response) -> bool:
    """An error status whose error body (the server's message, not model output) names the json_schema
    ``response_format``: the server does not take that form at all."""
    if resp.status_code < 400 or resp.status_code in (408, 429, 503):
        return False
    detail = _error_detail(resp).lower()
    return "response_format" in detail or "json_schema" in detail


def _error_detail(resp: httpx.Response) -> str:
    try:
        data = resp.json()
        msg = data.get("message") or data.get("error", {}).get("message") or data.get("detail")
        if msg:
            return " ".join(str(msg).split())[:200]
    except (ValueError, AttributeError):
        pass
    return resp.text[:200].replace("\n", " ")
