"""benchmarks/hover_repeats.py: entities repeat, each from different questions, interleaved, readable by
bench run."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from veracity.bench.datasets import load_dataset

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "hover_repeats.py"
spec = importlib.util.spec_from_file_location("hover_repeats", SCRIPT)
hover_repeats = importlib.util.module_from_spec(spec)
spec.loader.exec_module(hover_repeats)


def _row(uid: str, q: str, titles: list[str], label: str = "SUPPORTED") -> dict:
    return {"uid": uid, "claim": f"claim {uid}", "supporting_facts": [[t, 0] for t in titles],
            "label": label, "num_hops": len(titles), "hpqa_id": q}


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    rows = [
        _row("a1", "qa1", ["Alpha", "X1"]), _row("a2", "qa2", ["Alpha", "X2"], "NOT_SUPPORTED"),
        _row("a3", "qa1", ["Alpha", "X1"]),  # same question as a1: never both picked
        _row("b1", "qb1", ["Beta"]), _row("b2", "qb2", ["Beta", "Gamma"]),
        _row("c1", "qc1", ["Gamma"]),  # Gamma: two questions, but b2 may already be used
        _row("d1", "qd1", ["Delta"]), _row("d2", "qd1", ["Delta"]),  # one question only: not an entity
    ]
    (tmp_path / "hover").mkdir()
    (tmp_path / "hover" / "hover_dev_release_v1.1.json").write_text(json.dumps(rows), encoding="utf-8")
    monkeypatch.setenv("VERACITY_DATA_DIR", str(tmp_path))
    return tmp_path


def test_pairs_interleaved_from_distinct_questions(data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "rep.jsonl"
    assert hover_repeats.main([str(out), "--entities", "2", "--per-entity", "2"]) == 0
    lines = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert len(lines) == 4
    first, second = [x["entity"] for x in lines[:2]], [x["entity"] for x in lines[2:]]
    assert first == second and len(set(first)) == 2  # A1 B1 A2 B2
    assert "Delta" not in first
    by_id = {x["id"]: x for x in lines}
    assert len(by_id) == 4  # no claim twice
    assert not {"a1", "a3"} <= set(by_id)  # one claim per HotpotQA question
    for x in lines:
        assert x["entity"] in x["gold_titles"]
    assert {x["label"] for x in lines} <= {"SUPPORTED", "REFUTED"}
    ds = load_dataset(f"jsonl:{out}")
    assert [c.id for c, _ in ds.claims] == [x["id"] for x in lines]  # bench run keeps the file's order


def test_too_few_entities_and_missing_data(data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert hover_repeats.main([str(tmp_path / "o.jsonl"), "--entities", "5", "--per-entity", "2"]) == 2
    assert "only" in capsys.readouterr().err
    assert hover_repeats.main([str(tmp_path / "o.jsonl"), "--per-entity", "1"]) == 2
    monkeypatch.setenv("VERACITY_DATA_DIR", str(tmp_path / "nowhere"))
    assert hover_repeats.main([str(tmp_path / "o.jsonl")]) == 2
    assert "VERACITY_DATA_DIR" in capsys.readouterr().err
