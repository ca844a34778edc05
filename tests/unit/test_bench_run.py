"""`bench run` / `bench compare` with a scripted LLM and an in-memory index over the shared HoVer file:
run directory contents, metrics against the predictions, resume, leakage guard, bad input."""

import json
import sys

import click
import pytest

from tests.fixtures.index import shared_data_dir
from tests.unit.scripted_llm import FakeSearcher, ScriptedLLM
import veracity.pipeline.engine as engine_module
from veracity.bench.compare import compare_markdown, compare_rows
from veracity.bench.config import RunConfig, load_config
from veracity.bench.report import finalize
from veracity.bench.run import bench_run
from veracity.bench.scoring import read_predictions
from veracity.config import Settings
from veracity.errors import ConfigError, DataError, EndpointError, LeakageError
from veracity.pipeline.methods.direct import DirectJudgement
from veracity.pipeline.methods.rag import RagJudgement

DATA = shared_data_dir()
pytestmark = pytest.mark.usefixtures("shared_hover_data")  # missing data: fails under CI, skips elsewhere


def alternating_direct():
    """SUPPORTED, REFUTED, SUPPORTED, ... so that metrics are not trivial."""
    n = {"i": 0}

    def reply(messages):
        n["i"] += 1
        return DirectJudgement(explanation=f"call {n['i']}", label="SUPPORTED" if n["i"] % 2 else "REFUTED")
    return ScriptedLLM({"direct.judge": reply})


def settings(tmp_path):
    return Settings(home=tmp_path / "home", data_dir=DATA)


def test_run_directory_holds_manifest_predictions_metrics_report_and_plots(tmp_path):
    cfg = RunConfig.of(dataset="hover", method="direct", limit=6, seed=3, concurrency=2, hops=[2, 3])
    out = tmp_path / "run"
    metrics = bench_run(cfg, out, settings=settings(tmp_path), llm=alternating_direct())
    for name in ("run.json", "predictions.jsonl", "metrics.json", "report.md", "confusion.png", "hops.png"):
        assert (out / name).is_file(), name
    run = json.loads((out / "run.json").read_text())
    assert run["dataset"]["name"] == "hover" and len(run["dataset"]["sha256"]) == 64
    assert run["dataset"]["selection"] == {"hops": [2, 3], "limit": 6, "seed": 3}
    assert run["manifest"]["roles"]["direct.judge"]["max_tokens"] == 256 and run["versions"]["python"]
    # one run record: run.json embeds the record the predictions' manifest holds, built by the same code
    beside = json.loads((out / "predictions.jsonl.manifest.json").read_text())
    assert {k: v for k, v in run["manifest"].items() if k != "started_at"} == \
        {k: v for k, v in beside.items() if k != "started_at"}
    assert run["leakage"]["checked"] is False and "closed-book" in run["leakage"]["reason"]
    assert len(run["sessions"]) == 1 and run["sessions"][0]["done"] == 6
    preds = read_predictions(out)
    assert len(preds) == 6 and all(p["trace"]["llm_calls"] for p in preds)
    # the metrics are those of the predictions against the gold labels of the selected claims
    from veracity.bench.datasets import load_dataset
    from veracity.bench.metrics import evaluate

    ds = load_dataset("hover", DATA, limit=6, seed=3, hops=[2, 3])
    gold = {c.id: g for c, g in ds.claims}
    assert {c.meta["hops"] for c, _ in ds.claims} <= {2, 3}
    expected = evaluate([gold[p["id"]] for p in preds], [p["label"] for p in preds], labels=ds.labels)
    assert metrics["scores"]["accuracy"] == pytest.approx(expected.accuracy)
    assert metrics["scores"]["macro_f1"] == pytest.approx(expected.macro_f1)
    assert sum(map(sum, metrics["scores"]["confusion"]["matrix"])) == 6
    assert sum(h["n"] for h in metrics["by_hops"].values()) == 6
    assert metrics["efficiency"]["llm_calls_per_claim"] == 1.0 and metrics["efficiency"]["claims_per_min"] > 0
    report = (out / "report.md").read_text()
    assert ("macro-F1" in report and "![confusion.png](confusion.png)" in report
            and "By number of hops" in report)
    # each prediction carries its gold label; the report lists every claim and predictions.csv holds them all
    assert all(p["gold"] == gold[p["id"]].value for p in preds)
    assert ("## Claims" in report
            and f"| {preds[0]['id']} | {preds[0]['gold']} | {preds[0]['label']} |" in report)
    import csv
    rows = list(csv.DictReader((out / "predictions.csv").open()))
    assert [r["id"] for r in rows] == [c.id for c,
                                       _ in ds.claims] and rows[0]["gold"] == gold[rows[0]["id"]].value
    assert {r["correct"] for r in rows} <= {"True", "False"}


