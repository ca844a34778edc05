"""A batch of claims on a backend, the same for every caller (:meth:`Verifier.verify_many
<veracity.pipeline.api.Verifier.verify_many>`, the web app's jobs, ``bench run``):
the checks that need no server (limits, claims, gold evidence, the results file and its manifest), made
once, before anything is written; resume (ids already written are skipped); the one results writer and the
one manifest writer (:class:`~veracity.pipeline.results.ResultSink`,
:class:`~veracity.pipeline.results.RunManifest`);
the progress bar; the backend's run (:mod:`veracity.pipeline.backends`: the local backend's worker loop is
the only one); the statistics, attached to an error that stops the run under way (``err.stats``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from veracity.pipeline.backends import get_backend
from veracity.pipeline.claims import ClaimsFile, RejectedLine, load_claims
from veracity.pipeline.engine import Engine
from veracity.pipeline.results import (ResultSink, RunManifest, RunStats, _Progress, check_output,
                                       read_done_ids)


@dataclass
class PreparedClaims(ClaimsFile):
    """Claims :func:`prepare` has checked for one engine and results file: :func:`run_batch` takes them as
    they are (a caller that checks early, ``bench run``, before its endpoint, does not check twice)."""

    engine: Any = None
    out: Path | None = None


def prepare(engine: Engine, claims: Any, out: Path | str | None) -> PreparedClaims:
    """The loaded claims, after every check of a batch that needs no server: the claims, their gold evidence
    (``--evidence gold``), the results file (writable, resumable with these settings). The limits were checked
    where they entered (the run's config, or :meth:`Verifier.arun_batch`'s override)."""
    out_path = Path(out).expanduser() if out is not None else None
    if isinstance(claims, PreparedClaims) and claims.engine is engine and claims.out == out_path:
        return claims
    loaded = load_claims(claims)
    engine.check_claims(loaded.claims)  # before any server is contacted
    # a results file that cannot be written or resumed: before any server is contacted
    if out_path is not None:
        check_output(out_path, engine.spec, engine.params, engine.label_space, engine.evidence)
    return PreparedClaims(loaded.claims, loaded.rejected, engine, out_path)


async def run_batch(engine: Engine, claims: Any, out: Path | str | None = None, *, concurrency: int,
                    llm_concurrency: int | None = None, backend: str = "local", progress: bool = False,
                    on_result: Callable[[dict[str, Any]], None] | None = None,
                    rejected: Iterable[RejectedLine] = (), write_manifest: bool = True,
                    backend_options: dict[str, Any] | None = None) -> RunStats:
    """Verify ``claims`` (see :func:`prepare`) with ``engine`` on ``backend``; results are appended to ``out``
    (resumable), or without one kept in ``stats.results`` (input order). ``rejected`` lines of the caller's
    own reading are added to the statistics; ``write_manifest=False`` writes no ``<out>.manifest.json``.
    The local backend runs on this event loop; the Ray driver blocks, so it runs off it."""
    loaded = prepare(engine, claims, out)
    with contextlib.ExitStack() as stack:
        if out is None:
            out_path = (Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="veracity-")))
                        / "results.jsonl")
        else:
            out_path = Path(out).expanduser()
        stats = RunStats(out_path=out_path, total=len(loaded.claims),
                         rejected=list(loaded.rejected) + list(rejected))
        done = read_done_ids(out_path)
        pending = [c for c in loaded.claims if c.id not in done]
        stats.skipped = len(loaded.claims) - len(pending)
        manifest = RunManifest.of(engine, out_path) if out is not None and write_manifest else None
        bar = _Progress(len(pending), engine.spec.name, stats) if progress and pending else None
        sink = ResultSink(out_path, stats, done, bar=bar, on_result=on_result, manifest=manifest)
        stack.callback(sink.close)
        try:
            if backend == "local":
                from veracity.pipeline.backends import local

                if pending:
                    engine.state()  # opened before the client, as a single claim opens it
                await local.arun(engine, pending, sink, concurrency)
            else:
                await asyncio.to_thread(get_backend(backend).run, engine, pending, sink, concurrency,
                                        **(backend_options or {}))
        except Exception as exc:
            if hasattr(exc, "hint") and sink.opened:  # the run stopped under way: what was written stays
                stats.stopped = str(exc)
                exc.stats = stats  # type: ignore[attr-defined]
            raise
        finally:
            stats.elapsed_s = time.perf_counter() - sink.t0
            if bar is not None and sink.opened:
                bar.stop()
        if out is None:
            order = {c.id: i for i, c in enumerate(loaded.claims)}
            rows = [json.loads(line) for line in out_path.read_text(encoding="utf-8").splitlines()
                    if line.strip()]
            stats.results = sorted(rows, key=lambda r: order.get(r["id"], len(order)))
    return stats


__all__ = ["prepare", "run_batch"]
