"""Scores: per sentence its worst verdict, per text the counts per label, factual precision and (as an
option) a FActScore-style score with its length penalty.

- A sentence's verdict is the worst of its factual claims' verdicts: REFUTED before NOT_ENOUGH_INFO
  before SUPPORTED. A sentence with no factual claim is ``unchecked``; one whose claims all failed is
  ``failed`` (a failed claim next to verified ones does not hide their verdicts).
- Factual precision = SUPPORTED / (SUPPORTED + REFUTED): the claims the method decided; None when it
  decided fewer than :data:`MIN_DECIDED` (``precision_withheld`` says why). Beside it, always, the share of
  verified claims that came back NOT_ENOUGH_INFO (``nei_share``): a precision of 1.00 over 6 of 27 claims
  says little about the other 21.
- FActScore (Min et al. 2023, §3.1): the fraction of a text's atomic facts supported by the knowledge
  source, f = SUPPORTED / verified claims (NOT_ENOUGH_INFO counts as not supported, as FActScore has only
  "supported" and "not supported"); with the length penalty of the FActScore package (``--gamma``, default
  10) a text with n < gamma verified claims is scored f · exp(1 - gamma / n), so a text that states little
  cannot score high by saying almost nothing.
"""

from __future__ import annotations

import math
from typing import Any, Iterable

LABELS = ("SUPPORTED", "REFUTED", "NOT_ENOUGH_INFO")
# no factual precision over fewer decided (SUPPORTED or REFUTED) claims: "1.00" over one claim misleads
MIN_DECIDED = 3
SEVERITY = ("REFUTED", "NOT_ENOUGH_INFO", "SUPPORTED")  # worst first: a sentence's and a text's verdict


def worst(labels: Iterable[str | None]) -> str | None:
    """The worst of ``labels`` in :data:`SEVERITY` order (other values are ignored); None when none is."""
    seen = set(labels)
    return next((v for v in SEVERITY if v in seen), None)


def sentence_verdict(labels: Iterable[str | None]) -> str:
    """The worst verdict among a sentence's factual claims (None: the claim failed); ``unchecked`` when it
    has none, ``failed`` when every one failed."""
    labels = list(labels)
    if not labels:
        return "unchecked"
    decided = [x for x in labels if x is not None]
    if not decided:
        return "failed"
    return min(decided, key=lambda x: SEVERITY.index(x) if x in SEVERITY else 1)


def factscore(supported: int, verified: int, gamma: int = 10) -> float | None:
    """FActScore of one text (see the module docstring); None when no claim was verified."""
    if verified <= 0:
        return None
    f = supported / verified
    if gamma and verified < gamma:
        f *= math.exp(1 - gamma / verified)
    return f


def text_scores(claim_labels: list[str | None], *, gamma: int | None = None) -> dict[str, Any]:
    """Counts per label (and ``failed``), factual precision, and with ``gamma`` the FActScore-style score
    (``gamma=0``: without the length penalty)."""
    counts = {label: sum(1 for x in claim_labels if x == label) for label in LABELS}
    counts["failed"] = sum(1 for x in claim_labels if x is None)
    decided = counts["SUPPORTED"] + counts["REFUTED"]
    verified = decided + counts["NOT_ENOUGH_INFO"]
    out: dict[str, Any] = {
        "counts": counts,
        "factual_precision": counts["SUPPORTED"] / decided if decided >= MIN_DECIDED else None,
        "decided": decided,
        "nei_share": counts["NOT_ENOUGH_INFO"] / verified if verified else None,
    }
    if 0 < decided < MIN_DECIDED:
        out["precision_withheld"] = f"only {decided} decided claims (at least {MIN_DECIDED} needed)"
    if gamma is not None:
        verified = decided + counts["NOT_ENOUGH_INFO"]
        out["factscore"] = factscore(counts["SUPPORTED"], verified, gamma)
        out["factscore_gamma"] = gamma
    return out