def test_the_report_names_the_engine_that_run_json_records():
    from veracity.bench.report import _server_words

    llama = {"server": {"managed": True, "engine": "llamacpp", "command": ["/x/llama-server", "-m",
                                                                           "m.gguf"]}}
    assert _server_words(llama) == " (managed llama.cpp (llama-server) server)"
    # before engine was kept
    old_state = {"server": {"managed": True, "command": ["/x/bin/llama-server", "--port", "1"]}}
    assert "llama.cpp" in _server_words(old_state) and "vLLM" not in _server_words(old_state)
    assert _server_words({"server": {"managed": True, "command": ["python", "-m",
                                                                  "vllm.entrypoints.openai.api_server"]}}) \
        == " (managed vLLM server)"
    assert _server_words({"server": {"managed": False}, "served": [{"id": "m", "owned_by": "llamacpp"}]}) \
        == " (llama.cpp (llama-server) server)"


def test_interrupted_run_resumes_without_losing_or_repeating_claims(tmp_path):
    cfg = RunConfig.of(dataset="hover", method="direct", limit=8, seed=1, concurrency=1)
    out = tmp_path / "run"
    calls = {"n": 0}

    def die_after_three(role, messages):
        calls["n"] += 1
        if calls["n"] > 3:
            raise EndpointError("cannot reach the model endpoint", hint="start it")

    flaky = alternating_direct()
    flaky.fail = die_after_three
    with pytest.raises(EndpointError, match="3 of 8 claims are scored"):
        bench_run(cfg, out, settings=settings(tmp_path), llm=flaky)
    partial = json.loads((out / "metrics.json").read_text())
    assert partial["complete"] is False and partial["n_predicted"] == 3
    assert "INCOMPLETE (3 of 8 claims)" in (out / "report.md").read_text()
    metrics = bench_run(cfg, out, settings=settings(tmp_path), llm=alternating_direct())
    ids = [p["id"] for p in read_predictions(out)]
    assert len(ids) == 8 and len(set(ids)) == 8 and metrics["complete"]
    run = json.loads((out / "run.json").read_text())
    assert [s["done"] for s in run["sessions"]] == [3, 5] and run["sessions"][0]["stopped"]


def test_resume_with_other_settings_is_refused(tmp_path):
    out = tmp_path / "run"
    bench_run(RunConfig.of(dataset="hover", method="direct", limit=2), out, settings=settings(tmp_path),
              llm=alternating_direct())
    with pytest.raises(ConfigError, match="holds a run with other settings"):
        bench_run(RunConfig.of(dataset="hover", method="direct", limit=3), out, settings=settings(tmp_path),
                  llm=alternating_direct())
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="not a benchmark run directory"):
        bench_run(RunConfig.of(dataset="hover", method="direct", limit=2), tmp_path / "other",
                  settings=settings(tmp_path),
                  llm=alternating_direct())


def rag_llm():
    return ScriptedLLM({"rag.judge": lambda m: RagJudgement(explanation="x", label="SUPPORTED",
                                                            cited_passages=[])})


def dated_index(date):
    return FakeSearcher({"Skagen Painters": ["A group of Danish artists."]},
                        manifest={"kind": "veracity-index", "sources": [{"dump_date": date}], "passages": 1})


def test_leakage_guard_refuses_a_newer_index_unless_allowed(tmp_path):
    cfg = RunConfig.of(dataset="hover", method="rag", limit=2, index=None)
    with pytest.raises(LeakageError, match="dump date 2024-01-01, newer than the hover dataset"):
        bench_run_with_index(cfg, tmp_path / "a", dated_index("2024-01-01"), tmp_path)
    assert not (tmp_path / "a" / "predictions.jsonl").exists()
    cfg.allow_leakage = True
    bench_run_with_index(cfg, tmp_path / "b", dated_index("2024-01-01"), tmp_path)
    run = json.loads((tmp_path / "b" / "run.json").read_text())
    assert run["leakage"]["index_newer"] is True and run["leakage"]["allowed"] is True
    assert "allowed by --allow-leakage" in (tmp_path / "b" / "report.md").read_text()
    # an index from the 2017 dump is older than HoVer (2020): no flag needed
    ok = RunConfig.of(dataset="hover", method="rag", limit=2)
    bench_run_with_index(ok, tmp_path / "c", dated_index("2017-10-01"), tmp_path)
    leak = json.loads((tmp_path / "c" / "run.json").read_text())["leakage"]
    assert leak["index_newer"] is False and leak["index_dump_date"] == "2017-10-01"
    # an unknown dump date cannot rule leakage out
    with pytest.raises(LeakageError, match="unknown dump date"):
        bench_run_with_index(ok, tmp_path / "d", dated_index(None), tmp_path)


