"""Load test (issue 15 point 6): N claims at M in flight through one server, R rounds, the server restarted
between rounds. Loopback only, bounded in count (--claims) and time (--timeout per round).

Reports per round: claims written / failed (target 0), the fallback rate (claims whose verdict came from a
traced fallback: a role's reply never validated, or the binary rule), p50 / p99 claim latency (the trace's
``timings.total_s``), wall time and claims/min. Writes ``OUT/load.json`` and prints a markdown table.

    python benchmarks/load_test.py --out /tmp/load --claims 64 --in-flight 32 --rounds 2 --port 8011

The server is veracity's managed one (``veracity serve --detach --port PORT``, the CPU default model
unless --model); it is stopped before each round and started again, and stopped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

VERACITY = [sys.executable, "-m", "veracity"]


def quantile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    pos = q * (len(values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (pos - lo)


def fell_back(record: dict) -> bool:
    events = record.get("trace", {}).get("events", [])
    # a role's Fallback is traced with a `fallback` note (event `<method>.agent_failed` or its own kind)
    return any("fallback" in e or str(e.get("kind", "")).endswith(("agent_failed", "label_space.forced"))
               for e in events)


def write_claims(path: Path, n: int, dataset: str, seed: int) -> int:
    from veracity.bench.datasets import load_dataset
    from veracity.config import Settings

    data = load_dataset(dataset, Settings().data_dir, limit=n, seed=seed)
    with path.open("w", encoding="utf-8") as fh:
        for claim, _ in data.claims:
            fh.write(json.dumps({"id": claim.id, "claim": claim.text}) + "\n")
    return len(data.claims)


def restart_server(port: int, model: str | None) -> float:
    subprocess.run(VERACITY + ["serve", "--stop"], check=False, capture_output=True)
    t0 = time.perf_counter()
    cmd = VERACITY + ["serve", "--detach", "--port", str(port)] + (["--model", model] if model else [])
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return time.perf_counter() - t0


def one_round(args, claims: Path, out: Path) -> dict:
    cmd = VERACITY + ["verify", "-i", str(claims), "-o", str(out), "--method", args.method, "--endpoint",
                      f"http://127.0.0.1:{args.port}/v1", "--concurrency", str(args.in_flight)]
    if args.index:
        cmd += ["--index", args.index]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    wall = time.perf_counter() - t0
    records = [json.loads(line)
               for line in out.read_text(encoding="utf-8").splitlines()] if out.exists() else []
    latencies = [r["trace"]["timings"]["total_s"] for r in records]
    ids = [r["id"] for r in records]
    return {
        "exit_code": proc.returncode, "written": len(records), "duplicated": len(ids) - len(set(ids)),
        "failed": args.n - len(set(ids)), "fallback_rate": (sum(map(fell_back,
                                                                    records)) / len(records)) if records
            else None,
        "latency_p50_s": quantile(latencies, 0.5), "latency_p99_s": quantile(latencies, 0.99),
        "latency_mean_s": statistics.fmean(latencies) if latencies else None,
        "wall_s": wall, "claims_per_min": 60 * len(records) / wall if wall > 0 else 0.0,
        "stderr_tail": proc.stderr[-600:],
            "summary": proc.stdout.strip().splitlines()[-1:] if proc.stdout else [],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--claims", type=int, default=64)
    ap.add_argument("--in-flight", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--method", default="direct")
    ap.add_argument("--index", default=None)
    ap.add_argument("--dataset", default="hover")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--port", type=int, default=8011)
    ap.add_argument("--model", default=None)
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per round at most")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    claims = args.out / "claims.jsonl"
    args.n = write_claims(claims, args.claims, args.dataset, args.seed)
    rounds = []
    try:
        for r in range(1, args.rounds + 1):
            start_s = restart_server(args.port, args.model)
            res = {"round": r, "server_start_s": start_s, **one_round(args, claims,
                                                                      args.out / f"round{r}.jsonl")}
            rounds.append(res)
            (args.out / "load.json").write_text(json.dumps({"command": " ".join(sys.argv), "claims": args.n,
                                                            "in_flight": args.in_flight,
                                                            "method": args.method,
                                                            "rounds": rounds}, indent=2))
            print(f"round {r}: {res['written']}/{args.n} written, {res['failed']} failed, "
                  f"p50 {res['latency_p50_s']:.1f}s p99 {res['latency_p99_s']:.1f}s", flush=True)
    finally:
        subprocess.run(VERACITY + ["serve", "--stop"], check=False, capture_output=True)
    print(f"\n`{' '.join(['python'] + sys.argv)}`\n")
    print("| round | claims | in flight | written | failed | duplicated | fallback rate | p50 s | p99 s | "
          "wall s | claims/min |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for res in rounds:
        fb = "n/a" if res["fallback_rate"] is None else f"{res['fallback_rate']:.2f}"
        print(f"| {res['round']} | {args.n} | {args.in_flight} | {res['written']} | {res['failed']} | "
              f"{res['duplicated']} "
              f"| {fb} | {res['latency_p50_s']:.1f} | {res['latency_p99_s']:.1f} | {res['wall_s']:.0f} "
              f"| {res['claims_per_min']:.1f} |")
    sys.exit(0 if all(r["failed"] == 0 and r["duplicated"] == 0 for r in rounds) else 1)


if __name__ == "__main__":
    os.environ.pop("VERACITY_ENDPOINT", None)
    main()
