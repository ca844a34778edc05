"""The web app: one ASGI app serving the page at ``/`` and the API under ``/v1/`` (``veracity web``).

Routes (schema at ``/v1/openapi.json``, a docs page from local files at ``/v1/docs``):

- ``POST /v1/verify`` ``{claim, method, params, labels}`` -> the verdict JSON of ``veracity verify --json``
  (id, claim, label, explanation, method, evidence, trace); the check is kept in the history, its id in
  the ``X-Veracity-Check`` header and ``Location``.
- ``POST /v1/verify/stream`` (same body) -> server-sent events while the method runs: ``trace`` (each
  step: ``role.started`` with the prompt, ``role.finished`` with the JSON reply, tokens and latency,
  ``tool`` with its hits, method events), then ``verdict`` (the record and its check id) or ``error``.
- ``GET /v1/checks``, ``GET /v1/checks/{id}`` (``?download=1``: as a file): the history.
- ``POST /v1/jobs`` (body: a JSONL claims file; ``?method=&labels=&params=``) -> a job;
  ``GET /v1/jobs``, ``GET /v1/jobs/{id}`` (done / failed / claims per minute), ``GET /v1/jobs/{id}/results``
  (JSONL), ``POST /v1/jobs/{id}/resume``. Jobs persist and resume (:mod:`veracity.web.jobs`).
- ``GET /v1/passages/{id}``, ``GET /v1/articles/{title}``: the index's passages (the page's article view).
- ``GET /v1/methods``: methods and label spaces (the page's pickers).
- ``GET /healthz`` (app, model server, index), ``GET /metrics`` (Prometheus text).

Security (:class:`WebConfig`): with a ``token`` every route but ``/healthz`` needs ``Authorization: Bearer
TOKEN`` (the page sends it as the ``veracity_token`` cookie, set by the sign-in form a 401 page shows);
bodies over ``max_body_bytes`` are refused (413) before they are read in full, claims over
``max_claim_chars`` (422); more than ``max_checks`` checks in flight or ``max_jobs`` queued jobs is a 429
with ``Retry-After``; no CORS headers unless ``cors_origins`` names origins. Every error is one JSON line
``{"error": ..., "hint": ...}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Callable

from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, PlainTextResponse, Response, StreamingResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from veracity.errors import (ConfigError, DataError, EndpointError, IndexDirError, LLMOutputError, OutputError,
                             VeracityError)
from veracity.pipeline.types import MAX_CLAIM_CHARS
from veracity.web.jobs import JobRunner, Store, job_view
from veracity.web.metrics import Metrics

STATIC = Path(__file__).parent / "static"


@dataclass
class WebConfig:
    """What ``veracity web`` configures. ``llm`` replaces the model client (tests: the scripted stand-in);
    ``searcher`` is an open index (None: methods that need one answer 400)."""

    home: Path
    searcher: Any = None
    endpoint: str | None = None
    model: str | None = None
    llm: Any = None
    token: str | None = None
    cors_origins: tuple[str, ...] = ()
    max_body_bytes: int = 8 * 1024 * 1024
    max_claim_chars: int = MAX_CLAIM_CHARS
    max_checks: int = 4
    max_jobs: int = 8
    job_concurrency: int = 4
    llm_concurrency: int = 256
    settings: Any = None
    model_health: Callable[[], dict[str, Any]] | None = None
    index_dir: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class VerifyRequest(BaseModel):
    claim: str = Field(description="The claim to verify.")
    method: str = Field("mermaid", description="A method of `veracity methods list`.")
    params: dict[str, Any] = Field(default_factory=dict, description="Method parameters, e.g. {\"t_max\": 3}.")
    labels: str = Field("3way", description="Label space: 3way or binary.")


class TooBusy(Exception):
    def __init__(self, message: str, retry_after: int):
        super().__init__(message)
        self.retry_after = retry_after


def _status_of(exc: VeracityError) -> int:
    if isinstance(exc, EndpointError):
        return 503
    if isinstance(exc, (OutputError, LLMOutputError)):
        return 500
    if isinstance(exc, IndexDirError):
        return 400
    if isinstance(exc, DataError):
        return 422
    return 400


def _error(status: int, message: str, hint: str | None = None, headers: dict[str, str] | None = None) -> JSONResponse:
    body: dict[str, Any] = {"error": " ".join(str(message).split())}
    if hint:
        body["hint"] = " ".join(str(hint).split())
    return JSONResponse(body, status_code=status, headers=headers)


def _loopback(host: str) -> bool:
    import ipaddress

    if host in ("localhost",):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class Guard:
    """Outermost ASGI layer: bearer auth, body-size limit, request metrics (by route template)."""

    OPEN = ("/healthz",)

    def __init__(self, app: Any, config: WebConfig, metrics: Metrics):
        self.app = app
        self.config = config
        self.metrics = metrics

    def _authorised(self, scope: dict[str, Any]) -> bool:
        token = self.config.token
        if not token:
            return True
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        given = ""
        auth = headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            given = auth[7:].strip()
        else:
            for part in headers.get("cookie", "").split(";"):
                name, _, value = part.strip().partition("=")
                if name == "veracity_token":
                    from urllib.parse import unquote

                    given = unquote(value)
        return bool(given) and hmac.compare_digest(given.encode(), token.encode())

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        t0 = time.perf_counter()
        status = [500]

        async def send_and_note(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            if scope["path"] not in self.OPEN and not self._authorised(scope):
                await self._unauthorised(scope, receive, send_and_note)
                return
            limit = self.config.max_body_bytes
            headers = dict(scope.get("headers", []))
            length = headers.get(b"content-length")
            if length is not None and length.isdigit() and int(length) > limit:
                await _error(413, f"request body of {int(length):,} bytes is over the limit of {limit:,}",
                             hint="send a smaller body (split a batch into several jobs)")(scope, receive, send_and_note)
                return
            if scope["method"] in ("POST", "PUT", "PATCH"):
                body, more = bytearray(), True
                while more:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        return
                    body += message.get("body", b"")
                    more = message.get("more_body", False)
                    if len(body) > limit:
                        await _error(413, f"request body is over the limit of {limit:,} bytes",
                                     hint="send a smaller body (split a batch into several jobs)")(
                            scope, receive, send_and_note)
                        return
                sent = [False]

                async def replay() -> dict[str, Any]:
                    if not sent[0]:
                        sent[0] = True
                        return {"type": "http.request", "body": bytes(body), "more_body": False}
                    return await receive()

                await self.app(scope, replay, send_and_note)
            else:
                await self.app(scope, receive, send_and_note)
        finally:
            route = scope.get("route")
            path = getattr(route, "path", None) or ("/static" if scope["path"].startswith("/static/") else "unmatched")
            self.metrics.request(scope["method"], path, status[0], time.perf_counter() - t0)

    async def _unauthorised(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        accept = dict(scope.get("headers", [])).get(b"accept", b"").decode("latin-1")
        headers = {"WWW-Authenticate": 'Bearer realm="veracity"'}
        if scope["method"] == "GET" and "text/html" in accept:
            page = (STATIC / "signin.html").read_text(encoding="utf-8")
            resp: Response = HTMLResponse(page, status_code=401, headers=headers)
        else:
            resp = _error(401, "this server needs a bearer token",
                          hint="send `Authorization: Bearer TOKEN` (the --token veracity web was started with)",
                          headers=headers)
        await resp(scope, receive, send)


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


def create_app(config: WebConfig) -> FastAPI:
    """The app for ``config`` (see the module docstring)."""
    from veracity.config import Settings

    settings = config.settings or Settings(home=config.home)
    metrics = Metrics()
    store = Store(Path(config.home) / "web")
    checks = Checks(config.max_checks)
    verifiers: dict[str, Any] = {}
    shared: dict[str, Any] = {"llm": config.llm, "runner": None}

    def verifier_for(method: str, labels: str, params: dict[str, Any]) -> Any:
        """One Verifier per (method, labels, params), sharing the app's index and model client."""
        from veracity.pipeline.api import Verifier

        key = json.dumps([method, labels, params], sort_keys=True, default=str)
        if key not in verifiers:
            if config.searcher is None:
                from veracity.pipeline.methods import get_method

                if get_method(method).needs_index:
                    raise IndexDirError(f"method {method} needs an index and this server has none",
                                        hint="start `veracity web --index DIR`, or pick the method direct")
            verifiers[key] = Verifier(method=method, index=config.searcher, endpoint=config.endpoint,
                                      model=config.model, settings=settings, llm=shared["llm"], labels=labels,
                                      params=params, concurrency=config.job_concurrency,
                                      llm_concurrency=config.llm_concurrency)
        return verifiers[key]

    def on_claim(record: dict[str, Any] | None, seconds: float) -> None:
        metrics.claim(record["label"] if record else None, seconds)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        own_llm = None
        if shared["llm"] is None:
            from veracity.serving.client import LLMClient

            if not config.endpoint:
                raise ConfigError("the web app needs a model endpoint", hint="veracity web resolves one; pass --endpoint")
            own_llm = LLMClient(config.endpoint, config.model, api_key=settings.api_key,
                                concurrency=config.llm_concurrency, timeout_s=settings.request_timeout_s,
                                temperature=settings.temperature, seed=settings.seed)
            shared["llm"] = own_llm
        runner = JobRunner(store, verifier_for, config.job_concurrency, on_claim)
        shared["runner"] = runner
        runner.start()
        try:
            yield
        finally:
            await runner.stop()
            for v in verifiers.values():
                v.close()
            verifiers.clear()
            if own_llm is not None:
                await own_llm.close()
                shared["llm"] = None
            store.close()

    app = FastAPI(title="veracity", version=_version(), lifespan=lifespan, docs_url=None, redoc_url=None,
                  openapi_url="/v1/openapi.json",
                  description="Offline claim verification: the API behind the page at /. Errors are "
                              "{\"error\": one line, \"hint\": what to do}.")
    app.state.store = store
    app.state.metrics = metrics
    app.state.config = config

    # -- errors: one line with a hint -----------------------------------------------------------------
    @app.exception_handler(VeracityError)
    async def _veracity_error(request: Request, exc: VeracityError) -> JSONResponse:
        return _error(_status_of(exc), str(exc), exc.hint)

    @app.exception_handler(TooBusy)
    async def _too_busy(request: Request, exc: TooBusy) -> JSONResponse:
        return _error(429, str(exc), hint=f"retry after {exc.retry_after} s",
                      headers={"Retry-After": str(exc.retry_after)})

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or "body"
        return _error(422, f"invalid request: {where}: {first.get('msg', 'invalid')}",
                      hint='send JSON like {"claim": "Paris is in France.", "method": "rag"}')

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        hint = "see /v1/docs for the routes" if exc.status_code in (404, 405) else None
        return _error(exc.status_code, str(exc.detail), hint)

    # -- checks -----------------------------------------------------------------------------------------
    def _check_request(req: VerifyRequest) -> tuple[Any, Any]:
        """(verifier, claim) for a request, or a one-line error before any model call."""
        from veracity.pipeline.runner import make_claim

        if len(req.claim) > config.max_claim_chars:
            raise DataError(f"claim has {len(req.claim):,} characters, over the limit of {config.max_claim_chars:,}",
                            hint="shorten the claim")
        claim = make_claim(req.claim)
        return verifier_for(req.method, req.labels, req.params), claim

    @app.post("/v1/verify", tags=["checks"], summary="Verify one claim",
              responses={200: {"description": "The verdict JSON of `veracity verify --json`"}})
    async def verify(req: VerifyRequest) -> Response:
        verifier, claim = _check_request(req)
        with checks.slot():
            t0 = time.perf_counter()
            try:
                verdict = await verifier.averify(claim)
            except VeracityError:
                metrics.claim(None, time.perf_counter() - t0)
                raise
            record = verdict.to_dict(claim)
            metrics.claim(record["label"], time.perf_counter() - t0)
        check_id = store.add_check(record)
        return JSONResponse(record, headers={"X-Veracity-Check": check_id, "Location": f"/v1/checks/{check_id}"})

    @app.post("/v1/verify/stream", tags=["checks"], summary="Verify one claim, streaming its trace (SSE)",
              responses={200: {"content": {"text/event-stream": {}},
                               "description": "events: trace (one per step), then verdict or error"}})
    async def verify_stream(req: VerifyRequest) -> StreamingResponse:
        verifier, claim = _check_request(req)
        release = checks.take()  # taken now, so a 429 comes before the stream starts
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        t0 = time.perf_counter()
        task = asyncio.create_task(verifier.averify(claim, on_event=queue.put_nowait))
        # released when the method ends, even if the stream never starts (a client gone before the first byte)
        task.add_done_callback(lambda _t: release())

        async def events() -> AsyncIterator[bytes]:
            try:
                yield _sse("start", {"claim": claim.text, "id": claim.id, "method": req.method})
                while True:
                    getter = asyncio.ensure_future(queue.get())
                    done, _ = await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
                    if getter in done:
                        yield _sse("trace", getter.result())
                        continue
                    getter.cancel()
                    while not queue.empty():
                        yield _sse("trace", queue.get_nowait())
                    break
                try:
                    verdict = task.result()
                except VeracityError as exc:
                    metrics.claim(None, time.perf_counter() - t0)
                    yield _sse("error", {"error": str(exc), "hint": exc.hint, "status": _status_of(exc)})
                    return
                except Exception as exc:
                    metrics.claim(None, time.perf_counter() - t0)
                    yield _sse("error", {"error": f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}",
                                         "status": 500})
                    return
                record = verdict.to_dict(claim)
                metrics.claim(record["label"], time.perf_counter() - t0)
                check_id = store.add_check(record)
                yield _sse("verdict", {"check_id": check_id, "record": record})
            finally:
                if not task.done():  # the client went away: stop the method
                    task.cancel()

        return StreamingResponse(events(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})

    from veracity.web.check_routes import router as text_check_routes  # whole texts: /v1/check, /v1/check/stream
    app.include_router(text_check_routes(verifier_for=verifier_for, checks=checks, store=store, metrics=metrics))

    @app.get("/v1/checks", tags=["checks"], summary="Past checks, newest first")
    async def list_checks(limit: int = Query(50, ge=1, le=500)) -> list[dict[str, Any]]:
        return store.checks(limit)

    @app.get("/v1/checks/{check_id}", tags=["checks"], summary="One past check (its verdict JSON)")
    async def get_check(check_id: str, download: bool = False) -> JSONResponse:
        record = store.check(check_id)
        if record is None:
            return _error(404, f"no check {check_id[:64]!r}", hint="GET /v1/checks lists the checks kept")
        headers = {"Content-Disposition": f'attachment; filename="check-{check_id}.json"'} if download else None
        return JSONResponse(record, headers=headers)

    # -- jobs -------------------------------------------------------------------------------------------
    @app.post("/v1/jobs", tags=["jobs"], summary="Start a batch job from a JSONL claims file (the body)",
              status_code=201,
              openapi_extra={"requestBody": {"required": True,
                                             "content": {"application/x-ndjson": {"schema": {"type": "string"}}}}})
    async def create_job(request: Request, method: str = "mermaid", labels: str = "3way",
                         params: str = Query("{}", description="method parameters as a JSON object")) -> JSONResponse:
        from veracity.pipeline.labels import label_space
        from veracity.pipeline.methods import get_method

        try:
            parsed = json.loads(params)
        except json.JSONDecodeError:
            parsed = None
        if not isinstance(parsed, dict):
            raise ConfigError("params must be a JSON object", hint='e.g. params={"t_max": 3}')
        spec = get_method(method)  # unknown names: one line, before anything is kept
        space = label_space(labels)
        spec.check_label_space(spec.make_params(parsed), space)
        if store.count_active() >= config.max_jobs:
            raise TooBusy(f"{config.max_jobs} jobs are queued or running, the limit", retry_after=30)
        body = await request.body()
        if not body.strip():
            raise DataError("the uploaded claims file is empty",
                            hint='one JSON object per line, e.g. {"id": "c1", "claim": "Paris is in France."}')
        job = store.create_job(body, method, space.name, parsed)
        shared["runner"].submit(job["id"])
        return JSONResponse(job_view(store, shared["runner"], job), status_code=201,
                            headers={"Location": f"/v1/jobs/{job['id']}"})

    @app.get("/v1/jobs", tags=["jobs"], summary="Jobs, newest first")
    async def list_jobs(limit: int = Query(50, ge=1, le=500)) -> list[dict[str, Any]]:
        return [job_view(store, shared["runner"], j) for j in store.jobs(limit)]

    def _job_or_404(job_id: str) -> dict[str, Any]:
        job = store.job(job_id)
        if job is None:
            raise StarletteHTTPException(404, f"no job {job_id[:64]!r}")
        return job

    @app.get("/v1/jobs/{job_id}", tags=["jobs"], summary="A job's state and progress")
    async def get_job(job_id: str) -> dict[str, Any]:
        return job_view(store, shared["runner"], _job_or_404(job_id))

    @app.get("/v1/jobs/{job_id}/results", tags=["jobs"], summary="A job's results (JSONL, one verdict a line)",
             responses={200: {"content": {"application/x-ndjson": {}}}})
    async def job_results(job_id: str) -> Response:
        job = _job_or_404(job_id)
        path = store.results_path(job["id"])
        if not path.exists():
            return Response(b"", media_type="application/x-ndjson")
        return FileResponse(path, media_type="application/x-ndjson", filename=f"results-{job['id']}.jsonl")

    @app.post("/v1/jobs/{job_id}/resume", tags=["jobs"], summary="Queue a stopped or finished job again "
              "(claims already written are skipped; failed ones are retried)")
    async def resume_job(job_id: str) -> dict[str, Any]:
        job = _job_or_404(job_id)
        if job["state"] in ("queued", "running"):
            return _error(409, f"job {job_id} is already {job['state']}")  # type: ignore[return-value]
        if store.count_active() >= config.max_jobs:
            raise TooBusy(f"{config.max_jobs} jobs are queued or running, the limit", retry_after=30)
        store.set_state(job["id"], "queued", error=None)
        shared["runner"].submit(job["id"])
        return job_view(store, shared["runner"], store.job(job["id"]))  # type: ignore[arg-type]

    # -- the index --------------------------------------------------------------------------------------
    def _searcher() -> Any:
        if config.searcher is None:
            raise IndexDirError("this server has no index", hint="start `veracity web --index DIR`")
        return config.searcher

    @app.get("/v1/passages/{passage_id:path}", tags=["index"], summary="One passage of the index")
    async def get_passage(passage_id: str) -> dict[str, Any]:
        found = await asyncio.to_thread(_passage, _searcher(), passage_id)
        if found is None:
            raise StarletteHTTPException(404, f"no passage {passage_id[:200]!r} in the index")
        return found

    @app.get("/v1/articles/{title:path}", tags=["index"], summary="An article's passages in order")
    async def get_article(title: str) -> dict[str, Any]:
        hits = await asyncio.to_thread(_searcher().open_page, title)
        if not hits:
            raise StarletteHTTPException(404, f"no article {title[:200]!r} in the index")
        return {"title": hits[0].title,
                "passages": [{"passage_id": h.passage_id, "text": h.text} for h in hits]}

    @app.get("/v1/methods", tags=["meta"], summary="Methods and label spaces (the page's pickers)")
    async def methods() -> dict[str, Any]:
        from veracity.pipeline.labels import LABEL_SPACES
        from veracity.pipeline.methods import METHODS

        return {"methods": [{"name": s.name, "summary": s.summary, "needs_index": s.needs_index,
                             "available": s.needs_index is False or config.searcher is not None}
                            for s in METHODS.values()],
                "labels": [{"name": n, "labels": list(sp.values())} for n, sp in LABEL_SPACES.items()],
                "default_method": "mermaid" if config.searcher is not None else "direct"}

    # -- health and metrics -----------------------------------------------------------------------------
    @app.get("/healthz", tags=["meta"], summary="App, model server and index")
    async def healthz() -> JSONResponse:
        model = await asyncio.to_thread(_model_health, config)
        index: dict[str, Any] = {"ok": config.searcher is not None}
        if config.searcher is not None:
            manifest = getattr(config.searcher, "manifest", None) or {}
            index.update({"dir": config.index_dir or str(getattr(config.searcher, "index_dir", "") or ""),
                          "passages": manifest.get("passages")})
        else:
            index["error"] = "no index (start veracity web --index DIR)"
        ok = model["ok"] and index["ok"]
        return JSONResponse({"ok": ok, "app": {"ok": True, "version": _version()}, "model_server": model,
                             "index": index}, status_code=200 if ok else 503)

    @app.get("/metrics", tags=["meta"], summary="Prometheus text: requests, claims, failures, latency histograms",
             response_class=PlainTextResponse)
    async def get_metrics() -> PlainTextResponse:
        return PlainTextResponse(metrics.render(checks.running, store.count_active()),
                                 media_type="text/plain; version=0.0.4")

    # -- the page ---------------------------------------------------------------------------------------
    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html")

    @app.get("/v1/docs", include_in_schema=False)
    async def docs() -> FileResponse:
        return FileResponse(STATIC / "docs.html", media_type="text/html")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    guarded = Guard(app, config, metrics)
    if config.cors_origins:
        from starlette.middleware.cors import CORSMiddleware

        app.add_middleware(CORSMiddleware, allow_origins=list(config.cors_origins),
                           allow_methods=["GET", "POST"], allow_headers=["Authorization", "Content-Type"])
    app.state.guarded = guarded
    return app


