"""Evidence settings (issue 13 point 3): open (the index), gold (each claim's own gold passages), none
(closed book). The per-claim retrievers, the runner and the Verifier with them, the benchmark readers
that attach gold evidence, and `bench run` / `bench compare` / `verify` recording the setting."""

from __future__ import annotations

import asyncio
import json
import sys

import click
import pytest

from tests.fixtures.index import shared_data_dir
from tests.unit.scripted_llm import FakeSearcher, ScriptedLLM, run_claims
import veracity.pipeline.engine as engine_module
from veracity.errors import ConfigError, DataError
from veracity.indexes import GoldRetriever, Hit, NoEvidenceRetriever, Retriever
from veracity.pipeline.api import Verifier
from veracity.pipeline.methods import get_method
from veracity.pipeline.methods.rag import RagJudgement
from veracity.pipeline.engine import verify_one
from veracity.pipeline.evidence import claim_retrievers, evidence_setting
from veracity.pipeline.tools import Tools
from veracity.pipeline.types import Claim, Trace

DATA = shared_data_dir()
needs_data = pytest.mark.usefixtures("shared_hover_data")  # missing data: fails under CI, skips elsewhere

GOLD = [
    {"title": "Eiffel Tower", "text": "The Eiffel Tower is a wrought-iron lattice tower in Paris, France."},
    {"title": "Gustave Eiffel",
     "text": "Gustave Eiffel was a French civil engineer whose company built the tower."},
    {"title": "Eiffel Tower", "text": "It was the entrance arch to the 1889 World's Fair."},
]


# -- the retrievers --------------------------------------------------------------------------------------
def test_gold_retriever_ranks_only_the_claims_passages_and_opens_them_by_title():
    r = GoldRetriever(GOLD)
    assert isinstance(r, Retriever) and r.name == "gold" and len(r) == 3
    # ids: title#n, n counted per title
    assert [p.passage_id for p in r.passages] == ["Eiffel Tower#0", "Gustave Eiffel#0", "Eiffel Tower#1"]
    hits = r.search("Which engineer built it?", 10)
    assert hits[0].passage_id == "Gustave Eiffel#0" and hits[0].score > 0
    # every gold passage comes back (the query only orders them); ties keep the given order
    assert sorted(h.passage_id for h in hits) == sorted(p.passage_id for p in r.passages)
    assert [h.passage_id for h in hits[1:]] == ["Eiffel Tower#0", "Eiffel Tower#1"]
    assert [h.passage_id for h in r.search("1889 world fair", 1)] == ["Eiffel Tower#1"]
    assert r.search("anything", 0) == []
    assert r.search("Paris", 5) == r.search("Paris", 5)  # deterministic
    # the title filter of every retriever
    assert {h.title for h in r.search("tower", 5, exclude_titles=["Eiffel_Tower"])} == {"Gustave Eiffel"}
    assert {h.title for h in r.search("tower", 5, exclude_patterns=["^Gus"])} == {"Eiffel Tower"}
    # open_page: the claim's passages of that title only (underscores = spaces), nothing else
    assert [h.passage_id for h in r.open_page("Eiffel_Tower")] == ["Eiffel Tower#0", "Eiffel Tower#1"]
    assert r.open_page("Paris") == []


def test_gold_passages_keep_given_ids_and_refuse_bad_ones():
    r = GoldRetriever([Hit("X#4", "X", "text x", 0.3), {"id": "Y#2", "title": "Y", "text": "text y"},
                       {"id": "Y#2", "title": "Y", "text": "duplicate id is dropped"}])
    assert [p.passage_id for p in r.passages] == ["X#4", "Y#2"]
    for bad in ([{"title": "", "text": "t"}], [{"title": "T"}], ["just text"], "a string", {"title": "T"}):
        with pytest.raises(DataError) as err:
            GoldRetriever(bad, where="claim 7")
        assert "claim 7" in str(err.value) and "\n" not in str(err.value) and err.value.hint


