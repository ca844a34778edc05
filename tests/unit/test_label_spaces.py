"""Label spaces (issue 13): in the binary space every method's final verdict schema and prompt offer
SUPPORTED / REFUTED only, every path that would give NOT_ENOUGH_INFO gives the binary rule's REFUTED
(traced as label_space.forced), and the 3way space changes nothing. Also the runner, the Verifier, the
CLI, the dataset registry and `bench run`."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import warnings

import click
import pytest
from pydantic import BaseModel, Field, ValidationError

from tests.unit.scripted_llm import FakeSearcher, ScriptedLLM, keep_every_passage, run_claims
from veracity.pipeline.engine import Engine
from veracity.errors import ConfigError, LLMOutputError
from veracity.pipeline.labels import BINARY, BINARY_RULE, FORCED_EVENT, THREE_WAY, label_space
from veracity.pipeline.methods import METHODS
from veracity.pipeline.methods.direct import DIRECT_SYSTEM, DirectJudgement
from veracity.pipeline.methods.mermaid import Decomposition, FinalVerdict, ReactStep
from veracity.pipeline.methods.rag import RAG_SYSTEM, RagJudgement
from veracity.pipeline.engine import verify_one
from veracity.pipeline.types import Claim, Label, Verdict

ARTICLES = {"Paris": ["Paris is the capital of France."], "Berlin": ["Berlin is the capital of Germany."]}
CLAIM = Claim("c1", "Paris is the capital of France.")


def label_enum(model: type[BaseModel], field: str = "label") -> list:
    """The label enum of ``model``'s JSON schema (what constrained decoding is given)."""
    prop = model.model_json_schema()["properties"][field]
    if "anyOf" in prop:
        return [v for p in prop["anyOf"] for v in p.get("enum", [])]
    return prop["enum"]


def forced(trace) -> list[dict]:
    return [e for e in trace.events if e["kind"] == FORCED_EVENT]


def never_validates(role):
    def reply(*_):
        return LLMOutputError(f"{role}: the reply did not validate (json_invalid at top level)", role=role)
    return reply


def run(method, script, *, space=None, searcher=None, **params):
    llm = ScriptedLLM(script)
    spec = METHODS[method]
    verdict = asyncio.run(verify_one(CLAIM, spec, llm, searcher or FakeSearcher(ARTICLES),
                                     spec.make_params(params),
                                     label_space=space))
    return verdict, llm


# ----------------------------------------------------------------- the label space itself
def test_spaces_names_and_the_binary_rule():
    assert (label_space(None) is THREE_WAY and label_space("3way") is THREE_WAY
            and label_space("BINARY") is BINARY)
    for alias, space in (("2way", BINARY), ("two-way", BINARY), (" 2WAY ", BINARY), ("three-way", THREE_WAY),
                         ("3-way", THREE_WAY)):  # every spelling --labels takes names the space it says
        assert label_space(alias) is space, alias
    assert "NOT_ENOUGH_INFO" not in label_space("2way") and not label_space("2way").allows_nei
    assert THREE_WAY.allows_nei and not BINARY.allows_nei
    assert "NOT_ENOUGH_INFO" not in BINARY and "REFUTED" in BINARY and Label.NOT_ENOUGH_INFO in THREE_WAY
    with pytest.raises(ConfigError, match="unknown label space 'bad'") as exc:
        label_space("bad")
    assert "\n" not in str(exc.value) and "--labels binary" in exc.value.hint
    assert exc.value.hint == ("use --labels binary (SUPPORTED / REFUTED) or --labels 3way "
                              # the labels named as the flags take them
                              "(SUPPORTED / REFUTED / NOT_ENOUGH_INFO)")
    assert "MAYBE" not in BINARY and "MAYBE" not in THREE_WAY and 3 not in THREE_WAY  # not a label at all


