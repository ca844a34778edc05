"""Loading a benchmark: files found under the data dir, read, labels mapped, filtered, sampled, hashed.

Layout: ``data_dir/<folder>/<file>`` with the folder names of the shared evaluation data
(``hover/``, ``feverous_s/``, ``fever/``, ``factool_kbqa/``, ``bingcheck/``, ``factcheck_bench/``,
``felm_wk/``, ``politifact_gossipcop/<release>/``, ``liar/``); ``data_dir/<file>`` is accepted too.
``data_dir`` defaults to ``$VERACITY_DATA_DIR``.

Selection order: read all records -> map labels (a label mapped to ``drop`` removes the record) ->
with ``evidence="gold"``: attach each claim's gold passages (``Claim.meta["evidence"]``) and drop the
claims whose gold evidence is incomplete (:mod:`veracity.bench.datasets.gold`) -> ``hops`` filter ->
``limit`` (with ``seed``: seeded shuffle of the selection, then the first N; without a seed: the first N in
file order). The label as written in the file is kept in ``Claim.meta["orig_label"]``.
"""

from __future__ import annotations

import hashlib
import os
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from veracity.bench.datasets.gold import (CLAIMS_FILE_GOLD_MEANING, GoldResult, check_claims_file_gold,
                                          gold_summary)
from veracity.bench.datasets.jsonl import read_generic_jsonl
from veracity.bench.datasets.records import norm_label_key
from veracity.bench.datasets.registry import DATASETS, DatasetSpec, describe_datasets, get_spec
from veracity.errors import ConfigError, DataError
from veracity.pipeline.evidence import evidence_setting
from veracity.pipeline.labels import THREE_WAY, LabelSpace, space_of
from veracity.pipeline.types import Claim, Label

DATA_DIR_ENV = "VERACITY_DATA_DIR"
DATA_HINT = f"pass --data-dir DIR or set {DATA_DIR_ENV} to the folder that holds the dataset folders"


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
    label_space: LabelSpace = THREE_WAY  # the declared label space (bench run's default --labels)
    evidence: str = "open"  # the evidence setting it was loaded for: "gold" attaches Claim.meta["evidence"]
    gold: dict[str, Any] | None = None  # with evidence="gold": what gold means here, files, claims dropped

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
            "label_space": self.label_space.name,
            "label_mapping": self.label_mapping,
            "n_claims": len(self.claims),
            "total_before_limit": self.total,
            "dropped": self.dropped,
            "selection": self.selection,
            "label_counts": {lab.value: n for lab, n in self.label_counts().items()},
            "evidence": self.evidence,
            **({"gold": self.gold} if self.gold is not None else {}),
        }


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
    """``rel`` may list alternative official names separated by '|'; tried under data_dir/<folder>,
    then data_dir."""
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
        raise DataError(f"hops must be 2, 3 or 4, got {sorted(values, key=str)}",
                        hint="e.g. --hops 3 or --hops 2,3")
    return values


SAMPLE_MODES = ("random", "balanced")
ORDER_MODES = ("sample", "dataset")


def balanced_take(pairs: list[tuple[Claim, Label]], limit: int) -> list[tuple[Claim, Label]]:
    """``limit`` pairs taken in turn from groups of equal (hop count, gold label), keeping each group's
    order (the caller's seeded shuffle): a class-balanced sample, hop-balanced too on HoVer. A group that
    runs out leaves its turns to the others. Groups are visited in a fixed order (hops, then label)."""
    groups: dict[tuple[int, str], list[tuple[Claim, Label]]] = {}
    for pair in pairs:
        hop = pair[0].meta.get("hops")
        groups.setdefault((hop if isinstance(hop, int) else 0, pair[1].value), []).append(pair)
    queues = [groups[k] for k in sorted(groups)]
    out: list[tuple[Claim, Label]] = []
    turn = 0
    while len(out) < limit and any(queues):
        queue = queues[turn % len(queues)]
        if queue:
            out.append(queue.pop(0))
        turn += 1
    return out


