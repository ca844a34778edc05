"""FEVER 1.0 (Thorne et al. 2018): claims with Wikipedia-page evidence sets, 3-way labels."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from veracity.bench.datasets.records import Record, location, nonempty_text, read_jsonl, require_fields
from veracity.indexes.readers import fever_title
from veracity.pipeline.types import Claim


def read_fever(paths: Sequence[Path]) -> list[Record]:
    """FEVER 1.0 JSONL (``paper_dev.jsonl``, ``shared_task_dev.jsonl``, ``train.jsonl`` ...).

    Labels: SUPPORTS -> SUPPORTED, REFUTES -> REFUTED, NOT ENOUGH INFO -> NOT_ENOUGH_INFO (3-way).
    meta: ``verifiable``, ``evidence_sets`` (list of sets of [page, sentence id]), ``gold_titles``
    (distinct evidence pages as Wikipedia titles: -LRB- -> "(", underscores -> spaces).
    """
    fmt = "FEVER JSONL ({id, label, claim, evidence})"
    (path,) = paths
    out: list[Record] = []
    for lineno, obj in read_jsonl(path, fmt):
        where = location(path, lineno)
        require_fields(obj, ("id", "label", "claim"), where, fmt)
        sets = []
        for ev_set in obj.get("evidence") or []:
            sets.append([[e[2], e[3]] for e in ev_set if len(e) >= 4 and e[2] is not None])
        meta = {
            "verifiable": obj.get("verifiable"),
            "evidence_sets": [s for s in sets if s],
            "gold_titles": list(dict.fromkeys(fever_title(p) for s in sets for p, _ in s)),
        }
        out.append((Claim(id=str(obj["id"]), text=nonempty_text(obj["claim"], where, fmt), meta=meta),
                    obj["label"], where))
    return out