def asgi(config: WebConfig) -> Any:
    """The served ASGI callable: the app behind its guard (auth, body limit, request metrics)."""
    app = create_app(config)
    return _Served(app.state.guarded, app)


class _Served:
    """The guard as the outer callable, with the FastAPI app reachable (``.app``) for lifespan and tests."""

    def __init__(self, guard: Guard, app: FastAPI):
        self.guard = guard
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        await self.guard(scope, receive, send)


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False, default=str)}\n\n".encode("utf-8")


def _passage(searcher: Any, passage_id: str) -> dict[str, Any] | None:
    store = getattr(searcher, "store", None)
    if store is not None and hasattr(store, "by_ids"):
        found = store.by_ids([passage_id])
        if passage_id in found:
            title, text = found[passage_id]
            return {"passage_id": passage_id, "title": title, "text": text}
        return None
    title = passage_id.rsplit("#", 1)[0]  # an index without a passage store: ids are "title#n"
    for hit in searcher.open_page(title):
        if hit.passage_id == passage_id:
            return {"passage_id": hit.passage_id, "title": hit.title, "text": hit.text}
    return None


def _model_health(config: WebConfig) -> dict[str, Any]:
    if config.model_health is not None:
        return config.model_health()
    if not config.endpoint:
        return {"ok": config.llm is not None, "endpoint": None, "models": [getattr(config.llm, "model", None)]}
    from veracity.serving.server import health

    models = health(config.endpoint)
    out: dict[str, Any] = {"ok": bool(models), "endpoint": config.endpoint, "models": models or []}
    if not models:
        out["error"] = "the model server does not answer"
    return out


def _version() -> str:
    from veracity import __version__

    return __version__