def test_narrowing_keeps_the_fields_contract():
    """Binary narrows the label field and nothing else: the same schema name and module, the field still
    required with its description, a nullable field still nullable, a required one still refusing null."""

    class Step(BaseModel):
        label: Label | None = Field(None, description="finish only: the verdict")

    class Judged(BaseModel):
        explanation: str
        label: Label = Field(description="the verdict")

    narrowed = BINARY.narrow(Judged)
    old, new = Judged.model_fields["label"], narrowed.model_fields["label"]
    assert narrowed.__name__ == "Judged" and narrowed.__module__ == Judged.__module__ == __name__
    assert new.is_required() and old.is_required() and new.description == old.description and new.description
    with pytest.raises(ValidationError):
        narrowed.model_validate({"explanation": "x", "label": None})
    with pytest.raises(ValidationError):
        narrowed.model_validate({"explanation": "x", "label": "NOT_ENOUGH_INFO"})
    assert narrowed.model_validate({"explanation": "x", "label": "REFUTED"}).label == "REFUTED"
    step = BINARY.narrow(Step)
    assert step().label is None and step.model_fields["label"].description == "finish only: the verdict"
    assert step.model_validate({"label": None}).label is None
    assert step.model_json_schema()["properties"]["label"]["anyOf"][0]["enum"] == ["SUPPORTED", "REFUTED"]
    assert THREE_WAY.options("a", "b", "c") == "SUPPORTED if a, REFUTED if b, NOT_ENOUGH_INFO if c"
    assert BINARY.options("a", "b", "c") == "SUPPORTED if a, REFUTED if b or c"
    assert THREE_WAY.narrow(DirectJudgement) is DirectJudgement  # 3way: the very same model
    narrowed = BINARY.narrow(ReactStep)
    assert narrowed.__name__ == "ReactStep" and label_enum(narrowed) == ["SUPPORTED", "REFUTED"]
    assert narrowed.model_validate({"thought": "t", "action": "search", "argument": "q", "label": None,
                                    "cited_passages": []}).label is None  # still nullable
    assert "Trification §3.2" in BINARY_RULE

    class Loose(BaseModel):  # a union without None: not nullable, so narrowed it still refuses null
        label: Label | str = Field(description="a label or free text")

    with pytest.raises(ValidationError):
        BINARY.narrow(Loose).model_validate({"label": None})
    # the smallest space that holds some labels: binary unless NOT_ENOUGH_INFO is among them
    from veracity.pipeline.labels import space_of

    assert space_of([Label.SUPPORTED, Label.NOT_ENOUGH_INFO]) is THREE_WAY
    assert space_of((Label.REFUTED, Label.SUPPORTED)) is BINARY and space_of([]) is BINARY


def test_undecided_is_nei_in_3way_untraced_and_refuted_in_binary_traced():
    from veracity.pipeline.types import Trace

    t = Trace()
    assert THREE_WAY.undecided(t, "why") is Label.NOT_ENOUGH_INFO and t.events == []
    assert BINARY.undecided(t, "why", path="p") is Label.REFUTED
    assert t.events == [{"kind": FORCED_EVENT, "label": "REFUTED", "label_space": "binary",
                         "rule": BINARY_RULE,
                         "reason": "why", "path": "p"}]


# ----------------------------------------------------------------- direct, rag
def test_direct_binary_asks_for_two_labels_and_3way_is_unchanged():
    reply = {"direct.judge": [DirectJudgement(explanation="e", label="SUPPORTED")]}
    verdict, llm = run("direct", dict(reply), space="binary")
    call = llm.calls[0]
    assert label_enum(call.output_model) == ["SUPPORTED", "REFUTED"] and verdict.label is Label.SUPPORTED
    system = call.messages[0]["content"]
    assert "NOT_ENOUGH_INFO" not in system and "REFUTED if it is false or you cannot tell" in system
    verdict, llm = run("direct", dict(reply))
    assert (llm.calls[0].output_model is DirectJudgement
            and llm.calls[0].messages[0]["content"] == DIRECT_SYSTEM)
    assert label_enum(llm.calls[0].output_model) == ["SUPPORTED", "REFUTED", "NOT_ENOUGH_INFO"]


