"""The local backend: ``concurrency`` claims in flight in this process, each result handed to the sink as it
finishes. A claim whose method fails (e.g. the model's reply never validates) is listed as failed and not
written (a rerun retries it); an ``EndpointError`` or an ``OutputError`` stops the run at once, in-flight
claims dropped, and is raised."""

from __future__ import annotations

import asyncio
from collections import deque
from veracity.errors import EndpointError, OutputError
from veracity.pipeline.engine import Engine
from veracity.pipeline.results import ResultSink, RunStats, ServedModel, claim_failure
from veracity.pipeline.types import Claim


async def arun(engine: Engine, pending: list[Claim], sink: ResultSink, concurrency: int) -> RunStats:
    queue = deque(pending)
    stop: list[EndpointError | OutputError] = []  # what ends the whole run (the others stop at their claim)
    tasks: list[asyncio.Task] = []
    async with engine.client() as llm:
        sink.open(ServedModel.of(llm))

        def halt(exc: EndpointError | OutputError) -> None:
            if not stop:
                stop.append(exc)
                me = asyncio.current_task()
                for t in tasks:
                    if t is not me:
                        t.cancel()

        async def worker() -> None:
            while queue and not stop:
                claim = queue.popleft()
                try:
                    verdict = await engine.verify(claim, llm)
                except EndpointError as exc:
                    halt(exc)
                    return
                except Exception as exc:  # a bug in one claim's run must not sink the batch
                    sink.reject(claim.id, claim_failure(exc))
                    continue
                try:
                    sink.accept(verdict.to_dict(claim))
                except OutputError as exc:  # disk full, file size limit, ...: stop; a torn line is cut on resume
                    halt(exc)
                    return

        try:
            tasks.extend(asyncio.create_task(worker()) for _ in range(min(concurrency, len(queue))))
            outcomes = await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            for t in tasks:
                t.cancel()
    if stop:
        raise stop[0]
    for outcome in outcomes:  # e.g. an on_result callback that raised: surface it, results stay written
        if isinstance(outcome, BaseException) and not isinstance(outcome, asyncio.CancelledError):
            raise outcome
    return sink.stats


def run(engine: Engine, pending: list[Claim], sink: ResultSink, concurrency: int) -> RunStats:
    return asyncio.run(arun(engine, pending, sink, concurrency))


__all__ = ["arun", "run"]