def test_no_evidence_returns_nothing_and_the_trace_says_so():
    trace = Trace()
    tools = Tools(NoEvidenceRetriever(), trace)
    assert isinstance(NoEvidenceRetriever(), Retriever)
    assert asyncio.run(tools.search("Eiffel Tower", 5, role="rag.retrieve")) == []
    assert asyncio.run(tools.open_page("Eiffel Tower", role="x")) == []
    assert [(t.tool, t.query, t.hits, t.role) for t in trace.tool_calls] == [
        ("search", "Eiffel Tower", [], "rag.retrieve"), ("open_page", "Eiffel Tower", [], "x")]
    assert [(e["kind"], e["tool"], e["query"]) for e in trace.events] == [
        ("evidence.none", "search", "Eiffel Tower"), ("evidence.none", "open_page", "Eiffel Tower")]
    assert "closed book" in trace.events[0]["note"]
    # an index retriever records no such event
    other = Trace()
    asyncio.run(Tools(FakeSearcher({"A": ["a b"]}), other).search("a", 1))
    assert other.events == [] and len(other.tool_calls) == 1


def test_evidence_setting_names():
    assert evidence_setting(None) == "open" and evidence_setting("GOLD") == "gold"
    assert evidence_setting("closed-book") == "none"
    with pytest.raises(ConfigError, match="unknown evidence setting 'golden'") as err:
        evidence_setting("golden")
    assert "--evidence open" in err.value.hint
    assert claim_retrievers("open") is None


# -- the runner and the Verifier --------------------------------------------------------------------------
def rag_recorder(shown):
    def reply(messages):
        shown.append(messages[-1]["content"])
        return RagJudgement(explanation="x", label="SUPPORTED", cited_passages=["Gustave Eiffel#0"])
    return ScriptedLLM({"rag.judge": reply}, repeat_last=True)


def test_a_claim_searches_its_own_gold_passages_not_the_index():
    spec = get_method("rag")
    index = FakeSearcher({"Berlin": ["Berlin is the capital of Germany; the Eiffel Tower is not there."]})
    shown: list[str] = []
    claim = Claim("c1", "Gustave Eiffel's company built the Eiffel Tower.", meta={"evidence": GOLD})
    v = asyncio.run(verify_one(claim, spec, rag_recorder(shown), index, spec.make_params({"k": 2}),
                               retriever_for=claim_retrievers("gold")))
    assert index.queries == []  # the index is not read
    hits = v.trace.tool_calls[0].hits
    assert len(hits) == 2 and hits[0] == "Gustave Eiffel#0" and hits[1].startswith("Eiffel Tower#")
    assert "[Gustave Eiffel#0]" in shown[0] and "Berlin" not in shown[0]
    assert [e.passage_id for e in v.evidence] == ["Gustave Eiffel#0"]
    with pytest.raises(DataError, match="claim c2 has no gold evidence"):
        asyncio.run(verify_one(Claim("c2", "No evidence here."), spec, rag_recorder([]), None,
                               spec.make_params(),
                               retriever_for=claim_retrievers("gold")))


def test_run_claims_records_the_setting_and_refuses_to_mix_settings(tmp_path):
    spec = get_method("rag")
    out = tmp_path / "out.jsonl"
    claims = [Claim(f"c{i}", f"Claim {i} about the Eiffel Tower.", meta={"evidence": GOLD}) for i in range(3)]
    stats = asyncio.run(run_claims(claims, spec, rag_recorder([]), None, out, concurrency=2,
                                   retriever_for=claim_retrievers("gold"), evidence="gold"))
    assert stats.done == 3
    manifest = json.loads((tmp_path / "out.jsonl.manifest.json").read_text())
    assert manifest["evidence"] == "gold" and "gold" in manifest["evidence_meaning"]
    for line in out.read_text().splitlines():
        hits = [h for t in json.loads(line)["trace"]["tool_calls"] for h in t["hits"]]
        assert hits and set(hits) <= {"Eiffel Tower#0", "Eiffel Tower#1", "Gustave Eiffel#0"}
    with pytest.raises(ConfigError, match="with --evidence gold; resuming with --evidence none"):
        asyncio.run(run_claims(claims, spec, rag_recorder([]), None, out,
                               retriever_for=claim_retrievers("none"), evidence="none"))
    # a claim without gold passages: refused before anything is written
    other = tmp_path / "other.jsonl"
    bad = claims[:2] + [Claim("c9", "Nothing attached.")]
    with pytest.raises(DataError, match="claim c9 has no gold evidence") as err:
        asyncio.run(run_claims(bad, spec, rag_recorder([]), None, other,
                               retriever_for=claim_retrievers("gold"),
                               evidence="gold"))
    assert "\n" not in str(err.value) and not other.exists()