def load_dataset(
    name: str,
    data_dir: str | os.PathLike[str] | None = None,
    *,
    limit: int | None = None,
    seed: int | None = None,
    hops: int | Iterable[int] | None = None,
    variant: str | None = None,
    label_map: str | Mapping[str, Any] | None = None,
    evidence: str = "open",
    sample: str = "random",
    order: str = "sample",
) -> Dataset:
    """Read a benchmark (a name in :data:`DATASETS`, or ``jsonl:PATH``) into a :class:`Dataset`.

    ``label_map`` maps original labels onto Labels: for ``jsonl:PATH`` it is the mapping (default: the
    Label names); for a named dataset it overrides entries of the variant's mapping (e.g.
    ``"partially supported=drop"``). ``hops`` (HoVer only) keeps claims with those ``num_hops``.

    ``evidence`` is the run's evidence setting (``open`` / ``gold`` / ``none``). With ``gold`` each claim
    gets its gold passages in ``Claim.meta["evidence"]`` and claims whose gold evidence is incomplete are
    dropped before ``hops`` and ``limit`` (``Dataset.gold`` says how many); a dataset without gold evidence
    is a one-line ConfigError before any file is read (a claims file: a DataError naming its first line
    without an ``evidence`` list).

    ``sample`` says how ``limit`` claims are drawn: ``random`` (shuffled by ``seed``, then the first
    ``limit``) or ``balanced`` (class-balanced: the seeded shuffle is split by gold label, and by hop
    count where claims have one, and the groups are taken in turn, so every label - and every hop count
    - gets an equal share as far as the data allows). ``order`` is the order of the claims returned:
    ``sample`` (as drawn) or ``dataset`` (the drawn claims in the order of the dataset's file).
    """
    # options first: a bad option is reported before any file is looked up
    if limit is not None and limit < 1:
        raise DataError(f"limit must be a positive number of claims, got {limit}", hint="e.g. --limit 100")
    hop_set = _normalise_hops(hops)
    if sample not in SAMPLE_MODES:
        raise ConfigError(f"unknown sample mode {sample!r}",
                          hint="use --sample random (a seeded random sample) or balanced (class-balanced)")
    if order not in ORDER_MODES:
        raise ConfigError(f"unknown run order {order!r}",
                          hint="use --order sample (the sample's order) or dataset "
                               "(the dataset file's order)")
    evidence = evidence_setting(evidence)  # the settings' one check (veracity.pipeline.evidence)
    gold_spec = None
    if name.startswith("jsonl:"):
        path = Path(name[len("jsonl:"):]).expanduser()
        if not path.is_file():
            raise DataError(f"claims file not found: {path}",
                            hint="jsonl:PATH takes a path to a JSONL file of {\"id\", \"claim\", \"label\"} "
                                 "objects")
        mapping = parse_label_map(label_map) or dict(_DEFAULT_JSONL_MAP)
        files, reader, ds_name, var_name, created = [path], read_generic_jsonl, name, None, None
        declared = None
        if hops is not None:
            raise DataError("hops applies to the hover dataset only", hint="drop --hops for jsonl:PATH")
    else:
        spec = get_spec(name)
        var = spec.variant(variant)
        gold_spec = var.gold
        if evidence == "gold" and gold_spec is None:
            with_gold = [f"{s.name}" + (f" ({v.name})" if len(s.variants) > 1 else "")
                         for s in DATASETS.values() for v in s.variants.values() if v.gold is not None]
            raise ConfigError(
                f"{name}{f' ({var.name})' if len(spec.variants) > 1 else ''} has no gold evidence for "
                f"--evidence gold: {spec.no_gold}",
                hint=f"use --evidence open (an index) or --evidence none (closed book); gold evidence: "
                     f"{', '.join(with_gold)}, or a jsonl:PATH file whose lines carry an \"evidence\" list "
                     "of {title, text}")
        if hops is not None and not spec.supports_hops:
            raise DataError(f"hops applies to the hover dataset only, not {name}", hint="drop --hops")
        root = resolve_data_dir(data_dir)
        files = [_find_file(root, spec, rel) for rel in var.files]
        mapping = dict(var.label_map)
        mapping.update(parse_label_map(label_map) or {})
        reader, ds_name, var_name, created = var.reader, spec.name, var.name, var.created or spec.created
        declared = spec.space_of(var)

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

    gold: dict[str, Any] | None = None
    if evidence == "gold":
        read = len(pairs)
        if gold_spec is None:  # a claims file: every line carries its gold passages
            where_of = {c.id: w for c, _, w in records}
            check_claims_file_gold([(c, where_of[c.id]) for c, _ in pairs], files[0])
            result = GoldResult({c.id for c, _ in pairs}, {}, [files[0]])
            meaning = CLAIMS_FILE_GOLD_MEANING
        else:
            result = gold_spec.attach(root, [c for c, _ in pairs])
            meaning = gold_spec.meaning
        pairs = [(c, g) for c, g in pairs if c.id in result.kept]
        gold = gold_summary(result, meaning, read)
        gold["file_sha256"] = {str(p): _sha256(p) for p in result.source_files if p not in files}
    if hop_set is not None:
        pairs = [(c, g) for c, g in pairs if c.meta.get("hops") in hop_set]
    if not pairs:
        what = f" with hops {sorted(hop_set)}" if hop_set else ""
        no_gold = f", {gold['dropped_without_complete_gold']} without complete gold evidence" if gold else ""
        raise DataError(f"{ds_name}: no claims left{what} ({len(records)} records read, "
                        f"{sum(dropped.values())} dropped by the label mapping{no_gold})",
                        hint="loosen the filters (--hops, --label-map) or check the file")
    total = len(pairs)
    position = {id(c): i for i, (c, _) in enumerate(pairs)}
    if limit is not None:
        if seed is not None:
            random.Random(seed).shuffle(pairs)
        pairs = balanced_take(pairs, limit) if sample == "balanced" else pairs[:limit]
    if order == "dataset":
        pairs.sort(key=lambda pair: position[id(pair[0])])

    digests = {str(p): _sha256(p) for p in files}
    # the label set: the mapping's targets; a JSONL file read with the default mapping (the Label
    # names) uses the labels its records hold, so a two-label file is scored as a binary set
    if name.startswith("jsonl:") and label_map is None:
        used = {gold for _, gold in pairs}
    else:
        used = {lab for lab in mapping.values() if lab is not None}
    labels = tuple(lab for lab in Label if lab in used)
    # the label space: the dataset's declared one, widened to 3way when --label-map keeps NOT_ENOUGH_INFO;
    # a user's JSONL file: binary unless its labels include NOT_ENOUGH_INFO
    space = THREE_WAY if Label.NOT_ENOUGH_INFO in labels else (declared or space_of(labels))
    return Dataset(
        name=ds_name, variant=var_name, claims=pairs, labels=labels, source_files=list(files),
        sha256=_combined_sha(files, digests), created=created, file_sha256=digests,
        label_mapping={k: (v.value if v else None) for k, v in mapping.items()},
        total=total, dropped=dict(dropped),
        selection={"hops": sorted(hop_set) if hop_set else None, "limit": limit, "seed": seed,
                   **({"sample": sample} if sample != "random" else {}),
                   **({"order": order} if order != "sample" else {})},
        label_space=space, evidence=evidence, gold=gold,
    )



def describe_datasets_on_disk(data_dir: str | os.PathLike[str] | None = None,
                              progress: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """:func:`~veracity.bench.datasets.registry.describe_datasets` plus what the data dir holds.

    Each variant whose files are found is read in full (as ``load_dataset`` reads it) and gets
    ``n_claims`` and ``label_counts``; a variant whose files are missing or unreadable gets ``error``
    (the one-line message) instead. What ``veracity bench datasets --count`` prints.
    """
    root = resolve_data_dir(data_dir)
    out = describe_datasets()
    for record in out:
        for var_name, var in record["variants"].items():
            if progress is not None:
                progress(f"reading {record['name']} / {var_name}")
            try:
                ds = load_dataset(record["name"], root, variant=var_name)
            except DataError as exc:
                var["error"] = str(exc)
                continue
            var["n_claims"] = len(ds)
            var["label_counts"] = {lab.value: n for lab, n in ds.label_counts().items()}
            var["source_files"] = [str(p) for p in ds.source_files]
    return out
