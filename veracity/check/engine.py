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

from veracity.pipeline.backends.local import ClaimFeed, verify_each
from veracity.pipeline.results import check_output
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
        data = httpx.get(base + "/models", timeout=3,
                         headers={"Authorization": f"Bearer {settings.api_key}"}).json()
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
            out.update(model=getattr(eng.stand_in, "model", None), engine=type(eng.stand_in).__name__,
                       endpoint=None)
        else:
            url, model = eng.resolve_endpoint()
            out.update(model=getattr(llm, "model", None) or model, endpoint=url,
                       engine=engine_name(url, eng.settings))
        manifest = getattr(eng.searcher, "manifest", None)
        if isinstance(manifest, dict):
            dump = index_dump_date(manifest)
            # the folder the searcher opened: the one given, or the default index (~/.veracity/indexes/demo,
            # which the header named by the manifest's kind, "veracity-index", before)
            where = getattr(eng.searcher, "index_dir", None) or eng.config.evidence.index
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

    async def verify_claims(self, claims: Iterable[Claim] | ClaimFeed, llm: Any, *,
                            on_record: OnRecord | None = None,
                            on_event: Callable[[str, dict[str, Any]], None] | None = None) -> dict[str,
                                                                                                   dict[str,
                                                                                                        Any]]:
        """Verify ``claims`` on the engine's worker loop
        (:func:`~veracity.pipeline.backends.local.verify_each`,
        at most the Verifier's ``concurrency`` in flight) and return ``{claim id: record}``:
        ``Verdict.to_dict(claim)``, or ``{"id", "claim", "error"}`` for a claim whose method failed (the
        others
        stand). ``on_event(claim id, event)`` hears each step of a claim's trace; an endpoint failure stops
        the run (raised). ``claims`` may be a :class:`~veracity.pipeline.backends.local.ClaimFeed` still being
        filled (a text's claims verified while its later sentences are extracted)."""
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
                          listener=(lambda c: lambda ev: on_event(c.id,
                                                                  ev)) if on_event is not None else None)
        return out

    async def verify_into(self, claims: list[Claim], out: Path, *, on_record: OnRecord | None = None) -> Any:
        """Verify ``claims`` as ``veracity verify -i`` does, appending each result to ``out`` (ids already
        there are skipped); returns its RunStats (``failed`` lists the claims whose method failed)."""
        return await self.verifier.averify_many(claims, out=out, on_result=on_record)

    def close(self) -> None:
        self.verifier.close()

