"""HoVer (Jiang et al. 2020): many-hop claims with their supporting-fact titles."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from veracity.bench.datasets.records import Record, nonempty_text, read_json, require_fields
from veracity.errors import DataError
from veracity.pipeline.types import Claim


def read_hover(paths: Sequence[Path]) -> list[Record]:
    """HoVer (official ``hover_{dev,train}_release_v1.1.json``: a JSON list).

    Labels: SUPPORTED -> SUPPORTED, NOT_SUPPORTED -> REFUTED (HoVer merges refuted and not-enough-info
    into NOT_SUPPORTED and is scored as a binary task, as in ProgramFC and Trification).
    meta: ``gold_titles`` (distinct ``supporting_facts`` titles, in order), ``hops`` (``num_hops``),
    ``supporting_facts`` ([title, sentence id] pairs), ``hpqa_id``.
    """
    fmt = "HoVer JSON (list of {uid, claim, supporting_facts, label, num_hops})"
    (path,) = paths
    out: list[Record] = []
    for i, obj in enumerate(read_json(path, fmt, list)):
        where = f"{path} record {i}"
        if not isinstance(obj, dict):
            raise DataError(f"{where}: expected {fmt}, found a {type(obj).__name__}",
                            hint="use the official file")
        if "label" not in obj:
            raise DataError(f"{where}: expected {fmt}, found a record without 'label' (the unlabelled test "
                            "release?)",
                            hint="HoVer's test release has no labels: use the dev file "
                                 "hover_dev_release_v1.1.json")
        require_fields(obj, ("uid", "claim", "supporting_facts", "label", "num_hops"), where, fmt)
        facts = [[str(t), int(s)] for t, s in obj["supporting_facts"]]
        meta = {
            "gold_titles": list(dict.fromkeys(t for t, _ in facts)),
            "hops": int(obj["num_hops"]),
            "supporting_facts": facts,
            "hpqa_id": obj.get("hpqa_id"),
        }
        out.append((Claim(id=str(obj["uid"]), text=nonempty_text(obj["claim"], where, fmt), meta=meta),
                    obj["label"], where))
    return out
