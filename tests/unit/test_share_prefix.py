"""A text's shared prompt prefix copied into llama-server's idle slots (LLMClient.share_prefix, issue 44 point
5): the calls the server is sent and in which order, and every way it declines."""

from __future__ import annotations

import asyncio
import json

import httpx

from veracity.check.extract import PREFIX_EVENT, Sentence, share_text_prefix
from veracity.pipeline.types import Trace
from veracity.serving.client import PREFIX_FILE, LLMClient

MESSAGES = [{"role": "system", "content": "Extract claims."},
            {"role": "user", "content": "TEXT … sentence 1"}]


def _server(owner: str = "llamacpp", slots: int = 4, busy: tuple[int, ...] = (), save_status: int = 200):
    """A llama-server stand-in: ``calls`` gets (method, path, query, body) of each request but /models and
    /props."""
    calls: list[tuple] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path.endswith("/models"):
            return httpx.Response(200, json={"data": [{"id": "m", "owned_by": owner}]})
        if path == "/props":
            return httpx.Response(200, json={"total_slots": slots})
        body = json.loads(request.content) if request.content else None
        calls.append((request.method, path, dict(request.url.params), body))
        if path == "/apply-template":
            return httpx.Response(200, json={"prompt": "<s>TEXT … sentence 1<assistant>"})
        if path == "/completion":
            return httpx.Response(200, json={"content": "x", "id_slot": 2, "tokens_evaluated": 612})
        if path == "/slots" and request.method == "GET":
            return httpx.Response(200, json=[{"id": i, "is_processing": i in busy} for i in range(slots)])
        if path.startswith("/slots/"):
            return httpx.Response(save_status if request.url.params["action"] == "save" else 200,
                                  json={"n_saved": 612})
        return httpx.Response(404)

    return calls, httpx.MockTransport(handler)


def _share(transport, messages=MESSAGES, times: int = 1):
    async def go():
        async with LLMClient("http://srv/v1", "m", transport=transport, concurrency=8) as llm:
            return [await llm.share_prefix(messages) for _ in range(times)]

    return asyncio.run(go())


def test_the_prompt_is_primed_in_one_slot_saved_and_restored_into_the_idle_others():
    calls, transport = _server(busy=(1,))
    (shared,) = _share(transport)
    assert [(m, p, q.get("action")) for m, p, q, _ in calls] == [
        ("POST", "/apply-template", None), ("POST", "/completion", None), ("POST", "/slots/2", "save"),
        ("GET", "/slots", None), ("POST", "/slots/0", "restore"), ("POST", "/slots/3", "restore")]
    assert calls[0][3] == {"messages": MESSAGES}
    primed = calls[1][3]  # the templated prompt, cached, one token generated
    assert primed["prompt"] == "<s>TEXT … sentence 1<assistant>" and primed["n_predict"] == 1
    assert primed["cache_prompt"] is True
    assert all(body == {"filename": PREFIX_FILE} for _, p, _, body in calls if p.startswith("/slots/"))
    assert shared["slots"] == 2 and shared["tokens"] == 612 and shared["seconds"] >= 0


def test_a_server_that_cannot_save_slots_is_not_asked_again():
    calls, transport = _server(save_status=501)  # started without --slot-save-path
    assert _share(transport, times=2) == [None, None]
    assert [p for _, p, _, _ in calls] == ["/apply-template", "/completion", "/slots/2"]  # once, not twice


def test_nothing_is_sent_to_vllm_or_to_a_one_slot_server():
    for kind in (_server(owner="vllm"), _server(slots=1)):
        calls, transport = kind
        assert _share(transport) == [None] and calls == []


def test_a_text_shares_its_prefix_only_where_two_sentences_go_to_the_extractor():
    seen = []

    class Stand:
        async def share_prefix(self, messages):
            seen.append(messages)
            return {"slots": 3, "tokens": 600, "seconds": 0.5}

    text = "Rome lies on the Tiber. It was founded in 753 BC. Read more below."
    one = [Sentence(1, 0, 23, "Rome lies on the Tiber.")]
    two = [*one, Sentence(2, 24, 49, "It was founded in 753 BC.")]
    trace = Trace()
    asyncio.run(share_text_prefix(Stand(), text, one, trace))
    assert seen == [] and not trace.events
    asyncio.run(share_text_prefix(Stand(), text, two, trace))
    assert len(seen) == 1 and "Rome lies on the Tiber." in json.dumps(seen[0])  # the first sentence's call
    assert [e["kind"] for e in trace.events] == [PREFIX_EVENT] and trace.events[0]["slots"] == 3
    asyncio.run(share_text_prefix(object(), text, two, Trace()))  # a client without it: nothing to do
