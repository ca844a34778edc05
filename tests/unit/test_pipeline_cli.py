"""`veracity verify` and the Verifier API with a scripted model (no server, no real index)."""

from __future__ import annotations

import contextlib
import json
import sys

import click
import pytest
from click.testing import CliRunner

from tests.unit.scripted_llm import FakeSearcher, ScriptedLLM
import veracity.pipeline.engine as engine_module
from veracity.pipeline.engine import Engine
from veracity.cli._common import run_main
from veracity.cli.verify import parse_params, verify
from veracity.errors import ConfigError, IndexDirError
from veracity.pipeline.api import Verifier, open_index
from veracity.pipeline.methods.direct import DirectJudgement
from veracity.pipeline.methods.rag import RagJudgement
from veracity.pipeline.types import Label

ARTICLES = {"Paris": ["Paris is the capital of France."], "Berlin": ["Berlin is the capital of Germany."]}


@pytest.fixture
def scripted(monkeypatch):
    """Every Verifier talks to one scripted model instead of an endpoint."""
    llm = ScriptedLLM({
        "direct.judge": lambda m: DirectJudgement(explanation="It is well known.", label="REFUTED"),
        "rag.judge": lambda m: RagJudgement(explanation="The passage says so.", label="SUPPORTED",
                                            cited_passages=["Paris#0"] if "[Paris#0]" in m[-1]["content"]
                                            else []),
    })

    @contextlib.asynccontextmanager
    async def client(self, concurrency):
        yield llm

    monkeypatch.setattr(Engine, "_client", client)
    return llm


def run_cli(args, monkeypatch, capsys):
    """Run like the installed `veracity` command: library errors become one line + hint."""
    group = click.Group("veracity", commands={"verify": verify})
    monkeypatch.setattr(sys, "argv", ["veracity", "verify", *args])
    code = 0
    try:
        run_main(group)
    except SystemExit as exc:
        code = exc.code or 0
    out = capsys.readouterr()
    return code, out.out, out.err


def test_help_lists_methods_ablations_and_an_example():
    res = CliRunner().invoke(verify, ["--help"])
    assert res.exit_code == 0
    for text in ("direct|rag|mermaid|emulate", "--no-memory", "--no-decomposer", "--no-search-rank",
                 "--no-self-contained-check", "veracity verify -i claims.jsonl -o results.jsonl"):
        assert text in res.output


def test_bad_invocations_are_one_clear_line(monkeypatch, capsys, tmp_path):
    code, _, err = run_cli(["   "], monkeypatch, capsys)
    assert code == 1 and "error: cannot verify this claim: empty claim" in err and "Traceback" not in err
    code, _, err = run_cli(["x", "-i", "f.jsonl"], monkeypatch, capsys)
    assert code == 2 and "either a CLAIM or -i FILE" in err
    code, _, err = run_cli(["-i", "f.jsonl"], monkeypatch, capsys)
    assert code == 2 and "-i needs -o" in err
    code, _, err = run_cli(["x", "--method", "rag", "--index", str(tmp_path / "nope")], monkeypatch, capsys)
    assert code == 1 and "does not exist" in err and "veracity index build demo" in err
    code, _, err = run_cli(["x", "--method", "rag", "--index", str(tmp_path)], monkeypatch, capsys)
    assert code == 1 and "is not a veracity index" in err
    code, _, err = run_cli(["x", "--method", "direct", "--no-memory"], monkeypatch, capsys)
    assert code == 2 and "--no-memory is an ablation of mermaid, not of direct" in err
    code, _, err = run_cli(["x", "--method", "mermaid", "--static"], monkeypatch, capsys)
    assert code == 2 and "--static is an ablation of trification" in err and "no-memory, no-decomposer" in err
    code, _, err = run_cli(["x", "--param", "oops"], monkeypatch, capsys)
    assert code == 2 and "is not key=value" in err


