"""Does a busy llama-server still answer ``/v1/models``? A llama-server with SmolLM2 (4 slots, 1 thread, nice
10) and ``--threads-http N``; K keep-alive clients send back-to-back chat requests for D seconds while a probe
asks ``/v1/models`` once a second with a 5 s timeout (what a health probe or a second command's start-up
does). Prints the completions and how many probes went unanswered.

    python benchmarks/llama_http_threads.py --threads-http 2 --clients 4 --seconds 60
    python benchmarks/llama_http_threads.py --threads-http 8 --clients 4 --seconds 60
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import time
from pathlib import Path

import httpx

BINARY = Path.home() / ".veracity/engines/llama.cpp/bin/llama-server"
GGUF = Path.home() / ".veracity/downloads/SmolLM2-135M-Instruct.Q4_1.gguf"


async def measure(url: str, clients: int, seconds: float) -> tuple[int, list[float], int]:
    stop = time.perf_counter() + seconds
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(timeout=600, limits=limits) as c:
        body = {"model": "s", "max_tokens": 40, "messages": [{"role": "user", "content": "Say something."}]}

        async def worker() -> int:
            n = 0
            while time.perf_counter() < stop:
                await c.post(url + "/chat/completions", json=body)
                n += 1
            return n

        jobs = [asyncio.create_task(worker()) for _ in range(clients)]
        waits, fails = [], 0
        while time.perf_counter() < stop:
            t = time.perf_counter()
            try:
                async with httpx.AsyncClient(timeout=5) as probe:
                    await probe.get(url + "/models")
                waits.append(time.perf_counter() - t)
            except httpx.HTTPError:
                fails += 1
            await asyncio.sleep(1)
        done = await asyncio.gather(*jobs)
    return sum(done), waits, fails


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads-http", type=int, required=True)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--port", type=int, default=8771)
    ap.add_argument("--binary", type=Path, default=BINARY)
    ap.add_argument("--gguf", type=Path, default=GGUF)
    args = ap.parse_args()
    srv = subprocess.Popen(
        ["nice", "-n", "10", str(args.binary), "--model", str(args.gguf), "--alias", "s",
         "--host", "127.0.0.1", "--port", str(args.port), "--ctx-size", "8192", "--parallel", "4",
         "--threads", "1", "--threads-http", str(args.threads_http), "--no-webui"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{args.port}/v1"
    try:
        for _ in range(100):
            try:
                if httpx.get(url + "/models", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        done, waits, fails = asyncio.run(measure(url, args.clients, args.seconds))
    finally:
        srv.terminate()
        srv.wait()
    print(f"threads-http {args.threads_http}, {args.clients} keep-alive clients, {args.seconds:.0f} s: "
          f"{done} completions; /v1/models probes: {len(waits)} answered "
          f"(max {max(waits, default=0):.2f} s), "
          f"{fails} not answered within 5 s")


if __name__ == "__main__":
    main()
