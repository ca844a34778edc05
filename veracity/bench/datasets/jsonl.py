"""A user's own claims file (``--dataset jsonl:PATH``): one {"id", "claim", "label"} object per line."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from veracity.bench.datasets.records import Record, location, nonempty_text, read_jsonl, require_fields
from veracity.pipeline.types import Claim


def read_generic_jsonl(paths: Sequence[Path]) -> list[Record]:
    """A user's JSONL file: one {"id", "claim", "label"} object per line (``date`` and other fields optional).

    Labels map through the ``label_map`` given to :func:`load_dataset` (orig -> Label; default: the
    Label names, case-insensitive, SUPPORTED -> SUPPORTED etc., and the label set is then the labels the
    file uses). ``id`` defaults to ``<file stem>-<line>``; ``date`` goes to Claim.date; every other
    field is kept in meta.
    """
    fmt = 'claims JSONL ({"id", "claim", "label"} per line)'
    (path,) = paths
    out: list[Record] = []
    for lineno, obj in read_jsonl(path, fmt):
        where = location(path, lineno)
        require_fields(obj, ("claim", "label"), where, fmt)
        meta = {k: v for k, v in obj.items() if k not in ("id", "claim", "label", "date")}
        date = obj.get("date")
        claim = Claim(id=str(obj.get("id", f"{path.stem}-{lineno}")), text=nonempty_text(obj["claim"], where,
                                                                                         fmt),
                      date=str(date) if date is not None else None, meta=meta)
        out.append((claim, obj["label"], where))
    return out
