"""`veracity bench llm`: structured-generation throughput of the endpoint, through LLMClient and raw.

At each concurrency level the same number of schema-constrained requests is sent twice: once straight
to the server with plain HTTP (no client layer), once through :class:`LLMClient.generate`. Both use a
closed loop of ``concurrency`` workers. The ratio of the two output-token rates is the client's overhead.
Each phase uses its own prompts (same length) so neither profits from the other's prefix cache.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Annotated, Callable, Literal

import httpx
from pydantic import BaseModel, Field, ValidationError

from veracity.errors import LLMOutputError
from veracity.serving.client import LLMClient, normalize_endpoint
from veracity.serving.structured import response_format_for


class Span(BaseModel):
    """A nested object: where in the claim the evidence is needed."""

    entity: str = Field(max_length=80)
    kind: Literal["person", "place", "organisation", "work", "date", "other"]


class BenchVerdict(BaseModel):
    """Enum + list + nested object: the shapes every method's roles use."""

    label: Literal["SUPPORTED", "REFUTED", "NOT_ENOUGH_INFO"]
    queries: list[Annotated[str, Field(max_length=80)]] = Field(max_length=3)  # bounded: fits max_tokens
    focus: Span


CLAIMS = [
    "The Eiffel Tower was completed in 1889 for the World's Fair in Paris.",
    "Marie Curie won two Nobel Prizes, in physics and in chemistry.",
    "The Amazon River flows into the Pacific Ocean.",
    "Mount Kilimanjaro is the highest mountain in Africa.",
    "The Great Wall of China is visible from the Moon with the naked eye.",
    "Ludwig van Beethoven composed nine symphonies.",
    "The Treaty of Versailles was signed in 1919.",
    "Canberra is the largest city in Australia.",
]


def bench_messages(i: int, phase: str) -> list[dict[str, str]]:
    claim = CLAIMS[i % len(CLAIMS)]
    return [
        {"role": "system", "content": "You are a fact-checking assistant. Answer in JSON."},
        {"role": "user", "content": f"Request {phase}-{i:05d}. Claim: {claim}\nGive a label, up to three "
                                    "search queries, and the main entity to check."},
    ]


@dataclass
class PhaseResult:
    mode: str  # "raw" | "client"
    concurrency: int
    requests: int
    ok: int
    valid: int
    wall_s: float
    output_tokens: int
    prompt_tokens: int
    latencies_s: list[float]

    @property
    def output_tok_s(self) -> float:
        return self.output_tokens / self.wall_s if self.wall_s else 0.0

    @property
    def requests_s(self) -> float:
        return self.ok / self.wall_s if self.wall_s else 0.0

    @property
    def valid_rate(self) -> float:
        return self.valid / self.requests if self.requests else 0.0

    def percentile(self, q: float) -> float:
        if not self.latencies_s:
            return 0.0
        xs = sorted(self.latencies_s)
        k = min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))
        return xs[k]

    def summary(self) -> dict:
        return {
            "mode": self.mode, "concurrency": self.concurrency, "requests": self.requests, "ok": self.ok,
            "schema_valid_rate": round(self.valid_rate, 4), "wall_s": round(self.wall_s, 3),
            "output_tok_s": round(self.output_tok_s, 2), "requests_s": round(self.requests_s, 3),
            "p50_latency_s": round(self.percentile(0.5), 3), "p99_latency_s": round(self.percentile(0.99), 3),
            "mean_output_tokens": round(self.output_tokens / self.ok, 1) if self.ok else 0.0,
            "prompt_tokens": self.prompt_tokens, "output_tokens": self.output_tokens,
        }


async def _closed_loop(n: int, concurrency: int, one: Callable[[int], "asyncio.Future"]) -> float:
    counter = iter(range(n))

    async def worker() -> None:
        for i in counter:
            await one(i)

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - t0


