"""Batch runner: bad input lines, duplicate ids, atomic appends, resume, endpoint failure; baselines."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading

import pytest

from tests.unit.scripted_llm import FakeSearcher, ScriptedLLM, run_claims
from veracity.errors import ConfigError, DataError, EndpointError, LLMOutputError
from veracity.pipeline.methods import METHODS, get_method
from veracity.pipeline.methods.direct import DirectJudgement
from veracity.pipeline.methods.rag import RagJudgement
from veracity.pipeline.claims import make_claim, read_claims_jsonl
from veracity.pipeline.engine import verify_one
from veracity.pipeline.results import ResultWriter, read_done_ids
from veracity.pipeline.types import MAX_CLAIM_CHARS, Claim, Label, Verdict

ARTICLES = {"Paris": ["Paris is the capital of France."], "Berlin": ["Berlin is the capital of Germany."]}


def judge(label="SUPPORTED"):
    return lambda messages: DirectJudgement(explanation="known fact", label=label)


def claims(n):
    return [Claim(f"c{i}", f"Claim number {i} is true.") for i in range(n)]


def lines(path):
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def test_bad_lines_are_reported_with_file_and_line_and_the_rest_is_read(tmp_path):
    p = tmp_path / "claims.jsonl"
    rows = [
        b'{"id": "a", "claim": "Paris is in France."}',
        b"this is not json",
        b'{"id": "b"}',
        b'{"id": "c", "claim": "   "}',
        b'{"id": "d", "claim": "' + b"x" * (MAX_CLAIM_CHARS + 1) + b'"}',
        b'{"id": "e", "claim": "caf\xe9 au lait"}',
        b"",
        b'["claim"]',
        b'{"claim": "No id here.", "label": "SUPPORTED"}',
        b'{"id": 7, "claim": "Integer ids are fine.", "date": "2020-01-01"}',
    ]
    p.write_bytes(b"\xef\xbb\xbf" + b"\n".join(rows) + b"\n")  # with a byte-order mark
    got = read_claims_jsonl(p)
    assert [c.id for c in got.claims] == ["a", got.claims[1].id, "7"]
    assert got.claims[1].meta == {"label": "SUPPORTED"} and len(got.claims[1].id) == 12
    assert got.claims[2].date == "2020-01-01"
    reasons = {r.line: r.reason for r in got.rejected}
    assert sorted(reasons) == [2, 3, 4, 5, 6, 8]
    assert reasons[2].startswith("not JSON") and reasons[3] == "no `claim` field"
    assert reasons[4] == "empty claim" and "over the limit" in reasons[5]
    assert reasons[6].startswith("not UTF-8 (byte 0xe9") and reasons[8].startswith("not a JSON object")
    assert str(got.rejected[0]) == f"{p}:2: {reasons[2]}"


def test_duplicate_ids_are_an_error_naming_the_lines(tmp_path):
    p = tmp_path / "claims.jsonl"
    p.write_text('{"id": "x", "claim": "one"}\n{"id": "y", "claim": "two"}\n{"id": "x", "claim": "three"}\n')
    with pytest.raises(DataError, match=r"duplicate id 'x' on lines 1, 3"):
        read_claims_jsonl(p)
    with pytest.raises(DataError, match="does not exist"):
        read_claims_jsonl(tmp_path / "missing.jsonl")


def test_single_claim_validation():
    with pytest.raises(DataError, match="empty claim"):
        make_claim("   ")
    with pytest.raises(DataError, match="over the limit"):
        make_claim("y" * (MAX_CLAIM_CHARS + 1))
    assert make_claim("A claim.").id == make_claim("A claim. ").id  # stable default ids


def test_run_writes_one_line_per_claim_with_its_own_trace_and_resumes(tmp_path):
    out = tmp_path / "out" / "results.jsonl"
    llm = ScriptedLLM({"direct.judge": judge()})
    stats = asyncio.run(run_claims(claims(6), "direct", llm, None, out, concurrency=3))
    assert (stats.done, stats.skipped, stats.failed) == (6, 0, [])
    rows = lines(out)
    assert sorted(r["id"] for r in rows) == [f"c{i}" for i in range(6)]
    for r in rows:
        assert {"id", "claim", "label", "explanation", "evidence", "trace", "method"} <= set(r)
        calls = r["trace"]["llm_calls"]
        assert len(calls) == 1 and calls[0]["role"] == "direct.judge" and calls[0]["prompt_tokens"] > 0
        assert r["claim"] == f"Claim number {r['id'][1:]} is true."  # each line holds its own claim
        assert r["trace"]["summary"]["llm_calls"] == 1  # concurrent claims did not share usage records
    assert stats.prompt_tokens > 0 and stats.claims_per_min > 0
    manifest = json.loads((out.parent / "results.jsonl.manifest.json").read_text())
    assert manifest["method"] == "direct" and manifest["params"] == {"roles": {}}
    # the role's budget and its effective temperature (the client's, since the role declares none)
    assert manifest["roles"] == {"direct.judge": {"max_tokens": 256, "temperature": 0.0,
                                                  "temperature_from": "client default"}}
    # resume: nothing to do the second time, nothing duplicated
    llm2 = ScriptedLLM({"direct.judge": judge()})
    again = asyncio.run(run_claims(claims(8), "direct", llm2, None, out, concurrency=3))
    assert (again.skipped, again.done) == (6, 2) and llm2.count("direct.judge") == 2
    assert sorted(r["id"] for r in lines(out)) == [f"c{i}" for i in range(8)]


def test_resume_cuts_a_torn_last_line(tmp_path):
    out = tmp_path / "r.jsonl"
    good = json.dumps({"id": "c0", "label": "SUPPORTED"})
    out.write_text(good + "\n" + '{"id": "c1", "lab')
    assert read_done_ids(out) == {"c0"}
    assert out.read_text() == good + "\n"
    llm = ScriptedLLM({"direct.judge": judge()})
    asyncio.run(run_claims(claims(3), "direct", llm, None, out, concurrency=2))
    assert sorted(r["id"] for r in lines(out)) == ["c0", "c1", "c2"]
    # a complete last object missing only its newline is kept
    out.write_text(good)
    assert read_done_ids(out) == {"c0"} and out.read_text() == good + "\n"
    # corruption in the middle is not guessed at
    out.write_text(good + "\nnot json\n" + good + "\n")
    with pytest.raises(DataError, match=r"r.jsonl:2"):
        read_done_ids(out)


def test_endpoint_failure_stops_the_run_keeps_results_and_a_rerun_completes(tmp_path):
    out = tmp_path / "r.jsonl"
    answered = []

    def die_after_three(role, messages):
        if len(answered) >= 3:
            raise EndpointError("model endpoint http://x/v1 failed 5 times (ConnectError)")
        answered.append(role)

    llm = ScriptedLLM({"direct.judge": judge()}, fail=die_after_three)
    with pytest.raises(EndpointError) as info:
        asyncio.run(run_claims(claims(10), "direct", llm, None, out, concurrency=2))
    stats = info.value.stats
    assert stats.done == 3 and stats.stopped
    written = [r["id"] for r in lines(out)]
    assert len(written) == 3
    llm2 = ScriptedLLM({"direct.judge": judge()})
    again = asyncio.run(run_claims(claims(10), "direct", llm2, None, out, concurrency=4))
    assert again.skipped == 3 and again.done == 7
    ids = [r["id"] for r in lines(out)]
    assert sorted(ids) == sorted(f"c{i}" for i in range(10)) and len(ids) == len(set(ids))


def test_a_prompt_longer_than_the_context_fails_that_claim_only(tmp_path):
    """vLLM's 400 "maximum context length" is one claim's problem (a MERMAID ReAct history outgrew 4,096
    tokens with the 1.5B reference model): the claim is listed as failed, the others are written; before,
    it stopped the whole batch as an endpoint failure with a 'restart the server' hint."""
    from veracity.errors import PromptTooLongError

    out = tmp_path / "r.jsonl"

    def too_long_for_c3(role, messages):
        if "number 3 " in messages[-1]["content"]:
            raise PromptTooLongError("the prompt is longer than the server's context (maximum context length "
                                     "is 4096)")

    llm = ScriptedLLM({"direct.judge": judge()}, fail=too_long_for_c3)
    stats = asyncio.run(run_claims(claims(6), "direct", llm, None, out, concurrency=2))
    assert stats.done == 5 and not stats.stopped
    assert [cid for cid, _ in stats.failed] == ["c3"] and "PromptTooLongError" in stats.failed[0][1]
    assert sorted(r["id"] for r in lines(out)) == ["c0", "c1", "c2", "c4", "c5"]


def test_a_results_file_that_cannot_grow_stops_the_run_and_a_rerun_completes(tmp_path, monkeypatch):
    import errno

    from veracity.errors import OutputError
    from veracity.pipeline import results as runner

    out = tmp_path / "r.jsonl"
    real_append = runner.ResultWriter.append
    appended = []

    def full_after_two(self, record):
        if len(appended) >= 2:  # the disk fills part-way through the third line
            self._f.write(b'{"id": "torn')
            raise OSError(errno.EFBIG, "File too large")
        appended.append(record["id"])
        real_append(self, record)

    monkeypatch.setattr(runner.ResultWriter, "append", full_after_two)
    with pytest.raises(OutputError, match=f"cannot write results to {out}: File too large") as info:
        asyncio.run(run_claims(claims(6), "direct", ScriptedLLM({"direct.judge": judge()}), None, out,
                               concurrency=1))
    assert info.value.stats.done == 2 and info.value.hint
    monkeypatch.setattr(runner.ResultWriter, "append", real_append)
    again = asyncio.run(run_claims(claims(6), "direct", ScriptedLLM({"direct.judge": judge()}), None, out))
    assert again.skipped == 2 and again.done == 4
    ids = [r["id"] for r in lines(out)]  # the torn line was cut, none lost, none doubled
    assert sorted(ids) == sorted(f"c{i}" for i in range(6)) and len(ids) == len(set(ids))


def test_a_claim_whose_method_fails_is_listed_and_not_written(tmp_path):
    """A method that raises for one claim (here: a role without a fallback whose reply never validates)."""
    from veracity.pipeline.methods.base import MethodSpec
    from veracity.pipeline.params import MethodParams

    out = tmp_path / "r.jsonl"

    async def strict(claim, ctx):
        if "number 2 " in claim.text:
            raise LLMOutputError("strict.judge: the reply did not validate against DirectJudgement")
        return Verdict(label=Label.REFUTED, explanation="e", trace=ctx.trace, method="strict")

    spec = MethodSpec("strict", strict, MethodParams, "fails claim 2", needs_index=False)
    stats = asyncio.run(run_claims(claims(4), spec, ScriptedLLM({}), None, out))
    assert stats.done == 3 and [cid for cid, _ in stats.failed] == ["c2"]
    assert "LLMOutputError" in stats.failed[0][1]
    assert "c2" not in {r["id"] for r in lines(out)}


def test_direct_and_rag_fall_back_traced_when_the_judge_never_validates(tmp_path):
    from tests.unit.scripted_llm import FakeSearcher

    bad = {"explanation": "e", "label": "MAYBE"}
    for method, searcher in (("direct", None), ("rag", FakeSearcher({"Alpha": ["number alpha text"]}))):
        out = tmp_path / f"{method}.jsonl"
        stats = asyncio.run(run_claims(claims(2), method, ScriptedLLM({f"{method}.judge": [bad, bad]}),
                                       searcher,
                                       out))
        assert stats.done == 2 and stats.failed == []
        for row in lines(out):
            assert row["label"] == "NOT_ENOUGH_INFO" and "did not validate" in row["explanation"]
            (event,) = [e for e in row["trace"]["events"] if e["kind"] == f"{method}.agent_failed"]
            assert event["role"] == f"{method}.judge" and event["fallback"].startswith("no verdict")


def test_resuming_with_another_method_is_refused(tmp_path):
    out = tmp_path / "r.jsonl"
    asyncio.run(run_claims(claims(1), "direct", ScriptedLLM({"direct.judge": judge()}), None, out))
    with pytest.raises(ConfigError, match="resuming would mix"):
        asyncio.run(run_claims(claims(1), "rag", ScriptedLLM({}), FakeSearcher(ARTICLES), out))


def test_concurrent_appends_never_interleave(tmp_path):
    w = ResultWriter(tmp_path / "r.jsonl")
    big = "z" * 20_000

    def write(t):
        for i in range(25):
            w.append({"id": f"{t}-{i}", "pad": big})

    threads = [threading.Thread(target=write, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    w.close()
    rows = lines(tmp_path / "r.jsonl")
    assert len(rows) == 100 and all(r["pad"] == big for r in rows)


def test_rag_cites_only_passages_it_was_shown():
    llm = ScriptedLLM({"rag.judge": [RagJudgement(explanation="Paris passage", label="SUPPORTED",
                                                   cited_passages=["Paris#0", "Madrid#0", "Paris#0"])]})
    spec = get_method("rag")
    v = asyncio.run(verify_one(Claim("c", "Paris is the capital of France"), spec, llm,
                               FakeSearcher(ARTICLES),
                               spec.make_params({"k": 2, "constrain_citations": False, "select": False})))
    assert v.label is Label.SUPPORTED and [e.passage_id for e in v.evidence] == ["Paris#0"]
    assert v.trace.tool_calls[0].tool == "search" and v.trace.tool_calls[0].hits[0] == "Paris#0"
    prompt = llm.calls[0].messages[-1]["content"]
    # evidence first, claim last
    assert prompt.index("[Paris#0]") < prompt.index("Claim: Paris is the capital")
    # by default the schema enumerates the shown ids, so the server cannot produce an unknown one
    llm2 = ScriptedLLM({"rag.judge": [RagJudgement(explanation="e", label="SUPPORTED",
                                                   cited_passages=["Berlin#0"])]})
    v2 = asyncio.run(verify_one(Claim("c", "Berlin capital Germany"), spec, llm2, FakeSearcher(ARTICLES),
                                spec.make_params({"k": 2, "select": False})))
    enum = llm2.calls[0].output_model.model_json_schema()["properties"]["cited_passages"]["items"]["enum"]
    assert enum == ["Berlin#0", "Paris#0"] and [e.passage_id for e in v2.evidence] == ["Berlin#0"]


def test_methods_registry_and_parameters(tmp_path):
    assert {"direct", "rag", "mermaid", "emulate"} <= set(METHODS)
    assert METHODS["rag"].make_params().k == 5 and METHODS["mermaid"].make_params().t_max == 5
    with pytest.raises(ConfigError, match="no parameter"):
        METHODS["rag"].make_params({"t_max": 3})
    with pytest.raises(ConfigError, match="unknown method"):
        get_method("oracle")
    from veracity.config import Settings
    from veracity.errors import IndexDirError
    from veracity.pipeline.api import Verifier

    with pytest.raises(IndexDirError, match="no index given"):  # a method that needs an index, given none
        Verifier(method="rag", llm=ScriptedLLM({}), settings=Settings(home=tmp_path))


# -- run state: opened once per run, closed by whoever opened it ------------------------------------------
class CountingState:
    """A RunState that records how it was opened, which claims used it, and how often it was closed."""

    opened: list["CountingState"] = []

    def __init__(self, state_dir, index_namespace):
        self.state_dir, self.index_namespace = state_dir, index_namespace
        self.claims: list[str] = []
        self.closed = 0

    @classmethod
    def open(cls, state_dir, params, index_namespace):
        if state_dir is None:  # a state that keeps files refuses to open without a directory
            raise ConfigError("counting state needs a state directory", hint="pass --state-dir DIR")
        state = cls(state_dir, index_namespace)
        cls.opened.append(state)
        return state

    def close(self):
        self.closed += 1


async def _verify_counting(claim, ctx):
    ctx.state.claims.append(claim.id)
    out = await ctx.llm.generate([{"role": "user", "content": claim.text}], DirectJudgement,
                                 role="counting.judge")
    return Verdict(label=Label(out.label), explanation=out.explanation, trace=ctx.trace, method="counting")


def _counting_spec():
    from veracity.pipeline.methods.base import MethodSpec
    from veracity.pipeline.params import MethodParams

    CountingState.opened = []
    return MethodSpec("counting", _verify_counting, MethodParams, "test method with run state",
                      state_cls=CountingState, needs_index=False)


def test_the_runner_opens_one_state_per_run_and_closes_it(tmp_path):
    spec = _counting_spec()
    llm = ScriptedLLM({"counting.judge": judge()})
    out = tmp_path / "r.jsonl"
    stats = asyncio.run(run_claims(claims(5), spec, llm, None, out, concurrency=3,
                                   state_dir=tmp_path / "state"))
    assert stats.done == 5
    (state,) = CountingState.opened  # one state for the whole run, shared by every claim
    assert sorted(state.claims) == [f"c{i}" for i in range(5)] and state.closed == 1
    assert state.state_dir == tmp_path / "state" and state.index_namespace == "default"
    manifest = json.loads((tmp_path / "r.jsonl.manifest.json").read_text())
    assert manifest["state_dir"] == str(tmp_path / "state")
    # a state the caller opened is used as is and left open for the caller to close
    mine = CountingState(tmp_path, "default")
    asyncio.run(run_claims(claims(7), spec, ScriptedLLM({"counting.judge": judge()}), None, out, state=mine))
    assert sorted(mine.claims) == ["c5", "c6"] and mine.closed == 0 and len(CountingState.opened) == 1
    # nothing to do: no state is opened
    asyncio.run(run_claims(claims(7), spec, ScriptedLLM({}), None, out, state_dir=tmp_path / "state"))
    assert len(CountingState.opened) == 1
    with pytest.raises(ConfigError, match="keeps state across claims"):
        asyncio.run(verify_one(claims(1)[0], spec, ScriptedLLM({}), None, spec.make_params()))


def test_the_verifier_opens_its_state_once_and_closes_it(tmp_path, monkeypatch):
    from veracity.config import Settings
    from veracity.pipeline.api import Verifier

    spec = _counting_spec()
    monkeypatch.setitem(METHODS, "counting", spec)
    v = Verifier(method="counting", llm=ScriptedLLM({"counting.judge": judge()}),
                 settings=Settings(home=tmp_path))
    assert CountingState.opened == []  # opened lazily, on first use
    v.verify("One claim.")
    v.verify_many(["Two claims.", "Three claims."])
    (state,) = CountingState.opened
    assert len(state.claims) == 3 and state.state_dir == tmp_path  # default state dir: $VERACITY_HOME
    v.close()
    v.close()
    assert state.closed == 1
    Verifier(method="counting", llm=ScriptedLLM({"counting.judge": judge()}),
             state_dir=tmp_path / "s").verify("x")
    assert CountingState.opened[-1].state_dir == tmp_path / "s"


def test_claims_search_the_indexs_retriever_for_the_runs_mode():
    class Index:  # a searcher: hands out one retriever per mode
        manifest = {"kind": "veracity-index", "passages": 2}

        def __init__(self):
            self.asked, self.fake = [], FakeSearcher(ARTICLES)

        def retriever(self, mode=None):
            self.asked.append(mode)
            return self.fake

    index = Index()
    llm = ScriptedLLM({"rag.judge": lambda m: RagJudgement(explanation="e", label="SUPPORTED",
                                                           cited_passages=[])})
    spec = get_method("rag")
    asyncio.run(verify_one(Claim("c", "Paris capital"), spec, llm, index, spec.make_params({"k": 1}),
                           search_mode="bm25", exclude_titles=["Berlin"]))
    asyncio.run(verify_one(Claim("c", "Paris capital"), spec, llm, index, spec.make_params({"k": 1})))
    assert index.asked == ["bm25", None]  # None: the index picks (hybrid when it has both parts)
    assert index.fake.calls == [("Paris capital", 1, ("Berlin",)), ("Paris capital", 1, ())]
    with pytest.raises(ConfigError, match="needs an index"):  # no index at all: the stand-in says so
        asyncio.run(verify_one(Claim("c", "x"), spec, llm, None, spec.make_params()))


def test_rag_select_judges_only_the_kept_passages_and_falls_back_to_all_traced():
    """select=true: retrieval, a rag.select call whose schema enumerates the shown ids (at least one), then
    the judge on the kept passages only; a selection that never validates leaves every passage (traced)."""
    from veracity.pipeline.methods.rag import RagSelection

    articles = {"Danube": ["The Danube flows into the Black Sea."],
                "Baltic canal": ["A canal connected to the Baltic Sea."],
                "Riga": ["Riga lies on the Baltic Sea."]}
    spec = get_method("rag")
    claim = Claim("c", "The Danube flows into the Baltic Sea")
    judge_reply = RagJudgement(explanation="Black Sea", label="REFUTED", cited_passages=["Danube#0"])
    llm = ScriptedLLM({"rag.select": [RagSelection(relevant_passages=["Danube#0"])],
                       "rag.judge": [judge_reply]})
    v = asyncio.run(verify_one(claim, spec, llm, FakeSearcher(articles), spec.make_params({"k": 3,
                                                                                           "select": True})))
    assert [c.role for c in llm.calls] == ["rag.select", "rag.judge"]
    shown = llm.calls[0].prompt
    assert all(f"[{t}#0]" in shown for t in articles)  # the selector sees every retrieved passage
    items = llm.calls[0].output_model.model_json_schema()["properties"]["relevant_passages"]
    assert sorted(items["items"]["enum"]) == sorted(f"{t}#0" for t in articles)
    assert items["minItems"] == 1 and items["maxItems"] == 3
    judged = llm.calls[1].prompt
    assert "[Danube#0]" in judged and "Baltic canal#0" not in judged and "[Riga#0]" not in judged
    cite = llm.calls[1].output_model.model_json_schema()["properties"]["cited_passages"]["items"]
    assert cite.get("enum", [cite.get("const")]) == ["Danube#0"]  # one id: pydantic writes a const
    (event,) = [e for e in v.trace.events if e["kind"] == "rag.selected"]
    assert event["kept"] == ["Danube#0"] and sorted(event["dropped"]) == ["Baltic canal#0", "Riga#0"]
    assert v.label is Label.REFUTED and [e.passage_id for e in v.evidence] == ["Danube#0"]

    # a selection that never validates: the judge sees all three, and the trace names the fallback
    llm2 = ScriptedLLM({"rag.select": [{"relevant_passages": "not a list"}] * 2, "rag.judge": [judge_reply]})
    v2 = asyncio.run(verify_one(claim, spec, llm2, FakeSearcher(articles),
                                spec.make_params({"k": 3, "select": True})))
    assert all(f"[{t}#0]" in llm2.calls[-1].prompt for t in articles)
    (failed,) = [e for e in v2.trace.events if e["kind"] == "rag.agent_failed"]
    assert failed["role"] == "rag.select" and "every retrieved passage" in failed["fallback"]
    assert v2.label is Label.REFUTED

    # select=false makes one call, the judge, on every passage
    llm3 = ScriptedLLM({"rag.judge": [judge_reply]})
    asyncio.run(verify_one(claim, spec, llm3, FakeSearcher(articles), spec.make_params({"k": 3,
                                                                                        "select": False})))
    assert [c.role for c in llm3.calls] == ["rag.judge"] and "[Riga#0]" in llm3.calls[0].prompt


def test_rag_select_auto_selects_among_index_passages_but_not_among_a_claims_gold_evidence():
    """select=auto: an index's passages (open evidence) go through rag.select; a claim's gold passages go
    straight to the judge. Booleans and the words true / false / auto are accepted; anything else is one
    ConfigError naming the choices."""
    from veracity.pipeline.methods.rag import RagSelection
    from veracity.pipeline.evidence import claim_retrievers

    articles = {"Danube": ["The Danube flows into the Black Sea."], "Riga": ["Riga lies on the Baltic Sea."]}
    spec = get_method("rag")
    judge_reply = RagJudgement(explanation="Black Sea", label="REFUTED", cited_passages=["Danube#0"])
    auto = spec.make_params({"k": 2, "select": "auto"})
    open_llm = ScriptedLLM({"rag.select": [RagSelection(relevant_passages=["Danube#0"])],
                            "rag.judge": [judge_reply]})
    claim = Claim("c", "The Danube flows into the Baltic Sea")
    asyncio.run(verify_one(claim, spec, open_llm, FakeSearcher(articles), auto))
    assert [c.role for c in open_llm.calls] == ["rag.select", "rag.judge"]
    assert "[Riga#0]" not in open_llm.calls[1].prompt

    gold = [{"title": t, "text": texts[0]} for t, texts in articles.items()]
    gold_claim = Claim("g", "The Danube flows into the Baltic Sea", meta={"evidence": gold})
    gold_llm = ScriptedLLM({"rag.judge": [judge_reply]})
    asyncio.run(verify_one(gold_claim, spec, gold_llm, None, auto, retriever_for=claim_retrievers("gold")))
    assert [c.role for c in gold_llm.calls] == ["rag.judge"] and "[Riga#0]" in gold_llm.calls[0].prompt
    # select=true selects among gold passages too (what it did before auto existed)
    forced = ScriptedLLM({"rag.select": [RagSelection(relevant_passages=["Danube#0"])],
                          "rag.judge": [judge_reply]})
    asyncio.run(verify_one(gold_claim, spec, forced, None, spec.make_params({"k": 2, "select": True}),
                           retriever_for=claim_retrievers("gold")))
    assert [c.role for c in forced.calls] == ["rag.select", "rag.judge"]

    assert [spec.make_params({"select": v}).select for v in (True, False, "true", "auto")] == \
        ["true", "false", "true", "auto"]
    assert spec.make_params().select == "auto"  # the default since the seed-3 test of BENCHMARKS.md
    with pytest.raises(ConfigError, match="one of false, true, auto"):
        spec.make_params({"select": "sometimes"})


def test_read_done_ids_edges(tmp_path):
    out = tmp_path / "r.jsonl"
    assert read_done_ids(out) == set() and not out.exists()  # nothing yet: nothing written either
    out.write_text('\n{"id": 7}\n   \n{"id": "c1", "label": "SUPPORTED"}\n')
    assert read_done_ids(out) == {"7", "c1"}  # ids as strings, blank lines skipped
    for bad, n in (('{"id": 1}\n\n{"no_id": 2}\n', 3), ('[1, 2]\n', 1), (b'{"id": "\xff"}\n', 1)):
        out.write_bytes(bad if isinstance(bad, bytes) else bad.encode())
        with pytest.raises(DataError) as err:
            read_done_ids(out)
        assert str(err.value).startswith(f"{out}:{n}: not a result line") and "-o" in err.value.hint
    out.write_bytes(b'{"id": "a"}\n{"id": "b"')  # a torn last line is cut off, byte for byte
    assert read_done_ids(out) == {"a"} and out.read_bytes() == b'{"id": "a"}\n'
    out.write_bytes(b'{"id": "a"}\n[3]')  # a last line that is JSON but no result: torn too
    assert read_done_ids(out) == {"a"} and out.read_bytes() == b'{"id": "a"}\n'


def test_check_output_refuses_what_cannot_be_resumed_before_any_call(tmp_path):
    from veracity.pipeline.labels import BINARY
    from veracity.pipeline.results import check_output

    spec = METHODS["direct"]
    params = spec.make_params()
    with pytest.raises(DataError, match="is a directory"):
        check_output(tmp_path, spec, params)
    (tmp_path / "file").write_text("x")
    with pytest.raises(DataError, match="is a file, not a folder"):
        check_output(tmp_path / "file" / "deeper" / "r.jsonl", spec, params)
    check_output(tmp_path / "new" / "deeper" / "r.jsonl", spec, params)  # folders made later: fine
    assert not (tmp_path / "new").exists()  # writes nothing
    out = tmp_path / "r.jsonl"
    check_output(out, spec, params)
    assert not out.exists()  # the write test leaves nothing behind
    out.write_text('{"id": "a"}\nnot json\n{"id": "b"}\n')
    with pytest.raises(DataError, match=r"r.jsonl:2: not a result line"):
        check_output(out, spec, params)
    out.write_text('{"id": "a"}\n{"id": "b", "lab')  # a torn last line: read_done_ids repairs it later
    check_output(out, spec, params)
    manifest = tmp_path / "r.jsonl.manifest.json"
    same = {"method": "direct", "params": json.loads(json.dumps(dataclasses.asdict(params), default=str))}
    for body in ("{broken", "[]", "{}", json.dumps(same), json.dumps({**same, "label_space": "3way",
                                                                      "evidence": "open"})):
        manifest.write_text(body)
        check_output(out, spec, params)  # unreadable or empty manifests, and the same run's, are no obstacle
    refused = [({**same, "method": "rag"}, "holds results of method rag"),
               ({**same, "params": {"roles": {"x": 1}}}, "with other parameters"),
               ({**same, "label_space": "binary"}, "in the binary label space"),
               ({**same, "evidence": "gold"}, "with --evidence gold")]
    for body, words in refused:
        manifest.write_text(json.dumps(body))
        with pytest.raises(ConfigError, match=words):
            check_output(out, spec, params)
    manifest.write_text(json.dumps(same))  # no label space recorded: 3-way; no evidence recorded: open
    with pytest.raises(ConfigError, match="in the 3way label space; resuming in the binary") as err:
        check_output(out, spec, params, BINARY)
    assert err.value.hint == "pass another -o (bench run: --out), or --labels 3way as before"
    with pytest.raises(ConfigError, match="--evidence open; resuming with --evidence none") as err:
        check_output(out, spec, params, None, "none")
    assert err.value.hint == "pass another -o, or --evidence open as before"


def test_the_results_sink_manifest_stats_and_progress_lines_say_exactly_what_was_done(tmp_path, capsys):
    """results.py's pieces one by one: a failure's one-line reason, the run's rates, the record of the model
    and of the run, the sink that writes each id once (counting tokens, calling back, moving the bar) and
    the plain progress lines written when stderr is not a terminal."""
    from pathlib import Path

    from veracity.errors import OutputError
    from veracity.pipeline.results import (ResultSink, RunManifest, RunStats, ServedModel, _Progress,
                                           claim_failure)
    from veracity.pipeline.roles import SEED_RULE

    # a failure's reason: a VeracityError as it is; anything else on one line, cut at 300 characters
    assert claim_failure(OutputError("disk full", hint="h")) == "OutputError: disk full"
    assert claim_failure(ValueError("a\n  b\tc")) == "ValueError: a b c"
    assert claim_failure(RuntimeError("x" * 400)) == "RuntimeError: " + "x" * 300
    # rates: none before any time has passed
    stats = RunStats(tmp_path / "r.jsonl")
    assert (stats.claims_per_min, stats.tokens_per_s) == (0.0, 0.0)
    stats.done, stats.prompt_tokens, stats.completion_tokens, stats.elapsed_s = 3, 100, 20, 30.0
    assert (stats.claims_per_min, stats.tokens_per_s) == (6.0, 4.0)

    class Client:
        model, base_url, temperature, seed = "m", "http://127.0.0.1:1/v1", 0.5, 7

    served = ServedModel.of(Client())
    assert served == ServedModel("m", "http://127.0.0.1:1/v1", 0.5, 7)
    assert ServedModel.of(object()) == ServedModel()

    class Index:
        manifest = {"kind": "index"}
        index_dir = Path("/idx")

    spec = METHODS["direct"]
    params = spec.make_params()
    record = RunManifest(tmp_path / "r.jsonl", spec, params, Index(), tmp_path / "state", "binary",
                         "gold").record(Client())
    assert {k: record[k] for k in ("method", "params", "label_space", "labels", "evidence", "model",
                                   "endpoint", "temperature", "seed", "seed_rule", "index", "index_dir",
                                   "state_dir")} == {
        "method": "direct", "params": {"roles": {}}, "label_space": "binary",
        "labels": ["SUPPORTED", "REFUTED"], "evidence": "gold", "model": "m",
        "endpoint": "http://127.0.0.1:1/v1", "temperature": 0.5, "seed": 7,
        "seed_rule": SEED_RULE, "index": {"kind": "index"}, "index_dir": "/idx",
        "state_dir": None}  # direct keeps no state, so no state folder is recorded
    assert record["evidence_meaning"].startswith("gold evidence") and "confidence" not in record
    assert record["roles"]["direct.judge"]["temperature"] == 0.5
    bare = RunManifest(tmp_path / "r.jsonl", spec, params, None, None, None, None,
                       lambda model: {"for": model}).record(served)
    assert (bare["label_space"], bare["evidence"], bare["index"], bare["index_dir"]) == ("3way", "open", None,
                                                                                        None)
    assert bare["confidence"] == {"for": "m"} and bare["model"] == "m"
    mine = RunManifest(tmp_path / "r.jsonl", spec, params, None, None, None, "mine").record(served)
    assert mine["evidence_meaning"] == "a per-claim retriever given by the caller"
    mermaid = METHODS["mermaid"]
    assert RunManifest(tmp_path / "r.jsonl", mermaid, mermaid.make_params(), None, tmp_path / "state", None,
                       None).record(served)["state_dir"] == str(tmp_path / "state")

    # the sink: each id once, tokens and elapsed time counted, the callback and the bar called per line
    class Bar:
        started = advanced = 0

        def start(self):
            self.started += 1

        def advance(self):
            self.advanced += 1

    out, bar, seen = tmp_path / "sub" / "r.jsonl", Bar(), []
    stats = RunStats(out)
    sink = ResultSink(out, stats, ["old"], bar=bar, on_result=seen.append,
                      manifest=RunManifest(out, spec, params, None, None, None, None))
    sink.close()  # closing a sink that never opened writes nothing
    assert not out.parent.exists()
    sink.open(served)
    assert bar.started == 1 and sink.opened is True
    assert json.loads((tmp_path / "sub" / "r.jsonl.manifest.json").read_text())["model"] == "m"
    line = {"id": 5, "trace": {"summary": {"prompt_tokens": 11, "completion_tokens": 4}}}
    assert sink.accept(line) is True and sink.accept({"id": "5"}) is False
    assert sink.accept({"id": "old"}) is False
    assert sink.accept({"id": "6"}) is True  # a line without a trace counts no tokens
    assert (stats.done, stats.prompt_tokens, stats.completion_tokens) == (2, 11, 4) and stats.elapsed_s > 0
    assert seen == [line, {"id": "6"}] and bar.advanced == 2
    assert [json.loads(x)["id"] for x in out.read_text().splitlines()] == [5, "6"]
    sink.reject("6", "written already: no failure")
    sink.reject(7, "EndpointError: gone")
    assert stats.failed == [("7", "EndpointError: gone")]
    sink.close()
    # a sink opened by its first result (no open: no manifest, no bar)
    stats = RunStats(tmp_path / "late.jsonl")
    late = ResultSink(tmp_path / "late.jsonl", stats)
    assert late.accept({"id": "x"}) and (tmp_path / "late.jsonl").read_text() == '{"id": "x"}\n'
    assert not (tmp_path / "late.jsonl.manifest.json").exists()
    late.close()

    # stderr is not a terminal here: one plain line at the start and one per claim, no markup read
    stats = RunStats(tmp_path / "r.jsonl")
    progress = _Progress(2, "direct [x]", stats)
    assert progress.lines is True
    progress.start()
    stats.done, stats.prompt_tokens, stats.elapsed_s = 1, 90, 30.0
    progress.advance()
    progress.stop()
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "verify (direct [x]): 2 claims to verify"
    assert err[1].startswith("verify (direct [x]): 1/2 claims  2.0 claims/min  3 tok/s  ")
    assert err[1].endswith(" s")
    assert len(err) == 2 and progress.done == 1


def test_results_refusals_and_records_word_for_word(tmp_path, monkeypatch):
    """What a user reads when a results file cannot be written or resumed, each line and hint as printed;
    what the writer and the manifest put on disk, byte for byte where it matters."""
    import os
    import time
    from pathlib import Path

    from veracity import __version__
    from veracity.errors import OutputError
    from veracity.pipeline.results import ResultSink, RunManifest, RunStats, ServedModel, check_output

    spec = METHODS["direct"]
    params = spec.make_params()

    def refused(kind, *args):
        with pytest.raises(kind) as err:
            check_output(*args)
        return str(err.value), err.value.hint

    assert refused(DataError, tmp_path, spec, params) == (f"output {tmp_path} is a directory",
                                                          "pass a file path, e.g. -o results.jsonl")
    (tmp_path / "f").write_text("x")
    assert refused(DataError, tmp_path / "f" / "r.jsonl", spec, params) == (
        f"cannot write {tmp_path / 'f' / 'r.jsonl'}: {tmp_path / 'f'} is a file, not a folder",
        "pass an output path inside a folder")
    out = tmp_path / "r.jsonl"
    unwritable = (f"cannot write {out}: permission denied or read-only file system",
                  "pass an output path in a folder you can write to")
    # the folder's permission asked for a new file, the file's for an existing one
    asked = []
    monkeypatch.setattr(os, "access", lambda p, mode: asked.append((Path(p), mode)) or False)
    assert refused(DataError, out, spec, params) == unwritable and asked == [(tmp_path, os.W_OK | os.X_OK)]
    out.write_text("")
    asked.clear()
    assert refused(DataError, out, spec, params) == unwritable and asked == [(out, os.W_OK)]
    out.unlink()
    monkeypatch.undo()
    # access() says yes (root), the file system says no: tried for real
    real_touch = Path.touch

    def read_only(self, *a, **kw):
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(Path, "touch", read_only)
    assert refused(DataError, out, spec, params) == unwritable
    # ... and a file that appeared meanwhile is no obstacle
    monkeypatch.setattr(Path, "touch", lambda self, exist_ok=True: (_ for _ in ()).throw(FileExistsError()))
    check_output(out, spec, params)
    monkeypatch.setattr(Path, "touch", real_touch)
    # a results file that is not results: the line, and what to do
    out.write_text('{"id": "a"}\n{"no id": 1}\n')
    assert refused(DataError, out, spec, params) == (f"{out}:2: not a result line, so this file cannot be "
                                                     "resumed", "move the file aside or pass another -o")
    out.write_bytes(b'{"id": "a"}\n\n  \n{"id": "b"}\n')  # blank lines are no results and no obstacle
    check_output(out, spec, params)
    out.write_bytes(b'{"id": "a"}\n\n[1]\n')  # ... nor do they end the reading
    assert refused(DataError, out, spec, params)[0].startswith(f"{out}:3: not a result line")
    with pytest.raises(DataError) as err:
        read_done_ids(out)
    assert str(err.value) == f"{out}:3: not a result line, so this file cannot be resumed"
    assert err.value.hint == "move the file aside or pass another -o"
    out.unlink()
    manifest = tmp_path / "r.jsonl.manifest.json"
    same = {"method": "direct", "params": json.loads(json.dumps(dataclasses.asdict(params), default=str))}
    manifest.write_text(json.dumps({**same, "method": "rag"}))
    assert refused(ConfigError, out, spec, params) == (
        f"{out} holds results of method rag with other parameters; resuming would mix them",
        "pass another -o, or the same --method/--param as before")
    manifest.write_text(json.dumps({**same, "evidence": "gold"}))
    assert refused(ConfigError, out, spec, params, None, "none") == (
        f"{out} holds results with --evidence gold; resuming with --evidence none would mix them",
        "pass another -o, or --evidence gold as before")
    assert refused(ConfigError, out, spec, params)[0].endswith("resuming with --evidence open would mix them")
    manifest.write_text(json.dumps({**same, "label_space": "binary"}))
    assert refused(ConfigError, out, spec, params) == (
        f"{out} holds results in the binary label space; resuming in the 3way space would mix them",
        "pass another -o (bench run: --out), or --labels binary as before")
    # parameters compared as the manifest wrote them (any value as its text), whatever kind of object
    # holds them
    from types import SimpleNamespace

    manifest.write_text(json.dumps({"method": "direct", "params": {"path": "/x", "n": 2}}))
    check_output(out, spec, SimpleNamespace(path=Path("/x"), n=2))
    assert refused(ConfigError, out, spec, SimpleNamespace(path=Path("/y"), n=2))[0].endswith(
        "with other parameters; resuming would mix them")

    @dataclasses.dataclass
    class Inner:
        a: int = 1

    @dataclasses.dataclass
    class Nested:  # a method's parameters holding parameters of their own: compared as fields, all the way
        inner: Inner = dataclasses.field(default_factory=Inner)

    manifest.write_text(json.dumps({"method": "direct", "params": {"inner": {"a": 1}}}))
    check_output(out, spec, Nested())
    manifest.unlink()
    # a results file that appeared between the look and the write test is left alone
    out.write_text('{"id": "theirs"}\n')
    real_exists = Path.exists
    monkeypatch.setattr(Path, "exists", lambda self: False if self == out else real_exists(self))
    check_output(out, spec, params)
    monkeypatch.setattr(Path, "exists", real_exists)
    assert out.read_text() == '{"id": "theirs"}\n'
    out.unlink()

    # the writer: UTF-8 as it is (no \u escapes), anything else as its text, one line each, whatever the
    # file object takes per write
    w = ResultWriter(tmp_path / "deep" / "er" / "w.jsonl")  # its folders made
    real = w._f

    class Trickle:  # takes at most 3 bytes per write, as a pipe or a full disk may
        def write(self, data):
            return real.write(bytes(data[:3]))

        def fileno(self):
            return real.fileno()

        def close(self):
            real.close()

    w._f = Trickle()
    w.append({"id": "é", "path": Path("/x")})
    w.close()
    assert (tmp_path / "deep" / "er" / "w.jsonl").read_bytes() == '{"id": "é", "path": "/x"}\n'.encode()

    # the manifest: beside the results, indented, with when it started and the package's version, the
    # run's own role settings, and any value as its text (an index's manifest may hold paths)
    class Index:
        manifest = {"dir": Path("/idx")}

    tuned = spec.make_params({"judge.max_tokens": 64})
    before = time.time()
    RunManifest(out, spec, tuned, Index(), None, None, None).write(ServedModel("m"))
    text = manifest.read_text()
    record = json.loads(text)
    assert text.startswith('{\n  "method": "direct",\n  "params": {')
    assert before <= record["started_at"] <= time.time() and record["veracity_version"] == __version__
    assert record["roles"]["direct.judge"]["max_tokens"] == 64 and record["index"] == {"dir": "/idx"}
    assert record["params"] == json.loads(json.dumps(dataclasses.asdict(tuned))) and \
        record["params"]["roles"]["judge"]["max_tokens"] == 64
    # the manifest of an engine's run: every part of it taken from the engine
    from types import SimpleNamespace

    engine = SimpleNamespace(spec=spec, params=tuned, searcher=Index(), state_dir=tmp_path / "s",
                             label_space="binary", evidence="gold", confidence_record=lambda model: {})
    m = RunManifest.of(engine, str(out))
    assert (m.out_path, m.spec, m.params, m.searcher, m.state_dir, m.label_space, m.evidence,
            m.confidence_of) == (out, spec, tuned, engine.searcher, tmp_path / "s", "binary", "gold",
                                 engine.confidence_record)
    del engine.confidence_record
    assert RunManifest.of(engine, out).confidence_of is None

    # a sink is not open until its run starts; its elapsed time is the run's
    sink = ResultSink(out, RunStats(out))
    assert sink.opened is False
    assert sink.accept({"id": "t"}) and 0 < sink.stats.elapsed_s < 60
    sink.close()
    # a failed write: the line a user reads, and a close that fails after it is not a second error
    sink = ResultSink(out, RunStats(out))

    def full(record):
        raise OSError(28, "No space left on device")

    sink.writer = ResultWriter(out)
    sink.writer.append = full
    with pytest.raises(OutputError) as err:
        sink.accept({"id": "z"})
    assert str(err.value) == f"cannot write results to {out}: No space left on device"
    assert err.value.hint == "free space or fix the folder, then run the same command again to resume"

    def broken_close():
        raise OSError(5, "I/O error")

    sink.writer.close = broken_close
    sink.close()
    assert sink.stats.done == 0 and "z" not in sink.ids
    sink.writer._f.close()
