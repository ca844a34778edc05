"""Dataset loaders on the shared evaluation files, and their errors on bad input.

Counts are the numbers the folder READMEs / papers state, checked against what the files hold. Where
the shared copy is a subset of the official file (HoVer dev: 3,000 of 4,000; FEVEROUS-S: 2,221 of 2,962,
see the data README) the assertion is on what the file holds, with the official number in a comment.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from datetime import date
from pathlib import Path

import pytest

from tests.fixtures.index import missing

from veracity.bench.datasets import (
    DATA_DIR_ENV,
    DATASETS,
    LIAR_SIX_WAY,
    fever_title,
    load_dataset,
    parse_label_map,
)
from veracity.errors import ConfigError, DataError
from veracity.pipeline.types import MAX_CLAIM_CHARS, Label

S, R, N = Label.SUPPORTED, Label.REFUTED, Label.NOT_ENOUGH_INFO
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def data_dir() -> Path:
    env = os.environ.get(DATA_DIR_ENV)
    path = Path(env) if env else (REPO / ".." / "shared" / "data").resolve()
    if not (path / "hover").is_dir():
        missing(f"shared evaluation data not found at {path} (set {DATA_DIR_ENV})")  # fails under CI
    return path


def counts(ds) -> dict[Label, int]:
    return dict(Counter(gold for _, gold in ds.claims))


def orig(ds) -> Counter:
    return Counter(c.meta["orig_label"] for c, _ in ds.claims)


def assert_well_formed(ds):
    ids = [c.id for c, _ in ds.claims]
    assert len(ids) == len(set(ids)), "claim ids must be unique"
    assert all(c.text.strip() for c, _ in ds.claims)
    assert all("orig_label" in c.meta for c, _ in ds.claims)
    assert all(g in ds.labels for _, g in ds.claims)
    date.fromisoformat(ds.created)  # an ISO date, used by the leakage guard
    assert len(ds.sha256) == 64 and ds.source_files


def test_registry_names():
    assert set(DATASETS) == {"hover", "feverous-s", "fever", "factool-kbqa", "bingcheck", "factcheck-bench",
                             "felm-wk", "politifact", "gossipcop", "liar"}
    for spec in DATASETS.values():
        date.fromisoformat(spec.created)
        assert spec.default_variant in spec.variants
        for var in spec.variants.values():
            # every reader documents its label mapping ("orig -> Label") in its docstring
            assert var.reader.__doc__ and "->" in var.reader.__doc__, \
                f"{spec.name}/{var.name}: mapping undocumented"
            assert var.label_map and all(v is None or isinstance(v, Label) for v in var.label_map.values())


# ---- HoVer ------------------------------------------------------------------------------------------


def test_hover(data_dir):
    ds = load_dataset("hover", data_dir)
    assert_well_formed(ds)
    # Official dev: 4,000 (2,000 / 2,000); the shared copy holds 3,000 of them (data README).
    assert len(ds) == 3000
    assert counts(ds) == {S: 1500, R: 1500}
    assert ds.labels == (S, R)
    assert orig(ds) == {"SUPPORTED": 1500, "NOT_SUPPORTED": 1500}
    by_hops = Counter((c.meta["hops"], g) for c, g in ds.claims)
    # official: 2-hop 1,126 (521/605), 3-hop 1,835 (968/867), 4-hop 1,039 (511/528); this 3,000-claim copy:
    assert by_hops == {(2, S): 391, (2, R): 454, (3, S): 726, (3, R): 650, (4, S): 383, (4, R): 396}
    c0, g0 = ds.claims[0]
    assert c0.id == "042339bf-0374-4ab3-ab49-6df5f12d868e" and g0 == S
    assert c0.meta["gold_titles"] == ["Life Goes On (Fergie song)", "M.I.L.F. $"]
    assert c0.meta["hops"] == 2
    assert all(c.meta["gold_titles"] for c, _ in ds.claims)
    assert ds.created.startswith("2020")


def test_hover_hops_filter(data_dir):
    assert len(load_dataset("hover", data_dir, hops=3)) == 1376
    two_four = load_dataset("hover", data_dir, hops=[2, 4])
    assert len(two_four) == 845 + 779 and {c.meta["hops"] for c, _ in two_four.claims} == {2, 4}
    assert two_four.selection["hops"] == [2, 4]


# ---- FEVEROUS-S, FEVER --------------------------------------------------------------------------------


def test_feverous_s(data_dir):
    ds = load_dataset("feverous-s", data_dir)
    assert_well_formed(ds)
    # ProgramFC / Trification: 2,962 claims (refutes 1,551 / supports 1,411); shared copy: 2,221 of them.
    assert len(ds) == 2221
    assert counts(ds) == {S: 1058, R: 1163}
    assert ds.labels == (S, R)
    assert Counter(c.meta["challenge"] for c, _ in ds.claims)["Multi-hop Reasoning"] == 344
    c0 = ds.claims[0][0]
    assert c0.id == "3385" and c0.meta["gold_titles"][0] == "Glenn–Thompson Plantation"
    assert all(c.meta["gold_sentences"] for c, _ in ds.claims)


def test_fever_paper_dev(data_dir):
    ds = load_dataset("fever", data_dir)
    assert_well_formed(ds)
    assert len(ds) == 9999  # official paper_dev size, 3,333 per class
    assert counts(ds) == {S: 3333, R: 3333, N: 3333}
    assert ds.labels == (S, R, N)
    assert orig(ds) == {"SUPPORTS": 3333, "REFUTES": 3333, "NOT ENOUGH INFO": 3333}
    assert ds.claims[0][0].id == "91198" and ds.claims[0][1] == N
    verifiable = [c for c, g in ds.claims if g != N]
    assert all(c.meta["gold_titles"] for c in verifiable)
    assert len({t for c in verifiable for t in c.meta["gold_titles"]}) == 1460  # README: 1,460 gold pages
    assert ds.created.startswith("2018")


def test_fever_title_unescaping():
    assert fever_title("Tim_Burton_-LRB-director-RRB-") == "Tim Burton (director)"
    assert fever_title("Star_Wars-COLON-_Episode_I") == "Star Wars: Episode I"


# ---- FacTool-KBQA, BingCheck, Factcheck-Bench, FELM-WK -------------------------------------------------


def test_factool_kbqa(data_dir):
    ds = load_dataset("factool-kbqa", data_dir)
    assert_well_formed(ds)
    assert len(ds) == 233 and counts(ds) == {S: 177, R: 56}  # EMULATE Table 1: 177 True / 56 False
    assert ds.labels == (S, R)
    assert len({c.meta["prompt"] for c, _ in ds.claims}) == 50  # 50 prompts/responses
    fire = load_dataset("factool-kbqa", data_dir, variant="fire")
    assert [(c.text, g) for c, g in fire.claims] == [(c.text, g) for c, g in ds.claims]  # identical claims


def test_bingcheck_variants(data_dir):
    emu = load_dataset("bingcheck", data_dir)  # default: EMULATE convention
    assert_well_formed(emu)
    assert emu.variant == "emulate" and emu.labels == (S, R)
    # supported 2,681 -> True, refuted 42 -> False (EMULATE Table 1 has the same 42 False; it kept 160 True)
    assert counts(emu) == {S: 2681, R: 42}
    assert emu.dropped == {"partially supported": 900, "not supported": 217}
    assert orig(emu) == {"supported": 2681, "refuted": 42}

    four = load_dataset("bingcheck", data_dir, variant="4way")
    assert len(four) == 3840 and orig(four) == {"supported": 2681, "partially supported": 900,
                                                 "not supported": 217, "refuted": 42}
    assert counts(four) == {S: 2681 + 900, R: 42, N: 217}

    fire = load_dataset("bingcheck", data_dir, variant="fire")
    assert len(fire) == 142 and counts(fire) == {S: 100, R: 42}
    full = load_dataset("bingcheck", data_dir, variant="fire-full")
    assert len(full) == 3623 and counts(full) == {S: 3581, R: 42}

    # a label-map override changes the convention: partially supported counted as refuted
    strict = load_dataset("bingcheck", data_dir, variant="4way", label_map="partially supported=REFUTED")
    assert counts(strict) == {S: 2681, R: 942, N: 217}


def test_factcheck_bench_variants(data_dir):
    binary = load_dataset("factcheck-bench", data_dir)
    assert_well_formed(binary)
    assert len(binary) == 631 and counts(binary) == {S: 472, R: 159}  # EMULATE Table 1: 472 / 159 = 631
    assert binary.dropped == {"not_enough_evidence": 30}
    three = load_dataset("factcheck-bench", data_dir, variant="3way")
    assert len(three) == 661 and counts(three) == {S: 472, R: 159, N: 30} and three.labels == (S, R, N)
    fire = load_dataset("factcheck-bench", data_dir, variant="fire")
    assert [(c.text, g) for c, g in fire.claims] == [(c.text, g) for c, g in binary.claims]


def test_felm_wk(data_dir):
    ds = load_dataset("felm-wk", data_dir)
    assert_well_formed(ds)
    assert len(ds) == 184 and counts(ds) == {S: 99, R: 85}
    seg = load_dataset("felm-wk", data_dir, variant="segments")
    assert len(seg) == 532 and counts(seg) == {S: 385, R: 147}


# ---- PolitiFact / GossipCop -------------------------------------------------------------------------


def test_politifact_releases(data_dir):
    su = load_dataset("politifact", data_dir)  # default: PolitiFact++ human-written (ZoFia's re-release)
    assert_well_formed(su)
    assert su.variant == "su2023" and su.labels == (S, R)
    assert orig(su) == {"HF": 97, "HR": 194} and counts(su) == {R: 97, S: 194}
    c = su.claims[0][0]
    assert c.id == "HF-politifact11773" and c.meta["title"].startswith("Virginia Republican")

    all4 = load_dataset("politifact", data_dir, variant="su2023-all")
    assert orig(all4) == {"HF": 97, "HR": 194, "MF": 97, "MR": 132} and counts(all4) == {R: 194, S: 326}
    assert "MR-politifact385-2" in {c.id for c, _ in all4.claims}  # MR has two paraphrases of 3 articles

    sd = load_dataset("politifact", data_dir, variant="sheepdog-test")
    assert len(sd) == 90 and counts(sd) == {R: 45, S: 45}
    assert all((g == R) == (c.meta["label_name"] == "fake") for c, g in sd.claims)
    assert counts(load_dataset("politifact", data_dir, variant="sheepdog-train")) == {R: 180, S: 180}

    ch = load_dataset("politifact", data_dir, variant="chandleru11-test")
    assert len(ch) == 41 and counts(ch) == {R: 26, S: 15}
    assert counts(load_dataset("politifact", data_dir, variant="chandleru11-train")) == {R: 243, S: 129}

    fnn = load_dataset("politifact", data_dir, variant="fakenewsnet-fake")
    assert len(fnn) == 432 and counts(fnn) == {R: 432} and fnn.labels == (R,)
    assert fnn.claims[0][0].text.startswith("BREAKING: First NFL Team")

    # the full official release needs politifact_real.csv, which the shared data lacks
    with pytest.raises(DataError, match="politifact_real.csv") as err:
        load_dataset("politifact", data_dir, variant="fakenewsnet")
    assert "VERACITY_DATA_DIR" in err.value.hint


def test_gossipcop_releases(data_dir):
    ch = load_dataset("gossipcop", data_dir)
    assert_well_formed(ch)
    assert len(ch) == 582 and counts(ch) == {S: 349, R: 233}
    assert ch.claims[0][0].id == "gossipcop-8332264638" and ch.claims[0][1] == R
    titles = load_dataset("gossipcop", data_dir, variant="titles")
    assert len(titles) == 22140 and counts(titles) == {S: 16817, R: 5323}  # official FakeNewsNet counts


def test_news_articles_fit_the_claim_limit(data_dir):
    ds = load_dataset("politifact", data_dir)
    long = [c for c, _ in ds.claims if "truncated_from_chars" in c.meta]
    assert long, "PolitiFact++ HR holds articles longer than the claim limit"
    assert all(len(c.text) <= MAX_CLAIM_CHARS for c, _ in ds.claims)
    assert all(c.meta["truncated_from_chars"] > MAX_CLAIM_CHARS for c in long)
    assert max(c.meta["truncated_from_chars"] for c in long) == 100000


# ---- LIAR -------------------------------------------------------------------------------------------


def test_liar(data_dir):
    test = load_dataset("liar", data_dir)
    assert_well_formed(test)
    assert len(test) == 1283  # paper: 10,269 / 1,284 / 1,283
    assert orig(test) == {"half-true": 267, "false": 250, "mostly-true": 249, "barely-true": 214,
                          "true": 211, "pants-fire": 92}
    assert set(orig(test)) == set(LIAR_SIX_WAY)
    # binarisation {true, mostly-true, half-true} vs {barely-true, false, pants-fire}: 211+249+267 /
    # 214+250+92
    assert counts(test) == {S: 727, R: 556}
    c = test.claims[0][0]
    assert c.id == "11972" and c.meta["speaker"] == "rick-perry" and c.meta["orig_label"] == "true"
    assert len(load_dataset("liar", data_dir, variant="valid")) == 1284
    train = load_dataset("liar", data_dir, variant="train")
    assert len(train) == 10269 and orig(train)["half-true"] == 2123 and orig(train)["pants-fire"] == 842


# ---- selection, hashes, data dir --------------------------------------------------------------------


def test_limit_and_seed(data_dir):
    first = load_dataset("fever", data_dir, limit=5)
    assert [c.id for c, _ in first.claims] == [c.id for c, _ in load_dataset("fever", data_dir).claims[:5]]
    assert first.total == 9999 and len(first) == 5
    a = load_dataset("fever", data_dir, limit=20, seed=13)
    b = load_dataset("fever", data_dir, limit=20, seed=13)
    c = load_dataset("fever", data_dir, limit=20, seed=14)
    assert [x.id for x, _ in a.claims] == [x.id for x, _ in b.claims]
    assert [x.id for x, _ in a.claims] != [x.id for x, _ in c.claims]
    assert [x.id for x, _ in a.claims] != [x.id for x, _ in first.claims[:20]]
    # a sample of 20 from a balanced 3-way set holds more than one class
    assert len(counts(a)) > 1
    assert len(load_dataset("factool-kbqa", data_dir, limit=10_000)) == 233  # limit beyond the size: all


def test_sha256_and_manifest(data_dir):
    ds = load_dataset("liar", data_dir)
    path = data_dir / "liar" / "test.tsv"
    assert ds.source_files == [path]
    assert ds.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    multi = load_dataset("politifact", data_dir)
    assert len(multi.source_files) == 2 and len(multi.file_sha256) == 2
    assert multi.sha256 not in multi.file_sha256.values()
    m = multi.manifest()
    json.dumps(m)
    assert m["label_counts"] == {"SUPPORTED": 194, "REFUTED": 97} and m["created"] == multi.created


def test_data_dir_from_environment(data_dir, monkeypatch):
    monkeypatch.setenv(DATA_DIR_ENV, str(data_dir))
    assert len(load_dataset("felm-wk")) == 184
    monkeypatch.delenv(DATA_DIR_ENV)
    with pytest.raises(DataError, match="no data directory") as err:
        load_dataset("felm-wk")
    assert "--data-dir" in err.value.hint and DATA_DIR_ENV in err.value.hint


# ---- bad input (no shared data needed) ----------------------------------------------------------------


def one_line(err: DataError) -> None:
    assert "\n" not in str(err) and err.hint


def test_unknown_dataset_lists_known_ones():
    with pytest.raises(DataError, match="unknown dataset 'hovr'") as err:
        load_dataset("hovr", "/nonexistent")
    one_line(err.value)
    assert "hover" in err.value.hint and "liar" in err.value.hint and "jsonl:PATH" in err.value.hint


def test_unknown_variant(tmp_path):
    with pytest.raises(DataError, match="no variant 'dev2'") as err:
        load_dataset("hover", tmp_path, variant="dev2")
    assert "dev" in err.value.hint


def test_missing_data_dir_and_file(tmp_path):
    with pytest.raises(DataError, match="does not exist") as err:
        load_dataset("hover", tmp_path / "nope")
    assert DATA_DIR_ENV in err.value.hint
    with pytest.raises(DataError, match=r"file not found: .*hover_dev_release_v1\.1\.json") as err:
        load_dataset("hover", tmp_path)
    one_line(err.value)
    assert "--data-dir" in err.value.hint
    with pytest.raises(DataError, match="claims file not found"):
        load_dataset(f"jsonl:{tmp_path / 'missing.jsonl'}")


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def hover_record(uid, hops=2, label="SUPPORTED"):
    return {"uid": uid, "claim": f"claim {uid}", "supporting_facts": [["A", 0], ["B", 1]], "label": label,
            "num_hops": hops, "hpqa_id": "x"}


def test_wrong_format_jsonl_gives_file_and_line(tmp_path):
    p = write(tmp_path / "c.jsonl",
              '{"id": "1", "claim": "a", "label": "SUPPORTED"}\n\n{"id": "2", "claim": \n')
    with pytest.raises(DataError) as err:
        load_dataset(f"jsonl:{p}")
    one_line(err.value)
    assert f"{p}:3" in str(err.value) and "expected claims JSONL" in str(err.value)
    # a JSON list where JSON Lines are expected
    p2 = write(tmp_path / "list.jsonl", json.dumps([{"claim": "a", "label": "SUPPORTED"}]) + "\n")
    with pytest.raises(DataError, match=r":1: expected .* found a JSON list"):
        load_dataset(f"jsonl:{p2}")
    # an object without the required fields
    p3 = write(tmp_path / "f.jsonl", '{"text": "a", "verdict": "SUPPORTED"}\n')
    with pytest.raises(DataError,
                       match=r"f\.jsonl:1: .*missing claim, label \(found fields: text, verdict\)"):
        load_dataset(f"jsonl:{p3}")


def test_wrong_format_official_files(tmp_path):
    # HoVer dev as JSON Lines instead of one JSON list
    lines = "".join(json.dumps(hover_record(f"u{i}")) + "\n" for i in range(2))
    write(tmp_path / "hover" / "hover_dev_release_v1.1.json", lines)
    with pytest.raises(DataError, match="expected HoVer JSON .* found JSON Lines"):
        load_dataset("hover", tmp_path)
    # the unlabelled test release under the dev name
    write(tmp_path / "hover" / "hover_dev_release_v1.1.json", json.dumps([{"uid": "1", "claim": "c"}]))
    with pytest.raises(DataError, match="without 'label'") as err:
        load_dataset("hover", tmp_path)
    assert "test release has no labels" in err.value.hint
    # LIAR with a header row / wrong column count
    write(tmp_path / "liar" / "test.tsv", "id\tlabel\tstatement\n")
    with pytest.raises(DataError, match=r"test\.tsv:1: expected LIAR TSV .* found 3 column"):
        load_dataset("liar", tmp_path)
    # a CSV release without the expected columns
    write(tmp_path / "politifact_gossipcop" / "chandleru11_cleaned" / "gossipcop_test.csv", "a,b\n1,2\n")
    with pytest.raises(DataError, match="missing id, content, label, title"):
        load_dataset("gossipcop", tmp_path)


def test_labels_outside_the_mapping_are_listed(tmp_path):
    rows = [{"id": str(i), "claim": f"c{i}", "label": lab}
            for i, lab in enumerate(["true", "false", "maybe", "maybe", "unclear"])]
    p = write(tmp_path / "c.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DataError) as err:
        load_dataset(f"jsonl:{p}", label_map="true=SUPPORTED,false=REFUTED")
    one_line(err.value)
    msg = str(err.value)
    assert "labels outside the mapping" in msg and "'maybe' (2" in msg and "'unclear' (1" in msg
    assert "--label-map" in err.value.hint
    # default mapping: Label names only
    with pytest.raises(DataError, match="'true'"):
        load_dataset(f"jsonl:{p}")
    ok = load_dataset(f"jsonl:{p}", label_map="true=SUPPORTED,false=REFUTED,maybe=NEI,unclear=drop")
    assert counts(ok) == {S: 1, R: 1, N: 2} and ok.dropped == {"unclear": 1} and ok.labels == (S, R, N)


def test_generic_jsonl(tmp_path):
    rows = [
        {"id": "a", "claim": "Paris is in France.", "label": True, "date": "2020-01-02", "source": "x"},
        {"claim": "Paris is in Spain.", "label": False},
        {"id": "c", "claim": "Water boils at 90 C.", "label": "False"},
    ]
    p = write(tmp_path / "mine.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    ds = load_dataset(f"jsonl:{p}", label_map="true=SUPPORTED,false=REFUTED")
    assert [(c.id, g) for c, g in ds.claims] == [("a", S), ("mine-2", R), ("c", R)]
    a = ds.claims[0][0]
    assert a.date == "2020-01-02" and a.meta == {"source": "x", "orig_label": True}
    assert ds.labels == (S, R) and ds.created is None and ds.name == f"jsonl:{p}"
    assert ds.sha256 == hashlib.sha256(p.read_bytes()).hexdigest()
    # default mapping (Label names): the label set is what the file uses, here binary
    names = write(tmp_path / "names.jsonl",
                  '{"claim": "a", "label": "supported"}\n{"claim": "b", "label": "REFUTED"}\n')
    plain = load_dataset(f"jsonl:{names}")
    assert [g for _, g in plain.claims] == [S, R] and plain.labels == (S, R)


def test_empty_selection_and_duplicates(tmp_path):
    write(tmp_path / "hover" / "hover_dev_release_v1.1.json",
          json.dumps([hover_record("u1", 2), hover_record("u2", 3, "NOT_SUPPORTED")]))
    assert len(load_dataset("hover", tmp_path)) == 2
    with pytest.raises(DataError, match=r"no claims left with hops \[4\]") as err:
        load_dataset("hover", tmp_path, hops=4)
    one_line(err.value)
    p = write(tmp_path / "d.jsonl", '{"claim": "a", "label": "x"}\n')
    with pytest.raises(DataError, match="no claims left"):
        load_dataset(f"jsonl:{p}", label_map="x=drop")
    dup = write(tmp_path / "dup.jsonl", '{"id": "1", "claim": "a", "label": "SUPPORTED"}\n'
                                        '{"id": "1", "claim": "b", "label": "REFUTED"}\n')
    with pytest.raises(DataError, match=r"dup\.jsonl:2: duplicate claim id '1'"):
        load_dataset(f"jsonl:{dup}")


def test_bad_options(tmp_path):
    with pytest.raises(DataError, match="hops must be 2, 3 or 4"):
        load_dataset("hover", tmp_path, hops=5)
    with pytest.raises(DataError, match="hops applies to the hover dataset only"):
        load_dataset("fever", tmp_path, hops=2)
    with pytest.raises(DataError, match="limit must be a positive"):
        write(tmp_path / "hover" / "hover_dev_release_v1.1.json", json.dumps([hover_record("u1")]))
        load_dataset("hover", tmp_path, limit=0)
    with pytest.raises(DataError, match="not ORIG=LABEL"):
        parse_label_map("true:SUPPORTED")
    with pytest.raises(DataError, match="is not a label"):
        parse_label_map("true=YES")
    assert parse_label_map("True=supported, not enough info=NEI,x=drop") == {
        "true": S, "not enough info": N, "x": None}


def test_balanced_sample(data_dir):
    """--sample balanced: equal labels, and on HoVer equal hop counts too; seeded; a random sample is not."""
    ds = load_dataset("hover", data_dir, limit=24, seed=3, sample="balanced")
    assert len(ds) == 24
    assert counts(ds) == {S: 12, R: 12}
    hops = Counter(c.meta["hops"] for c, _ in ds.claims)
    assert hops == {2: 8, 3: 8, 4: 8}
    per_cell = Counter((c.meta["hops"], lab) for c, lab in ds.claims)
    assert set(per_cell.values()) == {4}
    again = load_dataset("hover", data_dir, limit=24, seed=3, sample="balanced")
    assert [c.id for c, _ in again.claims] == [c.id for c, _ in ds.claims]
    assert ds.selection["sample"] == "balanced"
    # FEVEROUS-S has no hop counts: balanced by label only
    fs = load_dataset("feverous-s", data_dir, limit=20, seed=3, sample="balanced")
    assert counts(fs) == {S: 10, R: 10}
    with pytest.raises(ConfigError, match="unknown sample mode"):
        load_dataset("hover", data_dir, limit=5, sample="stratified")


def test_balanced_take_leaves_turns_of_an_empty_group():
    from veracity.bench.datasets.load import balanced_take
    from veracity.pipeline.types import Claim

    pairs = [(Claim(id=f"s{i}", text=f"s {i}"), S) for i in range(5)] + [(Claim(id="r0", text="r"), R)]
    got = balanced_take(pairs, 4)
    assert [c.id for c, _ in got] == ["r0", "s0", "s1", "s2"]