def test_closed_book_verifier_opens_no_index_and_traces_every_search(tmp_path, monkeypatch):

    monkeypatch.setattr(engine_module, "open_index", lambda *a,
                        **k: pytest.fail("the index must not be opened"))
    v = Verifier(method="rag", llm=rag_llm(), evidence="none", state_dir=tmp_path)
    assert v.searcher is None and v.evidence == "none"
    verdict = v.verify("The Eiffel Tower is in Paris.")
    assert verdict.trace.tool_calls[0].hits == [] and verdict.evidence == []
    assert [e["kind"] for e in verdict.trace.events] == ["evidence.none"]
    stats = v.verify_many(["A.", "B."], out=tmp_path / "r.jsonl")
    assert stats.done == 2
    assert json.loads((tmp_path / "r.jsonl.manifest.json").read_text())["evidence"] == "none"
    # gold: a claim must carry its passages, checked before any model is called
    g = Verifier(method="direct", llm=ScriptedLLM({}), evidence="gold", state_dir=tmp_path)
    with pytest.raises(DataError, match="has no gold evidence"):
        g.verify("The Eiffel Tower is in Paris.")
    # a claims file whose lines carry their evidence
    path = tmp_path / "claims.jsonl"
    path.write_text(json.dumps({"id": "e1", "claim": "Gustave Eiffel built it.", "evidence": GOLD}) + "\n")
    shown: list[str] = []
    stats = Verifier(method="rag", llm=rag_recorder(shown), evidence="gold",
                     state_dir=tmp_path).verify_many(path)
    hits = stats.results[0]["trace"]["tool_calls"][0]["hits"]
    assert stats.done == 1 and set(hits) == {"Eiffel Tower#0", "Eiffel Tower#1", "Gustave Eiffel#0"}
    with pytest.raises(ConfigError, match="unknown evidence setting"):
        Verifier(method="direct", evidence="web")


def test_a_method_that_needs_an_index_runs_without_one_under_a_per_claim_setting(tmp_path):
    spec = get_method("rag")
    assert spec.needs_index
    llm = ScriptedLLM({"rag.judge": lambda m: RagJudgement(explanation="x", label="REFUTED",
                                                           cited_passages=[])},
                      repeat_last=True)
    stats = asyncio.run(run_claims([Claim("a", "A claim.")], spec, llm, None, tmp_path / "o.jsonl",
                                   retriever_for=claim_retrievers("none"), evidence="none"))
    assert stats.done == 1
    from veracity.config import Settings
    from veracity.errors import IndexDirError

    with pytest.raises(IndexDirError, match="no index given"):  # open book: the index is needed
        Verifier(method="rag", llm=llm, settings=Settings(home=tmp_path))


# -- the datasets -----------------------------------------------------------------------------------------
@needs_data
def test_hover_gold_is_the_supporting_fact_paragraphs_and_incomplete_claims_are_dropped():
    from veracity.bench.datasets import load_dataset

    corpus = {}
    for line in (DATA / "wiki_corpus_hover_gold"
                 / "hover_dev_gold_paragraphs.jsonl").read_text().splitlines():
        row = json.loads(line)
        corpus[row["title"]] = row["text"]
    ds = load_dataset("hover", DATA, evidence="gold", limit=40, seed=5)
    assert ds.evidence == "gold" and len(ds) == 40
    for claim, _ in ds.claims:
        titles = claim.meta["gold_titles"]
        assert [p["title"] for p in claim.meta["evidence"]] == titles
        assert [p["text"] for p in claim.meta["evidence"]] == [corpus[t] for t in titles]
        assert [p["id"] for p in claim.meta["evidence"]] == [f"{t}#0" for t in titles]
    gold = ds.manifest()["gold"]
    assert gold["claims_read"] == gold["claims_with_gold"] + gold["dropped_without_complete_gold"]
    assert gold["dropped_without_complete_gold"] > 0 and ds.total == gold["claims_with_gold"]
    assert all(len(sha) == 64 for sha in gold["file_sha256"].values())
    # the open setting attaches nothing and keeps every claim
    open_ds = load_dataset("hover", DATA, limit=40, seed=5)
    assert "evidence" not in open_ds.claims[0][0].meta and open_ds.total == gold["claims_read"]


