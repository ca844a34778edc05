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
