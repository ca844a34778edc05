"""Typed errors raised by library code.

Library code raises these; only the CLI turns them into one-line messages. Every error carries a
``hint`` saying what the user can do about it.
"""

from __future__ import annotations


class VeracityError(Exception):
    """Base class: a problem the user can act on. ``str(err)`` is one line; ``err.hint`` says what to do."""

    exit_code = 1

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:  # one line, always
        return " ".join(self.message.split())


class ConfigError(VeracityError):
    """A bad option, flag or setting."""

    exit_code = 2


class ModelError(VeracityError):
    """Unknown model, missing or broken weights, failed conversion."""


class ServerError(VeracityError):
    """The vLLM server could not be started, died, or is not managed by us."""


class EndpointError(VeracityError):
    """An OpenAI-compatible endpoint is unreachable or serves another model."""


class EndpointBusyError(EndpointError):
    """The endpoint answers its health check but did not finish replies within the timeout, time after time:
    it is overloaded, not dead. Its hint (fewer requests in flight, a longer timeout) is the one to show;
    restarting the server would not help."""


RESTART_HINT = "restart the server, then run the same command again to resume"


def endpoint_stop_hint(exc: EndpointError) -> str:
    """The hint for a batch an endpoint failure stopped: an overloaded endpoint keeps its own (fewer requests
    at once, a longer timeout); for a dead one, restart it and resume."""
    return exc.hint if isinstance(exc, EndpointBusyError) and exc.hint else RESTART_HINT


class PromptTooLongError(VeracityError):
    """One request outgrew the server's context (``--max-model-len``): that claim fails, the run goes on (the
    endpoint is fine, so this is not an ``EndpointError``, which stops a batch)."""


class LLMOutputError(VeracityError):
    """The model's reply still did not validate against the output schema after retries."""

    def __init__(self, message: str, hint: str | None = None, raw: str | None = None,
                 role: str | None = None):
        super().__init__(message, hint)
        self.raw = raw
        self.role = role


class IndexDirError(VeracityError):
    """An index directory is missing, corrupt, or incompatible with the query."""


class CorpusError(VeracityError):
    """A corpus or dump file that cannot be read (wrong format, truncated, bad line)."""


class DataError(VeracityError):
    """A dataset or claims file that cannot be read (wrong format, labels outside the mapping, ...)."""


class JavaError(VeracityError):
    """No Java runtime usable by pyserini."""


class LeakageError(VeracityError):
    """An index built from a dump newer than the dataset, without --allow-leakage."""


class OutputError(VeracityError):
    """Results cannot be written (disk full, file size limit, read-only folder); what was written is kept."""


class ClusterError(VeracityError):
    """The Ray cluster of ``--backend ray`` cannot be reached or cannot run the batch; results already
    written are kept."""