@needs_data
def test_feverous_gold_is_the_claims_gold_sentences():
    from veracity.bench.datasets import load_dataset

    ds = load_dataset("feverous-s", DATA, evidence="gold", limit=10, seed=0)
    for claim, _ in ds.claims:
        sentences = claim.meta["gold_sentences"]
        assert [(p["title"], p["text"]) for p in claim.meta["evidence"]] == [(s["title"], s["sentence"])
                                                                              for s in sentences]
    assert ds.gold["dropped_without_complete_gold"] == 0


@needs_data
@pytest.mark.parametrize("name, variant", [("fever", None), ("factool-kbqa", None), ("hover", "train"),
                                           ("liar", None)])
def test_a_dataset_without_gold_evidence_refuses_in_one_line(name, variant, tmp_path):
    from veracity.bench.datasets import load_dataset

    with pytest.raises(ConfigError) as err:
        load_dataset(name, tmp_path / "no-such-dir", variant=variant, evidence="gold")  # before any file
    assert "has no gold evidence for --evidence gold" in str(err.value) and "\n" not in str(err.value)
    assert "--evidence none" in err.value.hint and "feverous-s" in err.value.hint


def test_a_claims_file_carries_its_gold_evidence(tmp_path):
    from veracity.bench.datasets import load_dataset

    p = tmp_path / "claims.jsonl"
    p.write_text(json.dumps({"id": "1", "claim": "A is B.", "label": "SUPPORTED",
                             "evidence": [{"title": "A", "text": "A is B."}]}) + "\n"
                 + json.dumps({"id": "2", "claim": "C is D.", "label": "REFUTED",
                               "evidence": [{"title": "C", "text": "C is E."}]}) + "\n")
    ds = load_dataset(f"jsonl:{p}", evidence="gold")
    assert [c.meta["evidence"][0]["id"] for c, _ in ds.claims] == ["A#0", "C#0"]
    p.write_text(p.read_text() + json.dumps({"id": "3", "claim": "E.", "label": "REFUTED"}) + "\n")
    with pytest.raises(DataError, match=r"claims.jsonl:3: no `evidence` list"):
        load_dataset(f"jsonl:{p}", evidence="gold")


# -- bench run / compare / CLIs ------------------------------------------------------------------------------
def rag_llm(shown=None):
    def reply(messages):
        if shown is not None:
            shown.append(messages[-1]["content"])
        return RagJudgement(explanation="x", label="SUPPORTED", cited_passages=[])
    return ScriptedLLM({"rag.judge": reply}, repeat_last=True)


@needs_data
def test_bench_run_with_gold_evidence_uses_only_gold_passages_and_records_the_setting(tmp_path, monkeypatch):
    from veracity.bench.datasets import load_dataset
    from veracity.bench.compare import compare_rows
    from veracity.bench.config import RunConfig
    from veracity.bench.run import bench_run
    from veracity.bench.scoring import read_predictions
    from veracity.config import Settings

    monkeypatch.setattr(engine_module, "open_index", lambda *a,
                        **k: pytest.fail("no index is read with --evidence gold"))
    settings = Settings(home=tmp_path / "home", data_dir=DATA)
    cfg = RunConfig.of(dataset="hover", method="rag", limit=5, seed=2, evidence="gold", concurrency=2)
    out = tmp_path / "gold"
    shown: list[str] = []
    metrics = bench_run(cfg, out, settings=settings, llm=rag_llm(shown))
    assert metrics["n_predicted"] == 5 and metrics["run"]["evidence"] == "gold"
    gold = {c.id: {p["id"] for p in c.meta["evidence"]}
            for c, _ in load_dataset("hover", DATA, limit=5, seed=2, evidence="gold").claims}
    preds = read_predictions(out)
    assert {p["id"] for p in preds} == set(gold)
    for p in preds:
        hits = [h for t in p["trace"]["tool_calls"] for h in t["hits"]]
        assert set(hits) == gold[p["id"]]  # exactly the claim's gold paragraphs (k=5 >= its 2-4 titles)
    run = json.loads((out / "run.json").read_text())
    assert run["manifest"]["evidence"] == "gold" and run["config"]["evidence"] == "gold"
    assert run["identity"]["evidence"] == "gold" and run["manifest"]["index_dir"] is None
    assert run["dataset"]["gold"]["dropped_without_complete_gold"] > 0
    assert "--evidence gold" in run["leakage"]["reason"]
    assert json.loads((out / "predictions.jsonl.manifest.json").read_text())["evidence"] == "gold"
    report = (out / "report.md").read_text()
    assert "- evidence: gold (" in report and "left out of the selection" in report
    # a closed-book run beside it; compare shows the setting as a column
    none = tmp_path / "none"
    bench_run(RunConfig.of(dataset="hover", method="rag", limit=5, seed=2, evidence="none"), none,
              settings=settings,
              llm=rag_llm())
    traces = [p["trace"] for p in read_predictions(none)]
    assert all(t["tool_calls"][0]["hits"] == [] and t["events"][0]["kind"] == "evidence.none" for t in traces)
    rows = compare_rows([out, none])
    assert [r["evidence"] for r in rows] == ["gold", "none"]
    # resuming with another setting is refused
    with pytest.raises(ConfigError, match="holds a run with other settings"):
        bench_run(RunConfig.of(dataset="hover", method="rag", limit=5, seed=2), out, settings=settings,
                  llm=rag_llm())