def test_single_claim_json_and_panel(scripted, monkeypatch, capsys):
    code, out, err = run_cli(["Paris is in Spain.", "--method", "direct", "--endpoint", "http://x/v1",
                              "--json"],
                             monkeypatch, capsys)
    assert code == 0, err
    obj = json.loads(out)
    assert obj["label"] == "REFUTED" and obj["claim"] == "Paris is in Spain."
    assert {"id", "explanation", "evidence", "trace"} <= set(obj)
    assert obj["trace"]["llm_calls"][0]["role"] == "direct.judge"
    code, out, err = run_cli(["Paris is in Spain.", "--method", "direct", "--endpoint", "http://x/v1"],
                             monkeypatch, capsys)
    assert code == 0 and "REFUTED" in out and "It is well known." in out


def test_batch_reports_bad_lines_and_resumes(scripted, monkeypatch, capsys, tmp_path):
    src, out = tmp_path / "claims.jsonl", tmp_path / "results.jsonl"
    src.write_text('{"id": "a", "claim": "one"}\n{"claim": ""}\n{"id": "b", "claim": "two"}\n')
    args = ["-i", str(src), "-o", str(out), "--method", "direct", "--endpoint", "http://x/v1",
            "--concurrency", "2"]
    code, stdout, err = run_cli(args, monkeypatch, capsys)
    assert code == 0, err
    assert f"{src}:2: empty claim" in err
    assert "2 written, 0 already done, 0 failed, 1 bad lines" in stdout
    code, stdout, err = run_cli(args + ["--json"], monkeypatch, capsys)  # resume: nothing left to do
    assert code == 0 and stdout == "" and "0 written, 2 already done" in err
    assert sorted(json.loads(x)["id"] for x in out.read_text().splitlines()) == ["a", "b"]
    src.write_text(src.read_text() + '{"id": "c", "claim": "three"}\n')
    code, stdout, err = run_cli(args + ["--json"], monkeypatch, capsys)
    objs = [json.loads(x) for x in stdout.splitlines()]  # one object per new claim, as written
    assert [o["id"] for o in objs] == ["c"] and {"label", "explanation", "evidence", "trace"} <= set(objs[0])


def test_batch_prints_each_verdict_with_its_passages_and_whether_it_agrees_with_the_line(scripted,
                                                                                         monkeypatch,
                                                                                          capsys, tmp_path):
    """A batch shows what it decided, claim by claim: the verdict, the passages it cites, and ✓ / ✗ when the
    claim's line names a label (any of the datasets' spellings); -q leaves only the summary; --json keeps
    stdout to JSON objects and moves the agreement count to stderr."""

    monkeypatch.setattr(engine_module, "open_index", lambda index, settings=None: FakeSearcher(ARTICLES))
    src, out = tmp_path / "claims.jsonl", tmp_path / "results.jsonl"
    src.write_text('{"id": "a", "claim": "Paris is the capital of France.", "label": "SUPPORTED"}\n'
                   '{"id": "b", "claim": "Paris is the capital of Spain.", "label": "REFUTES"}\n'
                   '{"id": "c", "claim": "Madrid."}\n'
                   '{"id": "d", "claim": "Paris is big.", "label": "TRUE-ISH"}\n')
    args = ["-i", str(src), "-o", str(out), "--method", "rag", "--param", "select=false", "--param", "k=1",
            "--endpoint", "http://x/v1", "--concurrency", "1"]
    code, stdout, err = run_cli(args, monkeypatch, capsys)
    assert code == 0, err
    lines = stdout.splitlines()
    assert "a  SUPPORTED  ✓  [Paris#0]  Paris is the capital of France." in lines
    assert "b  SUPPORTED  ✗ (the line says REFUTED)  [Paris#0]  Paris is the capital of Spain." in lines
    assert "c  SUPPORTED  [no passage cited]  Madrid." in lines  # no label on the line: no mark
    assert "d  SUPPORTED  [Paris#0]  Paris is big." in lines  # a label that is none of the three: no mark
    summary = next(i for i,
                   x in enumerate(lines) if x.startswith("4 written, 0 already done, 0 failed, 0 bad lines"))
    assert lines[summary - 1] == "1 of 2 verdicts written this run agree with the label their line names"
    assert "claims/min" in "".join(lines[summary:])  # the summary comes last (a script reads it there)

    out.unlink()
    code, stdout, err = run_cli(args + ["-q"], monkeypatch, capsys)
    assert code == 0, err
    assert "Paris is the capital" not in stdout and "1 of 2 verdicts" in stdout and "4 written" in stdout
    out.unlink()
    code, stdout, err = run_cli(args + ["--json"], monkeypatch, capsys)
    assert code == 0, err
    assert [json.loads(x)["id"] for x in stdout.splitlines()] == ["a", "b", "c", "d"]
    assert "1 of 2 verdicts written this run agree" in err
    code, stdout, err = run_cli(args, monkeypatch, capsys)  # resumed with nothing left: no lines, no count
    assert code == 0 and "agree" not in stdout and stdout.strip().startswith("0 written, 4 already done")


