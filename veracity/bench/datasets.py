"""Loaders for the public claim-verification benchmarks, in the file layout their authors publish.

Every benchmark maps its gold labels onto :class:`~veracity.pipeline.types.Label` (SUPPORTED /
REFUTED / NOT_ENOUGH_INFO) and keeps the label as written in the file in ``Claim.meta["orig_label"]``.
The mapping of each dataset (and of each of its variants) is written in its reader's docstring and is
data in :data:`DATASETS`, so ``veracity bench`` can print it.

Layout: ``data_dir/<folder>/<file>`` with the folder names of the shared evaluation data
(``hover/``, ``feverous_s/``, ``fever/``, ``factool_kbqa/``, ``bingcheck/``, ``factcheck_bench/``,
``felm_wk/``, ``politifact_gossipcop/<release>/``, ``liar/``); ``data_dir/<file>`` is accepted too.
``data_dir`` defaults to ``$VERACITY_DATA_DIR``.

Usage::

    ds = load_dataset("hover", hops=3, limit=100, seed=0)
    for claim, gold in ds.claims: ...
    ds = load_dataset("jsonl:claims.jsonl", label_map="true=SUPPORTED,false=REFUTED")

Selection order: read all records -> map labels (a label mapped to ``drop`` removes the record) ->
``hops`` filter -> ``limit`` (with ``seed``: seeded shuffle of the selection, then the first N; without a
seed: the first N in file order).
"""

from __future__ import annotations

import ast
import csv
import hashlib
import json
import os
import random
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from veracity.errors import DataError
from veracity.pipeline.types import MAX_CLAIM_CHARS, Claim, Label

S, R, N = Label.SUPPORTED, Label.REFUTED, Label.NOT_ENOUGH_INFO
DROP = None  # a label mapped to DROP removes the record (e.g. EMULATE ignores "partially supported")

DATA_DIR_ENV = "VERACITY_DATA_DIR"
DATA_HINT = f"pass --data-dir DIR or set {DATA_DIR_ENV} to the folder that holds the dataset folders"

# A record as a reader yields it: the claim (without its label) and the label exactly as in the file.
Record = tuple[Claim, Any, str]  # (claim, raw label, "file:line" for error messages)
Reader = Callable[[Sequence[Path]], list[Record]]


# --------------------------------------------------------------------------------------------------
# Public types
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Variant:
    """One way of reading a dataset: which files, which reader, which label mapping."""

    name: str
    description: str
    files: tuple[str, ...]  # official file names, relative to the dataset folder
    reader: Reader
    label_map: Mapping[str, Label | None]  # normalised original label -> Label (None = drop the record)
    created: str | None = None  # overrides DatasetSpec.created when this variant's data is younger


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    folder: str  # folder under data_dir (official layout of the shared data)
    summary: str
    created: str  # ISO date of the dataset's first public release (leakage guard)
    created_source: str  # where that date comes from
    download: str  # where users get the files
    variants: Mapping[str, Variant]
    default_variant: str
    supports_hops: bool = False

    def variant(self, name: str | None) -> Variant:
        key = name or self.default_variant
        if key not in self.variants:
            raise DataError(
                f"dataset {self.name} has no variant {key!r}",
                hint=f"known variants of {self.name}: {', '.join(self.variants)}",
            )
        return self.variants[key]


@dataclass
class Dataset:
    """A loaded benchmark: claims with their gold label, plus what was read (for run manifests)."""

    name: str
    variant: str | None
    claims: list[tuple[Claim, Label]]
    labels: tuple[Label, ...]  # the label set of this dataset, in Label order (binary sets have 2)
    source_files: list[Path]
    sha256: str  # one file: its sha256; several: sha256 over "<sha256>  <file name>\n" lines in read order
    created: str | None  # ISO date of the dataset's release; None for a user JSONL file
    file_sha256: dict[str, str] = field(default_factory=dict)
    label_mapping: dict[str, str | None] = field(default_factory=dict)  # orig label -> Label value / None
    total: int = 0  # records after label mapping and filters, before --limit
    dropped: dict[str, int] = field(default_factory=dict)  # orig label -> records dropped by the mapping
    selection: dict[str, Any] = field(default_factory=dict)  # hops / limit / seed as applied

    def __len__(self) -> int:
        return len(self.claims)

    def __iter__(self):
        return iter(self.claims)

    def label_counts(self) -> dict[Label, int]:
        counts = Counter(gold for _, gold in self.claims)
        return {lab: counts.get(lab, 0) for lab in self.labels}

    def orig_label_counts(self) -> dict[str, int]:
        return dict(Counter(str(c.meta.get("orig_label")) for c, _ in self.claims))

    def manifest(self) -> dict[str, Any]:
        """What a run manifest records about the data."""
        return {
            "name": self.name,
            "variant": self.variant,
            "source_files": [str(p) for p in self.source_files],
            "sha256": self.sha256,
            "file_sha256": self.file_sha256,
            "created": self.created,
            "labels": [lab.value for lab in self.labels],
            "label_mapping": self.label_mapping,
            "n_claims": len(self.claims),
            "total_before_limit": self.total,
            "dropped": self.dropped,
            "selection": self.selection,
            "label_counts": {lab.value: n for lab, n in self.label_counts().items()},
        }


# --------------------------------------------------------------------------------------------------
# Low-level readers (every format error: DataError naming the expected format and file:line)
# --------------------------------------------------------------------------------------------------


def _where(path: Path, line: int | None = None) -> str:
    return f"{path}:{line}" if line is not None else str(path)


