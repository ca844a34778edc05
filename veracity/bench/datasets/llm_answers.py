"""Atomic claims taken from LLM answers: FacTool-KBQA, BingCheck, Factcheck-Bench, FELM-WK.

The official files of each, and FIRE's flattened ``{"claim", "label"}`` copies of them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from veracity.bench.datasets.records import (
    Reader,
    Record,
    location,
    nonempty_text,
    read_jsonl,
    require_fields,
)
from veracity.errors import DataError
from veracity.pipeline.types import Claim


def read_claim_label_jsonl(prefix: str) -> Reader:
    """FIRE's flattened files ``{"claim", "label"}`` (one atomic claim per line, no ids).

    Ids are ``<prefix>-<line number>`` so a claim can be found in the file. Label mappings:
    - FIRE's binary files (FacTool-KBQA, BingCheck data/data_full, Factcheck-Bench, FELM-WK), labels
      "true"/"false" or JSON booleans: true -> SUPPORTED, false -> REFUTED.
    - BingCheck's 4-way file: variant "emulate" (EMULATE's convention) supported -> SUPPORTED,
      refuted -> REFUTED, partially supported and not supported dropped; variant "4way" supported and
      partially supported -> SUPPORTED (as FIRE's binarisation), refuted -> REFUTED, not supported
      (the annotators found no evidence) -> NOT_ENOUGH_INFO.
    """

    def read(paths: Sequence[Path]) -> list[Record]:
        fmt = 'claim/label JSONL ({"claim", "label"})'
        (path,) = paths
        out: list[Record] = []
        for lineno, obj in read_jsonl(path, fmt):
            where = location(path, lineno)
            require_fields(obj, ("claim", "label"), where, fmt)
            out.append((Claim(id=f"{prefix}-{lineno}", text=nonempty_text(obj["claim"], where, fmt), meta={}),
                        obj["label"], where))
        return out

    read.__doc__ = read_claim_label_jsonl.__doc__
    return read


def read_factool_kbqa(paths: Sequence[Path]) -> list[Record]:
    """FacTool knowledge-based QA (``knowledge_qa.jsonl``: one ChatGPT response per line with its claims).

    One record per annotated atomic claim. Labels (JSON booleans): true -> SUPPORTED, false -> REFUTED.
    Ids ``kbqa-<line>-<claim number>``; meta: ``prompt``, ``response``, ``response_label``.
    """
    fmt = "FacTool knowledge_qa JSONL ({prompt, response, claims: [{claim, label}], label})"
    (path,) = paths
    out: list[Record] = []
    for lineno, obj in read_jsonl(path, fmt):
        where = location(path, lineno)
        require_fields(obj, ("prompt", "response", "claims"), where, fmt)
        if not isinstance(obj["claims"], list):
            raise DataError(f"{where}: expected {fmt}, found 'claims' of type {type(obj['claims']).__name__}",
                            hint="use FacTool's datasets/knowledge_qa/knowledge_qa.jsonl")
        for j, item in enumerate(obj["claims"], 1):
            if not isinstance(item, dict):
                raise DataError(f"{where}: expected {fmt}, found a claim that is a {type(item).__name__}",
                                hint="use FacTool's datasets/knowledge_qa/knowledge_qa.jsonl")
            require_fields(item, ("claim", "label"), f"{where} claim {j}", fmt)
            meta = {"prompt": obj["prompt"], "response": obj["response"], "response_label": obj.get("label")}
            out.append((Claim(id=f"kbqa-{lineno}-{j}", text=nonempty_text(item["claim"], where, fmt),
                              meta=meta),
                        item["label"], f"{where} claim {j}"))
    return out


def read_factcheck_subtask4(paths: Sequence[Path]) -> list[Record]:
    """Factcheck-Bench subtask 4 (``subtask4_claim_factuality.jsonl``: {claim, label, revised_claim}).

    Labels: true -> SUPPORTED, false -> REFUTED, not_enough_evidence -> NOT_ENOUGH_INFO ("3way") or
    dropped ("binary", the 631 claims EMULATE Table 1 uses). Ids ``factcheck-<line>``;
    meta: ``revised_claim`` (the annotators' correction).
    """
    fmt = "Factcheck-Bench subtask4 JSONL ({claim, label, revised_claim})"
    (path,) = paths
    out: list[Record] = []
    for lineno, obj in read_jsonl(path, fmt):
        where = location(path, lineno)
        require_fields(obj, ("claim", "label"), where, fmt)
        meta = {"revised_claim": obj.get("revised_claim")}
        out.append((Claim(id=f"factcheck-{lineno}", text=nonempty_text(obj["claim"], where, fmt), meta=meta),
                    obj["label"], where))
    return out


def read_factbench_segments(source: str) -> Reader:
    """Segment-level claims of one source of ``Factbench.jsonl`` (fields claims / claim_labels).

    Labels (JSON booleans): true -> SUPPORTED, false -> REFUTED. Ids ``<source>-<line>-<n>``;
    meta: ``prompt``, ``response``, ``response_label``.
    """

    def read(paths: Sequence[Path]) -> list[Record]:
        fmt = "FactBench JSONL ({prompt, response, response_label, claims, claim_labels, source})"
        (path,) = paths
        out: list[Record] = []
        for lineno, obj in read_jsonl(path, fmt):
            where = location(path, lineno)
            require_fields(obj, ("response", "claims", "claim_labels", "source"), where, fmt)
            if obj["source"] != source:
                continue
            claims, labels = obj["claims"], obj["claim_labels"]
            if not isinstance(claims, list) or not isinstance(labels, list) or len(claims) != len(labels):
                raise DataError(f"{where}: expected {fmt} with equally long lists claims/claim_labels",
                                hint="use the FactBench release of Factcheck-GPT")
            for j, (text, lab) in enumerate(zip(claims, labels, strict=True), 1):
                meta = {"prompt": obj.get("prompt"), "response": obj["response"],
                        "response_label": obj.get("response_label")}
                out.append((Claim(id=f"{source}-{lineno}-{j}", text=nonempty_text(text, where, fmt),
                                  meta=meta),
                            lab, f"{where} claim {j}"))
        return out

    read.__doc__ = read_factbench_segments.__doc__
    return read
