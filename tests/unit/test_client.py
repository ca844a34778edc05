"""LLMClient control flow against an in-process OpenAI-style transport (no server)."""

from __future__ import annotations

import asyncio
import json
from typing import Literal

import httpx
import pytest
from pydantic import BaseModel

from veracity.errors import ConfigError, EndpointError, LLMOutputError
from veracity.serving.client import LLMClient, normalize_endpoint, usage_scope
from veracity.serving.structured import response_format_for, schema_for


class Inner(BaseModel):
    name: str
    kind: Literal["a", "b"]


class Out(BaseModel):
    label: Literal["SUPPORTED", "REFUTED"]
    items: list[str]
    inner: Inner


GOOD = json.dumps({"label": "SUPPORTED", "items": ["x"], "inner": {"name": "n", "kind": "a"}})


class FakeServer:
    """Answers /v1/models and /v1/chat/completions from a script of (status, content) replies."""

    def __init__(self, replies=(), models=("m",)):
        self.replies = list(replies)
        self.models = list(models)
        self.bodies: list[dict] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/models"):
            return httpx.Response(200, json={"data": [{"id": m} for m in self.models]})
        body = json.loads(request.content)
        self.bodies.append(body)
        reply = self.replies.pop(0) if self.replies else (200, GOOD)
        if isinstance(reply, Exception):
            raise reply
        status, content = reply
        if status == "torn":  # a completion cut off in transit: the body is not whole JSON
            return httpx.Response(200, content=b'{"choices": [{"message": {"content": "{\\"lab')
        if status != 200:
            return httpx.Response(status, json={"message": content or "boom"})
        return httpx.Response(200, json={
            "choices": [{"message": {"content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 7,
                      "prompt_tokens_details": {"cached_tokens": 3}},
        })


def client(server: FakeServer, **kw) -> LLMClient:
    kw.setdefault("backoff_s", 0.001)
    return LLMClient("http://fake:1", "m", transport=httpx.MockTransport(server), **kw)


MSG = [{"role": "user", "content": "hi"}]


async def test_generate_sends_schema_and_returns_validated_model():
    srv = FakeServer()
    async with client(srv) as llm:
        out = await llm.generate(MSG, Out, role="t.role")
    assert out == Out.model_validate_json(GOOD)
    body = srv.bodies[0]
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["schema"] == schema_for(Out)
    assert body["temperature"] == 0.0 and body["model"] == "m"
    rec = llm.usage[0]
    assert (rec.role, rec.prompt_tokens, rec.completion_tokens, rec.cached_prompt_tokens) == ("t.role", 11, 7,
                                                                                              3)


def test_schema_inlines_nested_definitions():
    schema = schema_for(Out)
    assert "$defs" not in json.dumps(schema) and "$ref" not in json.dumps(schema)
    assert schema["properties"]["inner"]["properties"]["kind"]["enum"] == ["a", "b"]
    assert response_format_for(Out)["json_schema"]["name"] == "Out"


def test_recursive_model_is_refused():
    class Node(BaseModel):
        children: list["Node"]

    with pytest.raises(ConfigError, match="recursive"):
        schema_for(Node)


async def test_retries_5xx_and_transport_errors_then_succeeds():
    srv = FakeServer([(503, ""), httpx.ConnectError("refused"), (200, GOOD)])
    async with client(srv, max_retries=3) as llm:
        await llm.generate(MSG, Out, role="r")
    assert len(srv.bodies) == 3 and llm.usage[0].attempts == 3


async def test_a_reply_cut_off_in_transit_is_retried():
    srv = FakeServer([("torn", ""), ("torn", ""), (200, GOOD)])
    async with client(srv, max_retries=3) as llm:
        out = await llm.generate(MSG, Out, role="r")
    assert out.label == "SUPPORTED" and len(srv.bodies) == 3 and llm.usage[0].attempts == 3
    srv = FakeServer([("torn", "")] * 5)
    async with client(srv, max_retries=1) as llm:
        with pytest.raises(EndpointError,
                           match="failed 2 times .HTTP 200 with a truncated or malformed body"):
            await llm.generate(MSG, Out, role="r")


async def test_gives_up_after_max_retries_with_one_line_error():
    srv = FakeServer([(503, "")] * 10)
    async with client(srv, max_retries=2) as llm:
        with pytest.raises(EndpointError) as err:
            await llm.generate(MSG, Out, role="r")
    assert len(srv.bodies) == 3
    assert "failed 3 times (HTTP 503)" in str(err.value) and err.value.hint


async def test_client_error_is_not_retried():
    srv = FakeServer([(400, "")])
    async with client(srv, max_retries=5) as llm:
        with pytest.raises(EndpointError, match="rejected the request"):
            await llm.generate(MSG, Out, role="r")
    assert len(srv.bodies) == 1


@pytest.mark.parametrize("status", [400, 422, 500])
async def test_an_endpoint_rejecting_the_json_schema_form_is_one_line_not_five_retries(status):
    # llama-cpp-python's own server answers the OpenAI json_schema form with HTTP 500 naming response_format
    srv = FakeServer([(status,
                       "1 validation error: response_format -> type: unexpected value 'json_schema'")] * 9)
    async with client(srv, max_retries=5) as llm:
        with pytest.raises(EndpointError) as err:
            await llm.generate(MSG, Out, role="r")
    assert len(srv.bodies) == 1  # asked once: asking again cannot help
    assert "does not accept response_format json_schema" in str(err.value)
    assert "still running" not in str(err.value) + err.value.hint and "llama.cpp" in err.value.hint


async def test_a_500_that_does_not_name_the_schema_form_is_still_retried():
    srv = FakeServer([(500, "internal error"), (200, GOOD)])
    async with client(srv, max_retries=3) as llm:
        await llm.generate(MSG, Out, role="r")
    assert len(srv.bodies) == 2


async def test_a_prompt_over_the_context_is_its_own_error_not_an_endpoint_failure():
    from veracity.errors import PromptTooLongError

    msg = ("This model's maximum context length is 4096 tokens. However, your prompt contains at least 4097 "
           "input tokens, which exceeds this limit even without any output tokens.")
    srv = FakeServer([(400, msg)])
    async with client(srv, max_retries=5) as llm:
        with pytest.raises(PromptTooLongError, match="longer than the server's context") as err:
            await llm.generate(MSG, Out, role="r")
    assert not isinstance(err.value, EndpointError) and "--max-model-len" in err.value.hint
    assert len(srv.bodies) == 1  # not retried


async def test_invalid_reply_is_retried_with_more_tokens_then_typed_error():
    srv = FakeServer([(200, '{"label": "SUPP'), (200, "not json")])
    async with client(srv, validation_retries=1, max_tokens=50) as llm:
        with pytest.raises(LLMOutputError) as err:
            await llm.generate(MSG, Out, role="x.y")
    assert [b["max_tokens"] for b in srv.bodies] == [50, 100]
    assert err.value.role == "x.y" and err.value.raw == "not json"


async def test_invalid_then_valid_reply_succeeds():
    srv = FakeServer([(200, '{"label": 1}'), (200, GOOD)])
    async with client(srv) as llm:
        out = await llm.generate(MSG, Out, role="r")
    assert out.label == "SUPPORTED" and len(llm.usage) == 2


async def test_on_disk_cache_hits_without_calling_the_server(tmp_path):
    srv = FakeServer()
    async with client(srv, cache_path=tmp_path / "c.sqlite") as llm:
        a = await llm.generate(MSG, Out, role="r")
        b = await llm.generate(MSG, Out, role="r")
        c = await llm.generate(MSG, Out, role="r", temperature=0.7)  # other sampling params: another key
    assert a == b == c
    assert len(srv.bodies) == 2
    assert [u.cache_hit for u in llm.usage] == [False, True, False]


async def test_start_checks_the_served_model():
    async with client(FakeServer(models=("m",))) as llm:
        assert llm.model == "m"
    llm = LLMClient("http://fake:1", "other", transport=httpx.MockTransport(FakeServer(models=("m",))))
    with pytest.raises(EndpointError, match="serves m, not other") as err:
        await llm.start()
    assert err.value.hint == "pass --model m"
    await llm.close()


async def test_a_busy_server_that_answers_models_late_is_waited_for_not_called_unreachable():
    """A llama-server whose HTTP threads all hold other clients' requests answers GET /models late: the
    start-up gives it the request timeout (here the second try answers), and one that never answers is
    said to be busy or hung, not unreachable."""
    tries = []

    def late(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/models"):
            tries.append(request.extensions.get("timeout", {}).get("read"))
            if len(tries) == 1:
                raise httpx.ReadTimeout("no answer", request=request)
            return httpx.Response(200, json={"data": [{"id": "m"}]})
        raise AssertionError(request.url)

    llm = LLMClient("http://fake:1", "m", timeout_s=120, transport=httpx.MockTransport(late))
    await llm.start()
    assert tries == [10.0, 120]
    await llm.close()

    def never(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("no answer", request=request)

    llm = LLMClient("http://fake:1", "m", timeout_s=120, transport=httpx.MockTransport(never))
    with pytest.raises(EndpointError, match="did not answer GET /models within 120 s"):
        await llm.start()
    await llm.close()


async def test_model_defaults_to_the_one_served():
    llm = LLMClient("http://fake:1", None, transport=httpx.MockTransport(FakeServer(models=("only",))))
    await llm.start()
    assert llm.model == "only"
    await llm.close()


async def test_usage_scope_separates_concurrent_tasks():
    srv = FakeServer()
    async with client(srv) as llm:
        async def task(role: str, n: int):
            with usage_scope() as sink:
                for _ in range(n):
                    await llm.generate(MSG, Out, role=role)
                    await asyncio.sleep(0)
            return sink

        a, b = await asyncio.gather(task("a", 3), task("b", 2))
    assert [u.role for u in a] == ["a"] * 3 and [u.role for u in b] == ["b"] * 2
    assert len(llm.usage) == 5


async def test_bounded_concurrency():
    in_flight = 0
    peak = 0

    async def handler(request: httpx.Request) -> httpx.Response:
        nonlocal in_flight, peak
        if request.url.path.endswith("/models"):
            return httpx.Response(200, json={"data": [{"id": "m"}]})
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.01)
        in_flight -= 1
        return httpx.Response(200, json={"choices": [{"message": {"content": GOOD}}],
                                         "usage": {"prompt_tokens": 1, "completion_tokens": 1}})

    async with LLMClient("http://fake:1", "m", concurrency=3, transport=httpx.MockTransport(handler)) as llm:
        await asyncio.gather(*(llm.generate(MSG, Out, role="r") for _ in range(12)))
    assert peak == 3


def test_normalize_endpoint():
    assert normalize_endpoint("localhost:8000") == "http://localhost:8000/v1"
    assert normalize_endpoint("http://h:1/v1/") == "http://h:1/v1"


async def test_read_timeout_grows_with_the_reply_budget():
    """A long structured reply (a 1,536-token plan) on a loaded CPU server outlives a flat 300 s timeout;
    the wait is at least max_tokens / min_tokens_per_s."""
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/models"):
            return httpx.Response(200, json={"data": [{"id": "m"}]})
        seen.append(request.extensions["timeout"]["read"])
        return httpx.Response(200, json={"choices": [{"message": {"content": GOOD}}],
                                         "usage": {"prompt_tokens": 1, "completion_tokens": 1}})

    async with LLMClient("http://fake:1", "m", timeout_s=300, transport=httpx.MockTransport(handler)) as llm:
        await llm.generate(MSG, Out, role="r", max_tokens=100)
        await llm.generate(MSG, Out, role="r", max_tokens=1536)
    assert seen == [300, 768]


async def test_replies_that_keep_timing_out_on_a_live_server_say_overloaded_not_dead():
    """A CPU server with a full batch decodes each request slowly: when every try outlasts the read timeout
    but the server answers its health check, the error says it is overloaded and the hint offers fewer
    requests in flight or a longer timeout (restarting it would not help); a server that answers nothing
    keeps the plain endpoint failure."""
    from veracity.errors import EndpointBusyError

    srv = FakeServer([httpx.ReadTimeout("slow")] * 5)
    async with client(srv, max_retries=2, timeout_s=30) as llm:
        with pytest.raises(EndpointBusyError) as err:
            await llm.generate(MSG, Out, role="r", max_tokens=20)
    assert len(srv.bodies) == 3
    assert "answers but did not finish a reply within 30 s, 3 times: it is overloaded" in str(err.value)
    assert "--concurrency" in err.value.hint and "VERACITY_REQUEST_TIMEOUT_S, now 30" in err.value.hint

    probes = []

    def dies_after_start(request):  # answers the start-up probe, then nothing
        if request.url.path.endswith("/models") and not probes:
            probes.append(1)
            return httpx.Response(200, json={"data": [{"id": "m"}]})
        raise httpx.ReadTimeout("nothing")

    async with LLMClient("http://fake:1", "m", transport=httpx.MockTransport(dies_after_start),
                         backoff_s=0.001,
                         max_retries=1) as llm:
        with pytest.raises(EndpointError) as err:
            await llm.generate(MSG, Out, role="r")
    assert type(err.value) is EndpointError and "failed 2 times (ReadTimeout)" in str(err.value)


def test_request_timeout_comes_from_the_environment(monkeypatch):
    from veracity.config import Settings

    monkeypatch.setenv("VERACITY_REQUEST_TIMEOUT_S", "900")
    assert Settings().request_timeout_s == 900.0
    for bad in ("soon", "0", "-5", "inf"):
        monkeypatch.setenv("VERACITY_REQUEST_TIMEOUT_S", bad)
        with pytest.raises(ConfigError, match="VERACITY_REQUEST_TIMEOUT_S must be a positive number"):
            Settings()
    monkeypatch.delenv("VERACITY_REQUEST_TIMEOUT_S")
    assert Settings().request_timeout_s == 300.0