def test_duplicate_ids_in_a_batch_fail_before_any_work(scripted, monkeypatch, capsys, tmp_path):
    src = tmp_path / "claims.jsonl"
    src.write_text('{"id": "a", "claim": "one"}\n{"id": "a", "claim": "two"}\n')
    code, _, err = run_cli(["-i", str(src), "-o", str(tmp_path / "r.jsonl"), "--method", "direct",
                            "--endpoint", "http://x/v1"], monkeypatch, capsys)
    assert code == 1 and "duplicate id 'a' on lines 1, 2" in err
    assert scripted.calls == []


def test_verifier_api_with_a_searcher_object(scripted):
    v = Verifier(method="rag", index=FakeSearcher(ARTICLES), endpoint="http://x/v1", k=1)
    verdict = v.verify("Paris is the capital of France.")
    assert verdict.label is Label.SUPPORTED and [e.passage_id for e in verdict.evidence] == ["Paris#0"]
    stats = v.verify_many(["Paris is the capital of France.", {"id": "z", "claim": "Berlin is in Germany."}])
    assert stats.done == 2 and [r["claim"] for r in stats.results] == ["Paris is the capital of France.",
                                                                        "Berlin is in Germany."]
    assert stats.results[1]["id"] == "z"


def test_default_index_and_parameters(tmp_path, monkeypatch):
    from veracity.config import Settings

    with pytest.raises(IndexDirError, match="no index given") as info:
        open_index(None, Settings(home=tmp_path))
    assert "veracity index build demo" in info.value.hint
    assert parse_params(("t_max=3", "memory_path=/tmp/m.sqlite", "semantic_memory=true")) == {
        "t_max": 3, "memory_path": "/tmp/m.sqlite", "semantic_memory": True}
    with pytest.raises(ConfigError):
        Verifier(method="emulate", index=FakeSearcher(ARTICLES), endpoint="http://x", t_max=3)


@pytest.fixture
def fake_openai(monkeypatch):
    """The real LLMClient over an in-process OpenAI-style transport (no server): replies per schema name."""
    import httpx

    import veracity.serving.client as client_mod

    state = {"down": False, "requests": []}

    def handler(request):
        if state["down"]:
            raise httpx.ConnectError("connection refused", request=request)
        if request.url.path.endswith("/models"):
            return httpx.Response(200, json={"data": [{"id": "tiny"}]})
        body = json.loads(request.content)
        state["requests"].append(body)
        assert body["response_format"]["type"] == "json_schema"
        content = {"explanation": "Known.", "label": "REFUTED"}
        return httpx.Response(200, json={"choices": [{"message": {"content": json.dumps(content)},
                                                      "finish_reason": "stop"}],
                                         "usage": {"prompt_tokens": 40, "completion_tokens": 9}})

    original = client_mod.LLMClient.__init__

    def init(self, *args, **kwargs):
        kwargs["transport"] = httpx.MockTransport(handler)
        kwargs["backoff_s"] = 0.0
        original(self, *args, **kwargs)

    monkeypatch.setattr(client_mod.LLMClient, "__init__", init)
    return state


def test_verifier_through_the_real_client(fake_openai):
    v = Verifier(method="direct", endpoint="http://127.0.0.1:9/v1")
    verdict = v.verify("The Moon is made of cheese.")
    assert verdict.label is Label.REFUTED
    calls = verdict.trace.llm_calls
    assert len(calls) == 1 and calls[0].model == "tiny" and calls[0].prompt_tokens == 40
    assert fake_openai["requests"][0]["model"] == "tiny" and fake_openai["requests"][0]["temperature"] == 0.0


