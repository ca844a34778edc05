"""The Ray backend without a cluster: its options and one-line errors, the missing extra, the actor run
in-process on the scripted model, and the driver's keyed writer (resume, no duplicate, stops).

The pipeline itself (Ray Data, a real Ray instance, the real server and index) is tested in
tests/integration/test_ray_backend.py; here a batch on the Ray backend gets ``rows=``, which runs the same
:class:`ClaimActor` in this process and yields its rows as Ray would stream them back.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys

import click
import pytest

from tests.fixtures.server import missing
from tests.unit.scripted_llm import FakeSearcher, ScriptedLLM
from veracity.pipeline.engine import Engine
from veracity.cli._common import run_main
from veracity.cli.verify import verify
from veracity.errors import ClusterError, ConfigError, EndpointError, OutputError
from veracity.pipeline.api import Verifier
from veracity.pipeline.methods.rag import RagJudgement
from veracity.pipeline.backends.ray import (ClaimActor, RayOptions, actor_cpus, actor_recipe, claim_of,
                                            claim_payload,
                                            collect, connect)
from veracity.pipeline.config import VerifierConfig
from veracity.pipeline.results import ResultSink, ResultWriter
from veracity.pipeline.results import RunStats, read_done_ids
from veracity.pipeline.types import Claim

ARTICLES = {"Paris": ["Paris is the capital of France."], "Berlin": ["Berlin is the capital of Germany."]}


def rag_llm(**kw) -> ScriptedLLM:
    return ScriptedLLM({"rag.judge": lambda m: RagJudgement(
        explanation="The passage says so.", label="SUPPORTED" if "[Paris#0]" in m[-1]["content"]
                                                            else "REFUTED",
        cited_passages=["Paris#0"] if "[Paris#0]" in m[-1]["content"] else [])}, **kw)


def need_ray() -> None:
    """Tests of the Ray backend's own code need the extra installed (CI installs it; else they skip)."""
    try:
        import ray.data  # noqa: F401
    except ImportError:
        missing("Ray is not installed (pip install 'veracity[ray]')")


def ray_verifier(llm, tmp_path, **kw) -> Verifier:
    need_ray()
    return Verifier(method="rag", index=FakeSearcher(ARTICLES), llm=llm, state_dir=tmp_path, k=1,
                    backend="ray", **kw)


def in_process_rows(claims, recipe, options, concurrency):
    """What Ray streams back, produced here: one ClaimActor, every claim a batch of one."""
    actor = ClaimActor(recipe)

    async def run():
        out = []
        for c in claims:
            batch = await actor({"id": [c.id], "claim": [claim_payload(c)]})
            out.append({k: batch[k][0] for k in batch})
        await actor.aclose()
        return out

    yield from asyncio.run(run())


def lines(path):
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- options ----------------------------------------------------------------------------------------------
def ray_options(backend, address=None, actors=None):
    """(backend, Ray options) as the run's config checks and normalises them (the one place)."""
    c = VerifierConfig.of(method="direct", backend=backend, ray_address=address, ray_actors=actors)
    ex = c.execution
    return ex.backend, (None if ex.backend == "local" else RayOptions(address=ex.ray_address,
                                                                      actors=ex.ray_actors))


def verify_many_ray(v, claims, out=None, concurrency=None, progress=False, on_result=None, rows=None):
    """``v``'s batch on the Ray backend with ``rows`` in place of the Ray pipeline."""
    return v.run_batch(claims, out=out, concurrency=concurrency, progress=progress, on_result=on_result,
                       backend_options={"rows": rows})


def test_local_is_the_default_and_ray_options_need_the_ray_backend():
    assert ray_options(None) == ("local", None) and ray_options("LOCAL") == ("local", None)
    with pytest.raises(ConfigError, match="unknown backend 'spark'") as info:
        ray_options("spark")
    assert "--backend local" in info.value.hint
    with pytest.raises(ConfigError, match="--ray-address applies to --backend ray only"):
        ray_options("local", address="auto")
    with pytest.raises(ConfigError, match="--ray-address and --ray-actors apply to --backend ray only"):
        ray_options("local", address="auto", actors=2)


@pytest.mark.parametrize("actors", [0, -1, True, 1.5])
def test_actor_count_must_be_a_positive_integer(actors):
    with pytest.raises(ConfigError, match="--ray-actors must be an integer of at least 1"):
        ray_options("ray", actors=actors)