def test_a_binary_schema_rejects_nei():
    with pytest.raises(ValidationError):
        BINARY.narrow(DirectJudgement).model_validate({"explanation": "e", "label": "NOT_ENOUGH_INFO"})


def test_rag_binary_narrows_the_label_and_keeps_the_citation_enum():
    script = {"rag.select": keep_every_passage, "rag.judge": [RagJudgement(explanation="e", label="REFUTED",
                                                                           cited_passages=["Paris#0"])]}
    verdict, llm = run("rag", script, space=BINARY)
    assert [c.role for c in llm.calls] == ["rag.select", "rag.judge"]  # select=auto on an index
    model = llm.calls[-1].output_model
    assert label_enum(model) == ["SUPPORTED", "REFUTED"]
    assert "Paris#0" in json.dumps(model.model_json_schema()["properties"]["cited_passages"])
    assert "NOT_ENOUGH_INFO" not in llm.calls[-1].messages[0]["content"]
    assert verdict.label is Label.REFUTED and [e.passage_id for e in verdict.evidence] == ["Paris#0"]
    _, llm = run("rag", {"rag.select": keep_every_passage, "rag.judge": [RagJudgement(explanation="e",
                                                                                      label="REFUTED",
                                                                                      cited_passages=[])]})
    assert llm.calls[-1].messages[0]["content"] == RAG_SYSTEM
    assert label_enum(llm.calls[-1].output_model) == ["SUPPORTED", "REFUTED", "NOT_ENOUGH_INFO"]


# ----------------------------------------------------------------- MERMAID
def mermaid_script(final):
    search = ReactStep(thought="look", action="search", argument="Paris", label=None, cited_passages=[])
    return {"mermaid.decomposer": [Decomposition(triplets=[], keywords=[], domain="")],
            "mermaid.executor": [search], "mermaid.final": [final]}


def test_mermaid_binary_narrows_the_finish_label_and_the_final_verdict(tmp_path):
    spec = METHODS["mermaid"]
    for space, expected in ((BINARY, ["SUPPORTED", "REFUTED"]), (THREE_WAY, ["SUPPORTED", "REFUTED",
                                                                             "NOT_ENOUGH_INFO"])):
        llm = ScriptedLLM(mermaid_script(FinalVerdict(explanation="e", label="SUPPORTED", cited_passages=[])))
        p = spec.make_params({"t_max": 1, "memory": False})
        state = spec.open_state(tmp_path / space.name, p)
        verdict = asyncio.run(verify_one(CLAIM, spec, llm, FakeSearcher(ARTICLES), p, state,
                                         label_space=space))
        state.close()
        executor, final = llm.of("mermaid.executor")[0], llm.of("mermaid.final")[0]
        assert label_enum(executor.output_model) == expected and label_enum(final.output_model) == expected
        assert ("NOT_ENOUGH_INFO" in executor.messages[0]["content"]) is space.allows_nei
        assert final.messages[0] == executor.messages[0]  # one conversation, one system prompt
        assert verdict.label is Label.SUPPORTED and forced(verdict.trace) == []


def test_mermaid_final_that_never_validates_is_forced_in_binary(tmp_path):
    spec = METHODS["mermaid"]
    labels = {}
    for space in (BINARY, THREE_WAY):
        llm = ScriptedLLM(mermaid_script(never_validates("mermaid.final")))
        p = spec.make_params({"t_max": 1, "memory": False})
        state = spec.open_state(tmp_path / space.name, p)
        verdict = asyncio.run(verify_one(CLAIM, spec, llm, FakeSearcher(ARTICLES), p, state,
                                         label_space=space))
        state.close()
        labels[space.name] = (verdict.label, forced(verdict.trace))
        assert "did not validate" in verdict.explanation
    assert labels["3way"] == (Label.NOT_ENOUGH_INFO, [])
    label, events = labels["binary"]
    assert (label is Label.REFUTED and events[0]["path"] == "mermaid.final"
            and "did not validate" in events[0]["reason"])


