"""One typed settings object for the whole tool.

Values come from (highest first): explicit arguments / CLI flags, environment variables
(``VERACITY_*``), then defaults. Everything the tool writes lives under ``home`` unless told otherwise.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import urlsplit

from veracity.errors import ConfigError


def _env_path(name: str, default: Path) -> Path:
    value = os.environ.get(name)
    return Path(value).expanduser() if value else default


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or not value.strip():
        return default
    try:
        return int(value)
    except ValueError:
        raise ConfigError(f"${name} must be an integer, got {value!r}",
                          hint=f"e.g. {name}={default}") from None


def _env_float(name: str, default: float) -> float:
    value = os.environ.get(name)
    if value is None or not value.strip():
        return default
    try:
        got = float(value)
    except ValueError:
        got = -1.0
    if not got > 0 or got == float("inf"):
        raise ConfigError(f"${name} must be a positive number of seconds, got {value!r}",
                          hint=f"e.g. {name}={default:g}")
    return got


def _check_one_endpoint(endpoint: str, given: str) -> None:
    """A one-line ConfigError when ``endpoint`` (one entry of ``given``) is not an http(s) URL with a host."""
    text = endpoint.strip()
    url = text if "://" in text else "http://" + text
    try:
        parts = urlsplit(url)
        port = parts.port  # a port that is not a number or out of 0..65535 raises here
    except ValueError as exc:
        problem = str(exc)
    else:
        if parts.scheme not in ("http", "https"):
            problem = f"scheme {parts.scheme!r} is not http or https"
        elif not parts.hostname or any(c.isspace() for c in text):
            problem = "no host name" if not parts.hostname else "it contains spaces"
        elif port == 0:
            problem = "port 0"
        else:
            return
    where = "" if endpoint == given else f" (in {given!r})"
    raise ConfigError(f"model endpoint {endpoint!r}{where} (--endpoint or $VERACITY_ENDPOINT) is not a valid "
                      "URL: "
                      f"{problem}",
                      hint="e.g. --endpoint http://127.0.0.1:8000/v1 (an OpenAI-compatible server), "
                      "or a comma-separated list of such URLs serving the same model")


def endpoint_url(endpoint: str) -> str:
    """One endpoint as a base URL ending in ``/v1`` (``host:port`` alone means http); not validated."""
    url = endpoint.strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        url = "http://" + url
    return url if url.endswith("/v1") else url + "/v1"


def split_endpoints(endpoint: str) -> list[str]:
    """The endpoints of ``--endpoint`` / ``$VERACITY_ENDPOINT``: one URL or a comma-separated list of
    OpenAI-compatible endpoints serving the same model, each as a ``.../v1`` base URL, in the order given.
    An empty list, an empty entry, a malformed URL or one listed twice: a one-line ConfigError, before
    anything is contacted."""
    text = endpoint if isinstance(endpoint, str) else str(endpoint)
    parts = [p.strip() for p in text.split(",")]
    if not any(parts):
        raise ConfigError("the model endpoint list (--endpoint or $VERACITY_ENDPOINT) is empty: "
                          f"{endpoint!r}",
                          hint="give one URL, e.g. --endpoint http://127.0.0.1:8000/v1, or several separated "
                               "by commas; leave it out to use the managed server")
    if "" in parts:
        raise ConfigError(f"the model endpoint list {endpoint!r} (--endpoint or $VERACITY_ENDPOINT) has an "
                          "empty "
                          "entry", hint="separate URLs with single commas, e.g. "
                                        "--endpoint http://127.0.0.1:8000/v1,http://127.0.0.1:8001/v1")
    urls: list[str] = []
    for part in parts:
        _check_one_endpoint(part, text)
        url = endpoint_url(part)
        if url in urls:
            raise ConfigError(f"model endpoint {url} is listed twice in {endpoint!r}",
                              hint="list each server once (least-outstanding balancing already sends it "
                                   "as much as it takes)")
        urls.append(url)
    return urls


def check_endpoint(endpoint: str) -> str:
    """``endpoint`` as given when it is an http(s) URL with a host (``host:port`` alone means http) or a
    comma-separated list of such URLs, else a one-line ConfigError: a malformed URL fails before anything is
    contacted, not deep in the HTTP client."""
    split_endpoints(endpoint)
    return endpoint


def default_home() -> Path:
    return _env_path("VERACITY_HOME", Path.home() / ".veracity")


@dataclass(frozen=True)
class Settings:
    """Settings shared by the CLI and the Python API."""

    home: Path = field(default_factory=default_home)
    endpoint: str | None = field(default_factory=lambda: os.environ.get("VERACITY_ENDPOINT") or None)
    model: str | None = field(default_factory=lambda: os.environ.get("VERACITY_MODEL") or None)
    api_key: str = field(default_factory=lambda: os.environ.get("VERACITY_API_KEY", "EMPTY"))
    index_dir: Path | None = field(
        default_factory=lambda: Path(os.environ["VERACITY_INDEX"]) if os.environ.get("VERACITY_INDEX")
                                   else None
    )
    data_dir: Path | None = field(
        default_factory=lambda: Path(os.environ["VERACITY_DATA_DIR"]) if os.environ.get("VERACITY_DATA_DIR")
                                  else None
    )
    # claims in flight in a batch
    concurrency: int = field(default_factory=lambda: _env_int("VERACITY_CONCURRENCY", 16))
    # LLM requests in flight (one claim's parallel agents, or many claims): 256 is vLLM's default
    # --max-num-seqs, so the client never keeps the server's batch from filling; the server queues the rest
    llm_concurrency: int = field(default_factory=lambda: _env_int("VERACITY_LLM_CONCURRENCY", 256))
    # seconds a reply may take at least (longer replies get max_tokens / 2 tok/s); a CPU server with a full
    # batch decodes each request slowly, so heavy runs there may need more
    request_timeout_s: float = field(default_factory=lambda: _env_float("VERACITY_REQUEST_TIMEOUT_S", 300.0))
    temperature: float = 0.0
    seed: int = 0

    @property
    def models_dir(self) -> Path:
        return _env_path("VERACITY_MODELS_DIR", self.home / "models")

    @property
    def cache_dir(self) -> Path:
        return self.home / "cache"

    @property
    def run_dir(self) -> Path:
        """Where managed servers keep their state and log files."""
        return self.home / "run"

    @property
    def indexes_dir(self) -> Path:
        return self.home / "indexes"

    def __post_init__(self) -> None:
        if self.endpoint is not None:
            check_endpoint(self.endpoint)

    def with_(self, **changes) -> "Settings":
        """A copy with the given fields changed; ``None`` values are ignored."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


def load_settings(**overrides) -> Settings:
    return Settings().with_(**overrides)
