"""`veracity web`: the page and the HTTP API (one ASGI app, uvicorn), on the managed model server."""

from __future__ import annotations

import signal
import socket
from pathlib import Path

import click

from veracity.cli._common import config_options, err_console
from veracity.errors import ConfigError


@click.command("web")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind. Any address other than loopback needs --token.")
@click.option("--port", type=int, default=8080, show_default=True, help="Port to bind.")
@config_options("index", "endpoint", "model", help={
    "endpoint": "OpenAI-compatible endpoint (default: $VERACITY_ENDPOINT or the managed local server, "
                "started if "
                "needed)."})
@click.option("--token", default=None,
              help="Bearer token required on every route but /healthz: at least 16 characters, 8 different "
                   "ones, "
              "64 bits, no whitespace and no simple pattern (veracity web --new-token makes one). "
              "Required when binding a non-loopback address. Visible to other users in `ps`: prefer "
              "--token-file or $VERACITY_WEB_TOKEN.")
@click.option("--token-file", type=click.Path(path_type=Path), default=None,
              help="Read the bearer token from this file (its first line).")
@click.option("--new-token", is_flag=True, help="Print a new random bearer token (256 bits) and exit, e.g. "
              "`veracity web --new-token > ~/.veracity/web-token` then --token-file ~/.veracity/web-token.")
@click.option("--allowed-host", "allowed_hosts", multiple=True, metavar="NAME",
              help="Also accept requests whose Host header names NAME (repeatable; e.g. a reverse proxy's "
                   "name). "
              "By default only the address bound (and localhost on loopback) is accepted.")
@click.option("--cors-origin", "cors_origins", multiple=True, metavar="ORIGIN",
              help="Allow cross-origin requests from ORIGIN (repeatable; CORS is off by default).")
@click.option("--max-checks", type=int, default=4, show_default=True,
              help="Single checks in flight at once; more are answered 429 with Retry-After.")
@click.option("--max-jobs", type=int, default=8, show_default=True,
              help="Batch jobs queued or running at once; more are answered 429 with Retry-After.")
@click.option("--max-body-mb", type=float, default=8.0, show_default=True, help="Largest request body (MiB).")
@click.option("--max-claim-chars", type=int, default=None, help="Longest claim (default: 20,000 characters).")
@config_options("concurrency", help={
    "concurrency": "Claims in flight in a batch job (default: $VERACITY_CONCURRENCY or 16)."})
