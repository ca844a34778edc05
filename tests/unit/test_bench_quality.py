"""benchmarks/quality.py: the cells it runs (command line, resume, bad cell), the table it prints from real
run directories, and the wrong-verdict listing."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from tests.fixtures.index import shared_data_dir
from tests.unit.scripted_llm import ScriptedLLM
from veracity.bench.config import RunConfig
from veracity.bench.run import bench_run
from veracity.config import Settings
from veracity.pipeline.methods.direct import DirectJudgement

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "quality.py"
spec = importlib.util.spec_from_file_location("quality", SCRIPT)
quality = importlib.util.module_from_spec(spec)
spec.loader.exec_module(quality)

DATA = shared_data_dir()
needs_hover = pytest.mark.usefixtures("shared_hover_data")  # missing data: fails under CI, skips elsewhere


def test_cells_become_balanced_bench_runs_and_a_finished_cell_is_skipped(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(quality.subprocess, "call", lambda cmd, **kw: calls.append(cmd) or 0)
    root = tmp_path / "q"
    done = root / "m-s7" / "rag-hover-gold"
    done.mkdir(parents=True)
    (done / "metrics.json").write_text(json.dumps({"complete": True}))
    rc = quality.main(["run", "--model", "m", "--seed", "7", "--root", str(root), "--index",
                       str(tmp_path / "ix"),
                       "--param", "rag.k=3", "--param", "direct.x=1",
                       "direct:hover:none:12", "rag:hover:gold:12", "rag:hover:open:12:2"])
    assert rc == 0
    assert len(calls) == 2  # the complete cell was skipped
    none_cmd, open_cmd = calls
    assert none_cmd[none_cmd.index("--sample") + 1] == "balanced"
    assert none_cmd[none_cmd.index("--seed") + 1] == "7" and none_cmd[none_cmd.index("--limit") + 1] == "12"
    assert none_cmd[none_cmd.index("--evidence") + 1] == "none" and "--index" not in none_cmd
    assert none_cmd[none_cmd.index("--param") + 1] == "x=1" and none_cmd.count("--param") == 1
    assert open_cmd[open_cmd.index("--index") + 1] == str(tmp_path / "ix") and "--allow-leakage" in open_cmd
    assert open_cmd[open_cmd.index("--concurrency") + 1] == "2"
    assert open_cmd[open_cmd.index("--param") + 1] == "k=3"
    assert open_cmd[open_cmd.index("--out") + 1] == str(root / "m-s7" / "rag-hover-open")


def test_a_malformed_cell_is_refused(tmp_path, capsys):
    assert quality.main(["run", "--model", "m", "--seed", "1", "--root", str(tmp_path), "rag:hover"]) == 2
    assert "bad cell" in capsys.readouterr().err


@needs_hover
def test_table_and_wrong_read_real_run_directories(tmp_path, capsys):
    def always_supported(messages):
        return DirectJudgement(explanation="looks right", label="SUPPORTED")

    root = tmp_path / "m-s3"
    cfg = RunConfig.of(dataset="hover", method="direct", limit=6, seed=3, concurrency=2, sample="balanced",
                    evidence="none")
    bench_run(cfg, root / "direct-hover-none", settings=Settings(home=tmp_path / "home", data_dir=DATA),
              llm=ScriptedLLM({"direct.judge": always_supported}))
    assert quality.main(["table", str(root)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("| model | method | dataset | evidence | n |")
    row = [c.strip() for c in lines[2].strip("|").split("|")]
    assert row[1:5] == ["direct", "hover", "none", "6/6"]
    # balanced: half SUPPORTED, so always answering SUPPORTED is 50 % accurate, as is the majority baseline
    assert row[5].startswith("50.0 [") and row[8].startswith("50.0 /")
    assert row[9] == "69.4 / 60.6 / 59.2"  # ProgramFC's open-book F1 for 2/3/4 hops beside it
    assert row[10] == "0 / 0.00"  # replies that failed to validate / claims with a role fallback
    assert quality.main(["wrong", str(root / "direct-hover-none")]) == 0
    out = capsys.readouterr().out
    assert out.count("gold REFUTED, said SUPPORTED") == 3 and out.strip().endswith("3 wrong of 6")


def test_table_names_the_parameters_a_run_set():
    assert quality.method_label({"method": "rag", "params": {}}) == "rag"
    assert quality.method_label({"method": "rag", "params": {"select": True,
                                                             "k": 3}}) == "rag (k=3, select=True)"


# ------------------------------------------------ Trification's judge_aggregation replayed from a trace
async def _trification_run(handlers_, **params):
    from tests.unit.test_trification import make_ctx
    from tests.unit.test_trification_fidelity import CLAIM
    from veracity.pipeline.methods.trification.method import verify_trification

    ctx = make_ctx(ScriptedLLM(handlers_, repeat_last=True), **params)
    verdict = await verify_trification(CLAIM, ctx)
    return verdict.label.value, ctx.trace.events


def _three_judges():
    from tests.unit.test_trification import N, handlers, plan, user_text

    three = plan(N("s_1", "SEARCH"), N("j_1", "JUDGE", ["s_1"]), N("j_2", "JUDGE", ["s_1"]),
                 N("j_3", "JUDGE", ["j_1", "j_2"]))
    three["nodes"] = [dict(n, hint=n["id"]) for n in three["nodes"]]
    labels = {"j_1": "Supports", "j_2": "Refutes", "j_3": "Supports"}
    h = handlers(planner=[three])
    h["trification.judge"] = lambda m: (lambda k: {"explanation": k, "label": labels[k]})(
        next(k for k in labels if f"Hint: {k}" in user_text(m)))
    return h


@pytest.mark.parametrize("rule", ["all_supported", "majority", "last"])
async def test_aggregate_replays_every_rule_from_one_trace(rule):
    """The replay of each judge_aggregation rule on one run's trace gives the label a run with that rule
    gives (the three JUDGEs disagree, so the rules differ: REFUTED / SUPPORTED / SUPPORTED)."""
    _, events = await _trification_run(_three_judges(), static=True)  # recorded with the default rule
    judges = quality.judges_from_trace(events)
    assert sorted(j[:2] for j in judges) == [("j_1", "Supports"), ("j_2", "Refutes"), ("j_3", "Supports")]
    want, _ = await _trification_run(_three_judges(), static=True, judge_aggregation=rule)
    assert quality.aggregate_label(judges, rule, "REFUTED") == want
    assert {quality.aggregate_label(judges, r, "REFUTED") for r in ("all_supported", "majority")} == \
        {"REFUTED", "SUPPORTED"}


async def test_aggregate_reads_the_static_fallbacks_judges_after_the_cap():
    from tests.unit.test_trification_fidelity import fallback_handlers

    label, events = await _trification_run(fallback_handlers())
    judges = quality.judges_from_trace(events)
    assert [j[:2] for j in judges] == [("j_1", "Supports")]  # the static graph's JUDGE, not the dynamic ones
    assert quality.aggregate_label(judges, "all_supported", "REFUTED") == label == "SUPPORTED"
    assert quality.judges_from_trace([]) == []


# ------------------------------------------------ rag quotes=off against quotes=check (issue 31's rule)
def _first_passage(messages):
    """(id, a real quote of it): the first passage the judge was shown, as passages_then_claim renders it."""
    user = messages[1]["content"]
    head, body = user.split("\n", 2)[1:3]
    return head[1:head.index("]")], " ".join(body.split()[:4])


def _quoting_judge(messages):
    """SUPPORTED on a real quote when the claim has an even length, else a made-up quote (ungrounded
    twice)."""
    pid, words = _first_passage(messages)
    claim = messages[1]["content"].rsplit("Claim: ", 1)[1]
    quote = words if len(claim) % 2 == 0 else "words that are not in the passage at all"
    return {"explanation": "e", "label": "SUPPORTED", "quotes": [{"passage_id": pid, "quote": quote}]}


@needs_hover
def test_quotes_compares_off_and_check_and_writes_a_hand_read_sheet(tmp_path, capsys):
    from veracity.pipeline.methods.rag import RagJudgement

    def cite_first(messages):
        return RagJudgement(explanation="e", label="SUPPORTED", cited_passages=[_first_passage(messages)[0]])

    settings = Settings(home=tmp_path / "home", data_dir=DATA)
    for root, params, judge in (("off", {}, cite_first), ("check", {"quotes": "check"}, _quoting_judge)):
        cfg = RunConfig.of(dataset="hover", method="rag", limit=6, seed=3, concurrency=2, sample="balanced",
                        evidence="gold", params=params)
        bench_run(cfg, tmp_path / root / "rag-hover-gold", settings=settings,
                  llm=ScriptedLLM({"rag.judge": judge}))
    sheet = tmp_path / "sheet.md"
    assert quality.main(["quotes", str(tmp_path / "off"), str(tmp_path / "check"), "--sheet", str(sheet),
                         "--hand-read", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    row = [c.strip() for c in out[2].strip("|").split("|")]
    ungrounded = int(row[7].split("/")[0])
    assert row[0] == "rag-hover-gold" and row[1] == "6" and row[2].startswith("50.0 [")
    assert 0 < ungrounded < 6 and row[6] == row[7]  # every mismatch stayed after the retry here
    assert int(row[8]) == ungrounded  # each ungrounded verdict became NOT_ENOUGH_INFO... or REFUTED in binary
    assert any(line.startswith("pooled over 6 claims: accuracy off 50.0 %") for line in out)
    text = sheet.read_text()
    assert text.count("## grounded: ") == 2 and text.count("## ungrounded: ") == 2
    assert "NOT FOUND" in text and text.count(quality.SHEET_MARK) == 4
    assert quality.main(["quotes", "--tally", str(sheet)]) == 2  # not filled in yet: refused
    capsys.readouterr()
    sheet.write_text(text.replace(quality.SHEET_MARK + " ", quality.SHEET_MARK + " yes"))
    assert quality.main(["quotes", "--tally", str(sheet), "--drop", "1.5"]) == 0
    tally = capsys.readouterr().out
    assert "ungrounded: check right on 2 of 2" in tally and "check becomes the default" in tally


def test_the_quotes_rule_is_the_one_written_down():
    assert quality.quotes_rule(2.0, 0.70) and quality.quotes_rule(-1.0, 1.0)
    assert not quality.quotes_rule(2.1, 0.9) and not quality.quotes_rule(0.0, 0.69)
