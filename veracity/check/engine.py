"""The check stage's one adapter to the verification engine.

Everything :mod:`veracity.check` needs from verification goes through :class:`ClaimVerifier`, built on the
public :class:`~veracity.pipeline.api.Verifier` (its :class:`~veracity.pipeline.engine.Engine`): a text's
claims run on the engine's worker loop (:func:`~veracity.pipeline.backends.local.verify_each`, the local
backend's), a file of texts on :meth:`Verifier.averify_many`, the path of ``veracity verify -i``, with its
resume and atomic appends. :meth:`ClaimVerifier.build` is the one place a check's verifier is made.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Callable, Iterable

from veracity.pipeline.backends.local import verify_each
from veracity.pipeline.results import check_output
from veracity.pipeline.types import Claim

OnRecord = Callable[[dict[str, Any]], None]


class ClaimVerifier:
    """Verifies extracted claims with one method (any of ``veracity verify``'s), one index, one endpoint."""

    def __init__(self, verifier: Any):
        self.verifier = verifier

    @classmethod
    def build(cls, **options: Any) -> "ClaimVerifier":
        """From ``veracity verify``'s options (``method``, ``index``, ``endpoint``, ``labels``, ``params``,
        ...): every bad option is a one-line error here, before any server is contacted."""
        from veracity.pipeline.api import Verifier

        return cls(Verifier(**options))

    @property
    def method(self) -> str:
        return self.verifier.spec.name

    @property
    def concurrency(self) -> int:
        return self.verifier.concurrency

    def client(self) -> contextlib.AbstractAsyncContextManager[Any]:
        """The run's LLM client (extraction and verification share it)."""
        return self.verifier.client()

    def check_output(self, claims_path: Path) -> None:
        """The per-claim results file of a batch can be written and resumed with this method and its
        parameters (checked before any server is contacted)."""
        v = self.verifier
        check_output(claims_path, v.spec, v.params, v.label_space, v.evidence)

    async def verify_claims(self, claims: Iterable[Claim], llm: Any, *, on_record: OnRecord | None = None,
                            on_event: Callable[[str, dict[str, Any]], None] | None = None) -> dict[str, dict[str, Any]]:
        """Verify ``claims`` on the engine's worker loop (:func:`~veracity.pipeline.backends.local.verify_each`,
        at most the Verifier's ``concurrency`` in flight) and return ``{claim id: record}``:
        ``Verdict.to_dict(claim)``, or ``{"id", "claim", "error"}`` for a claim whose method failed (the others
        stand). ``on_event(claim id, event)`` hears each step of a claim's trace; an endpoint failure stops
        the run (raised)."""
        v = self.verifier
        out: dict[str, dict[str, Any]] = {}

        def keep(claim: Claim, record: dict[str, Any]) -> None:
            out[claim.id] = record
            if on_record is not None:
                on_record(record)

        v.state()
        await verify_each(v.engine, llm, claims, v.concurrency,
                          accept=lambda c, verdict: keep(c, verdict.to_dict(c)),
                          reject=lambda c, why: keep(c, {"id": c.id, "claim": c.text, "error": why}),
                          listener=(lambda c: lambda ev: on_event(c.id, ev)) if on_event is not None else None)
        return out

    async def verify_into(self, claims: list[Claim], out: Path, *, on_record: OnRecord | None = None) -> Any:
        """Verify ``claims`` as ``veracity verify -i`` does, appending each result to ``out`` (ids already
        there are skipped); returns its RunStats (``failed`` lists the claims whose method failed)."""
        return await self.verifier.averify_many(claims, out=out, on_result=on_record)

    def close(self) -> None:
        self.verifier.close()

