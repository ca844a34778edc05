"""The check stage's one adapter to the verification engine.

Everything :mod:`veracity.check` needs from verification goes through :class:`ClaimVerifier`, built on the
public :class:`~veracity.pipeline.api.Verifier` today: a claim is verified by the same code path as
``veracity verify`` (one claim: :func:`~veracity.pipeline.runner.verify_one` with the Verifier's method,
parameters, index, label space and evidence setting, as :meth:`Verifier.averify` does; a batch:
:meth:`Verifier.averify_many`, the path of ``veracity verify -i``, with its resume and atomic appends). When
the run configuration lands, :meth:`ClaimVerifier.build` is the one place to change.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any, Callable, Iterable

from veracity.errors import EndpointError
from veracity.pipeline.runner import check_output, claim_failure, verify_one
from veracity.pipeline.types import Claim

OnRecord = Callable[[dict[str, Any]], None]


def engine_name(url: str, settings: Any) -> str:
    """The program serving ``url``: the managed server's engine when it is veracity's, else what the
    endpoint's model list says of itself (llama.cpp's server answers ``owned_by: llamacpp``), else unknown."""
    try:
        from veracity.serving.state import read_state

        state = read_state(settings)
        if state is not None and state.endpoint.rstrip("/") == url.rstrip("/"):
            return f"{state.engine} (managed)"
    except Exception:  # a state file that cannot be read names nothing
        pass
    try:
        import httpx

        base = url.rstrip("/")
        base = base if base.endswith("/v1") else base + "/v1"
        data = httpx.get(base + "/models", timeout=3, headers={"Authorization": f"Bearer {settings.api_key}"}).json()
        owners = {m.get("owned_by") for m in data.get("data", []) if m.get("owned_by")}
        if owners:
            return ", ".join(sorted(str(o) for o in owners))
    except Exception:  # the report says what could be learned
        pass
    return "unknown"


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

    def header(self, llm: Any = None) -> dict[str, Any]:
        """What a check's report names: model, engine (the server program), index (with its dump date),
        method, label space, evidence setting and the date (UTC). ``llm`` is the run's open client."""
        import datetime as _dt

        from veracity.indexes.manifest import index_dump_date

        eng = self.verifier.engine
        out: dict[str, Any] = {"method": self.method, "labels": self.verifier.label_space.name,
                               "evidence": eng.evidence,
                               "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}
        if eng.stand_in is not None:
            out.update(model=getattr(eng.stand_in, "model", None), engine=type(eng.stand_in).__name__, endpoint=None)
        else:
            url, model = eng.resolve_endpoint()
            out.update(model=getattr(llm, "model", None) or model, endpoint=url,
                       engine=engine_name(url, eng.settings))
        manifest = getattr(eng.searcher, "manifest", None)
        if isinstance(manifest, dict):
            dump = index_dump_date(manifest)
            where = eng.config.index if eng.config is not None and eng.config.index is not None else None
            out["index"] = {"name": Path(str(where)).name if where else manifest.get("kind", "index"),
                            "path": str(where) if where else None, "passages": manifest.get("passages"),
                            "dump_date": dump.isoformat() if dump else None}
        else:
            out["index"] = None
        return out

    def check_output(self, claims_path: Path) -> None:
        """The per-claim results file of a batch can be written and resumed with this method and its
        parameters (checked before any server is contacted)."""
        v = self.verifier
        check_output(claims_path, v.spec, v.params, v.label_space, v.evidence)

    async def verify_claims(self, claims: Iterable[Claim], llm: Any, *, on_record: OnRecord | None = None,
                            on_event: Callable[[str, dict[str, Any]], None] | None = None) -> dict[str, dict[str, Any]]:
        """Verify ``claims`` (at most the Verifier's ``concurrency`` in flight) and return ``{claim id:
        record}``: ``Verdict.to_dict(claim)``, or ``{"id", "claim", "error"}`` for a claim whose method
        failed (the others stand). ``on_event(claim id, event)`` hears each step of a claim's trace; an
        endpoint failure stops the run (raised)."""
        v = self.verifier
        state = v.state()
        gate = asyncio.Semaphore(v.concurrency)
        out: dict[str, dict[str, Any]] = {}

        async def one(claim: Claim) -> None:
            listener = (lambda ev, cid=claim.id: on_event(cid, ev)) if on_event is not None else None
            async with gate:
                try:
                    verdict = await verify_one(claim, v.spec, llm, v.searcher, v.params, state,
                                               exclude_titles=v.exclude_titles, search_mode=v.search_mode,
                                               label_space=v.label_space, retriever_for=v.retriever_for,
                                               on_event=listener)
                    record = verdict.to_dict(claim)
                except EndpointError:
                    raise
                except Exception as exc:  # one claim's failure leaves the others standing
                    record = {"id": claim.id, "claim": claim.text, "error": claim_failure(exc)}
            out[claim.id] = record
            if on_record is not None:
                on_record(record)

        await asyncio.gather(*(one(c) for c in claims))
        return out

    async def verify_into(self, claims: list[Claim], out: Path, *, on_record: OnRecord | None = None) -> Any:
        """Verify ``claims`` as ``veracity verify -i`` does, appending each result to ``out`` (ids already
        there are skipped); returns its RunStats (``failed`` lists the claims whose method failed)."""
        return await self.verifier.averify_many(claims, out=out, on_result=on_record)

    def close(self) -> None:
        self.verifier.close()

