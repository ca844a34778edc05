"""A reply whose opening the client writes on llama.cpp (issue 44 point 5): which output models have one, the
request it makes (the opening as the assistant message the engine continues, a grammar for the rest, no JSON
schema), and that it is used on llama-server only, never for a deciding call."""

from __future__ import annotations

import asyncio
import json
from typing import ClassVar, Literal

import httpx
import pytest
from pydantic import BaseModel

from veracity.check.roles import AtomicClaims, CheckWorthiness
from veracity.serving.client import LLMClient, usage_scope
from veracity.serving.structured import prefilled_form

MSG = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]


class Server:
    """An OpenAI-style endpoint of one engine (``owned_by``) answering every completion with ``content``."""

    def __init__(self, owned_by: str, content: str):
        self.owned_by, self.content = owned_by, content
        self.bodies: list[dict] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/models"):
            return httpx.Response(200, json={"data": [{"id": "m", "owned_by": self.owned_by}]})
        self.bodies.append(json.loads(request.content))
        return httpx.Response(200, json={"choices": [{"message": {"content": self.content},
                                                      "finish_reason": "stop"}],
                                         "usage": {"prompt_tokens": 5, "completion_tokens": 3}})


def ask(server: Server, output, **kw):
    async def go():
        async with LLMClient("http://fake:1", "m", transport=httpx.MockTransport(server)) as llm:
            with usage_scope() as recs:
                value = await llm.generate(MSG, output, role="r", **kw)
            return value, recs

    return asyncio.run(go())


def test_the_check_roles_have_an_opening_and_a_grammar_for_the_rest():
    claims = prefilled_form(AtomicClaims)
    assert claims.opening == '{"claims": ["'
    # 1 to 6 claims of 1 to 200 characters, then the closing characters
    assert claims.grammar.splitlines()[:2] == ['root ::= item ("\\", \\"" item){0,5} "\\"]}"',
                                               "item ::= char{1,200}"]
    kind = prefilled_form(CheckWorthiness)
    assert kind.opening == '{"kind": "'
    assert kind.grammar == 'root ::= ("checkable_statement" | "opinion" | "no_statement") "\\"}"'
    # what the engine generates after the opening completes the JSON object the model validates
    assert AtomicClaims.model_validate_json(claims.reply('A is B.", "C is D."]}')).claims == ["A is B.",
                                                                                              "C is D."]
    assert CheckWorthiness.model_validate_json(kind.reply('opinion"}')).kind == "opinion"
    assert kind.reply('{"kind": "opinion"}') == '{"kind": "opinion"}'  # returned with its opening: as it is


class Two(BaseModel):
    reply_prefill: ClassVar[bool] = True
    a: str
    b: str


class Unmarked(BaseModel):
    kind: Literal["x", "y"]


class MaybeEmpty(BaseModel):
    reply_prefill: ClassVar[bool] = True
    items: list[str]  # may be empty: the opening '["' would force an item


def test_only_a_marked_one_field_enum_or_non_empty_string_list_has_one():
    assert [prefilled_form(m) for m in (Two, Unmarked, MaybeEmpty)] == [None, None, None]


def test_on_llama_server_the_opening_is_continued_under_a_grammar_instead_of_the_schema():
    server = Server("llamacpp", 'opinion"}')  # llama-server may return the continuation alone
    value, recs = ask(server, CheckWorthiness, max_tokens=32, seed=3)
    assert value.kind == "opinion" and recs[0].completion_tokens == 3
    body = server.bodies[0]
    assert "response_format" not in body
    assert body["messages"] == [*MSG, {"role": "assistant", "content": '{"kind": "'}]
    assert body["grammar"] == prefilled_form(CheckWorthiness).grammar
    assert body["continue_final_message"] is True and body["add_generation_prompt"] is False
    assert (body["max_tokens"], body["seed"]) == (32, 3)


@pytest.mark.parametrize("owned_by", ["vllm", None])
def test_other_engines_get_the_json_schema_as_before(owned_by):
    server = Server(owned_by, '{"kind": "opinion"}')
    value, _ = ask(server, CheckWorthiness)
    body = server.bodies[0]
    assert value.kind == "opinion" and body["messages"] == MSG
    assert body["response_format"]["type"] == "json_schema" and "grammar" not in body


def test_a_deciding_call_keeps_the_schema_its_logprobs_are_read_over():
    server = Server("llamacpp", '{"kind": "opinion"}')
    ask(server, CheckWorthiness, confidence_field="kind")
    assert "grammar" not in server.bodies[0] and server.bodies[0]["logprobs"] is True


