"""The outermost ASGI layer of the web app: bearer auth, body-size limit, request metrics (by route template)."""

from __future__ import annotations

import hmac
import time
from typing import Any

from fastapi.responses import HTMLResponse, Response

from veracity.web.common import STATIC, WebConfig, error
from veracity.web.metrics import Metrics


def loopback(host: str) -> bool:
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
                await error(413, f"request body of {int(length):,} bytes is over the limit of {limit:,}",
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
                        await error(413, f"request body is over the limit of {limit:,} bytes",
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
            resp = error(401, "this server needs a bearer token",
                         hint="send `Authorization: Bearer TOKEN` (the --token veracity web was started with)",
                         headers=headers)
        await resp(scope, receive, send)