# ----------------------------------------------------------------- EMULATE
def test_emulate_classifier_stays_true_false_and_its_failure_is_forced_in_binary():
    from veracity.pipeline.methods.emulate import Classification, QueryList

    def script(classifier):
        return {"emulate.initial_query_gen": [QueryList(queries=[])], "emulate.classifier": [classifier]}

    ok = Classification(explanation="e", label="False")
    for space in (BINARY, THREE_WAY):
        verdict, llm = run("emulate", script(ok), space=space)
        assert (verdict.label is Label.REFUTED
                and label_enum(llm.of("emulate.classifier")[0].output_model) == ["True", "False"])
    verdict, _ = run("emulate", script(never_validates("emulate.classifier")))
    assert verdict.label is Label.NOT_ENOUGH_INFO and forced(verdict.trace) == []
    verdict, _ = run("emulate", script(never_validates("emulate.classifier")), space=BINARY)
    assert verdict.label is Label.REFUTED and "did not validate" in verdict.explanation
    assert [e["path"] for e in forced(verdict.trace)] == ["emulate.classifier"]


# ----------------------------------------------------------------- Trification
def trification_ctx(llm, space, **params):
    from tests.unit.test_trification import make_ctx

    ctx = make_ctx(llm, **params)
    ctx.label_space = space
    return ctx


async def test_trification_no_plan_and_no_judge_are_forced_in_binary():
    from tests.unit.test_trification import N, handlers, plan
    from veracity.pipeline.methods.trification.method import verify_trification

    no_judge_plan = plan(N("s_1", "SEARCH"), N("t_1", "THINK", ["s_1"]))
    for space, expected in ((THREE_WAY, Label.NOT_ENOUGH_INFO), (BINARY, Label.REFUTED)):
        ctx = trification_ctx(ScriptedLLM(handlers(planner=[no_judge_plan]), repeat_last=True), space,
                              max_replans=0, structural_repair=False)
        verdict = await verify_trification(Claim("c", "x"), ctx)
        assert verdict.label is expected and verdict.explanation.startswith("the planner produced no valid")
        assert [e["path"] for e in forced(ctx.trace)] == (["trification.no_plan"] if space is BINARY else [])
    # the only JUDGE errs: no JUDGE finished
    graph = plan(N("s_1", "SEARCH", input="Eiffel Tower"), N("j_1", "JUDGE", ["s_1"], input="x"))
    for space, expected in ((THREE_WAY, Label.NOT_ENOUGH_INFO), (BINARY, Label.REFUTED)):
        script = handlers(planner=[graph])
        script["trification.judge"] = never_validates("trification.judge")
        ctx = trification_ctx(ScriptedLLM(script, repeat_last=True), space)
        verdict = await verify_trification(Claim("c", "x"), ctx)
        assert verdict.label is expected and verdict.explanation.startswith("no JUDGE node finished")
        assert [e["path"] for e in forced(ctx.trace)] == (["trification.no_judge"] if space is BINARY else [])


async def test_trification_judge_keeps_three_labels_and_uncertain_label_must_lie_in_the_space():
    from tests.unit.test_trification import handlers
    from veracity.pipeline.methods.trification import SPEC
    from veracity.pipeline.methods.trification.method import verify_trification

    ctx = trification_ctx(ScriptedLLM(handlers(judge=("Uncertain",)), repeat_last=True), BINARY, static=True)
    verdict = await verify_trification(Claim("c", "Gustave Eiffel's company built the Eiffel Tower."), ctx)
    assert verdict.label is Label.REFUTED  # the paper's rule, the default uncertain_label
    judge = next(c for c in ctx.llm.calls if c.role == "trification.judge")
    assert label_enum(judge.output_model) == ["Supports", "Refutes", "Uncertain"]
    params = SPEC.make_params({"uncertain_label": "NOT_ENOUGH_INFO"})
    SPEC.check_label_space(params, THREE_WAY)
    with pytest.raises(ConfigError, match="not in the binary label space"):
        SPEC.check_label_space(params, BINARY)
    with pytest.raises(ConfigError, match="not in the binary label space"):
        await verify_trification(Claim("c", "x"), trification_ctx(ScriptedLLM({}), BINARY,
                                                                  uncertain_label="NOT_ENOUGH_INFO"))
    from veracity.pipeline.api import Verifier

    with pytest.raises(ConfigError, match="not in the binary label space") as exc:  # before any server
        Verifier(method="trification", index=FakeSearcher(ARTICLES), labels="binary",
                 uncertain_label="NOT_ENOUGH_INFO")
    assert "uncertain_label=REFUTED" in exc.value.hint
    with pytest.raises(ConfigError, match="not in the binary label space"):
        await run_claims([CLAIM], "trification", ScriptedLLM({}), FakeSearcher(ARTICLES),
                         "/nonexistent/x.jsonl",
                         params={"uncertain_label": "NOT_ENOUGH_INFO"}, label_space="binary")


