"""FEVEROUS-S: the FEVEROUS dev claims with sentence-only evidence, as released by ProgramFC."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from veracity.bench.datasets.records import Record, nonempty_text, read_json, require_fields
from veracity.errors import DataError
from veracity.pipeline.types import Claim


def read_feverous_s(paths: Sequence[Path]) -> list[Record]:
    """FEVEROUS-S as released by ProgramFC (``datasets/FEVEROUS/claims/dev.json``: a JSON list).

    Labels: supports -> SUPPORTED, refutes -> REFUTED (ProgramFC kept only claims with sentence
    evidence and a SUPPORTS/REFUTES label, so the set is binary).
    meta: ``challenge``, ``gold_evidence`` (the file's "Title<TAB>sentence" lines), ``gold_sentences``
    ([{title, sentence}]), ``gold_titles`` (distinct titles in order). The derived
    ``feverous_s_dev_gold_sentences.jsonl`` holds the same sentences, so it is not read.
    """
    fmt = "ProgramFC FEVEROUS JSON (list of {id, claim, label, challenge, evidence})"
    (path,) = paths
    out: list[Record] = []
    for i, obj in enumerate(read_json(path, fmt, list)):
        where = f"{path} record {i}"
        if not isinstance(obj, dict):
            raise DataError(f"{where}: expected {fmt}, found a {type(obj).__name__}",
                            hint="use ProgramFC's dev.json")
        require_fields(obj, ("id", "claim", "label", "evidence"), where, fmt)
        sentences = []
        for line in str(obj["evidence"]).split("\n"):
            if line.strip():
                title, _, sent = line.partition("\t")
                sentences.append({"title": title.strip(), "sentence": sent.strip()})
        meta = {
            "challenge": obj.get("challenge"),
            "gold_evidence": obj["evidence"],
            "gold_sentences": sentences,
            "gold_titles": list(dict.fromkeys(s["title"] for s in sentences)),
        }
        out.append((Claim(id=str(obj["id"]), text=nonempty_text(obj["claim"], where, fmt), meta=meta),
                    obj["label"], where))
    return out