def _read_jsonl(path: Path, fmt: str) -> list[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line; a bad line is a DataError with file:line."""
    out: list[tuple[int, dict[str, Any]]] = []
    with _open_text(path, fmt) as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                found = "a JSON list (one document, not JSON Lines)" if lineno == 1 and line.lstrip().startswith("[") \
                    else f"text that is not JSON ({exc.msg})"
                raise DataError(
                    f"{_where(path, lineno)}: expected {fmt} (one JSON object per line), found {found}",
                    hint="check that the file is the one the dataset's authors publish, not a converted copy",
                ) from None
            if not isinstance(obj, dict):
                raise DataError(
                    f"{_where(path, lineno)}: expected {fmt} (one JSON object per line), "
                    f"found a JSON {type(obj).__name__}",
                    hint="each line must be an object such as {\"claim\": ..., \"label\": ...}",
                )
            out.append((lineno, obj))
    return out


def _read_json(path: Path, fmt: str, top: type) -> Any:
    """A whole-file JSON document whose top level must be ``top`` (list or dict)."""
    with _open_text(path, fmt) as fh:
        text = fh.read()
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        found = "JSON Lines (one object per line)" if exc.msg == "Extra data" else f"invalid JSON ({exc.msg})"
        raise DataError(
            f"{_where(path, exc.lineno)}: expected {fmt} (one JSON document), found {found}",
            hint="check that the file is the one the dataset's authors publish, not a converted copy",
        ) from None
    if not isinstance(doc, top):
        want = "list" if top is list else "object"
        raise DataError(
            f"{path}: expected {fmt} (a JSON {want} at the top level), found a JSON {type(doc).__name__}",
            hint="check that the file is the one the dataset's authors publish",
        )
    return doc


class _open_text:
    """open(path) for text, turning undecodable bytes into a DataError that names the format."""

    def __init__(self, path: Path, fmt: str):
        self.path, self.fmt = path, fmt

    def __enter__(self):
        self.fh = open(self.path, encoding="utf-8", newline="")
        return self

    def __iter__(self):
        try:
            yield from self.fh
        except UnicodeDecodeError:
            raise DataError(f"{self.path}: expected {self.fmt} (UTF-8 text), found binary data",
                            hint="check that the file is not compressed or truncated") from None

    def read(self) -> str:
        try:
            return self.fh.read()
        except UnicodeDecodeError:
            raise DataError(f"{self.path}: expected {self.fmt} (UTF-8 text), found binary data",
                            hint="check that the file is not compressed or truncated") from None

    def __exit__(self, *exc):
        self.fh.close()
        return False


def _require(obj: Mapping[str, Any], fields: Iterable[str], where: str, fmt: str) -> None:
    missing = [f for f in fields if f not in obj]
    if missing:
        raise DataError(
            f"{where}: expected {fmt} with fields {', '.join(fields)}; missing {', '.join(missing)} "
            f"(found fields: {', '.join(map(str, obj)) or 'none'})",
            hint="check that the file is the one the dataset's authors publish, not another version",
        )


def _read_csv(path: Path, fmt: str, fields: Sequence[str]) -> list[tuple[int, dict[str, str]]]:
    csv.field_size_limit(sys.maxsize)
    with _open_text(path, fmt) as fh:
        reader = csv.DictReader(iter(fh))
        header = reader.fieldnames or []
        missing = [f for f in fields if f not in header]
        if missing:
            raise DataError(
                f"{_where(path, 1)}: expected {fmt} with columns {', '.join(fields)}; missing "
                f"{', '.join(missing)} (found header: {', '.join(header) or 'empty file'})",
                hint="check that the file is the one the dataset's authors publish",
            )
        rows = []
        for row in reader:
            rows.append((reader.line_num, row))
    return rows


def _text(value: Any, where: str, fmt: str, what: str = "claim") -> str:
    if not isinstance(value, str) or not value.strip():
        raise DataError(f"{where}: expected {fmt} with a non-empty string {what!r}, found {type(value).__name__} "
                        f"{str(value)[:40]!r}", hint="fix or remove that record")
    return value.strip()


def _fit_article(text: str, meta: dict[str, Any]) -> str:
    """News articles longer than MAX_CLAIM_CHARS are cut at the last whitespace before the limit.

    The runner refuses longer inputs, and many PolitiFact/GossipCop bodies (scraped pages) run past
    20,000 characters; the cut keeps the article's beginning (headline, lead) and is recorded in
    ``meta["truncated_from_chars"]``.
    """
    if len(text) <= MAX_CLAIM_CHARS:
        return text
    cut = text.rfind(" ", 0, MAX_CLAIM_CHARS)
    meta["truncated_from_chars"] = len(text)
    return text[: cut if cut > MAX_CLAIM_CHARS // 2 else MAX_CLAIM_CHARS].rstrip()


def norm_label_key(value: Any) -> str:
    """How original labels are compared with mapping keys: JSON booleans as true/false, text lower-cased."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return " ".join(str(value).strip().lower().split())


# --------------------------------------------------------------------------------------------------
# Dataset readers. Each docstring states the label mapping; the mapping itself is the variant's
# label_map in DATASETS below.
# --------------------------------------------------------------------------------------------------


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
    for i, obj in enumerate(_read_json(path, fmt, list)):
        where = f"{path} record {i}"
        if not isinstance(obj, dict):
            raise DataError(f"{where}: expected {fmt}, found a {type(obj).__name__}", hint="use the official file")
        if "label" not in obj:
            raise DataError(f"{where}: expected {fmt}, found a record without 'label' (the unlabelled test release?)",
                            hint="HoVer's test release has no labels: use the dev file hover_dev_release_v1.1.json")
        _require(obj, ("uid", "claim", "supporting_facts", "label", "num_hops"), where, fmt)
        facts = [[str(t), int(s)] for t, s in obj["supporting_facts"]]
        meta = {
            "gold_titles": list(dict.fromkeys(t for t, _ in facts)),
            "hops": int(obj["num_hops"]),
            "supporting_facts": facts,
            "hpqa_id": obj.get("hpqa_id"),
        }
        out.append((Claim(id=str(obj["uid"]), text=_text(obj["claim"], where, fmt), meta=meta), obj["label"], where))
    return out


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
    for i, obj in enumerate(_read_json(path, fmt, list)):
        where = f"{path} record {i}"
        if not isinstance(obj, dict):
            raise DataError(f"{where}: expected {fmt}, found a {type(obj).__name__}", hint="use ProgramFC's dev.json")
        _require(obj, ("id", "claim", "label", "evidence"), where, fmt)
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
        out.append((Claim(id=str(obj["id"]), text=_text(obj["claim"], where, fmt), meta=meta), obj["label"], where))
    return out


_FEVER_ESCAPES = {"-LRB-": "(", "-RRB-": ")", "-LSB-": "[", "-RSB-": "]", "-LCB-": "{", "-RCB-": "}", "-COLON-": ":"}


def fever_title(page: str) -> str:
    """FEVER page ids (``Colin_Kaepernick``, ``Tim_Burton_-LRB-director-RRB-``) as Wikipedia titles."""
    for esc, ch in _FEVER_ESCAPES.items():
        page = page.replace(esc, ch)
    return page.replace("_", " ")


def read_fever(paths: Sequence[Path]) -> list[Record]:
    """FEVER 1.0 JSONL (``paper_dev.jsonl``, ``shared_task_dev.jsonl``, ``train.jsonl`` ...).

    Labels: SUPPORTS -> SUPPORTED, REFUTES -> REFUTED, NOT ENOUGH INFO -> NOT_ENOUGH_INFO (3-way).
    meta: ``verifiable``, ``evidence_sets`` (list of sets of [page, sentence id]), ``gold_titles``
    (distinct evidence pages as Wikipedia titles: -LRB- -> "(", underscores -> spaces).
    """
    fmt = "FEVER JSONL ({id, label, claim, evidence})"
    (path,) = paths
    out: list[Record] = []
    for lineno, obj in _read_jsonl(path, fmt):
        where = _where(path, lineno)
        _require(obj, ("id", "label", "claim"), where, fmt)
        sets = []
        for ev_set in obj.get("evidence") or []:
            sets.append([[e[2], e[3]] for e in ev_set if len(e) >= 4 and e[2] is not None])
        meta = {
            "verifiable": obj.get("verifiable"),
            "evidence_sets": [s for s in sets if s],
            "gold_titles": list(dict.fromkeys(fever_title(p) for s in sets for p, _ in s)),
        }
        out.append((Claim(id=str(obj["id"]), text=_text(obj["claim"], where, fmt), meta=meta), obj["label"], where))
    return out


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
        for lineno, obj in _read_jsonl(path, fmt):
            where = _where(path, lineno)
            _require(obj, ("claim", "label"), where, fmt)
            out.append((Claim(id=f"{prefix}-{lineno}", text=_text(obj["claim"], where, fmt), meta={}),
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
    for lineno, obj in _read_jsonl(path, fmt):
        where = _where(path, lineno)
        _require(obj, ("prompt", "response", "claims"), where, fmt)
        if not isinstance(obj["claims"], list):
            raise DataError(f"{where}: expected {fmt}, found 'claims' of type {type(obj['claims']).__name__}",
                            hint="use FacTool's datasets/knowledge_qa/knowledge_qa.jsonl")
        for j, item in enumerate(obj["claims"], 1):
            if not isinstance(item, dict):
                raise DataError(f"{where}: expected {fmt}, found a claim that is a {type(item).__name__}",
                                hint="use FacTool's datasets/knowledge_qa/knowledge_qa.jsonl")
            _require(item, ("claim", "label"), f"{where} claim {j}", fmt)
            meta = {"prompt": obj["prompt"], "response": obj["response"], "response_label": obj.get("label")}
            out.append((Claim(id=f"kbqa-{lineno}-{j}", text=_text(item["claim"], where, fmt), meta=meta),
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
    for lineno, obj in _read_jsonl(path, fmt):
        where = _where(path, lineno)
        _require(obj, ("claim", "label"), where, fmt)
        meta = {"revised_claim": obj.get("revised_claim")}
        out.append((Claim(id=f"factcheck-{lineno}", text=_text(obj["claim"], where, fmt), meta=meta),
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
        for lineno, obj in _read_jsonl(path, fmt):
            where = _where(path, lineno)
            _require(obj, ("response", "claims", "claim_labels", "source"), where, fmt)
            if obj["source"] != source:
                continue
            claims, labels = obj["claims"], obj["claim_labels"]
            if not isinstance(claims, list) or not isinstance(labels, list) or len(claims) != len(labels):
                raise DataError(f"{where}: expected {fmt} with equally long lists claims/claim_labels",
                                hint="use the FactBench release of Factcheck-GPT")
            for j, (text, lab) in enumerate(zip(claims, labels, strict=True), 1):
                meta = {"prompt": obj.get("prompt"), "response": obj["response"],
                        "response_label": obj.get("response_label")}
                out.append((Claim(id=f"{source}-{lineno}-{j}", text=_text(text, where, fmt), meta=meta),
                            lab, f"{where} claim {j}"))
        return out

    read.__doc__ = read_factbench_segments.__doc__
    return read


def read_liar(split: str) -> Reader:
    """LIAR TSV (``{train,valid,test}.tsv``, no header, 14 tab-separated columns).

    The six PolitiFact ratings are kept in ``meta["orig_label"]``; the gold Label is the common
    binarisation (e.g. used for LIAR in fake-news baselines; the shared data README gives test 727/556):
    true, mostly-true, half-true -> SUPPORTED; barely-true, false, pants-fire -> REFUTED.
    Ids: column 1 without ``.json``; meta: subject, speaker, job_title, state, party, context,
    credit_history (the five counts) and ``split``.
    """

    def read(paths: Sequence[Path]) -> list[Record]:
        fmt = "LIAR TSV (14 tab-separated columns, no header)"
        (path,) = paths
        out: list[Record] = []
        csv.field_size_limit(sys.maxsize)
        with _open_text(path, fmt) as fh:
            for lineno, row in enumerate(csv.reader(iter(fh), delimiter="\t", quoting=csv.QUOTE_NONE), 1):
                if not row or row == [""]:
                    continue
                where = _where(path, lineno)
                if len(row) != 14:
                    raise DataError(f"{where}: expected {fmt}, found {len(row)} column(s)",
                                    hint="use the original liar_dataset.zip files (copies with a header row "
                                         "or edited lines are not the official release)")
                meta = {
                    "split": split,
                    "subject": row[3], "speaker": row[4], "job_title": row[5], "state": row[6],
                    "party": row[7], "context": row[13],
                    "credit_history": dict(zip(
                        ("barely-true", "false", "half-true", "mostly-true", "pants-fire"), row[8:13], strict=True)),
                }
                cid = row[0][:-5] if row[0].endswith(".json") else row[0]
                out.append((Claim(id=cid, text=_text(row[2], where, fmt, "statement"), meta=meta), row[1], where))
        return out

    read.__doc__ = read_liar.__doc__
    return read


# ---- PolitiFact / GossipCop releases (the label convention of each is in its docstring) ------------


def read_su2023(paths: Sequence[Path]) -> list[Record]:
    """PolitiFact++ (Su et al. 2023): ``HF.json``, ``HR.json`` [, ``MF.json``, ``MR.json``].

    Each file is a JSON object {"0": {id, text, title, description}, ...}; the label is the file:
    HF (human-written fake) and MF (machine-generated fake) -> REFUTED, HR (human-written real) and
    MR (machine-paraphrased real) -> SUPPORTED; ``meta["orig_label"]`` is HF/HR/MF/MR. Note: one HR id
    (politifact14940) is also in FakeNewsNet's fake list; the release's label (real) is kept.
    Claim.text = article text; ids ``<HF|HR|MF|MR>-<politifact id>`` (MF reuses the HF ids; MR holds
    two paraphrases of three articles: the second one gets the suffix ``-2``);
    meta: ``title``, ``description``, ``news_id``, ``release``.
    """
    fmt = "PolitiFact++ JSON (object of {id, text, title, description})"
    out: list[Record] = []
    seen: Counter[str] = Counter()
    for path in paths:
        kind = path.stem.upper()
        doc = _read_json(path, fmt, dict)
        for key in sorted(doc, key=lambda k: (not str(k).isdigit(), int(k) if str(k).isdigit() else 0, str(k))):
            obj = doc[key]
            where = f"{path} key {key}"
            if not isinstance(obj, dict):
                raise DataError(f"{where}: expected {fmt}, found a {type(obj).__name__}", hint="use the released files")
            _require(obj, ("id", "text", "title"), where, fmt)
            meta = {"news_id": obj["id"], "title": obj.get("title"), "description": obj.get("description"),
                    "release": "PolitiFact++"}
            text = _fit_article(_text(obj["text"], where, fmt, "text"), meta)
            cid = f"{kind}-{obj['id']}"
            seen[cid] += 1
            if seen[cid] > 1:
                cid = f"{cid}-{seen[cid]}"
            out.append((Claim(id=cid, text=text, meta=meta), kind, where))
    return out


def read_sheepdog(split: str) -> Reader:
    """SheepDog PolitiFact articles (``politifact_{train,test}.jsonl``: {text, label, label_name}).

    Labels: 1 / "fake" -> REFUTED, 0 / "real" -> SUPPORTED (SheepDog README: 1 = fake). The mapping is
    on ``label``; ``label_name`` is kept in meta and must agree. Claim.text = article text;
    ids ``sheepdog-<split>-<line>``.
    """

    def read(paths: Sequence[Path]) -> list[Record]:
        fmt = "SheepDog JSONL ({text, label, label_name})"
        (path,) = paths
        out: list[Record] = []
        for lineno, obj in _read_jsonl(path, fmt):
            where = _where(path, lineno)
            _require(obj, ("text", "label"), where, fmt)
            name = obj.get("label_name")
            if name is not None and {"0": "real", "1": "fake"}.get(str(obj["label"])) != name:
                raise DataError(f"{where}: label {obj['label']!r} disagrees with label_name {name!r}",
                                hint="SheepDog uses 1 = fake, 0 = real; fix or remove that record")
            meta = {"label_name": name, "split": split, "release": "SheepDog"}
            text = _fit_article(_text(obj["text"], where, fmt, "text"), meta)
            out.append((Claim(id=f"sheepdog-{split}-{lineno}", text=text, meta=meta), obj["label"], where))
        return out

    read.__doc__ = read_sheepdog.__doc__
    return read


def _py_list(value: str, where: str, fmt: str, what: str) -> list[str]:
    """chandleru11 stores sentence lists as Python list literals; parsed as literals, never executed."""
    try:
        items = ast.literal_eval(value)
    except (ValueError, SyntaxError):
        raise DataError(f"{where}: expected {fmt} with {what} as a list literal, found {value[:40]!r}",
                        hint="use the files of github.com/ChandlerU11/fake_news_data") from None
    if not isinstance(items, list):
        raise DataError(f"{where}: expected {fmt} with {what} as a list, found {type(items).__name__}",
                        hint="use the files of github.com/ChandlerU11/fake_news_data")
    return [str(x) for x in items]


def read_chandleru11(site: str, split: str) -> Reader:
    """ChandlerU11 cleaned FakeNewsNet CSV (``<site>_<split>.csv``: "", id, content, comments, label, title).

    Labels: 1 -> REFUTED (fake), 0 -> SUPPORTED (real) (checked against the official FakeNewsNet id
    lists). Claim.text = the content sentences joined (lower-cased in this release); meta: ``title``,
    ``news_id``, ``n_comments`` (the tweet replies are not kept).
    """

    def read(paths: Sequence[Path]) -> list[Record]:
        fmt = "chandleru11 CSV (columns id, content, comments, label, title)"
        (path,) = paths
        out: list[Record] = []
        for lineno, row in _read_csv(path, fmt, ("id", "content", "label", "title")):
            where = _where(path, lineno)
            title = " ".join(_py_list(row["title"], where, fmt, "title"))
            meta = {"news_id": row["id"], "title": title, "split": split, "release": "chandleru11",
                    "n_comments": len(_py_list(row["comments"], where, fmt, "comments")) if row.get("comments") else 0}
            body = " ".join(_py_list(row["content"], where, fmt, "content")).strip() or title
            text = _fit_article(_text(body, where, fmt, "content"), meta)
            out.append((Claim(id=row["id"], text=text, meta=meta), row["label"], where))
        return out

    read.__doc__ = read_chandleru11.__doc__
    return read


def read_fakenewsnet_csv(paths: Sequence[Path]) -> list[Record]:
    """Official FakeNewsNet minimal release (``<site>_fake.csv`` / ``<site>_real.csv``: id, news_url, title, tweet_ids).

    The label is the file: ``*_fake.csv`` -> REFUTED, ``*_real.csv`` -> SUPPORTED (orig_label
    "fake"/"real"). Claim.text = the title (the release has no article bodies); meta: ``news_url``,
    ``n_tweets``.
    """
    fmt = "FakeNewsNet CSV (columns id, news_url, title, tweet_ids)"
    out: list[Record] = []
    for path in paths:
        kind = "fake" if path.stem.endswith("_fake") else "real"
        for lineno, row in _read_csv(path, fmt, ("id", "news_url", "title")):
            where = _where(path, lineno)
            tweets = [t for t in (row.get("tweet_ids") or "").split("\t") if t.strip()]
            meta = {"news_url": row["news_url"], "n_tweets": len(tweets), "release": "FakeNewsNet"}
            out.append((Claim(id=row["id"], text=_text(row["title"], where, fmt, "title"), meta=meta), kind, where))
    return out


def read_kkush_gossipcop(paths: Sequence[Path]) -> list[Record]:
    """GossipCop titles (``gossipcop_all_data.json``: a JSON list of {id, text, image_path, label, url}).

    A conversion of the official gossipcop_fake.csv + gossipcop_real.csv. Labels: 1 -> REFUTED (fake),
    0 -> SUPPORTED (real). Claim.text = the title (field ``text``); meta: ``url``, ``image_path``.
    """
    fmt = "GossipCop all_data JSON (list of {id, text, label})"
    (path,) = paths
    out: list[Record] = []
    for i, obj in enumerate(_read_json(path, fmt, list)):
        where = f"{path} record {i}"
        if not isinstance(obj, dict):
            raise DataError(f"{where}: expected {fmt}, found a {type(obj).__name__}", hint="use all_data.json")
        _require(obj, ("id", "text", "label"), where, fmt)
        meta = {"url": obj.get("url") or None, "image_path": obj.get("image_path") or None, "release": "FakeNewsNet"}
        out.append((Claim(id=str(obj["id"]), text=_text(obj["text"], where, fmt, "text"), meta=meta), obj["label"], where))
    return out


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
    for lineno, obj in _read_jsonl(path, fmt):
        where = _where(path, lineno)
        _require(obj, ("claim", "label"), where, fmt)
        meta = {k: v for k, v in obj.items() if k not in ("id", "claim", "label", "date")}
        date = obj.get("date")
        claim = Claim(id=str(obj.get("id", f"{path.stem}-{lineno}")), text=_text(obj["claim"], where, fmt),
                      date=str(date) if date is not None else None, meta=meta)
        out.append((claim, obj["label"], where))
    return out


# --------------------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------------------

TRUE_FALSE = {"true": S, "false": R}
FAKE_REAL_01 = {"1": R, "0": S}

DATASETS: dict[str, DatasetSpec] = {}


def _register(spec: DatasetSpec) -> None:
    assert spec.default_variant in spec.variants
    DATASETS[spec.name] = spec


_register(DatasetSpec(
    name="hover", folder="hover",
    summary="HoVer many-hop claims (2-4 hops), SUPPORTED / NOT_SUPPORTED, gold supporting-fact titles",
    created="2020-11-05", created_source="Jiang et al., HoVer, arXiv:2011.03088 (Findings of EMNLP 2020)",
    download="https://hover-nlp.github.io/ (data/hover/ of github.com/hover-nlp/hover)",
    variants={
        "dev": Variant("dev", "official dev set (labelled)", ("hover_dev_release_v1.1.json",), read_hover,
                       {"supported": S, "not_supported": R}),
        "train": Variant("train", "official train set", ("hover_train_release_v1.1.json",), read_hover,
                         {"supported": S, "not_supported": R}),
    },
    default_variant="dev", supports_hops=True,
))

_register(DatasetSpec(
    name="feverous-s", folder="feverous_s",
    summary="FEVEROUS dev claims with sentence-only evidence (ProgramFC's subset), supports / refutes",
    created="2021-06-10", created_source="Aly et al., FEVEROUS, arXiv:2106.05707 (NeurIPS 2021 Datasets)",
    download="github.com/teacherpeterpan/ProgramFC datasets/FEVEROUS/claims/dev.json",
    variants={
        "dev": Variant("dev", "ProgramFC's FEVEROUS-S dev.json", ("programfc_feverous_s_dev.json|dev.json",),
                       read_feverous_s, {"supports": S, "refutes": R}),
    },
    default_variant="dev",
))

_FEVER_MAP = {"supports": S, "refutes": R, "not enough info": N}
_register(DatasetSpec(
    name="fever", folder="fever",
    summary="FEVER 1.0 claims, 3-way SUPPORTS / REFUTES / NOT ENOUGH INFO",
    created="2018-03-14", created_source="Thorne et al., FEVER, arXiv:1803.05355 (NAACL 2018)",
    download="https://fever.ai/dataset/fever.html",
    variants={
        "paper_dev": Variant("paper_dev", "paper_dev (9,999 claims, balanced)", ("paper_dev.jsonl",), read_fever, _FEVER_MAP),
        "paper_test": Variant("paper_test", "paper_test", ("paper_test.jsonl",), read_fever, _FEVER_MAP),
        "shared_task_dev": Variant("shared_task_dev", "shared_task_dev (19,998 claims)", ("shared_task_dev.jsonl",),
                                   read_fever, _FEVER_MAP),
        "train": Variant("train", "train", ("train.jsonl",), read_fever, _FEVER_MAP),
    },
    default_variant="paper_dev",
))

_register(DatasetSpec(
    name="factool-kbqa", folder="factool_kbqa",
    summary="FacTool knowledge-based QA atomic claims, True / False (EMULATE Table 1: 177 / 56)",
    created="2023-07-25", created_source="Chern et al., FacTool, arXiv:2307.13528",
    download="github.com/GAIR-NLP/factool datasets/knowledge_qa/knowledge_qa.jsonl",
    variants={
        "official": Variant("official", "FacTool's knowledge_qa.jsonl, one record per annotated claim",
                            ("knowledge_qa.jsonl",), read_factool_kbqa, TRUE_FALSE),
        "fire": Variant("fire", "FIRE's flattening (datasets/factool_qa/data.jsonl)", ("fire_factool_qa_data.jsonl",),
                        read_claim_label_jsonl("kbqa-fire"), TRUE_FALSE),
    },
    default_variant="official",
))

_BING_4WAY = {"supported": S, "partially supported": S, "not supported": N, "refuted": R}
_register(DatasetSpec(
    name="bingcheck", folder="bingcheck",
    summary="BingCheck atomic claims of Bing Chat answers; 4-way labels and FIRE / EMULATE binary versions",
    created="2023-05-24", created_source="Li et al., Self-Checker, arXiv:2305.14623 (Findings of NAACL 2024)",
    download="github.com/mbzuai-nlp/fire datasets/bingcheck/",
    variants={
        "emulate": Variant(
            "emulate", "EMULATE convention: supported -> True, refuted -> False, other labels dropped "
            "(EMULATE further sub-sampled 160 supported claims; that subset is unpublished, use --limit/--seed)",
            ("fire_bingcheck.jsonl|bingcheck.jsonl",), read_claim_label_jsonl("bingcheck"),
            {"supported": S, "refuted": R, "partially supported": DROP, "not supported": DROP}),
        "4way": Variant(
            "4way", "all 3,840 claims: supported and partially supported -> SUPPORTED, refuted -> REFUTED, "
            "not supported (no evidence found) -> NOT_ENOUGH_INFO", ("fire_bingcheck.jsonl|bingcheck.jsonl",),
            read_claim_label_jsonl("bingcheck"), _BING_4WAY),
        "fire": Variant("fire", "FIRE paper subset (data.jsonl): true -> SUPPORTED, false -> REFUTED",
                        ("fire_data.jsonl|data.jsonl",), read_claim_label_jsonl("bingcheck-fire"), TRUE_FALSE),
        "fire-full": Variant("fire-full", "FIRE data_full.jsonl: true (= supported + partially supported) / false "
                             "(= refuted); not supported dropped by FIRE", ("fire_data_full.jsonl|data_full.jsonl",),
                             read_claim_label_jsonl("bingcheck-firefull"), TRUE_FALSE),
    },
    default_variant="emulate",
))

_register(DatasetSpec(
    name="factcheck-bench", folder="factcheck_bench",
    summary="Factcheck-Bench checkworthy claims of ChatGPT answers: true / false / not enough evidence",
    created="2023-11-15", created_source="Wang et al., Factcheck-Bench / Factcheck-GPT, arXiv:2311.09000",
    download="github.com/yuxiaw/Factcheck-GPT subtasks/subtask4_claim_factuality.jsonl",
    variants={
        "binary": Variant("binary", "subtask 4 without not_enough_evidence (631 claims, EMULATE Table 1)",
                          ("subtask4_claim_factuality.jsonl",), read_factcheck_subtask4,
                          {"true": S, "false": R, "not_enough_evidence": DROP}),
        "3way": Variant("3way", "subtask 4, all 661 claims, not_enough_evidence -> NOT_ENOUGH_INFO",
                        ("subtask4_claim_factuality.jsonl",), read_factcheck_subtask4,
                        {"true": S, "false": R, "not_enough_evidence": N}),
        "fire": Variant("fire", "FIRE's binary copy (datasets/factcheckbench/data.jsonl)",
                        ("fire_factcheckbench_data.jsonl",), read_claim_label_jsonl("factcheck-fire"), TRUE_FALSE),
    },
    default_variant="binary",
))

_register(DatasetSpec(
    name="felm-wk", folder="felm_wk",
    summary="FELM world-knowledge ChatGPT responses, True / False (response-level, as flattened by FIRE)",
    created="2023-10-01", created_source="Chen et al., FELM, arXiv:2310.00741 (NeurIPS 2023 Datasets)",
    download="github.com/mbzuai-nlp/fire datasets/felm_wk/data.jsonl",
    variants={
        "fire": Variant("fire", "FIRE's response-level file (184 responses; Claim.text = whole response)",
                        ("fire_felm_wk_data.jsonl",), read_claim_label_jsonl("felm-wk"), TRUE_FALSE),
        "segments": Variant("segments", "segment-level labels of the same responses from Factbench.jsonl",
                            ("../factcheck_bench/Factbench.jsonl|Factbench.jsonl",),
                            read_factbench_segments("felm-wk"), TRUE_FALSE),
    },
    default_variant="fire",
))

_PF = "politifact_gossipcop"
_FNN_CREATED = "FakeNewsNet: Shu et al., arXiv:1809.01286 (articles collected up to 2018)"
_register(DatasetSpec(
    name="politifact", folder=_PF,
    summary="PolitiFact news articles (FakeNewsNet): fake -> REFUTED, real -> SUPPORTED; several releases",
    created="2018-09-05", created_source=_FNN_CREATED,
    download="github.com/mbzuai-nlp/Fakenews-dataset (PolitiFact++), github.com/KaiDMML/FakeNewsNet",
    variants={
        "su2023": Variant("su2023", "PolitiFact++ human-written articles HF (fake) + HR (real): the re-release "
                          "ZoFia evaluates on", ("PolitiFact++/HF.json", "PolitiFact++/HR.json"), read_su2023,
                          {"hf": R, "hr": S}),
        "su2023-all": Variant("su2023-all", "PolitiFact++ incl. LLM-generated fake (MF) and paraphrased real (MR)",
                              ("PolitiFact++/HF.json", "PolitiFact++/HR.json", "PolitiFact++/MF.json",
                               "PolitiFact++/MR.json"), read_su2023, {"hf": R, "hr": S, "mf": R, "mr": S},
                              created="2023-11-08"),  # MF/MR written by LLMs for arXiv:2311.04917
        "sheepdog-test": Variant("sheepdog-test", "SheepDog test articles (1 = fake)",
                                 ("sheepdog_politifact/politifact_test.jsonl",), read_sheepdog("test"), FAKE_REAL_01),
        "sheepdog-train": Variant("sheepdog-train", "SheepDog train articles (1 = fake)",
                                  ("sheepdog_politifact/politifact_train.jsonl",), read_sheepdog("train"), FAKE_REAL_01),
        "chandleru11-test": Variant("chandleru11-test", "ChandlerU11 cleaned test articles (1 = fake)",
                                    ("chandleru11_cleaned/politifact_test.csv",), read_chandleru11("politifact", "test"),
                                    FAKE_REAL_01),
        "chandleru11-train": Variant("chandleru11-train", "ChandlerU11 cleaned train articles (1 = fake)",
                                     ("chandleru11_cleaned/politifact_train.csv",),
                                     read_chandleru11("politifact", "train"), FAKE_REAL_01),
        "fakenewsnet": Variant("fakenewsnet", "official FakeNewsNet titles, fake + real csv",
                               ("fakenewsnet_official/politifact_fake.csv", "fakenewsnet_official/politifact_real.csv"),
                               read_fakenewsnet_csv, {"fake": R, "real": S}),
        "fakenewsnet-fake": Variant("fakenewsnet-fake", "official FakeNewsNet titles, fake list only (all REFUTED)",
                                    ("fakenewsnet_official/politifact_fake.csv",), read_fakenewsnet_csv, {"fake": R}),
    },
    default_variant="su2023",
))

_register(DatasetSpec(
    name="gossipcop", folder=_PF,
    summary="GossipCop entertainment news (FakeNewsNet): fake -> REFUTED, real -> SUPPORTED; several releases",
    created="2018-09-05", created_source=_FNN_CREATED,
    download="github.com/KaiDMML/FakeNewsNet; github.com/ChandlerU11/fake_news_data",
    variants={
        "chandleru11-test": Variant("chandleru11-test", "ChandlerU11 cleaned test articles with body text (1 = fake)",
                                    ("chandleru11_cleaned/gossipcop_test.csv",), read_chandleru11("gossipcop", "test"),
                                    FAKE_REAL_01),
        "titles": Variant("titles", "all 22,140 FakeNewsNet GossipCop titles (all_data.json conversion, 1 = fake)",
                          ("gossipcop_titles_kkush/gossipcop_all_data.json",), read_kkush_gossipcop, FAKE_REAL_01),
        "fakenewsnet": Variant("fakenewsnet", "official FakeNewsNet titles, fake + real csv",
                               ("fakenewsnet_official/gossipcop_fake.csv", "fakenewsnet_official/gossipcop_real.csv"),
                               read_fakenewsnet_csv, {"fake": R, "real": S}),
    },
    default_variant="chandleru11-test",
))

_LIAR_BINARY = {"true": S, "mostly-true": S, "half-true": S, "barely-true": R, "false": R, "pants-fire": R}
_register(DatasetSpec(
    name="liar", folder="liar",
    summary="LIAR PolitiFact statements: 6 ratings kept in meta, binarised true/mostly/half vs barely/false/pants-fire",
    created="2017-05-01", created_source="Wang, 'Liar, Liar Pants on Fire', arXiv:1705.00648 (ACL 2017)",
    download="https://www.cs.ucsb.edu/~william/data/liar_dataset.zip",
    variants={split: Variant(split, f"{split}.tsv, binarised", (f"{split}.tsv",), read_liar(split), _LIAR_BINARY)
              for split in ("test", "valid", "train")},
    default_variant="test",
))

LIAR_SIX_WAY = ("pants-fire", "false", "barely-true", "half-true", "mostly-true", "true")  # for breakdowns


# --------------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------------


def parse_label_map(spec: str | Mapping[str, Any] | None) -> dict[str, Label | None] | None:
    """``"true=SUPPORTED,false=REFUTED"`` (or a dict) -> {normalised original label: Label or None}.

    Values are Label names (case-insensitive; ``NEI`` for NOT_ENOUGH_INFO) or ``drop`` to skip records.
    """
    if spec is None:
        return None
    hint = "e.g. --label-map true=SUPPORTED,false=REFUTED,unknown=NOT_ENOUGH_INFO (or =drop)"
    if isinstance(spec, str):
        pairs = []
        for item in (x for x in spec.split(",") if x.strip()):
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise DataError(f"label map entry {item.strip()!r} is not ORIG=LABEL", hint=hint)
            pairs.append((key, value))
    else:
        pairs = list(spec.items())
    if not pairs:
        raise DataError("label map is empty", hint=hint)
    out: dict[str, Label | None] = {}
    for key, value in pairs:
        if isinstance(value, Label) or value is None:
            out[norm_label_key(key)] = value
            continue
        v = str(value).strip().upper().replace(" ", "_").replace("-", "_")
        v = {"NEI": "NOT_ENOUGH_INFO"}.get(v, v)
        if v == "DROP":
            out[norm_label_key(key)] = None
        elif v in Label.__members__:
            out[norm_label_key(key)] = Label[v]
        else:
            raise DataError(f"label map value {value!r} for {key!r} is not a label",
                            hint="use SUPPORTED, REFUTED, NOT_ENOUGH_INFO (NEI) or drop; " + hint)
    return out


_DEFAULT_JSONL_MAP: dict[str, Label | None] = {lab.value.lower(): lab for lab in Label}


def resolve_data_dir(data_dir: str | os.PathLike[str] | None) -> Path:
    raw = data_dir if data_dir is not None else os.environ.get(DATA_DIR_ENV)
    if not raw:
        raise DataError("no data directory given", hint=DATA_HINT)
    path = Path(raw).expanduser()
    if not path.is_dir():
        raise DataError(f"data directory {path} does not exist", hint=DATA_HINT)
    return path


def _find_file(data_dir: Path, spec: DatasetSpec, rel: str) -> Path:
    """``rel`` may list alternative official names separated by '|'; tried under data_dir/<folder>, then data_dir."""
    names = rel.split("|")
    tried = []
    for base in (data_dir / spec.folder, data_dir):
        for name in names:
            cand = (base / name)
            tried.append(cand)
            if cand.is_file():
                return cand
    raise DataError(
        f"{spec.name}: file not found: {tried[0]}",
        hint=f"download it ({spec.download}) into {tried[0].parent}, or {DATA_HINT}",
    )


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _combined_sha(paths: Sequence[Path], digests: Mapping[str, str]) -> str:
    if len(paths) == 1:
        return digests[str(paths[0])]
    lines = "".join(f"{digests[str(p)]}  {p.name}\n" for p in paths)
    return hashlib.sha256(lines.encode()).hexdigest()


def _normalise_hops(hops: int | Iterable[int] | None) -> set[int] | None:
    if hops is None:
        return None
    values = {hops} if isinstance(hops, int) else set(hops)
    if not values or not all(isinstance(h, int) and h in (2, 3, 4) for h in values):
        raise DataError(f"hops must be 2, 3 or 4, got {sorted(values, key=str)}", hint="e.g. --hops 3 or --hops 2,3")
    return values


def load_dataset(
    name: str,
    data_dir: str | os.PathLike[str] | None = None,
    *,
    limit: int | None = None,
    seed: int | None = None,
    hops: int | Iterable[int] | None = None,
    variant: str | None = None,
    label_map: str | Mapping[str, Any] | None = None,
) -> Dataset:
    """Read a benchmark (a name in :data:`DATASETS`, or ``jsonl:PATH``) into a :class:`Dataset`.

    ``label_map`` maps original labels onto Labels: for ``jsonl:PATH`` it is the mapping (default: the
    Label names); for a named dataset it overrides entries of the variant's mapping (e.g.
    ``"partially supported=drop"``). ``hops`` (HoVer only) keeps claims with those ``num_hops``.
    """
    # options first: a bad option is reported before any file is looked up
    if limit is not None and limit < 1:
        raise DataError(f"limit must be a positive number of claims, got {limit}", hint="e.g. --limit 100")
    hop_set = _normalise_hops(hops)
    if name.startswith("jsonl:"):
        path = Path(name[len("jsonl:"):]).expanduser()
        if not path.is_file():
            raise DataError(f"claims file not found: {path}",
                            hint="jsonl:PATH takes a path to a JSONL file of {\"id\", \"claim\", \"label\"} objects")
        mapping = parse_label_map(label_map) or dict(_DEFAULT_JSONL_MAP)
        files, reader, ds_name, var_name, created = [path], read_generic_jsonl, name, None, None
        if hops is not None:
            raise DataError("hops applies to the hover dataset only", hint="drop --hops for jsonl:PATH")
    else:
        if name not in DATASETS:
            raise DataError(f"unknown dataset {name!r}",
                            hint=f"known datasets: {', '.join(DATASETS)}, or jsonl:PATH for your own file")
        spec = DATASETS[name]
        var = spec.variant(variant)
        if hops is not None and not spec.supports_hops:
            raise DataError(f"hops applies to the hover dataset only, not {name}", hint="drop --hops")
        root = resolve_data_dir(data_dir)
        files = [_find_file(root, spec, rel) for rel in var.files]
        mapping = dict(var.label_map)
        mapping.update(parse_label_map(label_map) or {})
        reader, ds_name, var_name, created = var.reader, spec.name, var.name, var.created or spec.created

    records = reader(files)

    # map labels; every label outside the mapping is reported at once
    unknown: Counter[str] = Counter()
    first_at: dict[str, str] = {}
    dropped: Counter[str] = Counter()
    seen: dict[str, str] = {}
    pairs: list[tuple[Claim, Label]] = []
    for claim, raw, where in records:
        key = norm_label_key(raw)
        if key not in mapping:
            unknown[key] += 1
            first_at.setdefault(key, where)
            continue
        if claim.id in seen:
            raise DataError(f"{where}: duplicate claim id {claim.id!r} (first at {seen[claim.id]})",
                            hint="claim ids must be unique so that runs can resume; fix the file")
        seen[claim.id] = where
        gold = mapping[key]
        if gold is None:
            dropped[str(raw)] += 1
            continue
        claim.meta["orig_label"] = raw
        pairs.append((claim, gold))
    if unknown:
        listed = ", ".join(f"{k!r} ({n}, first at {first_at[k]})" for k, n in unknown.most_common(8))
        more = f" and {len(unknown) - 8} more" if len(unknown) > 8 else ""
        known = ", ".join(f"{k}={v.value if v else 'drop'}" for k, v in mapping.items())
        raise DataError(f"{ds_name}: labels outside the mapping: {listed}{more}",
                        hint=f"mapping in use: {known}; extend it with --label-map ORIG=LABEL,...")

    if hop_set is not None:
        pairs = [(c, g) for c, g in pairs if c.meta.get("hops") in hop_set]
    if not pairs:
        what = f" with hops {sorted(hop_set)}" if hop_set else ""
        raise DataError(f"{ds_name}: no claims left{what} ({len(records)} records read, "
                        f"{sum(dropped.values())} dropped by the label mapping)",
                        hint="loosen the filters (--hops, --label-map) or check the file")
    total = len(pairs)
    if limit is not None:
        if seed is not None:
            random.Random(seed).shuffle(pairs)
        pairs = pairs[:limit]

    digests = {str(p): _sha256(p) for p in files}
    # the label set: the mapping's targets; a JSONL file read with the default mapping (the Label
    # names) uses the labels its records hold, so a two-label file is scored as a binary set
    if name.startswith("jsonl:") and label_map is None:
        used = {gold for _, gold in pairs}
    else:
        used = {lab for lab in mapping.values() if lab is not None}
    labels = tuple(lab for lab in Label if lab in used)
    return Dataset(
        name=ds_name, variant=var_name, claims=pairs, labels=labels, source_files=list(files),
        sha256=_combined_sha(files, digests), created=created, file_sha256=digests,
        label_mapping={k: (v.value if v else None) for k, v in mapping.items()},
        total=total, dropped=dict(dropped),
        selection={"hops": sorted(hop_set) if hop_set else None, "limit": limit, "seed": seed},
    )


def describe_datasets() -> list[dict[str, Any]]:
    """Name, variants, label mappings and release date of every dataset (for `veracity bench datasets`)."""
    out = []
    for spec in DATASETS.values():
        out.append({
            "name": spec.name, "summary": spec.summary, "folder": spec.folder, "created": spec.created,
            "created_source": spec.created_source, "default_variant": spec.default_variant,
            "variants": {v.name: {"description": v.description, "files": list(v.files),
                                  "label_map": {k: (lab.value if lab else None) for k, lab in v.label_map.items()}}
                         for v in spec.variants.values()},
        })
    return out
