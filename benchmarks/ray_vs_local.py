"""Time the local and the Ray backend on the same claims: claims/min of each, with the command it ran.

Each backend runs as its own `veracity verify -i CLAIMS -o OUT --backend ...` process into a fresh results
file, one after the other, against the same endpoint and index. Two rates are printed: over the whole
command's wall time (for Ray: starting the instance and the actors, each opening the index) and the
run's own (the summary line's claims/min, from the first claim started to the last written). The local
backend keeps ``--concurrency`` claims in flight; the Ray backend ``--ray-concurrency`` per actor (default:
``--concurrency`` divided among the ``--ray-actors``, so both keep as many claims in flight).

Usage:
  python benchmarks/ray_vs_local.py --claims claims.jsonl --method rag --index ~/.veracity/indexes/demo \\
      --endpoint http://127.0.0.1:8100/v1 [--concurrency 4] [--ray-actors 2] [--param k=2] [--json]
  python benchmarks/ray_vs_local.py --hover 12 ...   # the first 12 HoVer dev claims ($VERACITY_DATA_DIR)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SUMMARY = re.compile(r"(\d+) written, (\d+) already done, (\d+) failed.*?\(([\d.]+)\s+claims/min", re.S)


def parse_summary(text: str) -> dict:
    """The numbers of a batch's summary line: written, failed, the run's claims/min (None when absent)."""
    m = SUMMARY.search(text)
    if not m:
        return {"written": None, "failed": None, "run_claims_per_min": None}
    return {"written": int(m.group(1)), "failed": int(m.group(3)), "run_claims_per_min": float(m.group(4))}


def hover_claims(n: int, out: Path) -> Path:
    data = Path(os.environ.get("VERACITY_DATA_DIR", "")) / "hover" / "hover_dev_release_v1.1.json"
    if not data.is_file():
        sys.exit(f"error: {data} not found; set VERACITY_DATA_DIR or pass --claims FILE")
    rows = json.loads(data.read_text(encoding="utf-8"))[:n]
    out.write_text("".join(json.dumps({"id": f"hover-{r['uid']}", "claim": r["claim"]}) + "\n" for r in rows),
                   encoding="utf-8")
    return out


def command(args: argparse.Namespace, claims: Path, out: Path, backend: str) -> list[str]:
    per_actor = args.ray_concurrency or max(1, args.concurrency // args.ray_actors)
    cmd = [sys.executable, "-m", "veracity", "verify", "-i", str(claims), "-o", str(out), "--method",
           args.method,
           "--endpoint", args.endpoint]
    if args.index:
        cmd += ["--index", str(args.index)]
    if args.evidence:
        cmd += ["--evidence", args.evidence]
    for p in args.param:
        cmd += ["--param", p]
    # the backend's options last
    cmd += ["--concurrency", str(per_actor if backend == "ray" else args.concurrency), "--backend", backend]
    if backend == "ray":
        cmd += ["--ray-actors", str(args.ray_actors)]
        if args.ray_address:
            cmd += ["--ray-address", args.ray_address]
    return cmd


def run(cmd: list[str], n_claims: int) -> dict:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "COLUMNS": "400"})
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"error: {shlex.join(cmd)} exited with {proc.returncode}:\n{proc.stderr[-2000:]}")
    stats = parse_summary(proc.stdout + proc.stderr)
    done = stats["written"] if stats["written"] is not None else n_claims
    return {"command": shlex.join(cmd), "wall_s": round(wall, 1),
            "wall_claims_per_min": round(60.0 * done / wall, 2) if wall > 0 else 0.0, **stats}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--claims", type=Path, help="claims JSONL")
    src.add_argument("--hover", type=int, help="the first N HoVer dev claims")
    ap.add_argument("--method", default="rag")
    ap.add_argument("--index", type=Path, default=None)
    ap.add_argument("--evidence", default=None)
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--ray-actors", type=int, default=2)
    ap.add_argument("--ray-concurrency", type=int, default=None, help="claims in flight per actor")
    ap.add_argument("--ray-address", default=None)
    ap.add_argument("--param", action="append", default=[])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ray-vs-local-") as tmp:
        claims = args.claims or hover_claims(args.hover, Path(tmp) / "claims.jsonl")
        n = sum(1 for line in claims.read_text(encoding="utf-8").splitlines() if line.strip())
        rows = {}
        for backend in ("local", "ray"):
            rows[backend] = run(command(args, claims, Path(tmp) / f"{backend}.jsonl", backend), n)
    if args.json:
        print(json.dumps({"claims": n, **rows}, indent=2))
        return 0
    print("measured with: python benchmarks/ray_vs_local.py " + shlex.join(sys.argv[1:] if argv is None
                                                                           else argv))
    print("| backend | claims | wall s | claims/min (wall) | claims/min (run) | failed |")
    print("|---|---|---|---|---|---|")
    for backend, r in rows.items():
        print(f"| {backend} | {n} | {r['wall_s']} | {r['wall_claims_per_min']} | {r['run_claims_per_min']} | "
              f"{r['failed']} |")
    for backend, r in rows.items():
        print(f"\n{backend}: {r['command']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
