"""The client's gate on requests in flight (veracity.serving.gate): a bound, handed out by priority, and on
llama-server the server's slots (issue 44 point 5: extraction's requests no longer wait behind a dozen
verification requests in the server's first-come queue)."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from veracity.check.roles import CheckWorthiness
from veracity.serving.client import LLMClient
from veracity.serving.gate import EXTRACTION, Gate, current_priority, request_priority


def test_a_freed_place_goes_to_the_lowest_priority_number_then_first_come():
    async def go():
        gate, order = Gate(1), []
        release = asyncio.Event()

        async def holder():
            async with gate.held(5):
                await release.wait()

        async def call(name, priority):
            async with gate.held(priority):
                order.append(name)

        first = asyncio.create_task(holder())
        await asyncio.sleep(0)
        waiting = [asyncio.create_task(call(n, p)) for n, p in (("a", 1), ("b", 0), ("c", 1), ("d", 0))]
        gone = asyncio.create_task(call("gone", 0))
        await asyncio.sleep(0)
        gone.cancel()  # cancelled while waiting: its place is not kept
        release.set()
        await asyncio.gather(first, *waiting)
        await asyncio.gather(gone, return_exceptions=True)
        return order, gate.busy

    order, busy = asyncio.run(go())
    assert order == ["b", "d", "a", "c"] and busy == 0


def test_at_most_n_hold_it_and_no_limit_means_none_waits():
    async def go(n):
        gate, now, most = Gate(n), [0], [0]

        async def call():
            async with gate.held():
                now[0] += 1
                most[0] = max(most[0], now[0])
                await asyncio.sleep(0.001)
                now[0] -= 1

        await asyncio.gather(*(call() for _ in range(9)))
        return most[0], gate.busy

    assert asyncio.run(go(2)) == (2, 0)
    assert asyncio.run(go(None)) == (9, 0) and Gate(0).n is None


def test_the_priority_of_a_block_reaches_the_tasks_made_inside_it():
    async def go():
        with request_priority(EXTRACTION):
            inner = await asyncio.create_task(asyncio.sleep(0, result=current_priority()))
        return inner, current_priority()

    assert asyncio.run(go()) == (EXTRACTION, 1)


def _llama_server(slots: int | None, log: list, release: asyncio.Event):
    """A llama-server stand-in (``owned_by`` llamacpp, ``GET /props``) whose completions wait for ``release``;
    ``log`` gets ("start"/"end", the claim text) in order."""
    async def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/models"):
            return httpx.Response(200, json={"data": [{"id": "m", "owned_by": "llamacpp"}]})
        if request.url.path == "/props":
            return httpx.Response(200, json={"total_slots": slots} if slots else {})
        who = json.loads(request.content)["messages"][-2]["content"]
        log.append(("start", who))
        await release.wait()
        await asyncio.sleep(0.002)
        log.append(("end", who))
        return httpx.Response(200, json={"choices": [{"message": {"content": '{"kind": "opinion"}'}}],
                                         "usage": {"prompt_tokens": 1, "completion_tokens": 1}})
    return handler


def _most_at_once(log) -> int:
    now = most = 0
    for what, _ in log:
        now += 1 if what == "start" else -1
        most = max(most, now)
    return most


@pytest.mark.parametrize("slots, most", [(2, 2), (None, 16)])
def test_on_llama_server_the_client_sends_no_more_than_its_slots_and_extraction_goes_first(slots, most):
    log: list = []

    async def go():
        release = asyncio.Event()
        async with LLMClient("http://fake:1/v1", "m", concurrency=16,
                             transport=httpx.MockTransport(_llama_server(slots, log, release))) as llm:
            def ask(who):
                return llm.generate([{"role": "user", "content": who}], CheckWorthiness, role="r")

            verifying = [asyncio.create_task(ask(f"v{i}")) for i in range(16)]
            while len(log) < min(16, slots or 16):  # the first requests reached the server and wait there
                await asyncio.sleep(0.001)
            with request_priority(EXTRACTION):
                extracting = asyncio.create_task(ask("x"))
            for _ in range(20):  # every request not sent is waiting in the client's gate
                await asyncio.sleep(0)
            release.set()
            await asyncio.gather(*verifying, extracting)

    asyncio.run(go())
    assert _most_at_once(log) == most  # without total_slots: the client's own bound
    starts = [who for what, who in log if what == "start"]
    if slots:  # the extraction request came after 16 verification requests and went first of the waiting
        assert starts.index("x") == slots