@needs_data
def test_bench_run_open_identity_is_unchanged_and_a_dataset_without_gold_refuses(tmp_path):
    from veracity.bench.config import RunConfig
    from veracity.bench.run import bench_run
    from veracity.config import Settings

    cfg = RunConfig.of(dataset="hover", method="direct", limit=2)
    assert cfg.evidence == "open" and "evidence" not in cfg.identity()  # old run directories still resume
    with pytest.raises(ConfigError, match="unknown evidence setting"):
        RunConfig.of(dataset="hover", method="direct", evidence="oracle")
    llm = ScriptedLLM({}, fail=lambda role, messages: pytest.fail("no model call for a refused run"))
    with pytest.raises(ConfigError, match="fever .paper_dev. has no gold evidence"):
        bench_run(RunConfig.of(dataset="fever", method="rag", evidence="gold"), tmp_path / "x",
                  settings=Settings(home=tmp_path / "home", data_dir=DATA), llm=llm)
    assert not (tmp_path / "x").exists()


def run_cli(group, args, monkeypatch, capsys):
    from veracity.cli._common import run_main

    monkeypatch.setattr(sys, "argv", ["veracity", *args])
    try:
        run_main(click.Group("veracity", commands={group.name: group}))
        code = 0
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


@needs_data
def test_cli_refusals_are_one_line_before_any_server(monkeypatch, capsys, tmp_path):
    from veracity.cli.bench import bench
    from veracity.cli.verify import verify

    monkeypatch.setenv("VERACITY_DATA_DIR", str(DATA))
    monkeypatch.setenv("VERACITY_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("VERACITY_ENDPOINT", "http://127.0.0.1:9/v1")  # refused at once if ever contacted
    code, _, err = run_cli(bench, ["bench", "run", "--dataset", "fever", "--method", "rag", "--evidence",
                                   "gold",
                                   "--out", str(tmp_path / "r")], monkeypatch, capsys)
    lines = [x for x in err.splitlines() if x.strip() and not x.startswith("run directory")]
    assert (code != 0 and "has no gold evidence" in lines[0] and lines[1].startswith("hint:")
            and len(lines) == 2)
    assert not (tmp_path / "r").exists()
    code, _, err = run_cli(bench, ["bench", "run", "--dataset", "hover", "--method", "rag", "--evidence",
                                   "web",
                                   "--out", str(tmp_path / "r")], monkeypatch, capsys)
    assert code != 0 and "unknown evidence setting 'web'" in err and "Traceback" not in err
    code, _, err = run_cli(verify, ["verify", "The Eiffel Tower is in Paris.", "--evidence", "gold"],
                           monkeypatch,
                           capsys)
    assert code != 0 and "a single CLAIM has none" in err and "hint:" in err and "Traceback" not in err
    claims = tmp_path / "c.jsonl"
    claims.write_text('{"id": "1", "claim": "A is B."}\n')
    code, _, err = run_cli(verify, ["verify", "-i", str(claims), "-o", str(tmp_path / "o.jsonl"), "--method",
                                    "rag",
                                    "--evidence", "gold"], monkeypatch, capsys)
    assert code != 0 and "claim 1 has no gold evidence" in err and "Traceback" not in err
    assert not (tmp_path / "o.jsonl").exists()
