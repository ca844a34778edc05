"""Eight schema-constrained claim checks in flight on an OpenAI-compatible server (one first, so that the
grammar is compiled): tokens/s and a hash of the replies. Used by benchmarks/vllm_worker_inproc.sh.

    python benchmarks/vllm_eight_in_flight.py http://127.0.0.1:8451
"""

import asyncio
import hashlib
import sys
import time

import httpx

CLAIMS = ["The Eiffel Tower is in Berlin.", "Marie Curie won two Nobel prizes.",
          "The Nile flows into the Mediterranean Sea.", "Tokyo hosted the 1964 Summer Olympics.",
          "Albert Einstein was born in Ulm.", "Mount Everest is in Peru.",
          "The Amazon River flows into the Pacific Ocean.", "Paris is the capital of France."]
SCHEMA = {"type": "object", "required": ["label", "explanation"], "properties": {
    "label": {"type": "string", "enum": ["SUPPORTED", "REFUTED", "NOT_ENOUGH_INFO"]},
    "explanation": {"type": "string", "maxLength": 300}}}


async def one(client: httpx.AsyncClient, url: str, model: str, claim: str) -> tuple[str, int]:
    body = {"model": model, "max_tokens": 64, "temperature": 0,
            "messages": [{"role": "user",
                          "content": f"Claim: {claim}\nGive the label and a short explanation."}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "v", "schema": SCHEMA}}}
    r = (await client.post(url + "/v1/chat/completions", json=body, timeout=900)).json()
    return r["choices"][0]["message"]["content"], r["usage"]["completion_tokens"]


async def main(url: str) -> None:
    model = httpx.get(url + "/v1/models").json()["data"][0]["id"]
    async with httpx.AsyncClient() as client:
        await one(client, url, model, CLAIMS[0])
        t = time.time()
        outs = await asyncio.gather(*[one(client, url, model, c) for c in CLAIMS])
        wall = time.time() - t
    n = sum(o[1] for o in outs)
    digest = hashlib.sha256("".join(o[0] for o in outs).encode()).hexdigest()[:12]
    print(f"8 in flight: {n} tokens in {wall:.1f}s = {n / wall:.1f} tok/s; replies {digest}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