# ----------------------------------------------------------------- ZoFia
def zofia_ctx(llm, space, **params):
    from tests.unit.test_zofia import make_ctx

    ctx, _ = make_ctx(llm, **params)
    ctx.label_space = space
    return ctx


async def test_zofia_undecided_debate_and_failed_direct_judge_are_forced_in_binary():
    from tests.unit.test_zofia import ARTICLE, scripted
    from veracity.pipeline.methods.zofia import verify_zofia

    for space, expected in ((THREE_WAY, Label.NOT_ENOUGH_INFO), (BINARY, Label.REFUTED)):
        ctx = zofia_ctx(ScriptedLLM(scripted(judge=("CONTINUE",)), repeat_last=True), space,
                        max_debate_rounds=2)
        verdict = await verify_zofia(Claim("n", ARTICLE), ctx)
        assert verdict.label is expected and verdict.explanation.startswith("Insufficient: no ruling after 2 "
                                                                            "rounds")
        # the judge keeps R / F / I (real / fake / continue) in every round, as in the paper (B.6)
        assert all(label_enum(c.output_model, "decision") == ["R", "F", "I"]
                   for c in ctx.llm.of("zofia.judge"))
        assert [e["path"] for e in forced(ctx.trace)] == (["zofia.decision"] if space is BINARY else [])
    # the w/o-debate judge whose reply never validates
    ctx = zofia_ctx(ScriptedLLM(scripted(**{"zofia.judge": never_validates("zofia.judge")}),
                                repeat_last=True),
                    BINARY, no_debate=True)
    verdict = await verify_zofia(Claim("n", ARTICLE), ctx)
    assert verdict.label is Label.REFUTED and "did not validate" in forced(ctx.trace)[0]["reason"]
    # a ruling is never touched
    ctx = zofia_ctx(ScriptedLLM(scripted(judge=("REAL",)), repeat_last=True), BINARY)
    assert (await verify_zofia(Claim("n", ARTICLE), ctx)).label is Label.SUPPORTED and forced(ctx.trace) == []


async def test_zofia_nothing_to_check_is_forced_in_binary():
    from tests.unit.test_zofia import entities, scripted
    from veracity.pipeline.methods.zofia import verify_zofia

    for claim in (Claim("n", "something will happen."), Claim("e", "   ")):
        for space, expected in ((THREE_WAY, Label.NOT_ENOUGH_INFO), (BINARY, Label.REFUTED)):
            ctx = zofia_ctx(ScriptedLLM(scripted(ents=entities()), repeat_last=True), space,
                            no_linguist=True, no_expert=True)
            verdict = await verify_zofia(claim, ctx)
            assert verdict.label is expected and "nothing could be checked" in verdict.explanation
            assert [e["path"] for e in forced(ctx.trace)] == (["zofia.nothing_to_check"] if space is BINARY
                                                              else [])