@pytest.mark.parametrize("address,why", [("foo:bar", "port 'bar'"), ("10.0.0.5:0", "port '0'"),
                                         ("localhost", "no host name"), ("a b:6379", "not HOST:PORT"),
                                         ("http://h:1/x", "not HOST:PORT")])
def test_a_malformed_address_is_one_line(address, why):
    with pytest.raises(ConfigError, match="is not a Ray address") as info:
        ray_options("ray", address=address)
    assert why in str(info.value) and "HOST:PORT" in info.value.hint and "\n" not in str(info.value)


def test_valid_options():
    need_ray()
    assert ray_options("ray") == ("ray", RayOptions(address=None, actors=2))
    assert ray_options("ray", " auto ", 3)[1] == RayOptions(address="auto", actors=3)
    assert ray_options("ray", "10.0.0.5:6379")[1].address == "10.0.0.5:6379"
    assert ray_options("ray", "ray://head")[1].address == "ray://head"
    assert ray_options("ray", "")[1].address is None


def test_actor_cpus_fit_the_cluster():
    assert actor_cpus(16, 4) == 1.0 and actor_cpus(2, 4) == 0.5 and actor_cpus(2, 2) == 1.0
    with pytest.raises(ClusterError, match="no CPUs"):
        actor_cpus(0, 2)


# -- without the extra -------------------------------------------------------------------------------
def run_cli(args, monkeypatch, capsys):
    group = click.Group("veracity", commands={"verify": verify})
    monkeypatch.setattr(sys, "argv", ["veracity", "verify", *args])
    code = 0
    try:
        run_main(group)
    except SystemExit as exc:
        code = exc.code or 0
    out = capsys.readouterr()
    return code, out.out, out.err


