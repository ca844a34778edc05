"""The table of benchmark datasets: name -> folder, release date, variants (files, reader, label mapping).

Every benchmark maps its gold labels onto :class:`~veracity.pipeline.types.Label` (SUPPORTED /
REFUTED / NOT_ENOUGH_INFO). The mapping of each dataset (and of each of its variants) is written in its
reader's docstring and is data here (``Variant.label_map``), so ``veracity bench datasets`` can print it.

Every dataset also declares its label space (:mod:`veracity.pipeline.labels`), the labels its claims are
verified with, which ``bench run`` passes to the methods by default: ``BINARY`` (SUPPORTED / REFUTED:
HoVer, FEVEROUS-S, FacTool-KBQA, BingCheck, Factcheck-Bench, FELM-WK, and the news datasets PolitiFact,
GossipCop and LIAR, whose real / fake ratings map onto SUPPORTED / REFUTED) or ``THREE_WAY`` (FEVER). A
variant whose mapping keeps NOT_ENOUGH_INFO declares ``THREE_WAY`` itself (BingCheck ``4way``,
Factcheck-Bench ``3way``); registering checks that the space holds every label the mapping produces.

A variant may declare its gold evidence (``Variant.gold``, :mod:`veracity.bench.datasets.gold`: what
``--evidence gold`` serves each claim): HoVer dev (the supporting-fact paragraphs) and FEVEROUS-S (the gold
sentences). Every other dataset refuses ``--evidence gold`` in one line, giving ``DatasetSpec.no_gold``
as the reason (FEVER: page and sentence ids only, no text).

To add a dataset:

1. write its reader (``paths -> list[Record]``) in the reader module of its family of formats
   (``hover.py``, ``feverous.py``, ``fever.py``, ``llm_answers.py``, ``liar.py``, ``news.py``), or in a
   new module beside them, using the helpers of ``records.py``; its docstring states the label mapping;
2. register a :class:`DatasetSpec` below (folder under the data dir, release date and its source for
   the leakage guard, download hint, label space, one :class:`Variant` per file set / label convention);
3. add a loader test on the shared data in ``tests/unit/test_bench_datasets.py``.

``veracity bench run --dataset NAME``, ``bench throughput`` and ``bench datasets`` pick it up from
:data:`DATASETS`; nothing else changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from veracity.bench.datasets.fever import read_fever
from veracity.bench.datasets.feverous import read_feverous_s
from veracity.bench.datasets.gold import FEVEROUS_GOLD, HOVER_GOLD, GoldEvidence
from veracity.bench.datasets.hover import read_hover
from veracity.bench.datasets.liar import read_liar
from veracity.bench.datasets.llm_answers import (
    read_claim_label_jsonl,
    read_factbench_segments,
    read_factcheck_subtask4,
    read_factool_kbqa,
)
from veracity.bench.datasets.news import (
    read_chandleru11,
    read_fakenewsnet_csv,
    read_kkush_gossipcop,
    read_sheepdog,
    read_su2023,
)
from veracity.bench.datasets.records import Reader
from veracity.errors import DataError
from veracity.pipeline.labels import BINARY, THREE_WAY, LabelSpace
from veracity.pipeline.types import Label

S, R, N = Label.SUPPORTED, Label.REFUTED, Label.NOT_ENOUGH_INFO
DROP = None  # a label mapped to DROP removes the record (e.g. EMULATE ignores "partially supported")


@dataclass(frozen=True)
class Variant:
    """One way of reading a dataset: which files, which reader, which label mapping."""

    name: str
    description: str
    files: tuple[str, ...]  # official file names, relative to the dataset folder
    reader: Reader
    label_map: Mapping[str, Label | None]  # normalised original label -> Label (None = drop the record)
    created: str | None = None  # overrides DatasetSpec.created when this variant's data is younger
    # overrides DatasetSpec.label_space (e.g. a dataset's 3-way variant)
    label_space: LabelSpace | None = None
    # the claims' gold evidence (--evidence gold); None: the variant has none
    gold: GoldEvidence | None = None


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
    # the labels its claims are verified with: BINARY or THREE_WAY (variants may override)
    label_space: LabelSpace
    supports_hops: bool = False
    # why --evidence gold is refused (variants without gold)
    no_gold: str = "its files hold no evidence passages"

    def space_of(self, variant: Variant) -> LabelSpace:
        """The declared label space of ``variant`` (its own, else the dataset's)."""
        return variant.label_space or self.label_space

    def variant(self, name: str | None) -> Variant:
        key = name or self.default_variant
        if key not in self.variants:
            raise DataError(
                f"dataset {self.name} has no variant {key!r}",
                hint=f"known variants of {self.name}: {', '.join(self.variants)}",
            )
        return self.variants[key]



TRUE_FALSE = {"true": S, "false": R}
FAKE_REAL_01 = {"1": R, "0": S}

DATASETS: dict[str, DatasetSpec] = {}


def label_set(label_map: Mapping[str, Label | None]) -> tuple[Label, ...]:
    """The labels a mapping produces, in Label order (a binary set has two)."""
    used = {lab for lab in label_map.values() if lab is not None}
    return tuple(lab for lab in Label if lab in used)


def _register(spec: DatasetSpec) -> None:
    assert spec.default_variant in spec.variants
    for v in spec.variants.values():  # the declared label space holds every label the mapping produces
        space = spec.space_of(v)
        assert all(lab in space for lab in label_set(v.label_map)), (spec.name, v.name, space.name)
    DATASETS[spec.name] = spec


_register(DatasetSpec(
    name="hover", folder="hover", label_space=BINARY,
    summary="HoVer many-hop claims (2-4 hops), SUPPORTED / NOT_SUPPORTED, gold supporting-fact titles",
    created="2020-11-05", created_source="Jiang et al., HoVer, arXiv:2011.03088 (Findings of EMNLP 2020)",
    download="https://hover-nlp.github.io/ (data/hover/ of github.com/hover-nlp/hover)",
    variants={
        "dev": Variant("dev", "official dev set (labelled)", ("hover_dev_release_v1.1.json",), read_hover,
                       {"supported": S, "not_supported": R}, gold=HOVER_GOLD),
        "train": Variant("train", "official train set", ("hover_train_release_v1.1.json",), read_hover,
                         {"supported": S, "not_supported": R}),
    },
    default_variant="dev", supports_hops=True,
    no_gold="the gold paragraph corpus (wiki_corpus_hover_gold) covers the dev set only",
))

_register(DatasetSpec(
    name="feverous-s", folder="feverous_s", label_space=BINARY,
    summary="FEVEROUS dev claims with sentence-only evidence (ProgramFC's subset), supports / refutes",
    created="2021-06-10", created_source="Aly et al., FEVEROUS, arXiv:2106.05707 (NeurIPS 2021 Datasets)",
    download="github.com/teacherpeterpan/ProgramFC datasets/FEVEROUS/claims/dev.json",
    variants={
        "dev": Variant("dev", "ProgramFC's FEVEROUS-S dev.json", ("programfc_feverous_s_dev.json|dev.json",),
                       read_feverous_s, {"supports": S, "refutes": R}, gold=FEVEROUS_GOLD),
    },
    default_variant="dev",
))

_FEVER_MAP = {"supports": S, "refutes": R, "not enough info": N}
_register(DatasetSpec(
    name="fever", folder="fever", label_space=THREE_WAY,
    summary="FEVER 1.0 claims, 3-way SUPPORTS / REFUTES / NOT ENOUGH INFO",
    created="2018-03-14", created_source="Thorne et al., FEVER, arXiv:1803.05355 (NAACL 2018)",
    download="https://fever.ai/dataset/fever.html",
    variants={
        "paper_dev": Variant("paper_dev", "paper_dev (9,999 claims, balanced)", ("paper_dev.jsonl",),
                             read_fever, _FEVER_MAP),
        "paper_test": Variant("paper_test", "paper_test", ("paper_test.jsonl",), read_fever, _FEVER_MAP),
        "shared_task_dev": Variant("shared_task_dev", "shared_task_dev (19,998 claims)",
                                   ("shared_task_dev.jsonl",),
                                   read_fever, _FEVER_MAP),
        "train": Variant("train", "train", ("train.jsonl",), read_fever, _FEVER_MAP),
    },
    default_variant="paper_dev",
    no_gold="FEVER's evidence is Wikipedia page names and sentence ids only (none for NOT ENOUGH INFO); "
            "their text is in FEVER's wiki-pages dump, which is not read",
))

_register(DatasetSpec(
    name="factool-kbqa", folder="factool_kbqa", label_space=BINARY,
    summary="FacTool knowledge-based QA atomic claims, True / False (EMULATE Table 1: 177 / 56)",
    created="2023-07-25", created_source="Chern et al., FacTool, arXiv:2307.13528",
    download="github.com/GAIR-NLP/factool datasets/knowledge_qa/knowledge_qa.jsonl",
    variants={
        "official": Variant("official", "FacTool's knowledge_qa.jsonl, one record per annotated claim",
                            ("knowledge_qa.jsonl",), read_factool_kbqa, TRUE_FALSE),
        "fire": Variant("fire", "FIRE's flattening (datasets/factool_qa/data.jsonl)",
                        ("fire_factool_qa_data.jsonl",),
                        read_claim_label_jsonl("kbqa-fire"), TRUE_FALSE),
    },
    default_variant="official",
))

_BING_4WAY = {"supported": S, "partially supported": S, "not supported": N, "refuted": R}
_register(DatasetSpec(
    name="bingcheck", folder="bingcheck", label_space=BINARY,
    summary="BingCheck atomic claims of Bing Chat answers; 4-way labels and FIRE / EMULATE binary versions",
    created="2023-05-24", created_source="Li et al., Self-Checker, arXiv:2305.14623 (Findings of NAACL 2024)",
    download="github.com/mbzuai-nlp/fire datasets/bingcheck/",
    variants={
        "emulate": Variant(
            "emulate", "EMULATE convention: supported -> True, refuted -> False, other labels dropped "
            "(EMULATE further sub-sampled 160 supported claims; that subset is unpublished, use "
            "--limit/--seed)",
            ("fire_bingcheck.jsonl|bingcheck.jsonl",), read_claim_label_jsonl("bingcheck"),
            {"supported": S, "refuted": R, "partially supported": DROP, "not supported": DROP}),
        "4way": Variant(
            "4way", "all 3,840 claims: supported and partially supported -> SUPPORTED, refuted -> REFUTED, "
            "not supported (no evidence found) -> NOT_ENOUGH_INFO", ("fire_bingcheck.jsonl|bingcheck.jsonl",),
            read_claim_label_jsonl("bingcheck"), _BING_4WAY, label_space=THREE_WAY),
        "fire": Variant("fire", "FIRE paper subset (data.jsonl): true -> SUPPORTED, false -> REFUTED",
                        ("fire_data.jsonl|data.jsonl",), read_claim_label_jsonl("bingcheck-fire"),
                        TRUE_FALSE),
        "fire-full": Variant("fire-full",
                             "FIRE data_full.jsonl: true (= supported + partially supported) / false "
                             "(= refuted); not supported dropped by FIRE",
                             ("fire_data_full.jsonl|data_full.jsonl",),
                             read_claim_label_jsonl("bingcheck-firefull"), TRUE_FALSE),
    },
    default_variant="emulate",
))

_register(DatasetSpec(
    name="factcheck-bench", folder="factcheck_bench", label_space=BINARY,
    summary="Factcheck-Bench checkworthy claims of ChatGPT answers: true / false / not enough evidence",
    created="2023-11-15", created_source="Wang et al., Factcheck-Bench / Factcheck-GPT, arXiv:2311.09000",
    download="github.com/yuxiaw/Factcheck-GPT subtasks/subtask4_claim_factuality.jsonl",
    variants={
        "binary": Variant("binary", "subtask 4 without not_enough_evidence (631 claims, EMULATE Table 1)",
                          ("subtask4_claim_factuality.jsonl",), read_factcheck_subtask4,
                          {"true": S, "false": R, "not_enough_evidence": DROP}),
        "3way": Variant("3way", "subtask 4, all 661 claims, not_enough_evidence -> NOT_ENOUGH_INFO",
                        ("subtask4_claim_factuality.jsonl",), read_factcheck_subtask4,
                        {"true": S, "false": R, "not_enough_evidence": N}, label_space=THREE_WAY),
        "fire": Variant("fire", "FIRE's binary copy (datasets/factcheckbench/data.jsonl)",
                        ("fire_factcheckbench_data.jsonl",), read_claim_label_jsonl("factcheck-fire"),
                        TRUE_FALSE),
    },
    default_variant="binary",
))

_register(DatasetSpec(
    name="felm-wk", folder="felm_wk", label_space=BINARY,
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
    name="politifact", folder=_PF, label_space=BINARY,
    summary="PolitiFact news articles (FakeNewsNet): fake -> REFUTED, real -> SUPPORTED; several releases",
    created="2018-09-05", created_source=_FNN_CREATED,
    download="github.com/mbzuai-nlp/Fakenews-dataset (PolitiFact++), github.com/KaiDMML/FakeNewsNet",
    variants={
        "su2023": Variant("su2023",
                          "PolitiFact++ human-written articles HF (fake) + HR (real): the re-release "
                          "ZoFia evaluates on", ("PolitiFact++/HF.json", "PolitiFact++/HR.json"), read_su2023,
                          {"hf": R, "hr": S}),
        "su2023-all": Variant("su2023-all",
                              "PolitiFact++ incl. LLM-generated fake (MF) and paraphrased real (MR)",
                              ("PolitiFact++/HF.json", "PolitiFact++/HR.json", "PolitiFact++/MF.json",
                               "PolitiFact++/MR.json"), read_su2023, {"hf": R, "hr": S, "mf": R, "mr": S},
                              created="2023-11-08"),  # MF/MR written by LLMs for arXiv:2311.04917
        "sheepdog-test": Variant("sheepdog-test", "SheepDog test articles (1 = fake)",
                                 ("sheepdog_politifact/politifact_test.jsonl",), read_sheepdog("test"),
                                 FAKE_REAL_01),
        "sheepdog-train": Variant("sheepdog-train", "SheepDog train articles (1 = fake)",
                                  ("sheepdog_politifact/politifact_train.jsonl",), read_sheepdog("train"),
                                  FAKE_REAL_01),
        "chandleru11-test": Variant("chandleru11-test", "ChandlerU11 cleaned test articles (1 = fake)",
                                    ("chandleru11_cleaned/politifact_test.csv",),
                                    read_chandleru11("politifact", "test"),
                                    FAKE_REAL_01),
        "chandleru11-train": Variant("chandleru11-train", "ChandlerU11 cleaned train articles (1 = fake)",
                                     ("chandleru11_cleaned/politifact_train.csv",),
                                     read_chandleru11("politifact", "train"), FAKE_REAL_01),
        "fakenewsnet": Variant("fakenewsnet", "official FakeNewsNet titles, fake + real csv",
                               ("fakenewsnet_official/politifact_fake.csv",
                                "fakenewsnet_official/politifact_real.csv"),
                               read_fakenewsnet_csv, {"fake": R, "real": S}),
        "fakenewsnet-fake": Variant("fakenewsnet-fake",
                                    "official FakeNewsNet titles, fake list only (all REFUTED)",
                                    ("fakenewsnet_official/politifact_fake.csv",), read_fakenewsnet_csv,
                                    {"fake": R}),
    },
    default_variant="su2023",
))

_register(DatasetSpec(
    name="gossipcop", folder=_PF, label_space=BINARY,
    summary="GossipCop entertainment news (FakeNewsNet): fake -> REFUTED, real -> SUPPORTED; "
            "several releases",
    created="2018-09-05", created_source=_FNN_CREATED,
    download="github.com/KaiDMML/FakeNewsNet; github.com/ChandlerU11/fake_news_data",
    variants={
        "chandleru11-test": Variant("chandleru11-test",
                                    "ChandlerU11 cleaned test articles with body text (1 = fake)",
                                    ("chandleru11_cleaned/gossipcop_test.csv",), read_chandleru11("gossipcop",
                                                                                                  "test"),
                                    FAKE_REAL_01),
        "titles": Variant("titles",
                          "all 22,140 FakeNewsNet GossipCop titles (all_data.json conversion, 1 = fake)",
                          ("gossipcop_titles_kkush/gossipcop_all_data.json",), read_kkush_gossipcop,
                          FAKE_REAL_01),
        "fakenewsnet": Variant("fakenewsnet", "official FakeNewsNet titles, fake + real csv",
                               ("fakenewsnet_official/gossipcop_fake.csv",
                                "fakenewsnet_official/gossipcop_real.csv"),
                               read_fakenewsnet_csv, {"fake": R, "real": S}),
    },
    default_variant="chandleru11-test",
))

_LIAR_BINARY = {"true": S, "mostly-true": S, "half-true": S, "barely-true": R, "false": R, "pants-fire": R}
_register(DatasetSpec(
    name="liar", folder="liar", label_space=BINARY,
    summary="LIAR PolitiFact statements: 6 ratings kept in meta, binarised true/mostly/half vs "
            "barely/false/pants-fire",
    created="2017-05-01", created_source="Wang, 'Liar, Liar Pants on Fire', arXiv:1705.00648 (ACL 2017)",
    download="https://www.cs.ucsb.edu/~william/data/liar_dataset.zip",
    variants={split: Variant(split, f"{split}.tsv, binarised", (f"{split}.tsv",), read_liar(split),
                             _LIAR_BINARY)
              for split in ("test", "valid", "train")},
    default_variant="test",
))

LIAR_SIX_WAY = ("pants-fire", "false", "barely-true", "half-true", "mostly-true", "true")  # for breakdowns

# --------------------------------------------------------------------------------------------------
# Lookup
# --------------------------------------------------------------------------------------------------


def get_spec(name: str) -> DatasetSpec:
    """The registered dataset ``name``; an unknown name is a DataError listing the known ones."""
    if name not in DATASETS:
        raise DataError(f"unknown dataset {name!r}",
                        hint=f"known datasets: {', '.join(DATASETS)}, or jsonl:PATH for your own file")
    return DATASETS[name]


def describe_datasets() -> list[dict[str, Any]]:
    """Name, variants (files, label mapping, label set), folder and release date of every dataset.

    What ``veracity bench datasets --json`` prints (without ``--count``); reads no file.
    """
    out = []
    for spec in DATASETS.values():
        out.append({
            "name": spec.name, "summary": spec.summary, "folder": spec.folder, "created": spec.created,
            "created_source": spec.created_source, "download": spec.download,
            "default_variant": spec.default_variant, "supports_hops": spec.supports_hops,
            "variants": {v.name: {"description": v.description, "files": list(v.files),
                                  "created": v.created or spec.created,
                                  "labels": [lab.value for lab in label_set(v.label_map)],
                                  "label_space": spec.space_of(v).name,
                                  "gold_evidence": v.gold.meaning if v.gold else None,
                                  "label_map": {k: (lab.value if lab else None) for k,
                                                lab in v.label_map.items()}}
                         for v in spec.variants.values()},
        })
    return out
