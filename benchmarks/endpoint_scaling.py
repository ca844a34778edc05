"""Claims/min through 1 endpoint and through 2 (issue 17 point 5), and a model on paper for N replicas.

    python benchmarks/endpoint_scaling.py --endpoints http://127.0.0.1:8200/v1,http://127.0.0.1:8201/v1 \\
        --method direct --dataset hover --claims 24 --concurrency 8 --out /tmp/scaling.json

The same method runs twice on two disjoint, equally sized slices of one seeded sample (so the second run
finds none of the first's claims in a server's prefix cache): first through the first endpoint alone, then
through both behind one client (least outstanding requests, per-claim affinity). A few warm-up claims go
to every endpoint first (grammar compilation, first-request costs) and are not counted. ``--order 2,1``
reverses the runs.

Printed: per run claims done / failed, wall time, claims/min, total LLM tokens/s, tokens per claim (from the
traces), requests per endpoint and failovers; then the speed-up of 2 over 1 and the model on paper:

    claims/min(N) = N x e x 60 x R / T

with R a replica's measured total tokens/s (prompt + completion, from the 1-endpoint run), T the tokens per
claim of the method (from the traces) and e the balancing efficiency (1 assumed; the measured 2-endpoint
run gives e = speed-up / 2). The assumptions are printed with the numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def load_claims(dataset: str, n: int, seed: int, data_dir: str | None) -> list[dict[str, str]]:
    from veracity.bench.datasets import load_dataset
    from veracity.config import Settings

    data = load_dataset(dataset, Path(data_dir) if data_dir else Settings().data_dir, limit=n, seed=seed)
    return [{"id": c.id, "claim": c.text} for c, _ in data.claims]


async def run_config(endpoints: list[str], claims: list[dict[str, str]], method: str, index: str | None,
                     concurrency: int, out: Path, max_tokens: int | None = None) -> dict[str, Any]:
    """One run of ``claims`` through ``endpoints`` (one client); returns its figures."""
    from veracity.pipeline.api import Verifier
    from veracity.pipeline.config import VerifierConfig
    from veracity.serving.client import LLMClient

    notes: list[str] = []
    kw = {"max_tokens": max_tokens} if max_tokens else {}
    llm = LLMClient(",".join(endpoints), None, concurrency=256, notify=notes.append, **kw)
    async with llm:
        verifier = Verifier.from_config(VerifierConfig.of(method=method, index=index), llm=llm)
        t0 = time.perf_counter()
        stats = await verifier.averify_many(claims, out=out, concurrency=concurrency)
        wall = time.perf_counter() - t0
        pool = llm.pool.stats()
    rows = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    prompt = sum(c.get("prompt_tokens", 0) for r in rows for c in r.get("trace", {}).get("llm_calls", []))
    completion = sum(c.get("completion_tokens", 0) for r in rows for c in r.get("trace", {}).get("llm_calls",
                                                                                                 []))
    calls = sum(len(r.get("trace", {}).get("llm_calls", [])) for r in rows)
    done = len(rows)
    return {
        "endpoints": len(endpoints), "claims": len(claims), "done": done, "failed": len(stats.failed),
        "wall_s": round(wall, 2), "claims_per_min": round(60.0 * done / wall, 2) if wall > 0 else 0.0,
        "tokens_per_s": round((prompt + completion) / wall, 1) if wall > 0 else 0.0,
        "llm_calls_per_claim": round(calls / done, 2) if done else 0.0,
        "prompt_tokens_per_claim": round(prompt / done, 1) if done else 0.0,
        "completion_tokens_per_claim": round(completion / done, 1) if done else 0.0,
        "requests_per_endpoint": [e["assigned"] for e in pool["endpoints"]], "failovers": pool["failovers"],
        "notes": notes,
    }


def paper_model(tokens_per_s: float, tokens_per_claim: float, replicas: list[int],
                efficiency: float = 1.0) -> list[dict[str, float]]:
    """Predicted claims/min for N replicas: N x efficiency x 60 x R / T (see the module docstring)."""
    if tokens_per_claim <= 0:
        return []
    per = 60.0 * tokens_per_s / tokens_per_claim
    return [{"replicas": n, "claims_per_min": round(n * efficiency * per, 2)} for n in replicas]


def markdown(report: dict[str, Any]) -> str:
    lines = ["| endpoints | claims done / asked | failed | wall s | claims/min | total tok/s | LLM "
             "calls/claim "
             "| tokens/claim (prompt + completion) | requests per endpoint | failovers |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in report["runs"]:
        lines.append(f"| {r['endpoints']} | {r['done']}/{r['claims']} | {r['failed']} | {r['wall_s']:.1f} | "
                     f"{r['claims_per_min']:.2f} | {r['tokens_per_s']:.1f} | {r['llm_calls_per_claim']:.2f} "
                     "| "
                     f"{r['prompt_tokens_per_claim']:.0f} + {r['completion_tokens_per_claim']:.0f} | "
                     f"{' / '.join(map(str, r['requests_per_endpoint']))} | {r['failovers']} |")
    m = report["model"]
    lines += ["", f"speed-up of 2 endpoints over 1: {report['speedup']:.2f}x (balancing efficiency e = "
              f"{report['efficiency']:.2f})", "",
              f"model on paper: claims/min(N) = N x e x 60 x R / T with R = {m['tokens_per_s']:.1f} tok/s "
              f"(one replica, measured above), T = {m['tokens_per_claim']:.0f} tokens/claim "
              f"({report['method']}, "
              "from the traces)", "",
              "| replicas N | claims/min, e = 1 | claims/min, e measured |", "|---|---|---|"]
    for ideal, measured in zip(m["ideal"], m["measured_e"], strict=True):
        lines.append(f"| {ideal['replicas']} | {ideal['claims_per_min']:.1f} | "
                     f"{measured['claims_per_min']:.1f} |")
    return "\n".join(lines)


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    from veracity.config import split_endpoints

    endpoints = split_endpoints(args.endpoints)
    if len(endpoints) < 2:
        raise SystemExit("error: --endpoints needs two endpoints (the first is also the 1-endpoint run)")
    endpoints = endpoints[:2]
    order = [int(x) for x in args.order.split(",")]
    if sorted(order) != [1, 2]:
        raise SystemExit("error: --order is 1,2 or 2,1")
    warm = 2 * len(endpoints)
    claims = load_claims(args.dataset, warm + args.claims * 2, args.seed, args.data_dir)
    if len(claims) < warm + 2 * args.claims:
        raise SystemExit(f"error: the dataset has {len(claims)} claims, {warm + 2 * args.claims} needed")
    warmup, slices = claims[:warm], [claims[warm:warm + args.claims], claims[warm + args.claims:]]
    runs: dict[int, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="veracity-scaling-") as tmp:
        for i, ep in enumerate(endpoints):  # every server compiles the schemas once before timing
            await run_config([ep], warmup[2 * i:2 * i + 2], args.method, args.index, 2,
                             Path(tmp) / f"warm{i}.jsonl",
                             args.max_tokens)
        for k, part in zip(order, slices, strict=True):
            print(f"running {len(part)} claims through {k} endpoint(s) ...", file=sys.stderr, flush=True)
            runs[k] = await run_config(endpoints[:k], part, args.method, args.index, args.concurrency,
                                       Path(tmp) / f"run{k}.jsonl", args.max_tokens)
    one, two = runs[1], runs[2]
    speedup = two["claims_per_min"] / one["claims_per_min"] if one["claims_per_min"] else 0.0
    tokens_per_claim = one["prompt_tokens_per_claim"] + one["completion_tokens_per_claim"]
    replicas = [1, 2, 4, 8]
    return {
        "command": "python benchmarks/endpoint_scaling.py " + " ".join(shlex.quote(a) for a in args.argv),
        "method": args.method, "dataset": args.dataset, "seed": args.seed, "concurrency": args.concurrency,
        "runs": [one, two], "speedup": round(speedup, 3), "efficiency": round(speedup / 2, 3),
        "model": {"tokens_per_s": one["tokens_per_s"], "tokens_per_claim": tokens_per_claim,
                  "ideal": paper_model(one["tokens_per_s"], tokens_per_claim, replicas),
                  "measured_e": paper_model(one["tokens_per_s"], tokens_per_claim, replicas, speedup / 2),
                  "assumptions": [
                      "each replica sustains the measured tokens/s at the same batch occupancy (claims in "
                      "flight "
                      "per replica kept equal: scale --concurrency with N)",
                      "tokens per claim do not depend on the replica count (same model, same prompts)",
                      "retrieval and the client are not the bottleneck (a search takes milliseconds)",
                      "replicas share nothing (own GPU group or own cores); e covers balancing losses"]},
        "measured_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--endpoints", required=True,
                    help="two endpoints serving the same model, comma-separated")
    ap.add_argument("--method", default="direct")
    ap.add_argument("--index", default=None, help="index directory (methods that retrieve)")
    ap.add_argument("--dataset", default="hover", help="a bench dataset name or jsonl:PATH")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--claims", type=int, default=24, help="claims per run (two runs, disjoint)")
    ap.add_argument("--concurrency", type=int, default=8, help="claims in flight (the same for both runs)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-tokens", type=int, default=None)
    ap.add_argument("--order", default="1,2", help="which run goes first: 1,2 or 2,1")
    ap.add_argument("--out", default=None, help="write the report as JSON here")
    args = ap.parse_args(argv)
    args.argv = list(argv) if argv is not None else sys.argv[1:]
    if args.claims < 1 or args.concurrency < 1:
        raise SystemExit("error: --claims and --concurrency must be at least 1")
    report = asyncio.run(measure(args))
    print(report["command"])
    print(markdown(report))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()
