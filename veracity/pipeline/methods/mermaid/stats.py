"""MERMAID's run statistics for ``bench run`` (the ``run_statistics`` hook of its MethodSpec): executor steps,
claims that recalled memory, claims forced to a verdict at T_max."""

from __future__ import annotations

from typing import Any


def _events(r: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [e for e in (r.get("trace") or {}).get("events", []) if e.get("kind") == kind]


def run_statistics(results: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Means over the claims whose trace has MERMAID step or recall events; None when none has."""
    mer = [r for r in results if _events(r, "mermaid.step") or _events(r, "mermaid.recall")]
    if not mer:
        return None
    n = len(mer)
    return {
        "claims": n,
        "executor_steps_per_claim": sum(len(_events(r, "mermaid.step")) for r in mer) / n,
        "claims_with_memory_hits": sum(1 for r in mer if (r.get("trace") or {}).get("memory_hits")) / n,
        "forced_verdicts": sum(1 for r in mer if _events(r, "mermaid.final")) / n,
    }
