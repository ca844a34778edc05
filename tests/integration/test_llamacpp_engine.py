"""The llama.cpp engine for real: llama-server (``veracity engines install llama.cpp``) serving the
prepared SmolLM2's GGUF as it is.

- supervised like vLLM: ``serve --engine llama.cpp`` start / ``--status`` / ``--stop``, a start-up error
  in one line, nothing left running;
- the same client, roles and schemas unchanged: vLLM's serving tests that hold for llama.cpp run here
  again against llama-server (imported below, so they take this module's ``llm_endpoint``); the methods end
  to end and the client-side faults run on llama.cpp in their own modules, on the session's server of the
  default engine;
- which JSON-schema features the engine enforces while decoding (string bounds, array sizes, enums in
  arrays), and that whatever it lets through is refused by pydantic after decoding;
- the server killed mid-batch: nothing lost or doubled, nothing left running.

Under ``CI=true`` a missing llama-server fails these tests (``.ci/run`` installs it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Literal

import httpx
import pytest
from pydantic import BaseModel, Field, ValidationError

from tests.fixtures.server import LLAMA_MARK, llama_home, start_llama
from tests.integration.test_faults import _kill_mid_batch_then_resume, _members
# the client-side faults, the methods end to end and the rest run on llama.cpp in their own modules (it is the
# default engine without a GPU: the session's llm_endpoint); vLLM's serving tests that hold for llama.cpp
# too run here against llama-server
from tests.integration.test_serving import (  # noqa: F401
    test_label_confidence_from_the_engines_logprobs,
    test_repeated_call_is_served_from_the_cache,
    test_unknown_model_name_gives_clear_error,
)
from veracity.models.registry import CPU_DEFAULT

pytestmark = [pytest.mark.integration, getattr(pytest.mark, LLAMA_MARK)]


@pytest.fixture(scope="module")
def llm_endpoint(tmp_path_factory):
    from veracity.serving.server import stop_server

    settings = llama_home(tmp_path_factory.mktemp("llamacpp"))
    ep = start_llama(settings, "test-llamacpp")
    try:
        yield ep
    finally:
        stop_server(settings, "test-llamacpp")
        assert _members(ep.pid) == []


@pytest.fixture()
def killable_llm_server(killable_llama_server):
    """The tests imported here kill ``killable_llm_server``: on this module it is a private llama-server."""
    return killable_llama_server


# -- supervised like vLLM -------------------------------------------------------------------------------
def _veracity(home: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {k: v for k,
           v in os.environ.items() if not k.startswith("VERACITY_") or k == "VERACITY_LLAMA_SERVER"}
    env.update(VERACITY_HOME=str(home), COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "veracity", *args], capture_output=True, text=True, env=env,
                          timeout=timeout)


def test_serve_start_status_stop_leaves_nothing_running(tmp_path):
    from veracity.serving.server import free_port

    settings = llama_home(tmp_path)
    port = free_port()
    t0 = time.monotonic()
    started = _veracity(settings.home, "serve", "--engine", "llama.cpp", "--port", str(port), "--detach",
                        "--json")
    took = time.monotonic() - t0
    assert started.returncode == 0, started.stderr[-2000:]
    state = json.loads(started.stdout)
    try:
        assert state["engine"] == "llama.cpp" and state["model"] == CPU_DEFAULT
        assert state["variant"].startswith("llama-server ")
        print(f"serve --engine llama.cpp ready in {took:.1f} s")
        status = json.loads(_veracity(settings.home, "serve", "--status", "--json").stdout)
        assert status["status"] == "running" and status["pid"] == state["pid"] and status["orphans"] == []
        models = httpx.get(state["endpoint"] + "/models", timeout=10).json()
        assert [m["id"] for m in models["data"]] == [CPU_DEFAULT]
        again = _veracity(settings.home, "serve", "--engine", "llama.cpp", "--port", str(port))
        assert again.returncode == 1 and "already running" in again.stderr and "Traceback" not in again.stderr
    finally:
        stopped = _veracity(settings.home, "serve", "--stop")
    assert stopped.returncode == 0 and "processes ended" in stopped.stdout, stopped.stdout + stopped.stderr
    assert _members(state["pid"]) == []
    assert json.loads(_veracity(settings.home, "serve", "--status", "--json").stdout)["status"] == "stopped"


def test_a_start_up_failure_is_one_line_and_leaves_nothing(tmp_path):
    settings = llama_home(tmp_path)
    junk = tmp_path / "broken.gguf"
    junk.write_bytes(b"GGUF" + b"\0" * 64)
    out = _veracity(settings.home, "serve", "--engine", "llama.cpp", "--model", str(junk), "--detach")
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr[-2000:]
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    # serve's first line names the engine and why (issue 39), then the failure in one line and its hint
    assert lines[0] == "engine llama.cpp (--engine llama.cpp)", out.stderr
    assert lines[1].startswith("error: the llama.cpp server exited during start-up"), out.stderr
    assert lines[2].startswith("hint:") and "full log" in lines[2]
    assert len(lines) == 3, out.stderr
    assert json.loads(_veracity(settings.home, "serve", "--status", "--json").stdout)["status"] == "stopped"


def test_replicas_share_the_cores_and_stop_together(tmp_path):
    from veracity.serving.server import free_port, port_in_use

    settings = llama_home(tmp_path)
    port = next(p for p in (free_port() for _ in range(50)) if p < 65535 and not port_in_use("127.0.0.1",
                                                                                             p + 1))
    started = _veracity(settings.home, "serve", "--engine", "llama.cpp", "--replicas", "2", "--port",
                        str(port),
                        "--detach", "--json")
    assert started.returncode == 0, started.stderr[-2000:]
    replicas = json.loads(started.stdout)["replicas"]
    try:
        assert [r["port"] for r in replicas] == [port, port + 1]
        if len(os.sched_getaffinity(0)) >= 2:  # each bound to its own share of the cores
            assert replicas[0]["devices"] != replicas[1]["devices"] and replicas[0]["devices"]
            for r in replicas:
                assert "--threads" in r["command"]
                assert r["command"][r["command"].index("--threads") + 1] == str(len(r["devices"].split(",")))
    finally:
        stopped = _veracity(settings.home, "serve", "--stop")
    assert stopped.returncode == 0
    assert all(_members(r["pid"]) == [] for r in replicas)


def test_server_killed_mid_batch_then_resumed(killable_llm_server, llm_endpoint, tmp_path):
    """llama-server is one process: killed, the batch stops with its results kept, --stop clears it and
    the same command on a live server completes every claim once."""
    assert _members(killable_llm_server.pid) == [killable_llm_server.pid]
    _kill_mid_batch_then_resume(tmp_path, killable_llm_server, llm_endpoint, killable_llm_server.pid)


# -- the schema features the engine enforces --------------------------------------------------------------
class Bounded(BaseModel):
    name: str = Field(min_length=3, max_length=12)


class Sized(BaseModel):
    keywords: list[str] = Field(min_length=2, max_length=3)


class EnumArray(BaseModel):
    cited: list[Literal["P1", "P2", "P3"]] = Field(max_length=2)


class BoundedInt(BaseModel):
    year: int = Field(ge=1900, le=1950)


FEATURES = {  # feature -> (output model, a prompt pushing against the bound)
    "string maxLength/minLength": (Bounded,
                                   "Give the full name of the longest-named place in Wales, all of it."),
    "array minItems/maxItems": (Sized, "List twenty keywords about the history of Rome."),
    "enum array with maxItems": (EnumArray, "Cite P4, P5, P1, P2 and P3, in that order."),
    "integer minimum/maximum": (BoundedInt, "In which year did the first person walk on the Moon?"),
}
# measured: what each engine does not enforce while decoding (pydantic refuses it after decoding)
NOT_ENFORCED: dict[str, set[str]] = {"llama.cpp": set()}


def _raw_reply(url: str, model: str, output: type[BaseModel], prompt: str, seed: int) -> str:
    from veracity.serving.structured import response_format_for

    body = {"model": model, "messages": [{"role": "user", "content": prompt}], "max_tokens": 200,
            "temperature": 1.0, "seed": seed, "response_format": response_format_for(output)}
    resp = httpx.post(url + "/chat/completions", json=body, timeout=120)
    resp.raise_for_status()
    return resp.json()["choices"][0]["message"]["content"]


def test_which_schema_features_the_engine_enforces(llm_endpoint):
    import jsonschema

    broken: dict[str, list[str]] = {}
    for feature, (output, prompt) in FEATURES.items():
        schema = output.model_json_schema()
        for seed in range(4):
            raw = _raw_reply(llm_endpoint.url, llm_endpoint.model, output, prompt, seed)
            try:
                jsonschema.validate(json.loads(raw), schema)
            except (ValueError, jsonschema.ValidationError):
                broken.setdefault(feature, []).append(raw)
                with pytest.raises(ValidationError):  # what the engine let through, pydantic refuses
                    output.model_validate_json(raw)
    print("not enforced by llama.cpp while decoding:", {k: v[:1] for k, v in broken.items()})
    assert set(broken) == NOT_ENFORCED["llama.cpp"], broken


def test_the_check_roles_opening_is_continued_under_their_grammar(llm_endpoint):
    # llama-server continues the opening the client writes (issue 44 point 5): the grammar parses, the
    # replies validate, and check.worthiness generates its kind alone, fewer tokens than under the schema
    import asyncio

    from veracity.check.roles import EXTRACTOR, WORTHINESS, AtomicClaims, CheckWorthiness
    from veracity.serving.client import LLMClient, usage_scope

    class SchemaWorthiness(CheckWorthiness):
        reply_prefill = False  # the same schema, asked for as JSON

    text = "Marie Curie was a physicist. She won two Nobel Prizes, in 1903 and in 1911."
    sentence = "She won two Nobel Prizes, in 1903 and in 1911."

    async def go():
        async with LLMClient(llm_endpoint.url, llm_endpoint.model, seed=0) as llm:
            with usage_scope() as recs:
                claims = await llm.generate(EXTRACTOR.messages(text=text, sentence=sentence), AtomicClaims,
                                            role="check.extractor", max_tokens=320)
                short = await llm.generate(WORTHINESS.messages(claim=sentence), CheckWorthiness,
                                           role="check.worthiness", max_tokens=32)
                framed = await llm.generate(WORTHINESS.messages(claim=sentence), SchemaWorthiness,
                                            role="check.worthiness", max_tokens=32)
            return llm.continues_replies, claims, short, framed, recs, llm._sem.n

    continues, claims, short, framed, recs, in_flight = asyncio.run(go())
    assert continues
    # and the client sends no more requests at once than the server has slots (veracity.serving.gate)
    slots = httpx.get(llm_endpoint.url.removesuffix("/v1") + "/props", timeout=30).json()["total_slots"]
    assert in_flight == slots
    assert 1 <= len(claims.claims) <= 6 and all(0 < len(c) <= 200 for c in claims.claims)
    assert short.kind in ("checkable_statement", "opinion", "no_statement") and framed.kind
    assert recs[1].completion_tokens < recs[2].completion_tokens, [r.completion_tokens for r in recs]


def test_a_texts_prefix_is_copied_into_the_idle_slots(llm_endpoint):
    """LLMClient.share_prefix on the real llama-server (started with --slot-save-path): the text's extractor
    prompt is processed in one slot and restored into the idle others, and then every one of the text's
    extractor calls sent at once finds the text cached, whichever slot it gets (issue 44 point 5). Without
    the copy the calls that land in other slots process the text anew."""
    import asyncio

    from veracity.check.roles import EXTRACTOR, AtomicClaims
    from veracity.serving.client import LLMClient, usage_scope

    # a text of its own (no slot holds it from another test), long enough that its share of each prompt shows
    facts = ["The Danube flows through ten countries.", "Vienna stands on the Danube.",
             "Budapest was formed from Buda, Pest and Obuda in 1873.", "The river ends in the Black Sea.",
             "Its delta is a protected wetland.", "Bratislava lies near two borders."]
    text = " ".join(facts * 4)

    async def go():
        async with LLMClient(llm_endpoint.url, llm_endpoint.model, seed=0) as llm:
            shared = await llm.share_prefix(EXTRACTOR.messages(text=text, sentence=facts[0]))
            with usage_scope() as recs:
                await asyncio.gather(*(llm.generate(EXTRACTOR.messages(text=text, sentence=f), AtomicClaims,
                                                    role="check.extractor", max_tokens=96)
                                       for f in facts[1:5]))
            return shared, recs

    shared, recs = asyncio.run(go())
    slots = httpx.get(llm_endpoint.url.removesuffix("/v1") + "/props", timeout=30).json()["total_slots"]
    assert shared is not None and shared["slots"] == slots - 1, shared  # the session's server is idle here
    assert shared["tokens"] > 300, shared
    cached = [r.cached_prompt_tokens for r in recs]
    # each call's prompt: the shared prefix (instructions and the text), then its own sentence
    assert len(cached) == 4 and all(c is not None and c >= 0.8 * shared["tokens"] for c in cached), (
        cached, shared)


def test_a_streamed_reply_cut_short_stops_the_server_at_once(llm_endpoint):
    """LLMClient.generate(cut_when=...) on the real llama-server (issue 44 point 5: check's copying cut): the
    reply streams, the client closes it where cut_when says, llama-server cancels the request (its slot idle
    at once, far fewer tokens generated than the whole reply), and the record has the server's token counts
    and finish reason "cut"."""
    import asyncio
    import time

    from veracity.check.extract import complete_claims
    from veracity.check.roles import AtomicClaims
    from veracity.serving.client import LLMClient, usage_scope

    messages = [{"role": "system", "content": "Reply with six short claims about the city, one fact each."},
                {"role": "user", "content": "Six facts about Paris, France, each a full sentence."}]

    def first_claim(so_far: str) -> str | None:
        got = complete_claims(so_far)
        return json.dumps({"claims": got[:1]}) if got else None

    async def go():
        async with LLMClient(llm_endpoint.url, llm_endpoint.model, seed=0) as llm:
            with usage_scope() as recs:
                whole = await llm.generate(messages, AtomicClaims, role="r", max_tokens=320,
                                           cut_when=lambda so_far: None)
                cut = await llm.generate(messages, AtomicClaims, role="r", max_tokens=320,
                                         cut_when=first_claim)
            return whole, cut, recs

    log = Path(llm_endpoint.log_path) if llm_endpoint.log_path else None  # None: a server given by URL
    cancelled = log.read_text(errors="replace").count("cancel task") if log else 0
    whole, cut, recs = asyncio.run(go())
    assert len(whole.claims) >= 2, whole  # a reply worth cutting
    assert cut.claims == whole.claims[:1]  # temperature 0: the same reply, up to its first claim
    assert recs[0].finish_reason == "stop" and recs[1].finish_reason == "cut"
    assert 0 < recs[1].completion_tokens < recs[0].completion_tokens, [r.completion_tokens for r in recs]
    assert recs[1].prompt_tokens == recs[0].prompt_tokens > 0
    # the server cancelled the request when the stream closed: its log says so (it writes "stop: cancel
    # task" when a client goes away mid-reply), and no slot is still generating
    deadline = time.monotonic() + 30
    while log is not None and log.read_text(errors="replace").count("cancel task") == cancelled:
        assert time.monotonic() < deadline, f"llama-server did not cancel the cut request (see {log})"
        time.sleep(0.2)
    root = llm_endpoint.url.removesuffix("/v1")
    while any(s.get("is_processing") for s in httpx.get(root + "/slots", timeout=30).json()):
        assert time.monotonic() < deadline, "the cut request is still being generated"
        time.sleep(0.2)
