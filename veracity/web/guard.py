"""The outermost ASGI layer of the web app: the Host header, bearer auth, cross-site refusal, body-size limit,
security headers, request metrics (by route template).

Cross-site requests (issue 29 point 3): a page on another origin can send a "simple" request (a form post,
a ``no-cors`` fetch) without the browser asking the server first; such a request can only carry the
content types ``text/plain``, ``application/x-www-form-urlencoded`` or ``multipart/form-data`` and no
custom header. So every state-changing request (any method but GET / HEAD / OPTIONS) must declare its
route's type, ``application/json`` (``application/x-ndjson`` for a claims file upload): a cross-origin
page can only send that after a CORS preflight, which this app answers for ``--cors-origin`` origins
only. ``Origin`` and ``Sec-Fetch-Site``, when the browser sends them, must say the request comes from the
app's own origin (or a ``--cors-origin``). The Host header must name the address served (or an
``--allowed-host``), which closes DNS rebinding: a rebound name reaches the app with the attacker's name
in Host."""

from __future__ import annotations

import hmac
import ipaddress
import socket
import time
from typing import Any
from urllib.parse import urlsplit

from fastapi.responses import HTMLResponse, Response

from veracity.web.common import STATIC, WebConfig, error
from veracity.web.metrics import Metrics