# ----------------------------------------------------------------- the runner, the Verifier, the CLI
def test_runner_records_the_space_refuses_to_mix_and_forces_a_stray_nei(tmp_path):
    out = tmp_path / "r.jsonl"
    llm = ScriptedLLM({"direct.judge": lambda m: DirectJudgement(explanation="e", label="SUPPORTED")})
    asyncio.run(run_claims([CLAIM], "direct", llm, None, out, label_space="binary"))
    manifest = json.loads((tmp_path / "r.jsonl.manifest.json").read_text())
    assert manifest["label_space"] == "binary" and manifest["labels"] == ["SUPPORTED", "REFUTED"]
    assert label_enum(llm.calls[0].output_model) == ["SUPPORTED", "REFUTED"]
    with pytest.raises(ConfigError, match="binary label space; resuming in the 3way space would mix"):
        asyncio.run(run_claims([CLAIM], "direct", llm, None, out))
    asyncio.run(run_claims([CLAIM], "direct", llm, None, tmp_path / "d.jsonl"))
    # the default
    assert json.loads((tmp_path / "d.jsonl.manifest.json").read_text())["label_space"] == "3way"

    # a method path that still returns NOT_ENOUGH_INFO in the binary space: the runner applies the rule
    import dataclasses

    async def nei(claim, ctx):
        return Verdict(Label.NOT_ENOUGH_INFO, "could not decide", [], ctx.trace, "stub")

    stub = dataclasses.replace(METHODS["direct"], name="stub", fn=nei)
    v = asyncio.run(verify_one(CLAIM, stub, llm, None, stub.make_params(), label_space="binary"))
    assert v.label is Label.REFUTED and forced(v.trace)[0]["path"] == "runner"
    assert "could not decide" in forced(v.trace)[0]["reason"]
    v = asyncio.run(verify_one(CLAIM, stub, llm, None, stub.make_params()))
    assert v.label is Label.NOT_ENOUGH_INFO and forced(v.trace) == []


def verify_cli(args, monkeypatch, capsys, llm):
    from veracity.cli._common import run_main
    from veracity.cli.verify import verify

    @contextlib.asynccontextmanager
    async def client(self, concurrency):
        yield llm

    monkeypatch.setattr(Engine, "_client", client)
    monkeypatch.setattr(sys, "argv", ["veracity", "verify", *args])
    code = 0
    try:
        run_main(click.Group("veracity", commands={"verify": verify}))
    except SystemExit as exc:
        code = exc.code or 0
    out = capsys.readouterr()
    return code, out.out, out.err


def test_verify_labels_option(monkeypatch, capsys):
    llm = ScriptedLLM({"direct.judge": lambda m: DirectJudgement(explanation="e", label="REFUTED")})
    code, _, err = verify_cli(["x", "--method", "direct", "--labels", "bad"], monkeypatch, capsys, llm)
    assert code == 2 and err.splitlines()[0] == "error: unknown label space 'bad'" and "Traceback" not in err
    assert llm.calls == []
    code, out, _ = verify_cli(["Paris is in France.", "--method", "direct", "--labels", "binary", "--json"],
                              monkeypatch, capsys, llm)
    assert code == 0 and json.loads(out)["label"] == "REFUTED"
    assert label_enum(llm.calls[-1].output_model) == ["SUPPORTED", "REFUTED"]
    code, out, _ = verify_cli(["Paris is in France.", "--method", "direct", "--json"], monkeypatch, capsys,
                              llm)
    assert code == 0 and llm.calls[-1].output_model is DirectJudgement  # 3way by default


# ----------------------------------------------------------------- bench run
def _bench(tmp_path):
    from tests.fixtures.index import missing, shared_data_dir

    data = shared_data_dir()
    if data is None or not (data / "hover").exists():
        missing("shared data (../shared/data with hover/) not found; set VERACITY_DATA_DIR")
    from veracity.config import Settings

    return Settings(home=tmp_path / "home", data_dir=data)


def direct_llm(label="SUPPORTED"):
    return ScriptedLLM({"direct.judge": lambda m: DirectJudgement(explanation="e", label=label)})


