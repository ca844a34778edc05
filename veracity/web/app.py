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

Layout: this module assembles the app; :mod:`veracity.web.guard` is the outer ASGI layer (auth, limits,
metrics); :mod:`veracity.web.routes` holds one router per resource (checks, jobs, index, meta, page), each
built from the app's :class:`~veracity.web.common.WebContext`.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any, AsyncIterator

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from veracity.errors import ConfigError, IndexDirError, VeracityError
from veracity.web.common import STATIC, Checks, TooBusy, WebConfig, WebContext, error, status_of, version
from veracity.web.guard import Guard, loopback
from veracity.web.jobs import JobRunner, Store
from veracity.web.metrics import Metrics
from veracity.web.routes import ROUTERS
from veracity.web.routes.checks import VerifyRequest

__all__ = ["STATIC", "VerifyRequest", "WebConfig", "asgi", "create_app"]

_loopback = loopback  # the name `veracity web` and the tests import


def create_app(config: WebConfig) -> FastAPI:
    """The app for ``config`` (see the module docstring)."""
    settings = config.verifier.settings
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
            run = config.verifier.replace(method=method, params=params, labels=labels, index=config.searcher)
            verifiers[key] = Verifier.from_config(run, llm=shared["llm"])
        return verifiers[key]

    def on_claim(record: dict[str, Any] | None, seconds: float) -> None:
        metrics.claim(record["label"] if record else None, seconds)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        own_llm = None
        if shared["llm"] is None:
            from veracity.serving.client import LLMClient

            if not config.endpoint:
                raise ConfigError("the web app needs a model endpoint",
                                  hint="veracity web resolves one; pass --endpoint")
            own_llm = LLMClient(config.endpoint, config.verifier.endpoint.model, api_key=settings.api_key,
                                concurrency=config.verifier.execution.llm_concurrency,
                                timeout_s=settings.request_timeout_s,
                                temperature=settings.temperature, seed=settings.seed)
            shared["llm"] = own_llm
        runner = JobRunner(store, verifier_for, on_claim)
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

    app = FastAPI(title="veracity", version=version(), lifespan=lifespan, docs_url=None, redoc_url=None,
                  openapi_url="/v1/openapi.json",
                  description="Offline claim verification: the API behind the page at /. Errors are "
                              "{\"error\": one line, \"hint\": what to do}.")
    app.state.store = store
    app.state.metrics = metrics
    app.state.config = config

    # -- errors: one line with a hint -----------------------------------------------------------------
    @app.exception_handler(VeracityError)
    async def _veracity_error(request: Request, exc: VeracityError) -> JSONResponse:
        return error(status_of(exc), str(exc), exc.hint)

    @app.exception_handler(TooBusy)
    async def _too_busy(request: Request, exc: TooBusy) -> JSONResponse:
        return error(429, str(exc), hint=f"retry after {exc.retry_after} s",
                     headers={"Retry-After": str(exc.retry_after)})

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return error(422, _invalid_message(exc.errors()),
                     hint='send JSON like {"claim": "Paris is in France.", "method": "rag"}')

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        hint = "see /v1/docs for the routes" if exc.status_code in (404, 405) else None
        return error(exc.status_code, str(exc.detail), hint)

    # -- the routes, one router per resource (veracity/web/routes) ----------------------------------------
    ctx = WebContext(config=config, settings=settings, store=store, metrics=metrics, checks=checks,
                     verifier_for=verifier_for, shared=shared)
    for make_router in ROUTERS:
        app.include_router(make_router(ctx))

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


def _invalid_message(errors: Any) -> str:
    """A request body pydantic refused, in words a user reads (not "14: JSON decode error")."""
    first = errors[0] if errors else {}
    kind = first.get("type", "")
    if kind == "json_invalid":
        where = next((p for p in first.get("loc", ()) if isinstance(p, int)), None)
        why = (first.get("ctx") or {}).get("error") or "not JSON"
        at = f" at character {where}" if where is not None else ""
        return f"the request body is not valid JSON ({why}{at})"
    where = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or "body"
    if kind == "extra_forbidden":
        fields = ", ".join(VerifyRequest.model_fields)
        return f"unknown field {where!r} in the request body (the fields are {fields})"
    if kind == "missing":
        return ("the request has no JSON body" if where == "body"
                else f"the request body has no {where!r} field")
    return f"invalid request: {where}: {first.get('msg', 'invalid')}"