def bench_run_with_index(cfg, out, searcher, tmp_path):
    cfg = cfg.replace(index=None)

    real_open = engine_module.open_index
    engine_module.open_index = lambda index, settings=None: searcher
    try:
        return bench_run(cfg, out, settings=settings(tmp_path), llm=rag_llm())
    finally:
        engine_module.open_index = real_open


def test_a_runs_directory_is_its_state_dir(tmp_path, monkeypatch):
    from veracity.pipeline.methods.mermaid import Decomposition, ReactStep

    def executor(messages):  # search once, then finish
        if any(m["role"] == "assistant" for m in messages):
            return ReactStep(thought="seen", action="finish", argument="", label="SUPPORTED",
                             cited_passages=[])
        return ReactStep(thought="look", action="search", argument="Skagen Painters", label=None,
                         cited_passages=[])

    llm = ScriptedLLM({"mermaid.decomposer": lambda m: Decomposition(triplets=[], keywords=[], domain=""),
                       "mermaid.executor": executor})
    monkeypatch.setattr(engine_module, "open_index", lambda index, settings=None: dated_index("2017-10-01"))
    out = tmp_path / "run"
    metrics = bench_run(RunConfig.of(dataset="hover", method="mermaid", limit=2), out,
                        settings=settings(tmp_path), llm=llm)
    assert metrics["n_predicted"] == 2
    assert (out / "memory" / "evidence.sqlite").is_file()  # the run's evidence memory lives in its directory
    assert not (tmp_path / "home" / "memory").exists()
    run = json.loads((out / "run.json").read_text())
    assert run["manifest"]["state_dir"] == str(out)
    # the effective temperature (the client's: the role declares none), the run's seed and the seed rule
    assert run["manifest"]["roles"]["mermaid.executor"] == {"max_tokens": 384, "temperature": 0.0,
                                                "temperature_from": "client default"}
    assert (run["manifest"]["seed"] == 0 and "sha256" in run["manifest"]["seed_rule"]
            and run["order"] == "sample")