def test_bench_run_takes_the_datasets_label_space(tmp_path):
    from veracity.bench.compare import compare_rows
    from veracity.bench.config import RunConfig
    from veracity.bench.run import bench_run

    settings = _bench(tmp_path)
    llm = direct_llm()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning: the dataset's own space
        metrics = bench_run(RunConfig.of(dataset="hover", method="direct", limit=3), tmp_path / "a",
                            settings=settings,
                            llm=llm)
    assert all(label_enum(c.output_model) == ["SUPPORTED", "REFUTED"] for c in llm.calls)
    run = json.loads((tmp_path / "a" / "run.json").read_text())
    assert run["manifest"]["label_space"] == "binary" and run["dataset"]["label_space"] == "binary"
    assert metrics["label_space"] == {"name": "binary", "labels": ["SUPPORTED", "REFUTED"],
                                      "nei_allowed": False,
                                      "dataset": "binary", "forced_verdicts": 0, "forced_rate": 0.0}
    report = (tmp_path / "a" / "report.md").read_text()
    assert "- label space: binary (SUPPORTED / REFUTED; the dataset's)" in report
    assert "NOT_ENOUGH_INFO rate" not in report and "verdicts forced by the binary rule | 0" in report

    # --labels 3way overrides, with a warning; the report then shows the NEI rate
    seen = []
    llm = direct_llm("NOT_ENOUGH_INFO")
    metrics = bench_run(RunConfig.of(dataset="hover", method="direct", limit=3, labels="3way"),
                        tmp_path / "b",
                        settings=settings, llm=llm, on_warning=seen.append)
    assert seen == ["label space 3way (SUPPORTED / REFUTED / NOT_ENOUGH_INFO) differs from the hover "
                    "dataset's "
                    "binary (SUPPORTED / REFUTED)"]
    assert all(c.output_model is DirectJudgement for c in llm.calls)
    assert metrics["label_space"]["name"] == "3way" and metrics["scores"]["nei_rate"] == 1.0
    report = (tmp_path / "b" / "report.md").read_text()
    assert "| NOT_ENOUGH_INFO rate | 1.000 |" in report and "--labels; the dataset's is binary" in report
    rows = {r["run"]: r for r in compare_rows([tmp_path / "a", tmp_path / "b"])}
    assert (rows["a"]["labels"], rows["a"]["NEI"], rows["a"]["forced"]) == ("binary", "n/a", "0.00")
    assert (rows["b"]["labels"], rows["b"]["NEI"], rows["b"]["forced"]) == ("3way", "1.00", "n/a")

    # a run is resumed in its own space only
    # (the predictions file's resume guard, made once by the batch's checks, before the endpoint)
    with pytest.raises(ConfigError,
                       match="holds results in the 3way label space; resuming in the binary space"):
        bench_run(RunConfig.of(dataset="hover", method="direct", limit=3), tmp_path / "b", settings=settings,
                  llm=llm)
    with pytest.raises(ConfigError, match="unknown label space 'two'"):
        RunConfig.of(dataset="hover", method="direct", labels="two")


def test_bench_run_on_a_jsonl_with_nei_is_3way_and_configs_may_set_labels(tmp_path):
    from veracity.bench.datasets import load_dataset
    from veracity.bench.config import load_config

    f = tmp_path / "c.jsonl"
    f.write_text("".join(json.dumps({"id": str(i), "claim": f"Claim {i}.", "label": lab}) + "\n"
                         for i, lab in enumerate(["SUPPORTED", "REFUTED", "NOT_ENOUGH_INFO"])))
    assert load_dataset(f"jsonl:{f}").label_space is THREE_WAY
    f.write_text("".join(json.dumps({"id": str(i), "claim": f"Claim {i}.", "label": lab}) + "\n"
                         for i, lab in enumerate(["SUPPORTED", "REFUTED"])))
    assert load_dataset(f"jsonl:{f}").label_space is BINARY
    cfg = tmp_path / "c.toml"
    cfg.write_text('dataset = "fever"\nmethod = "rag"\nlabels = "binary"\n')
    assert load_config(cfg).labels == "binary"
    cfg.write_text('dataset = "fever"\nmethod = "rag"\nlabels = "4way"\n')
    with pytest.raises(ConfigError, match="unknown label space '4way'"):
        load_config(cfg)
