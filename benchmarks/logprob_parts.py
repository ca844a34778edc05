"""Where a server's logprob cost sits (issue 43): CPU per completion token of each server process with
logprobs off and with ``top_logprobs`` 0, 3 and 10, in alternating rounds of 8 concurrent short JSON replies.

    python benchmarks/logprob_parts.py --endpoint http://127.0.0.1:8744/v1 --model smollm2-135m-instruct \
        --pids API_PID,ENGINE_CORE_PID,WORKER_PID
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time

import httpx

SCHEMA = {"type": "object", "properties": {"reasoning": {"type": "string", "maxLength": 300},
                                           "label": {"type": "string",
                                                     "enum": ["SUPPORTED", "REFUTED", "NOT_ENOUGH_INFO"]}},
          "required": ["reasoning", "label"]}
CLAIMS = [f"Claim {i}: The river number {i} flows into the sea near city {i * 7}." for i in range(8)]
PROMPT = "Is this claim supported? Answer in JSON with reasoning then label. "
MODES = [None, 0, 3, 10]  # None: no logprobs; else top_logprobs


def cpu_s(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def one(client: httpx.AsyncClient, args: argparse.Namespace, claim: str, mode: int | None) -> int:
    body = {"model": args.model, "temperature": 0, "max_tokens": 120,
            "messages": [{"role": "user", "content": PROMPT + claim}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "v", "schema": SCHEMA}}}
    if mode is not None:
        body["logprobs"] = True
        body["top_logprobs"] = mode
    r = await client.post(args.endpoint.rstrip("/") + "/chat/completions", json=body, timeout=600)
    return r.json()["usage"]["completion_tokens"]


async def one_round(args: argparse.Namespace, pids: list[int], mode: int | None) -> dict:
    async with httpx.AsyncClient() as client:
        c0, t = {p: cpu_s(p) for p in pids}, time.perf_counter()
        tokens = sum(await asyncio.gather(*(one(client, args, c, mode) for c in CLAIMS)))
        wall, c1 = time.perf_counter() - t, {p: cpu_s(p) for p in pids}
    return {"top_logprobs": mode, "wall_s": round(wall, 2), "tokens": tokens,
            "cpu_ms_per_token": {str(p): round(1000 * (c1[p] - c0[p]) / tokens, 3) for p in pids}}


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--pids", required=True, help="comma-separated server process ids to count")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    pids = [int(p) for p in args.pids.split(",")]
    await one_round(args, pids, None)  # warm-up, not reported
    for r in range(args.rounds):
        for mode in (MODES if r % 2 == 0 else MODES[::-1]):
            print(json.dumps(await one_round(args, pids, mode)), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