def loopback(host: str) -> bool:
    if host in ("localhost",):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _ip(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


def host_name(value: str) -> str:
    """The name in a Host header (or an origin's netloc), lowercased, without port or IPv6 brackets; '' (no
    name) for an address in brackets followed by anything but ``:PORT``."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return value[1:]
        port = value[end + 1:]
        return value[1:end] if not port or (port[0] == ":" and port[1:].isdigit()) else ""
    if value.count(":") == 1:
        return value.split(":", 1)[0]
    return value


def host_allowed(value: str, bound: str, extra: tuple[str, ...] = ()) -> bool:
    """Whether a Host header names the address the app is bound to.

    An IP literal cannot be rebound, a DNS name can: loopback binds accept ``localhost`` and loopback
    addresses, a wildcard bind (0.0.0.0, ::) any address and this machine's names, any bind its own address;
    ``extra`` (``--allowed-host``) adds names (a reverse proxy's)."""
    name = host_name(value)
    if not name:
        return False
    bound = host_name(bound) if bound.startswith("[") else bound.strip().lower()
    if name == bound or name in {host_name(e) for e in extra}:
        return True
    ip, bound_ip = _ip(name), _ip(bound)
    if loopback(bound):
        return name == "localhost" or (ip is not None and ip.is_loopback)
    if bound_ip is not None and bound_ip.is_unspecified:
        return ip is not None or name == "localhost" or name in {socket.gethostname().lower(),
                                                                 socket.getfqdn().lower()}
    return False


# sent with every response: no framing, no MIME sniffing, scripts and styles only from the app's own files
SECURITY_HEADERS = (
    (b"content-security-policy",
     b"default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
                                 b"form-action 'self'; frame-ancestors 'none'"),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
)

SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


class Guard:
    """Outermost ASGI layer: bearer auth, body-size limit, request metrics (by route template)."""

    # no token needed (the sign-in page's files)
    OPEN = ("/healthz", "/static/signin.js", "/static/signin.css")
    JSON = "application/json"
    UPLOADS = {"/v1/jobs": "application/x-ndjson"}  # routes whose body is a file of another declared type

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
                headers = list(message.get("headers", []))
                present = {k.lower() for k, _ in headers}
                headers += [(k, v) for k, v in SECURITY_HEADERS if k not in present]
                message = {**message, "headers": headers}
            await send(message)

        try:
            refused = self._host_refused(scope)
            if refused is not None:
                await refused(scope, receive, send_and_note)
                return
            authorised = self._authorised(scope)
            scope.setdefault("state", {})["authorised"] = authorised  # /healthz tells details only then
            if scope["path"] not in self.OPEN and not authorised:
                await self._unauthorised(scope, receive, send_and_note)
                return
            refused = self._cross_site_refused(scope)
            if refused is not None:
                await refused(scope, receive, send_and_note)
                return
            limit = self.config.max_body_bytes
            headers = dict(scope.get("headers", []))
            length = headers.get(b"content-length")
            if length is not None and length.isdigit() and int(length) > limit:
                await error(413, f"request body of {int(length):,} bytes is over the limit of {limit:,}",
                            hint="send a smaller body (split a batch into several jobs)")(scope, receive,
                                                                                          send_and_note)
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
            path = getattr(route, "path",
                           None) or ("/static" if scope["path"].startswith("/static/") else "unmatched")
            self.metrics.request(scope["method"], path, status[0], time.perf_counter() - t0)

    def _headers(self, scope: dict[str, Any]) -> dict[str, str]:
        return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}

    def _host_refused(self, scope: dict[str, Any]) -> Any:
        """A 421 for a Host header that does not name this server (DNS rebinding), else None."""
        host = self._headers(scope).get("host", "")
        if host_allowed(host, self.config.host, self.config.allowed_hosts):
            return None
        shown = " ".join(host.split())[:100]
        return error(421,
                     f"the Host header {shown!r} does not name this server" if host
                     else "the request has no Host header",
                     hint=f"open the address veracity web serves ({self.config.host}); behind a reverse "
                          "proxy start "
                          "it with --allowed-host NAME")

    def _cross_site_refused(self, scope: dict[str, Any]) -> Any:
        """A 403 / 415 for a state-changing request a page on another origin could have sent, else None."""
        if scope["method"] in SAFE_METHODS:
            return None
        headers = self._headers(scope)
        origin = headers.get("origin")
        listed = origin is not None and (origin in self.config.cors_origins or self._proxied(origin))
        site = headers.get("sec-fetch-site")
        if not listed and (site not in (None, "same-origin", "none")
                           or (origin is not None and not self._same_origin(origin, headers.get("host",
                                                                                                "")))):
            return error(403, f"cross-site request refused ({scope['method']} {scope['path']} from "
                              f"{' '.join((origin or site or '').split())[:100]})",
                         hint="use the page this server serves, or start veracity web with --cors-origin "
                              "ORIGIN")
        declared = self.UPLOADS.get(scope["path"], self.JSON)
        given = headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if given != declared:
            return error(415, f"{scope['method']} {scope['path']} needs Content-Type {declared}, got "
                              f"{' '.join(given.split())[:60] or 'none'}",
                         hint=f"send the body as {declared}" + (" (one JSON object per line)"
                                                               if declared != self.JSON else ""))
        return None

    def _proxied(self, origin: str) -> bool:
        """The page served through a reverse proxy named by --allowed-host (which may rewrite Host)."""
        parts = urlsplit(origin)
        return parts.scheme in ("http", "https") and bool(parts.netloc) and \
            host_name(parts.netloc) in {host_name(h) for h in self.config.allowed_hosts}

    @staticmethod
    def _same_origin(origin: str, host: str) -> bool:
        parts = urlsplit(origin)
        return (parts.scheme in ("http", "https") and bool(parts.netloc)
                and parts.netloc.lower() == host.strip().lower())

    async def _unauthorised(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        accept = dict(scope.get("headers", [])).get(b"accept", b"").decode("latin-1")
        headers = {"WWW-Authenticate": 'Bearer realm="veracity"'}
        if scope["method"] == "GET" and "text/html" in accept:
            page = (STATIC / "signin.html").read_text(encoding="utf-8")
            resp: Response = HTMLResponse(page, status_code=401, headers=headers)
        else:
            resp = error(401, "this server needs a bearer token",
                         hint="send `Authorization: Bearer TOKEN` "
                              "(the --token veracity web was started with)",
                         headers=headers)
        await resp(scope, receive, send)