def test_endpoint_down_is_one_line_and_keeps_results(fake_openai, monkeypatch, capsys, tmp_path):
    src, out = tmp_path / "claims.jsonl", tmp_path / "results.jsonl"
    src.write_text('{"id": "a", "claim": "one"}\n{"id": "b", "claim": "two"}\n')
    args = ["-i", str(src), "-o", str(out), "--method", "direct", "--endpoint", "http://127.0.0.1:9/v1"]
    code, _, err = run_cli(args, monkeypatch, capsys)
    assert code == 0 and len(out.read_text().splitlines()) == 2
    before = out.read_bytes()
    fake_openai["down"] = True
    src.write_text(src.read_text() + '{"id": "c", "claim": "three"}\n')
    code, _, err = run_cli(args, monkeypatch, capsys)
    assert code == 1 and "cannot reach the model endpoint" in err and "Traceback" not in err
    assert out.read_bytes() == before  # nothing written is lost


def test_a_single_claim_uses_the_llm_request_limit_not_one_slot(fake_openai, monkeypatch, tmp_path):
    import veracity.serving.client as client_mod
    from veracity.config import Settings

    seen = []
    init = client_mod.LLMClient.__init__

    def spy(self, *args, **kwargs):
        seen.append(kwargs.get("concurrency"))
        init(self, *args, **kwargs)

    monkeypatch.setattr(client_mod.LLMClient, "__init__", spy)
    monkeypatch.delenv("VERACITY_LLM_CONCURRENCY", raising=False)
    assert Settings().llm_concurrency == 256 and Settings().concurrency >= 1  # vLLM's default max_num_seqs
    Verifier(method="direct", endpoint="http://127.0.0.1:9/v1").verify("The Moon is made of cheese.")
    assert seen == [256]
    monkeypatch.setenv("VERACITY_LLM_CONCURRENCY", "96")
    v = Verifier(method="direct", endpoint="http://127.0.0.1:9/v1", concurrency=2)
    v.verify("The Moon is made of cheese.")
    v.verify_many(["One.", "Two."], concurrency=1)  # claims in flight do not change the request limit
    assert seen == [256, 96, 96]
    Verifier(method="direct", endpoint="http://127.0.0.1:9/v1", llm_concurrency=8).verify("x")
    assert seen[-1] == 8


def test_concurrency_below_one_is_one_line_before_any_server(monkeypatch, capsys, tmp_path):
    with pytest.raises(ConfigError, match="claims in flight .* at least 1, got 0"):
        Verifier(method="direct", concurrency=0)
    with pytest.raises(ConfigError, match="LLM requests in flight .* at least 1, got 0"):
        Verifier(method="direct", llm_concurrency=0)
    for flag in ("--concurrency", "--llm-concurrency"):
        # no endpoint given: a managed server would be started if the check came later
        code, _, err = run_cli(["x", "--method", "direct", flag, "0"], monkeypatch, capsys)
        assert code == 2 and f"({flag}," in err and "at least 1" in err and "Traceback" not in err
    monkeypatch.setenv("VERACITY_LLM_CONCURRENCY", "lots")
    code, _, err = run_cli(["x", "--method", "direct"], monkeypatch, capsys)
    assert code == 2 and "$VERACITY_LLM_CONCURRENCY must be an integer" in err


def test_state_dir_option_reaches_the_verifier(scripted, monkeypatch, capsys, tmp_path):
    seen = {}
    real_build = Verifier._build  # what Verifier(**kw) and Verifier.from_config both go through

    def build(self, *args, **kwargs):
        real_build(self, *args, **kwargs)
        seen["state_dir"] = self.state_dir

    monkeypatch.setattr(Verifier, "_build", build)
    code, _, err = run_cli(["x", "--method", "direct", "--endpoint", "http://x/v1", "--state-dir",
                            str(tmp_path / "s"),
                            "--json"], monkeypatch, capsys)
    assert code == 0, err
    assert seen["state_dir"] == tmp_path / "s"
