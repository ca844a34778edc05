"""Backends of a batch: one interface, ``run(engine, pending, sink, concurrency) -> RunStats``.

``engine`` is the run's :class:`~veracity.pipeline.engine.Engine` (built from its
:class:`~veracity.pipeline.config.VerifierConfig`), ``pending`` the claims still to verify (the caller
checked them and left out the ids already written), ``sink`` the
:class:`~veracity.pipeline.results.ResultSink`
that writes the run manifest (:meth:`~veracity.pipeline.results.ResultSink.open`) and every result.
``local`` keeps ``concurrency`` claims in flight in this process; ``ray`` runs them as a Ray Data pipeline
of actors, each building its own engine from the config. An endpoint that stops answering
(``EndpointError``) or results that cannot be written (``OutputError``) stop a run; the caller attaches
the statistics.
"""

from __future__ import annotations

from typing import Any


def get_backend(name: str) -> Any:
    """The backend module for ``name`` (``local`` or ``ray``; the config checked the name)."""
    if name == "ray":
        from veracity.pipeline.backends import ray

        return ray
    from veracity.pipeline.backends import local

    return local