def web(host, port, index, endpoint, model, token, token_file, new_token, allowed_hosts, cors_origins,
        max_checks, max_jobs,
        max_body_mb, max_claim_chars, concurrency) -> None:
    """Serve the page at / and the API under /v1/ (docs at /v1/docs).

    \b
    Examples:
      veracity web                                  # http://127.0.0.1:8080/
      veracity web --index ~/.veracity/indexes/demo --port 9000
      veracity web --new-token > ~/.veracity/web-token
      veracity web --host 0.0.0.0 --token-file ~/.veracity/web-token
    """
    if new_token:
        from veracity.web.common import new_token as make_token

        click.echo(make_token())
        return
    from veracity.config import load_settings
    from veracity.pipeline.api import open_index
    from veracity.pipeline.config import VerifierConfig
    from veracity.pipeline.types import MAX_CLAIM_CHARS
    from veracity.web.app import WebConfig, _loopback, asgi

    import os

    token = _token(token, token_file, os.environ.get("VERACITY_WEB_TOKEN"))
    if not _loopback(host) and not token:
        raise ConfigError(f"binding {host} exposes the app beyond this machine and needs a token",
                          hint="pass --token SECRET (clients send `Authorization: Bearer SECRET`), or bind "
                               "127.0.0.1")
    for name, value in (("--max-checks", max_checks), ("--max-jobs", max_jobs)):
        if value < 1:
            raise ConfigError(f"{name} must be at least 1, got {value}", hint=f"e.g. {name} 4")
    check_port(port)
    if max_body_mb <= 0:
        raise ConfigError(f"--max-body-mb must be positive, got {max_body_mb}", hint="e.g. --max-body-mb 8")
    claim_cap = max_claim_chars if max_claim_chars is not None else MAX_CLAIM_CHARS
    if not 1 <= claim_cap <= MAX_CLAIM_CHARS:
        raise ConfigError(f"--max-claim-chars must be between 1 and {MAX_CLAIM_CHARS:,}, got {claim_cap}",
                          hint="e.g. --max-claim-chars 2000")
    settings = load_settings(endpoint=endpoint, model=model)
    # the app's configuration, before any index or server: the token and the limits are checked here, once
    config = WebConfig(home=settings.home, verifier=VerifierConfig.of(concurrency=concurrency,
                                                                      settings=settings),
                       token=token, cors_origins=tuple(cors_origins), host=host,
                       allowed_hosts=tuple(allowed_hosts),
                       max_body_bytes=int(max_body_mb * 1024 * 1024), max_claim_chars=claim_cap,
                       max_checks=max_checks, max_jobs=max_jobs)
    _check_port(host, port)
    searcher = None
    if index is not None or settings.index_dir is not None or (settings.indexes_dir / "demo").exists():
        searcher = open_index(index, settings)  # a bad --index: one line, before the model server
    else:
        err_console.print("[yellow]warning:[/] no index (pass --index DIR): only methods without one "
                          "(direct) "
                          "can run", highlight=False)
    from veracity.serving.server import ensure_endpoint

    url, served = ensure_endpoint(settings, model)  # the managed server, started if needed, like verify
    config.searcher, config.index_dir = searcher, str(getattr(searcher, "index_dir", "")) or None
    config.verifier = config.verifier.replace(endpoint=url, model=served)  # only the endpoint part is new
    app = asgi(config)
    shown = f"[{host}]" if ":" in host else host
    err_console.print(f"veracity web on http://{shown}:{port}/ (API docs /v1/docs; model {url}; "
                      f"index {config.index_dir or 'none'})", highlight=False)
    if token:
        err_console.print("bearer auth is on: every route but /healthz needs `Authorization: Bearer TOKEN` "
                          "(the page asks for the token once)", highlight=False)
    import uvicorn

    from veracity.cli import interrupt

    interrupt.keep(f"the app stopped; its checks and jobs are kept in {settings.home / 'web'} and unfinished "
                   "jobs "
                   "resume when `veracity web` starts again")
    try:
        server = _uvicorn_server()(uvicorn.Config(app, host=host, port=port, log_level="warning",
                                                  access_log=False))
        server.run()
        if server.stopped_by == signal.SIGINT:
            # uvicorn shut down gracefully on Ctrl-C and raises it again, but inside its event loop, where
            # asyncio may take it for a cancellation of a task already done: exit 0. Ctrl-C is 130, one line.
            raise KeyboardInterrupt
    finally:
        if searcher is not None:
            searcher.close()


def _uvicorn_server():
    """uvicorn.Server noting its stop signal (a class made on first use: `veracity --help` imports no
    uvicorn)."""
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server, remembering the signal that stopped it."""

        stopped_by: int | None = None

        def handle_exit(self, sig: int, frame) -> None:
            self.stopped_by = self.stopped_by or sig
            super().handle_exit(sig, frame)

    return Server


TOKEN_FILE_BYTES = 64 << 10  # read of a --token-file: its first line is the token


def _token(given: str | None, path: Path | None, env: str | None) -> str | None:
    """The token from --token, --token-file or $VERACITY_WEB_TOKEN (one of them), or None."""
    if given is not None and path is not None:
        raise ConfigError("pass --token or --token-file, not both", hint="--token-file keeps it out of `ps`")
    if path is None:
        return given if given is not None else (env if env else None)
    from veracity.reading import read_file_limited

    try:
        data, more = read_file_limited(path, TOKEN_FILE_BYTES)  # a device or a pipe is read with a bound
        lines = data.decode("utf-8").splitlines()
        if more and len(lines) < 2:  # no line break in the first 64 KiB: no token file
            raise ConfigError(f"the token file {path} has no line break in its first "
                              f"{TOKEN_FILE_BYTES >> 10} KiB: "
                              "not a token file", hint="write the token on the file's first line, e.g. "
                              "veracity web --new-token > FILE")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise ConfigError(f"cannot read the token file {path} ({why})",
                          hint="write the token on the file's first line, e.g. veracity web --new-token > "
                               "FILE") from None
    return lines[0].strip() if lines else ""


def check_port(port: int, flag: str = "--port") -> None:
    """A TCP port: 1 to 65535 (one line otherwise, before anything starts)."""
    if not 1 <= port <= 65535:
        raise ConfigError(f"{flag} must be between 1 and 65535, got {port}", hint=f"e.g. {flag} 8080")


def _check_port(host: str, port: int) -> None:
    """The address can be bound, else one line before the index or the model server is touched."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            raise ConfigError(f"cannot bind {host}:{port} ({exc.strerror or exc})",
                              hint="pick another --port, or stop what is using it") from None


COMMANDS = [web]
