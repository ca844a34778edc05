"""benchmarks/same_behaviour.py: per-claim label / LLM-call / tool-call comparison of two runs."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("same_behaviour", ROOT / "benchmarks" / "same_behaviour.py")
same_behaviour = importlib.util.module_from_spec(spec)
spec.loader.exec_module(same_behaviour)


def write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def row(cid: str, label: str, roles: list[str], tools: int = 0) -> dict:
    return {"id": cid, "label": label,
            "trace": {"llm_calls": [{"role": r} for r in roles], "tool_calls": [{}] * tools}}


def test_identical_runs_pass_and_a_changed_claim_is_named(tmp_path, capsys):
    a = write(tmp_path / "a.jsonl", [row("1", "SUPPORTED", ["x.judge"]), row("2", "REFUTED", ["x.a", "x.b"],
                                                                             1)])
    b = write(tmp_path / "b.jsonl", [row("2", "REFUTED", ["x.a", "x.b"], 1), row("1", "SUPPORTED",
                                                                                 ["x.judge"])])
    assert same_behaviour.main([str(a), str(b)]) == 0
    c = write(tmp_path / "c.jsonl", [row("1", "REFUTED", ["x.judge"]), row("2", "REFUTED", ["x.a"], 1)])
    assert same_behaviour.main([str(a), str(c)]) == 1
    out = capsys.readouterr().out
    assert ("same label 1/2" in out and "same LLM-call count 1/2" in out
            and "  2: before REFUTED 2 calls" in out)


def test_a_claim_missing_from_one_run_fails(tmp_path):
    a = write(tmp_path / "a.jsonl", [row("1", "SUPPORTED", ["x.judge"])])
    run = tmp_path / "run"
    run.mkdir()
    write(run / "predictions.jsonl", [row("1", "SUPPORTED", ["x.judge"]), row("9", "REFUTED", ["x.judge"])])
    result = same_behaviour.compare(same_behaviour.load(a), same_behaviour.load(run))
    assert result["only_after"] == ["9"] and not result["differences"]
    assert same_behaviour.main([str(a), str(run)]) == 1
