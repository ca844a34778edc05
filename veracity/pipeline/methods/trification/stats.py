"""Trification's run statistics for ``bench run`` (the ``run_statistics`` hook of its MethodSpec): graph
modifications and node counts by type before -> after modification, the paper's Table 2 (§4.3)."""

from __future__ import annotations

from typing import Any


def _events(r: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [e for e in (r.get("trace") or {}).get("events", []) if e.get("kind") == kind]


def run_statistics(results: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Means over the claims whose trace has a ``trification.stats`` event; None when none has."""
    tri = [ev[-1] for ev in (_events(r, "trification.stats") for r in results) if ev]
    if not tri:
        return None
    n = len(tri)
    types = ("SEARCH", "REFINE", "THINK", "JUDGE")
    return {
        "claims": n,
        "graph_modifications_per_claim": sum(t.get("graph_modifications", 0) for t in tri) / n,
        "claims_modified": sum(1 for t in tri if t.get("graph_modifications", 0)) / n,
        "nodes_initial": {k: sum((t.get("initial_nodes") or {}).get(k, 0) for t in tri) / n for k in types},
        "nodes_final": {k: sum((t.get("final_nodes") or {}).get(k, 0) for t in tri) / n for k in types},
        "no_plan": sum(1 for r in results if _events(r, "trification.no_plan")),
        # §4.3: claims still unresolved after the modification cap, decided in static mode
        "static_fallbacks": sum(1 for r in results if _events(r, "trification.static_fallback")),
    }