def test_a_cut_prefilled_reply_is_asked_again_with_twice_the_budget():
    server = Server("llamacpp", 'A is B.", "C i')  # cut at max_tokens: no closing characters
    with pytest.raises(Exception, match="did not validate"):
        ask(server, AtomicClaims, max_tokens=10)
    assert [b["max_tokens"] for b in server.bodies] == [10, 20]
    assert all(b["messages"][-1] == {"role": "assistant", "content": '{"claims": ["'} for b in server.bodies)


class StreamingServer:
    """A llama-server-like endpoint that streams its reply (server-sent events, one piece per token, with
    per-token timings as llama-server gives them) and counts the pieces it managed to send before the client
    hung up."""

    def __init__(self, pieces: list[str], finish: str = "stop"):
        self.pieces, self.finish = pieces, finish
        self.bodies: list[dict] = []
        self.sent = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/models"):
            return httpx.Response(200, json={"data": [{"id": "m", "owned_by": "llamacpp"}]})
        body = json.loads(request.content)
        self.bodies.append(body)
        if not body.get("stream"):
            return httpx.Response(200, json={"choices": [{"message": {"content": "".join(self.pieces)},
                                                          "finish_reason": self.finish}],
                                             "usage": {"prompt_tokens": 5,
                                                       "completion_tokens": len(self.pieces)}})
        server = self

        class Events(httpx.AsyncByteStream):
            async def __aiter__(self):
                for n, piece in enumerate(server.pieces, 1):
                    server.sent = n
                    last = n == len(server.pieces)
                    chunk = {"choices": [{"index": 0, "delta": {"content": piece},
                                          "finish_reason": server.finish if last else None}],
                             "timings": {"cache_n": 40, "prompt_n": 12, "predicted_n": n}}
                    yield f"data: {json.dumps(chunk)}\n\n".encode()
                yield b"data: [DONE]\n\n"

        return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=Events())


COPYING = ['Rome is', ' the capital."', ', "Paris is', ' in France."', ', "Oslo is', ' in Norway."', ']}']


def test_a_streamed_reply_is_cut_where_cut_when_says_and_the_rest_is_never_read():
    server = StreamingServer(COPYING)
    seen: list[str] = []

    def cut_when(so_far: str) -> str | None:
        seen.append(so_far)
        return '{"claims": ["Rome is the capital.", "Paris is in France."]}' if "France" in so_far else None

    value, recs = ask(server, AtomicClaims, cut_when=cut_when)
    assert value.claims == ["Rome is the capital.", "Paris is in France."]
    body = server.bodies[0]
    assert body["stream"] is True and body["grammar"] and body["continue_final_message"] is True
    # handed the whole reply so far, its opening included
    assert seen[0] == '{"claims": ["Rome is' and seen[-1].endswith("in France.\"")
    assert server.sent == 4  # the client hung up after the fourth piece: the Oslo claim was never sent
    assert recs[0].finish_reason == "cut"
    # what the server's last timings said: 40 cached + 12 new prompt tokens, 4 generated
    assert (recs[0].prompt_tokens, recs[0].cached_prompt_tokens, recs[0].completion_tokens) == (52, 40, 4)


def test_a_streamed_reply_never_cut_is_the_whole_reply():
    server = StreamingServer(COPYING)
    value, recs = ask(server, AtomicClaims, cut_when=lambda so_far: None)
    assert value.claims == ["Rome is the capital.", "Paris is in France.", "Oslo is in Norway."]
    assert server.sent == len(COPYING) and recs[0].finish_reason == "stop"
    assert recs[0].completion_tokens == len(COPYING)


@pytest.mark.parametrize("owned_by", ["vllm", "unknown"])
def test_other_engines_read_the_reply_whole_and_never_call_cut_when(owned_by):
    server = Server(owned_by, '{"claims": ["Rome is the capital."]}')

    def never(so_far: str) -> str | None:
        raise AssertionError("cut_when called on an engine whose replies are not streamed")

    value, _ = ask(server, AtomicClaims, cut_when=never)
    assert value.claims == ["Rome is the capital."] and "stream" not in server.bodies[0]


def test_a_stream_that_ends_without_its_last_event_is_asked_again():
    class Dropping(StreamingServer):
        def __call__(self, request):
            resp = super().__call__(request)
            if request.url.path.endswith("/models") or len(self.bodies) > 1:
                return resp
            first = self.pieces[0]

            class Torn(httpx.AsyncByteStream):
                async def __aiter__(self):
                    chunk = {"choices": [{"index": 0, "delta": {"content": first}, "finish_reason": None}]}
                    yield f"data: {json.dumps(chunk)}\n\n".encode()

            return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=Torn())

    server = Dropping(COPYING)
    value, recs = ask(server, AtomicClaims, cut_when=lambda so_far: None)
    assert len(server.bodies) == 2 and recs[0].attempts == 2
    assert value.claims[-1] == "Oslo is in Norway."
