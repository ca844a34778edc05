"""Evidence settings: what a claim's tools search (:data:`EVIDENCE_SETTINGS`).

``open`` (default): the run's index. ``gold``: only the claim's own gold passages, ``Claim.meta["evidence"]``
(a list of ``{title, text}``; the benchmark readers attach it, a claims file may carry it), served by a
:class:`~veracity.indexes.gold.GoldRetriever` built for that claim. ``none``: closed book, a
:class:`~veracity.indexes.gold.NoEvidenceRetriever` (every search and page is empty, traced as
``evidence.none``). The engine only sees a per-claim retriever factory, ``retriever_for(claim) ->
Retriever`` (:func:`claim_retrievers` builds the one of a setting); it knows nothing of the methods.
"""

from __future__ import annotations

from typing import Callable, Iterable

from veracity.errors import ConfigError, DataError
from veracity.indexes.gold import GOLD_KEY, GoldRetriever, NoEvidenceRetriever
from veracity.indexes.retriever import Retriever
from veracity.pipeline.types import Claim

EVIDENCE_SETTINGS: dict[str, str] = {
    "open": "open book: search and open_page read the run's index",
    "gold": "gold evidence: search ranks only the claim's gold passages, open_page opens them by title",
    "none": "closed book: search and open_page return nothing (traced as evidence.none)",
}


GOLD_HINT = ('give every claim an "evidence" list of {"title": ..., "text": ...} passages, or use '
             '--evidence open (an index) or --evidence none (closed book)')


ClaimRetrievers = Callable[[Claim], Retriever]


def evidence_setting(value: str | None) -> str:
    """``open`` / ``gold`` / ``none`` (None: open); anything else is a one-line ConfigError."""
    if value is None:
        return "open"
    key = str(value).strip().lower()
    key = {"closed": "none", "closed-book": "none", "open-book": "open"}.get(key, key)
    if key not in EVIDENCE_SETTINGS:
        raise ConfigError(f"unknown evidence setting {value!r}",
                          hint="use --evidence open (the index), gold (each claim's gold evidence only) "
                               "or none (closed book)")
    return key


def gold_retriever(claim: Claim) -> GoldRetriever:
    """The retriever over ``claim``'s gold passages (``Claim.meta["evidence"]``); a claim without any is a
    one-line DataError."""
    items = claim.meta.get(GOLD_KEY)
    if not items:
        raise DataError(f"claim {claim.id} has no gold evidence (no {GOLD_KEY!r} passages)", hint=GOLD_HINT)
    return GoldRetriever(items, where=f"claim {claim.id}: {GOLD_KEY!r}")


_NO_EVIDENCE = NoEvidenceRetriever()


def claim_retrievers(evidence: str | None) -> ClaimRetrievers | None:
    """The per-claim retriever factory of an evidence setting: None for ``open`` (the index), the gold
    retriever of each claim for ``gold``, the closed book for ``none``."""
    setting = evidence_setting(evidence)
    if setting == "gold":
        return gold_retriever
    if setting == "none":
        return lambda claim: _NO_EVIDENCE
    return None


def check_gold_evidence(claims: Iterable[Claim]) -> None:
    """Every claim carries valid gold passages, else one DataError naming the first that does not (and how
    many more): checked before a gold run contacts any server."""
    bad: list[str] = []
    first = ""
    for claim in claims:
        try:
            gold_retriever(claim)
        except DataError as exc:
            if not bad:
                first = str(exc)
            bad.append(claim.id)
    if bad:
        more = f" (and {len(bad) - 1} more claims)" if len(bad) > 1 else ""
        raise DataError(f"--evidence gold: {first}{more}", hint=GOLD_HINT)