def test_compare_puts_runs_side_by_side(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    bench_run(RunConfig.of(dataset="hover", method="direct", limit=4, name="direct-4"), a,
              settings=settings(tmp_path),
              llm=alternating_direct())
    bench_run(RunConfig.of(dataset="hover", method="direct", limit=2), b, settings=settings(tmp_path),
              llm=alternating_direct())
    (b / "metrics.json").unlink()  # recomputed from the run directory
    rows = compare_rows([a, b])
    assert [r["run"] for r in rows] == ["direct-4", "b"] and [r["n"] for r in rows] == ["4/4", "2/2"]
    md = compare_markdown(rows)
    assert (md.splitlines()[0].startswith("| run | dataset | method | n | acc | acc 95% CI | macro-F1")
            and len(md.splitlines()) == 4)
    assert finalize(b)["n_predicted"] == 2
    # --json: the same runs, unformatted, for scripts
    from click.testing import CliRunner

    from veracity.cli import _register, cli
    _register()
    res = CliRunner().invoke(cli, ["bench", "compare", str(a), str(b), "--json"])
    assert res.exit_code == 0, res.output
    records = json.loads(res.output)
    assert [(r["run"], r["n_predicted"], r["n_claims"]) for r in records] == [("direct-4", 4, 4), ("b", 2, 2)]
    assert records[0]["scores"]["accuracy"] == pytest.approx(float(rows[0]["acc"]), abs=5e-4)
    assert records[0]["method"] == "direct" and records[0]["label_space"] == "binary"


def test_configs_and_bad_input(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text('dataset = "hover"\nmethod = "mermaid"\nlimit = 5\nablations = '
                 '["no-memory"]\n[params]\nt_max = 3\n')
    cfg = load_config(p, limit=7)
    assert cfg.limit == 7 and cfg.method_overrides() == {"t_max": 3, "memory": False}
    p.write_text('dataset = "hover"\nmethod = "mermaid"\nlimt = 5\n')
    with pytest.raises(ConfigError, match="unknown key.*limt"):
        load_config(p)
    p.write_text('dataset = "hover"\nmethod = [\n')
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(p)
    with pytest.raises(ConfigError, match="unknown method 'magic'"):
        bench_run(RunConfig.of(dataset="hover", method="magic"), tmp_path / "x", settings=settings(tmp_path))
    with pytest.raises(ConfigError, match="--no-debate is an ablation of zofia"):
        bench_run(RunConfig.of(dataset="hover", method="mermaid", ablations=["no-debate"]), tmp_path / "x",
                  settings=settings(tmp_path))
    with pytest.raises(DataError, match="unknown dataset 'hoverr'"):
        bench_run(RunConfig.of(dataset="hoverr", method="direct"), tmp_path / "x",
                  settings=settings(tmp_path))
    with pytest.raises(DataError, match="hops must be 2, 3 or 4"):
        bench_run(RunConfig.of(dataset="hover", method="direct", hops=[7]), tmp_path / "x",
                  settings=settings(tmp_path))
    with pytest.raises(DataError, match="no claims left"):  # an empty selection after filters
        bench_run(RunConfig.of(dataset="hover", method="direct",
                               label_map="SUPPORTED=drop,NOT_SUPPORTED=drop"),
                  tmp_path / "x", settings=settings(tmp_path))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "1", "claim": "A is B.", "label": "maybe"}\n')
    with pytest.raises(DataError, match="labels outside the mapping: 'maybe'"):
        bench_run(RunConfig.of(dataset=f"jsonl:{bad}", method="direct"), tmp_path / "x",
                  settings=settings(tmp_path))
    assert not (tmp_path / "x").exists()  # nothing written for a run that could not start


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


def test_cli_errors_are_one_line(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("VERACITY_DATA_DIR", str(DATA))
    code, _, err = run_cli(["run", "--dataset", "nope", "--method", "direct", "--out", str(tmp_path / "r")],
                           monkeypatch, capsys)
    assert code != 0 and "unknown dataset 'nope'" in err and "hint:" in err and "Traceback" not in err
    code, _, err = run_cli(["run", "--method", "direct"], monkeypatch, capsys)
    assert code == 2 and "give --dataset and --method" in err
    code, _, err = run_cli(["run", "--dataset", "hover", "--method", "emulate", "--ablation", "static"],
                           monkeypatch, capsys)
    assert code != 0 and "--static is an ablation of trification" in err
    code, _, err = run_cli(["compare", str(tmp_path)], monkeypatch, capsys)
    assert code != 0 and "is not a benchmark run directory" in err
    code, out, _ = run_cli(["--help"], monkeypatch, capsys)
    assert code == 0 and all(c in out for c in ("run", "compare", "llm", "retrieval"))


def test_method_statistics_average_trification_graphs_and_mermaid_steps():
    from veracity.bench.scoring import method_statistics

    def rec(*events, hits=()):
        return {"trace": {"events": list(events), "memory_hits": list(hits)}}

    tri = [rec({"kind": "trification.stats", "graph_modifications": 2,
                "initial_nodes": {"SEARCH": 2, "REFINE": 0, "THINK": 1, "JUDGE": 1},
                "final_nodes": {"SEARCH": 4, "REFINE": 1, "THINK": 2, "JUDGE": 2}}),
           rec({"kind": "trification.stats", "graph_modifications": 0,
                "initial_nodes": {"SEARCH": 3, "REFINE": 1, "THINK": 1, "JUDGE": 1},
                "final_nodes": {"SEARCH": 3, "REFINE": 1, "THINK": 1, "JUDGE": 1}}),
           rec({"kind": "trification.no_plan", "reason": "x"})]
    tri[0]["trace"]["events"].insert(0, {"kind": "trification.static_fallback", "reason": "capped"})
    s = method_statistics(tri)["trification"]
    assert s["claims"] == 2 and s["graph_modifications_per_claim"] == 1.0 and s["claims_modified"] == 0.5
    assert s["nodes_initial"]["SEARCH"] == 2.5 and s["nodes_final"]["SEARCH"] == 3.5 and s["no_plan"] == 1
    assert s["static_fallbacks"] == 1
    mer = [rec({"kind": "mermaid.recall"}, {"kind": "mermaid.step"}, {"kind": "mermaid.step"},
               hits=[{"passage_id": "A#0"}]),
           rec({"kind": "mermaid.recall"}, *[{"kind": "mermaid.step"}] * 5, {"kind": "mermaid.final"})]
    m = method_statistics(mer)["mermaid"]
    assert m == {"claims": 2, "executor_steps_per_claim": 3.5, "claims_with_memory_hits": 0.5,
                 "forced_verdicts": 0.5}
    assert method_statistics([rec()]) == {}


def test_llm_concurrency_is_its_own_setting(monkeypatch, capsys, tmp_path):
    with pytest.raises(ConfigError, match=r"--llm-concurrency.*must be an integer of at least 1, got 0"):
        RunConfig.of(dataset="hover", method="direct", llm_concurrency=0)
    code, _, err = run_cli(["run", "--dataset", "hover", "--method", "direct", "--llm-concurrency", "0",
                            "--out", str(tmp_path / "r")], monkeypatch, capsys)
    assert (code == 2
            and "--llm-concurrency, $VERACITY_LLM_CONCURRENCY) must be an integer of at least 1" in err
            and "Traceback" not in err)
    assert not (tmp_path / "r").exists()
    out = tmp_path / "ok"
    bench_run(RunConfig.of(dataset="hover", method="direct", limit=2, concurrency=1, llm_concurrency=8), out,
              settings=settings(tmp_path), llm=alternating_direct())
    run = json.loads((out / "run.json").read_text())
    assert run["concurrency"] == 1 and run["llm_concurrency"] == 8 and run["manifest"]["state_dir"] is None


def test_sample_mode_is_checked_and_part_of_the_run_identity():
    from veracity.bench.config import RunConfig

    with pytest.raises(ConfigError, match="unknown sample mode"):
        RunConfig.of(dataset="hover", method="direct", sample="stratified")
    # old runs resume as before
    assert "sample" not in RunConfig.of(dataset="hover", method="direct").identity()
    assert RunConfig.of(dataset="hover", method="direct",
                        sample="balanced").identity()["sample"] == "balanced"


def test_dataset_order_runs_the_sample_in_file_order_and_is_recorded(tmp_path):
    from veracity.bench.datasets import load_dataset

    cfg = RunConfig.of(dataset="hover", method="direct", limit=6, seed=3, order="dataset", concurrency=1)
    out = tmp_path / "run"
    bench_run(cfg, out, settings=settings(tmp_path), llm=alternating_direct())
    file_order = [c.id for c, _ in load_dataset("hover", DATA).claims]
    ran = [p["id"] for p in read_predictions(out)]
    sampled = [c.id for c, _ in load_dataset("hover", DATA, limit=6, seed=3).claims]
    assert sorted(ran) == sorted(sampled) and ran != sampled
    assert ran == sorted(ran, key=file_order.index)  # one claim in flight: written in the order run
    run = json.loads((out / "run.json").read_text())
    assert run["order"] == "dataset" and run["identity"]["order"] == "dataset" and run["concurrency"] == 1
    assert run["dataset"]["selection"]["order"] == "dataset"


def test_an_overloaded_endpoint_stops_the_run_with_its_own_hint(tmp_path):
    """An endpoint that answers but cannot finish replies in time (a full CPU batch) keeps its hint — fewer
    requests at once, or a longer timeout — instead of the dead-server advice to restart it."""
    from veracity.errors import EndpointBusyError

    def busy(role, messages):
        raise EndpointBusyError("model endpoint http://x/v1 answers but did not finish a reply within 300 s",
                                hint="run fewer claims or requests at once "
                                     "(--concurrency, --llm-concurrency)")

    flaky = alternating_direct()
    flaky.fail = busy
    with pytest.raises(EndpointBusyError, match="0 of 4 claims are scored") as err:
        bench_run(RunConfig.of(dataset="hover", method="direct", limit=4), tmp_path / "run",
                  settings=settings(tmp_path),
                  llm=flaky)
    assert "--concurrency" in err.value.hint and "restart" not in err.value.hint


def test_the_served_context_is_recorded_on_both_engines():
    """run.json's `served` names the context length of vLLM (max_model_len) and of llama-server
    (meta.n_ctx)."""
    from veracity.bench.manifest import served_entry

    vllm = {"id": "m", "root": "/models/m", "max_model_len": 8192, "owned_by": "vllm"}
    llama = {"id": "m", "owned_by": "llamacpp", "meta": {"n_ctx": 4096, "n_ctx_train": 32768}}
    assert served_entry(vllm) == {"id": "m", "root": "/models/m", "max_model_len": 8192, "owned_by": "vllm"}
    assert served_entry(llama) == {"id": "m", "root": None, "max_model_len": 4096, "owned_by": "llamacpp"}
    assert served_entry({"id": "m"})["max_model_len"] is None