def test_without_the_extra_backend_ray_is_one_line_naming_it(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError, as when not installed
    src, out = tmp_path / "claims.jsonl", tmp_path / "results.jsonl"
    src.write_text('{"id": "a", "claim": "one"}\n')
    code, _, err = run_cli(["-i", str(src), "-o", str(out), "--method", "direct", "--endpoint", "http://x/v1",
                            "--backend", "ray"], monkeypatch, capsys)
    assert code == 2 and "Traceback" not in err
    first, hint = err.strip().splitlines()
    assert first.startswith("error: --backend ray needs the optional extra veracity[ray]")
    assert hint.startswith("hint: pip install 'veracity[ray]'") and not out.exists()
    with pytest.raises(ConfigError, match=r"veracity\[ray\]"):
        Verifier(method="direct", llm=rag_llm(), backend="ray")


def test_the_local_backend_needs_no_ray(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "ray", None)
    v = Verifier(method="rag", index=FakeSearcher(ARTICLES), llm=rag_llm(), state_dir=tmp_path, k=1)
    stats = v.verify_many(["Paris is the capital of France."], out=tmp_path / "r.jsonl")
    assert v.backend == "local" and stats.done == 1 and lines(tmp_path / "r.jsonl")[0]["label"] == "SUPPORTED"
    code = ("import sys, veracity.cli, veracity.pipeline.api, veracity.bench.run, "
            "veracity.pipeline.backends.ray;"
            "sys.exit('ray' in sys.modules)")
    # importing veracity never imports ray
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_a_single_claim_is_not_sent_to_ray(monkeypatch, capsys):
    code, _, err = run_cli(["Paris is in France.", "--backend", "ray"], monkeypatch, capsys)
    assert code == 2 and "--backend ray runs a claims file" in err


# -- the actor ---------------------------------------------------------------------------------------------
def test_the_actor_runs_the_unchanged_method_and_reports_failures_per_claim(tmp_path):
    def judge(m):
        if "Atlantis" in m[-1]["content"]:
            raise RuntimeError("a bug in   one claim")
        if "Mars" in m[-1]["content"]:
            raise EndpointError("cannot reach the model endpoint http://x/v1 (ConnectError)",
                                hint="restart it")
        return RagJudgement(explanation="ok", label="SUPPORTED", cited_passages=[])

    llm = ScriptedLLM({"rag.judge": judge})
    v = ray_verifier(llm, tmp_path)
    actor = ClaimActor(actor_recipe(v, None, None))
    claims = [Claim("p", "Paris is the capital of France.", meta={"topic": "geo"}), Claim("a",
                                                                                          "Atlantis sank."),
              Claim("m", "Mars is red.")]
    batch = asyncio.run(actor({"id": [c.id for c in claims], "claim": [claim_payload(c) for c in claims]}))
    assert batch["id"] == ["p", "a", "m"] and batch["kind"] == ["ok", "failed", "endpoint"]
    record = json.loads(batch["record"][0])
    assert record["id"] == "p" and record["label"] == "SUPPORTED" and record["method"] == "rag"
    assert (record["trace"]["summary"]["llm_calls"] == 1
            and record["trace"]["tool_calls"][0]["tool"] == "search")
    assert batch["error"][1] == "RuntimeError: a bug in one claim" and batch["record"][1] == ""
    assert "cannot reach the model endpoint" in batch["error"][2] and batch["hint"][2] == "restart it"
    assert claim_of(claim_payload(claims[0])) == claims[0]
    assert actor.engine.searcher is v.searcher or actor.engine.searcher.articles == ARTICLES


# -- the driver ---------------------------------------------------------------------------------------------
def test_the_sink_writes_each_id_once(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text('{"id": "old", "label": "REFUTED"}\n')
    w = ResultSink(path, RunStats(out_path=path), read_done_ids(path))
    assert w.accept({"id": "new", "label": "SUPPORTED"}) is True
    assert w.accept({"id": "new", "label": "REFUTED"}) is False  # a retried task's second result
    assert w.accept({"id": "old", "label": "SUPPORTED"}) is False  # already in the file before this run
    w.close()
    assert [(r["id"], r["label"]) for r in lines(path)] == [("old", "REFUTED"), ("new", "SUPPORTED")]


def ok_row(cid, label="SUPPORTED", tokens=(10, 2)):
    record = {"id": cid, "label": label, "trace": {"summary": {"prompt_tokens": tokens[0],
                                                               "completion_tokens": tokens[1]}}}
    return {"id": cid, "kind": "ok", "record": json.dumps(record), "error": "", "hint": ""}


def test_collect_writes_as_rows_come_and_stops_at_an_endpoint_error(tmp_path):
    path = tmp_path / "r.jsonl"
    stats = RunStats(out_path=path)
    seen = []
    w = ResultSink(path, stats, on_result=seen.append)
    rows = [ok_row("a"), ok_row("a", "REFUTED"), {"id": "b", "kind": "failed", "record": "", "error": "X: y",
                                                  "hint": ""},
            {"id": "a", "kind": "failed", "record": "", "error": "late retry", "hint": ""},
            {"id": "c", "kind": "endpoint", "record": "", "error": "endpoint gone", "hint": "restart"},
            ok_row("d")]
    stop = collect(iter(rows), w)
    w.close()
    assert isinstance(stop, EndpointError) and str(stop) == "endpoint gone" and stop.hint == "restart"
    assert [r["id"] for r in lines(path)] == ["a"] and lines(path)[0]["label"] == "SUPPORTED"
    assert stats.done == 1 and stats.failed == [("b", "X: y")] and [r["id"] for r in seen] == ["a"]
    assert (stats.prompt_tokens, stats.completion_tokens) == (10, 2)


def test_collect_stops_when_results_cannot_be_written(tmp_path):
    class FullDisk(ResultWriter):
        def append(self, record):
            raise OSError(28, "No space left on device")

    w = ResultSink(tmp_path / "r.jsonl", RunStats(out_path=tmp_path / "r.jsonl"))
    w.writer = FullDisk(tmp_path / "r2.jsonl")
    stop = collect([ok_row("a")], w)
    w.close()
    assert isinstance(stop, OutputError) and "No space left on device" in str(stop)


def test_driver_writes_manifest_and_results_resumes_and_drops_duplicates(tmp_path):
    src, out = tmp_path / "claims.jsonl", tmp_path / "results.jsonl"
    src.write_text('{"id": "p", "claim": "Paris is the capital of France."}\n{"claim": ""}\n'
                   '{"id": "b", "claim": "Berlin is the capital of Spain."}\n')
    calls = []

    def twice(claims, recipe, options, concurrency):  # every row comes back twice (Ray re-ran each task)
        calls.append((sorted(c.id for c in claims), options, concurrency))
        for row in in_process_rows(claims, recipe, options, concurrency):
            yield row
            yield row

    v = ray_verifier(rag_llm(), tmp_path, ray_actors=3)
    seen = []
    stats = verify_many_ray(v, str(src), out=out, concurrency=2, on_result=seen.append, rows=twice)
    assert calls == [(["b", "p"], RayOptions(actors=3), 2)]
    got = {r["id"]: r for r in lines(out)}
    assert sorted(got) == ["b", "p"] and len(lines(out)) == 2 and len(seen) == 2
    assert got["p"]["label"] == "SUPPORTED" and got["b"]["label"] == "REFUTED"
    assert stats.done == 2 and stats.skipped == 0 and len(stats.rejected) == 1 and stats.total == 2
    manifest = json.loads((tmp_path / "results.jsonl.manifest.json").read_text())
    assert (manifest["method"] == "rag" and manifest["model"] == "scripted-llm"
            and manifest["params"]["k"] == 1)
    stats = verify_many_ray(v, str(src), out=out, rows=twice)  # resume: nothing left, no pipeline
    assert stats.done == 0 and stats.skipped == 2 and len(calls) == 1 and len(lines(out)) == 2


def test_driver_stop_keeps_what_was_written(tmp_path):
    out = tmp_path / "results.jsonl"

    def endpoint_dies(claims, recipe, options, concurrency):
        rows = list(in_process_rows(claims[:1], recipe, options, concurrency))
        yield from rows
        yield {"id": claims[1].id, "kind": "endpoint", "record": "", "error": "endpoint gone", "hint": ""}
        raise AssertionError("the driver reads no further rows after the endpoint stopped")

    v = ray_verifier(rag_llm(), tmp_path)
    claims = [{"id": "p", "claim": "Paris is the capital of France."}, {"id": "q", "claim": "Paris is old."}]
    with pytest.raises(EndpointError, match="endpoint gone") as info:
        verify_many_ray(v, claims, out=out, rows=endpoint_dies)
    assert info.value.stats.done == 1 and [r["id"] for r in lines(out)] == ["p"]

    def cluster_breaks(claims, recipe, options, concurrency):
        raise RuntimeError("ActorDiedError: the actor died unexpectedly\n  (a node was lost)")
        yield

    with pytest.raises(ClusterError, match="the Ray pipeline failed: RuntimeError: ActorDiedError") as info:
        verify_many_ray(v, claims, out=out, rows=cluster_breaks)
    assert "\n" not in str(info.value) and info.value.stats.done == 0 and [r["id"]
                                                                           for r in lines(out)] == ["p"]
    stats = verify_many_ray(v, claims, out=out, rows=in_process_rows)  # the same run again finishes the rest
    assert stats.skipped == 1 and stats.done == 1 and sorted(r["id"] for r in lines(out)) == ["p", "q"]


def test_results_without_an_output_file_come_back_in_input_order(tmp_path):
    v = ray_verifier(rag_llm(), tmp_path)
    stats = verify_many_ray(v, ["Berlin is in Spain.", "Paris is the capital of France."],
                            rows=lambda c, r, o, n: reversed(list(in_process_rows(c, r, o, n))))
    assert [r["claim"] for r in stats.results] == ["Berlin is in Spain.", "Paris is the capital of France."]


def test_an_unreachable_address_is_one_line_and_loses_nothing(monkeypatch, capsys, tmp_path):
    need_ray()
    llm = rag_llm()

    @contextlib.asynccontextmanager
    async def client(self, concurrency):
        yield llm

    monkeypatch.setattr(Engine, "_client", client)
    src, out = tmp_path / "claims.jsonl", tmp_path / "results.jsonl"
    src.write_text('{"id": "p", "claim": "Paris is the capital of France."}\n{"id": "q", "claim": "Paris is '
                   'old."}\n')
    out.write_text('{"id": "p", "label": "SUPPORTED"}\n')
    before = out.read_bytes()
    port = free_port()
    code, _, err = run_cli(["-i", str(src), "-o", str(out), "--method", "direct", "--endpoint", "http://x/v1",
                            "--backend", "ray", "--ray-address", f"127.0.0.1:{port}"], monkeypatch, capsys)
    assert code == 1 and "Traceback" not in err
    first, hint = err.strip().splitlines()
    assert first == f"error: cannot reach the Ray cluster at 127.0.0.1:{port} (Connection refused)"
    assert "ray start --head" in hint and out.read_bytes() == before
    assert not (tmp_path / "results.jsonl.manifest.json").exists()
    with pytest.raises(ClusterError, match="cannot reach the Ray cluster"):
        connect(RayOptions(address=f"localhost:{port}"))


def test_rays_own_output_goes_to_a_log_file_not_the_terminal(tmp_path, capfd):
    from veracity.pipeline.backends.ray import ray_output_to

    log = tmp_path / "run" / "ray-driver.log"
    with ray_output_to(log):
        os.write(2, b"[C++] core_worker.cc: a warning\n")  # what Ray's C++ parts write to descriptor 2
    os.write(2, b"after\n")
    assert log.read_bytes() == b"[C++] core_worker.cc: a warning\n"
    assert capfd.readouterr().err == "after\n"  # descriptor 2 is the terminal again


def test_ray_vs_local_benchmark_reads_the_summary_and_builds_both_commands(tmp_path):
    import argparse
    import importlib.util
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("ray_vs_local", root / "benchmarks" / "ray_vs_local.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    text = ("verify (rag) ━━ 4/4\n4 written, 2 already done, 1 failed, 0 bad lines → r.jsonl  (17.5 \n"
            "claims/min, 50 tokens/s)")
    assert bench.parse_summary(text) == {"written": 4, "failed": 1, "run_claims_per_min": 17.5}
    assert bench.parse_summary("error: endpoint down")["written"] is None
    args = argparse.Namespace(method="rag", endpoint="http://h:1/v1", concurrency=4, index=tmp_path,
                              evidence=None,
                              param=["k=2"], ray_actors=2, ray_address="auto", ray_concurrency=None)
    local = bench.command(args, tmp_path / "c.jsonl", tmp_path / "o.jsonl", "local")
    ray = bench.command(args, tmp_path / "c.jsonl", tmp_path / "o.jsonl", "ray")
    assert local[local.index("--backend") + 1] == "local" and "--ray-actors" not in local
    assert local[-4:] == ["--concurrency", "4", "--backend", "local"]  # 4 claims in flight in all
    assert ray[len(local) - 4:] == ["--concurrency", "2", "--backend", "ray", "--ray-actors", "2",
                                    "--ray-address",
                                    "auto"] and ray[:len(local) - 4] == local[:-4]  # 2 actors x 2 in flight


def test_an_actors_error_reaches_the_user_as_one_line():
    from veracity.errors import IndexDirError
    from veracity.pipeline.backends.ray import _cluster_failure

    text = ("The actor died because of an error raised in its creation task, "
            "\x1b[36mray::MapWorker(MapBatches("
            "ClaimActor)).__init__()\x1b[39m (pid=1, ip=10.0.0.7)\n  File \"api.py\", line 77, in "
            "open_index\n"
            "veracity.errors.IndexDirError: index directory /data/idx does not exist\n")
    err = _cluster_failure(RuntimeError(text))
    assert (isinstance(err, IndexDirError)
            and str(err) == "on a Ray actor: index directory /data/idx does not exist")
    assert "index at the driver's path" in err.hint

    class TaskError(Exception):  # like Ray's RayTaskError: the actor's exception in .cause
        def __init__(self, cause):
            super().__init__("task failed")
            self.cause = cause

    original = IndexDirError("index is corrupt", hint="rebuild it")
    assert _cluster_failure(TaskError(original)) is original
    err = _cluster_failure(RuntimeError("\x1b[31mnode lost\x1b[0m\n  more lines"))
    assert isinstance(err, ClusterError) and str(err) == "the Ray pipeline failed: RuntimeError: node lost"


def test_rays_error_messages_stay_off_stdout(tmp_path, capfd):
    need_ray()
    from ray._private import worker as ray_worker

    from veracity.pipeline.backends.ray import ray_messages_to_log, ray_output_to

    log = tmp_path / "ray-driver.log"
    original = ray_worker.print_to_stdstream
    with ray_output_to(log), ray_messages_to_log():  # what Ray's error listener calls for a raylet's message
        ray_worker.print_to_stdstream({"lines": ["Task failed: Traceback ..."], "pid": "raylet",
                                       "is_err": False},
                                      ignore_prefix=False)
    assert ray_worker.print_to_stdstream is original
    assert log.read_text() == "(raylet) Task failed: Traceback ...\n" and capfd.readouterr().out == ""
