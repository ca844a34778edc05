"""What asking for token logprobs costs (issue 43): the same claims through one method with and without them.

The deciding role's calls ask the engine for ``logprobs`` + ``top_logprobs`` (the verdict's confidence);
``LLMClient(logprobs=False)`` never asks. This runs the same claims both ways, alternating (on, off, then off,
on, ...), after ``--warmup`` unmeasured rounds (the first round meets a cold prompt cache and every later one
a warm one: a run of 2026-11-28 without the warm-up had its first "on" round at 3.6 claims/min against 5.3-6.8
for the others), and prints claims/min per round and the ratio of the medians; each claim's labels in every
round of both ways are compared (they should be the same: logprobs only report). With ``--server-pid`` (a
llama-server on this machine) each round also records the CPU seconds the server and this process spent: on a
loaded machine the wall-clock rate swings with the load, while CPU seconds per claim hardly do.

    python benchmarks/logprob_cost.py --endpoint http://127.0.0.1:8400/v1 --dataset feverous-s \
        --evidence gold --limit 12 --rounds 4 --concurrency 4 --out logprob-cost.json

``--top-logprobs N`` asks N alternatives per token whatever the engine (the client's own choice otherwise:
fewer on vLLM, :func:`veracity.serving.confidence.top_logprobs_for`); each "on" round records every claim's
confidence, so two runs with different N can be compared claim by claim.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from pathlib import Path

from veracity.bench.datasets import load_dataset
from veracity.config import Settings
from veracity.pipeline.config import VerifierConfig
from veracity.pipeline.engine import Engine
import veracity.serving.client as client_module
from veracity.serving.client import LLMClient


def cpu_s(pid: int | None) -> float:
    """User + system CPU seconds of a process so far (Linux /proc), 0 without a pid."""
    if not pid:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def one_round(args: argparse.Namespace, claims: list, logprobs: bool) -> tuple[float, dict[str, str],
                                                                                     dict]:
    config = VerifierConfig.of(method=args.method, labels=args.labels, evidence=args.evidence,
                               index=args.index,
                               endpoint=args.endpoint, calibration="off", settings=Settings())
    async with LLMClient(args.endpoint, args.model, concurrency=args.concurrency, logprobs=logprobs,
                         timeout_s=Settings().request_timeout_s) as llm:
        engine = Engine(config, llm=llm)
        gate = asyncio.Semaphore(args.concurrency)
        labels: dict[str, str] = {}
        confidences: dict[str, float | None] = {}

        async def run(claim) -> None:
            async with gate:
                v = await engine.verify(claim, llm)
                labels[claim.id] = v.label.value
                confidences[claim.id] = v.confidence

        t0, s0, c0 = time.perf_counter(), cpu_s(args.server_pid), time.process_time()
        await asyncio.gather(*(run(c) for c in claims))
        wall = time.perf_counter() - t0
        cpu = {"server_cpu_s_per_claim": round((cpu_s(args.server_pid) - s0) / len(claims), 3),
               "client_cpu_s_per_claim": round((time.process_time() - c0) / len(claims), 3)}
        if logprobs:
            cpu["confidences"] = confidences
            cpu["masks_first"] = llm.masks_first
        engine.close()
    return len(claims) / wall * 60.0, labels, cpu


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--model", default=None)
    ap.add_argument("--method", default="rag")
    ap.add_argument("--dataset", default="feverous-s")
    ap.add_argument("--evidence", default="gold")
    ap.add_argument("--labels", default="binary")
    ap.add_argument("--index", default=None)
    ap.add_argument("--limit", type=int, default=12)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=2,
                    help="unmeasured rounds first (off, on, off, ...), so every measured round meets the "
                         "same warm prompt cache and a server warm for both ways (default 2)")
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--server-pid", type=int, default=None,
                    help="a local llama-server's pid: also count its CPU")
    ap.add_argument("--top-logprobs", type=int, default=None,
                    help="alternatives asked per token (default: the client's choice for the engine)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    if args.top_logprobs is not None:
        forced = args.top_logprobs
        client_module.top_logprobs_for = lambda values, masks_first: forced
    ds = load_dataset(args.dataset, None, limit=args.limit, seed=args.seed, evidence=args.evidence,
                      sample="balanced")
    claims = [c for c, _ in ds.claims]
    rates: dict[bool, list[float]] = {True: [], False: []}
    cpus: dict[bool, list[float]] = {True: [], False: []}
    seen: dict[str, set[tuple[bool, str]]] = {c.id: set() for c in claims}
    rows = []
    for w in range(args.warmup):
        # the first round meets a cold prompt cache, the others a warm one; and a server's first requests with
        # logprobs may pay a one-time cost (vLLM compiles its rank-counting kernel on the first one): warm-up
        # rounds alternate off, on, so that both ways are warm before anything is measured
        flag = w % 2 == 1
        rate, _labels, _cpu = await one_round(args, claims, flag)
        print(json.dumps({"warmup": w, "logprobs": flag, "claims_per_min": round(rate, 3)}), flush=True)
    for r in range(args.rounds):
        # on, off, then off, on: a drift in the machine's speed falls on both ways alike
        for flag in ((True, False) if r % 2 == 0 else (False, True)):
            rate, labels, cpu = await one_round(args, claims, flag)
            rates[flag].append(rate)
            cpus[flag].append(cpu["server_cpu_s_per_claim"] + cpu["client_cpu_s_per_claim"])
            for cid, label in labels.items():
                seen[cid].add((flag, label))
            rows.append({"round": r, "logprobs": flag, "claims_per_min": round(rate, 3), **cpu})
            print(json.dumps(rows[-1]), flush=True)
    # logprobs only report: a claim's label should not depend on them (nor, on a server that repeats itself,
    # on the round)
    same = sum(1 for pairs in seen.values() if len({label for _, label in pairs}) == 1)
    on, off = statistics.median(rates[True]), statistics.median(rates[False])
    summary = {"claims": len(claims), "warmup_rounds": args.warmup, "top_logprobs": args.top_logprobs,
               "median_on": round(on, 3),
               "median_off": round(off, 3), "ratio_on_over_off": round(on / off, 4),
               "cpu_s_per_claim_on": round(statistics.median(cpus[True]), 3),
               "cpu_s_per_claim_off": round(statistics.median(cpus[False]), 3),
               "labels_same_in_every_round": f"{same}/{len(claims)}",
               "labels_that_moved": {cid: sorted(f"{'on' if f else 'off'}:{lab}" for f, lab in pairs)
                                     for cid, pairs in seen.items() if len({lab for _, lab in pairs}) > 1},
               "rounds": rows}
    print(json.dumps({k: v for k, v in summary.items() if k != "rounds"}))
    if args.out:
        args.out.write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    asyncio.run(main())