async def run_raw(endpoint: str, model: str, concurrency: int, n: int, max_tokens: int,
                  phase: str) -> PhaseResult:
    """Requests straight to the server: one POST, no validation on the hot path (checked afterwards)."""
    fmt = response_format_for(BenchVerdict)
    res = PhaseResult("raw", concurrency, n, 0, 0, 0.0, 0, 0, [])
    contents: list[str] = []
    async with httpx.AsyncClient(base_url=normalize_endpoint(endpoint), timeout=600.0,
                                 limits=httpx.Limits(max_connections=concurrency + 4)) as http:
        async def one(i: int) -> None:
            t0 = time.perf_counter()
            resp = await http.post("/chat/completions", json={
                "model": model, "messages": bench_messages(i, phase), "response_format": fmt,
                "temperature": 0.0, "max_tokens": max_tokens, "seed": 0})
            lat = time.perf_counter() - t0
            if resp.status_code == 200:
                data = resp.json()
                res.ok += 1
                res.latencies_s.append(lat)
                res.output_tokens += data["usage"]["completion_tokens"]
                res.prompt_tokens += data["usage"]["prompt_tokens"]
                contents.append(data["choices"][0]["message"]["content"] or "")

        res.wall_s = await _closed_loop(n, concurrency, one)
    for c in contents:
        try:
            BenchVerdict.model_validate_json(c)
            res.valid += 1
        except ValidationError:
            pass
    return res


async def run_client(endpoint: str, model: str, concurrency: int, n: int, max_tokens: int,
                     phase: str) -> PhaseResult:
    res = PhaseResult("client", concurrency, n, 0, 0, 0.0, 0, 0, [])
    llm = LLMClient(endpoint, model, concurrency=concurrency, max_tokens=max_tokens, validation_retries=0)
    await llm.start()
    try:
        async def one(i: int) -> None:
            t0 = time.perf_counter()
            try:
                await llm.generate(bench_messages(i, phase), BenchVerdict, role="bench.llm")
                res.valid += 1
            except LLMOutputError:
                pass
            res.latencies_s.append(time.perf_counter() - t0)
            res.ok += 1

        res.wall_s = await _closed_loop(n, concurrency, one)
    finally:
        await llm.close()
    res.output_tokens = sum(u.completion_tokens for u in llm.usage)
    res.prompt_tokens = sum(u.prompt_tokens for u in llm.usage)
    return res


async def bench_llm(endpoint: str, model: str | None, concurrencies: list[int], *,
                    requests_per_level: int | None = None,
                    max_tokens: int = 192, progress: Callable[[str], None] | None = None) -> dict:
    """Run both modes at each concurrency; returns a JSON-ready report."""
    normalize_endpoint(endpoint)  # one endpoint: the raw mode talks to it directly (a list: ConfigError)
    probe = LLMClient(endpoint, model)
    await probe.start()
    model = probe.model
    await probe.close()
    assert model is not None
    # warm-up: compile the grammar and fill caches so the first level is not penalised
    await run_raw(endpoint, model, 2, 2, max_tokens, "warmup")
    levels = []
    for c in concurrencies:
        n = requests_per_level or max(8, 2 * c)
        if progress:
            progress(f"concurrency {c}: {n} raw requests")
        raw = await run_raw(endpoint, model, c, n, max_tokens, f"raw{c}")
        if progress:
            progress(f"concurrency {c}: {n} client requests")
        cli = await run_client(endpoint, model, c, n, max_tokens, f"client{c}")
        ratio = cli.output_tok_s / raw.output_tok_s if raw.output_tok_s else 0.0
        levels.append({"concurrency": c, "raw": raw.summary(), "client": cli.summary(),
                       "client_over_raw_tok_s": round(ratio, 3)})
    return {"endpoint": endpoint, "model": model, "max_tokens": max_tokens, "schema": BenchVerdict.__name__,
            "levels": levels, "time": time.strftime("%Y-%m-%dT%H:%M:%S")}

