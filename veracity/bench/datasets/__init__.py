"""Loaders for the public claim-verification benchmarks, in the file layout their authors publish.

Every benchmark maps its gold labels onto :class:`~veracity.pipeline.types.Label` (SUPPORTED /
REFUTED / NOT_ENOUGH_INFO) and keeps the label as written in the file in ``Claim.meta["orig_label"]``.

Usage::

    ds = load_dataset("hover", hops=3, limit=100, seed=0)
    for claim, gold in ds.claims: ...
    ds = load_dataset("jsonl:claims.jsonl", label_map="true=SUPPORTED,false=REFUTED")

The package:

- ``records.py``: the :data:`Record` a reader yields and the low-level file readers (JSON, JSON Lines,
  CSV) whose errors name the expected format and the file:line;
- one reader module per family of formats: ``hover.py``, ``feverous.py``, ``fever.py``,
  ``llm_answers.py`` (FacTool-KBQA, BingCheck, Factcheck-Bench, FELM-WK), ``liar.py``, ``news.py``
  (PolitiFact / GossipCop releases) and ``jsonl.py`` (a user's own ``jsonl:PATH`` file);
- ``registry.py``: :data:`DATASETS`, the table of names -> folder, release date and variants (files,
  reader, label mapping), and the lookups over it;
- ``load.py``: :func:`load_dataset` (find the files, read, map labels, filter, sample, hash) and the
  :class:`Dataset` it returns.

Adding a dataset touches two files: its reader in the reader module of its family (or a new module
here) and its :class:`DatasetSpec` in ``registry.py`` (see that module's docstring), plus a loader test
in ``tests/unit/test_bench_datasets.py``. ``veracity bench datasets`` lists what is registered.
"""

from __future__ import annotations

from veracity.bench.datasets.fever import fever_title, read_fever
from veracity.bench.datasets.feverous import read_feverous_s
from veracity.bench.datasets.hover import read_hover
from veracity.bench.datasets.jsonl import read_generic_jsonl
from veracity.bench.datasets.liar import read_liar
from veracity.bench.datasets.llm_answers import (
    read_claim_label_jsonl,
    read_factbench_segments,
    read_factcheck_subtask4,
    read_factool_kbqa,
)
from veracity.bench.datasets.load import (
    DATA_DIR_ENV,
    DATA_HINT,
    Dataset,
    describe_datasets_on_disk,
    load_dataset,
    parse_label_map,
    resolve_data_dir,
)
from veracity.bench.datasets.news import (
    read_chandleru11,
    read_fakenewsnet_csv,
    read_kkush_gossipcop,
    read_sheepdog,
    read_su2023,
)
from veracity.bench.datasets.records import Reader, Record, norm_label_key
from veracity.bench.datasets.registry import (
    DATASETS,
    DROP,
    FAKE_REAL_01,
    LIAR_SIX_WAY,
    TRUE_FALSE,
    DatasetSpec,
    Variant,
    describe_datasets,
    get_spec,
    label_set,
)

__all__ = [
    "DATASETS", "DATA_DIR_ENV", "DATA_HINT", "DROP", "FAKE_REAL_01", "LIAR_SIX_WAY", "TRUE_FALSE",
    "Dataset", "DatasetSpec", "Reader", "Record", "Variant",
    "describe_datasets", "describe_datasets_on_disk", "fever_title", "get_spec", "label_set", "load_dataset",
    "norm_label_key", "parse_label_map", "resolve_data_dir",
    "read_chandleru11", "read_claim_label_jsonl", "read_factbench_segments", "read_factcheck_subtask4",
    "read_factool_kbqa", "read_fakenewsnet_csv", "read_fever", "read_feverous_s", "read_generic_jsonl",
    "read_hover", "read_kkush_gossipcop", "read_liar", "read_sheepdog", "read_su2023",
]
