"""`veracity bench datasets`: the registry listed as a table / JSON, and --count on a small data dir."""

from __future__ import annotations

import json

from click.testing import CliRunner

from veracity.bench.datasets import DATASETS
from veracity.cli.bench import bench


def test_json_lists_every_registered_dataset_with_label_sets():
    res = CliRunner().invoke(bench, ["datasets", "--json"])
    assert res.exit_code == 0, res.output
    records = json.loads(res.output)
    assert [r["name"] for r in records] == list(DATASETS)
    by_name = {r["name"]: r for r in records}
    hover = by_name["hover"]
    assert hover["default_variant"] == "dev" and hover["supports_hops"] is True
    assert hover["variants"]["dev"]["files"] == ["hover_dev_release_v1.1.json"]
    assert hover["variants"]["dev"]["labels"] == ["SUPPORTED", "REFUTED"]
    assert by_name["fever"]["variants"]["paper_dev"]["labels"] == ["SUPPORTED", "REFUTED", "NOT_ENOUGH_INFO"]
    # a label mapped to drop is listed in the mapping but not in the label set
    emulate = by_name["bingcheck"]["variants"]["emulate"]
    assert emulate["label_map"]["partially supported"] is None and emulate["labels"] == ["SUPPORTED",
                                                                                         "REFUTED"]
    assert by_name["politifact"]["variants"]["su2023-all"]["created"] == "2023-11-08"
    # every variant declares its label space: binary unless NOT_ENOUGH_INFO is one of its labels
    assert hover["variants"]["dev"]["label_space"] == "binary"
    assert by_name["fever"]["variants"]["paper_dev"]["label_space"] == "3way"
    assert (by_name["bingcheck"]["variants"]["4way"]["label_space"] == "3way"
            and emulate["label_space"] == "binary")
    assert by_name["factcheck-bench"]["variants"]["3way"]["label_space"] == "3way"
    for rec in records:
        for var in rec["variants"].values():
            assert var["label_space"] == ("3way" if "NOT_ENOUGH_INFO" in var["labels"]
                                          else "binary"), rec["name"]


def test_table_marks_default_variants():
    res = CliRunner().invoke(bench, ["datasets"])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()[1:]  # not a terminal: "# title", then tab-separated lines
    assert res.output.startswith("# benchmark datasets")
    assert lines[0].split("\t") == ["dataset", "variant", "labels", "label space", "files", "released"]
    rows = [line.split("\t") for line in lines[1:]]
    assert len(rows) == sum(len(spec.variants) for spec in DATASETS.values())
    assert ["hover", "dev *", "SUPPORTED/REFUTED", "binary", "hover/hover_dev_release_v1.1.json",
            "2020-11-05"] in rows
    assert ["fever", "paper_dev *", "SUPPORTED/REFUTED/NOT_ENOUGH_INFO", "3way"] == \
        next(r for r in rows if r[:2] == ["fever", "paper_dev *"])[:4]
    assert ["hover", "train"] == rows[1][:2]


def test_count_reads_the_files_present_and_names_the_missing(tmp_path):
    (tmp_path / "hover").mkdir()
    records = [{"uid": f"u{i}", "claim": f"Claim {i}.", "supporting_facts": [["Page", 0]],
                "label": "SUPPORTED" if i < 2 else "NOT_SUPPORTED", "num_hops": 2} for i in range(3)]
    (tmp_path / "hover" / "hover_dev_release_v1.1.json").write_text(json.dumps(records))
    res = CliRunner().invoke(bench, ["datasets", "--count", "--data-dir", str(tmp_path), "--json"])
    assert res.exit_code == 0, res.output
    by_name = {r["name"]: r for r in json.loads(res.output)}
    dev = by_name["hover"]["variants"]["dev"]
    assert dev["n_claims"] == 3 and dev["label_counts"] == {"SUPPORTED": 2, "REFUTED": 1}
    assert "file not found" in by_name["hover"]["variants"]["train"]["error"]
    assert "n_claims" not in by_name["liar"]["variants"]["test"]

    res = CliRunner().invoke(bench, ["datasets", "--count", "--data-dir", str(tmp_path)])
    assert res.exit_code == 0, res.output
    rows = [line.split("\t") for line in res.output.splitlines()[1:]]
    assert rows[0][-1] == "claims"
    assert ["hover", "dev *"] == rows[1][:2] and rows[1][-1] == "3 (SUPPORTED 2, REFUTED 1)"
