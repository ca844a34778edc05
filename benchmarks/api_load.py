"""API load benchmark (issue 16 point 6): N claims through one `veracity web` app by C concurrent HTTP
clients (each ``POST /v1/verify``, one claim at a time), against ``veracity verify -i`` on the same claims
with ``--concurrency C``. Loopback only; bounded in claims (--claims, at most 500) and time (--timeout per
side: the API side stops sending when it runs out, the CLI run is killed).

Reports for each side: claims answered, errors (non-200 answers and transport errors, by kind), p50 / p99
latency and claims/min, and the API / CLI claims-per-minute ratio, with the commands that produced them.
API latency is the client's request time (queueing in the app included); CLI latency is each claim's
``trace.timings.total_s``. Writes ``OUT/api_load.json``.

    python benchmarks/api_load.py --out /tmp/api-load --claims 24 --clients 4 --method rag \\
        --index ~/.veracity/indexes/demo --endpoint http://127.0.0.1:8100/v1

The app runs as ``python -m veracity web`` on a free port with a fresh ``VERACITY_HOME`` under OUT (its
history and jobs stay there) and ``--max-checks C``. The model server is shared, and the order matters: on
the 2-core CPU box, 6 rag claims at 2 in flight ran about 3x faster on whichever side went second (the
server's prefix cache then holds every prompt). So a warm-up pass (the same claims through ``verify -i``
into ``OUT/warmup.jsonl``, not measured) runs first unless ``--no-warmup``; ``--cli-first`` swaps the order.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from load_test import quantile  # noqa: E402  (the same interpolated quantile as the load test)

VERACITY = [sys.executable, "-m", "veracity"]
MAX_CLAIMS = 500




def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def load_claims(args) -> list[dict]:
    if args.claims_file:
        rows = [json.loads(x) for x in Path(args.claims_file).read_text(encoding="utf-8").splitlines()
                if x.strip()]
        rows = rows[:args.claims]
    else:
        from veracity.bench.datasets import load_dataset
        from veracity.config import Settings

        data = load_dataset(args.dataset, Settings().data_dir, limit=args.claims, seed=args.seed)
        rows = [{"id": c.id, "claim": c.text} for c, _ in data.claims]
    out, seen = [], set()
    for i, r in enumerate(rows):
        cid = str(r.get("id", i))
        if cid not in seen:
            seen.add(cid)
            out.append({"id": cid, "claim": r["claim"]})
    return out


def start_app(args, home: Path, port: int) -> tuple[subprocess.Popen, list[str]]:
    cmd = VERACITY + ["web", "--port", str(port), "--max-checks", str(args.clients)]
    if args.index:
        cmd += ["--index", args.index]
    if args.endpoint:
        cmd += ["--endpoint", args.endpoint]
    env = {**os.environ, "VERACITY_HOME": str(home)}
    log = open(home / "web.log", "w")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    import httpx

    end = time.time() + 180
    while time.time() < end:
        if proc.poll() is not None:
            raise SystemExit(f"veracity web exited ({proc.returncode}); see {home / 'web.log'}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                return proc, cmd
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    proc.terminate()
    raise SystemExit(f"veracity web did not become healthy in 180 s; see {home / 'web.log'}")


async def api_side(args, claims: list[dict], port: int) -> dict:
    import httpx

    queue: asyncio.Queue[dict] = asyncio.Queue()
    for c in claims:
        queue.put_nowait(c)
    latencies: list[float] = []
    errors: Counter[str] = Counter()
    labels: Counter[str] = Counter()
    deadline = time.perf_counter() + args.timeout

    async def client() -> None:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=args.timeout) as http:
            while not queue.empty() and time.perf_counter() < deadline:
                c = queue.get_nowait()
                t0 = time.perf_counter()
                try:
                    resp = await http.post("/v1/verify", json={"claim": c["claim"], "method": args.method,
                                                               "labels": args.labels})
                except httpx.HTTPError as exc:
                    errors[type(exc).__name__] += 1
                    continue
                if resp.status_code != 200:
                    errors[f"HTTP {resp.status_code}"] += 1
                    continue
                latencies.append(time.perf_counter() - t0)
                labels[resp.json()["label"]] += 1

    t0 = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(args.clients)))
    wall = time.perf_counter() - t0
    return {"answered": len(latencies), "unsent": queue.qsize(), "errors": dict(errors),
            "labels": dict(labels),
            "latency_p50_s": quantile(latencies, 0.5), "latency_p99_s": quantile(latencies, 0.99),
            "wall_s": wall, "claims_per_min": 60 * len(latencies) / wall if wall > 0 else 0.0}


def cli_side(args, claims_path: Path, out: Path, home: Path) -> dict:
    cmd = VERACITY + ["verify", "-i", str(claims_path), "-o", str(out), "--method", args.method, "--labels",
                      args.labels, "--concurrency", str(args.clients)]
    if args.index:
        cmd += ["--index", args.index]
    if args.endpoint:
        cmd += ["--endpoint", args.endpoint]
    env = {**os.environ, "VERACITY_HOME": str(home)}
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env)
        code, stderr = proc.returncode, proc.stderr
    except subprocess.TimeoutExpired:
        code, stderr = "timeout", ""
    wall = time.perf_counter() - t0
    records = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()] if out.exists() else []
    lat = [r["trace"]["timings"]["total_s"] for r in records]
    failed = [ln for ln in stderr.splitlines() if ln.startswith("failed")]
    return {"answered": len(records), "exit_code": code,
            "errors": {"failed claims": len(failed)} if failed else {},
            "labels": dict(Counter(r["label"] for r in records)),
            "latency_p50_s": quantile(lat, 0.5), "latency_p99_s": quantile(lat, 0.99), "wall_s": wall,
            "claims_per_min": 60 * len(records) / wall if wall > 0 else 0.0, "command": shlex.join(cmd)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--claims", type=int, default=24, help=f"claims (at most {MAX_CLAIMS})")
    ap.add_argument("--clients", type=int, default=4, help="concurrent HTTP clients = CLI --concurrency")
    ap.add_argument("--method", default="rag")
    ap.add_argument("--labels", default="3way")
    ap.add_argument("--index", default=None)
    ap.add_argument("--endpoint", default=None, help="model endpoint (default: the managed server)")
    ap.add_argument("--claims-file", default=None, help="JSONL claims (default: --dataset)")
    ap.add_argument("--dataset", default="hover")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=900, help="seconds per side")
    ap.add_argument("--cli-first", action="store_true")
    ap.add_argument("--no-warmup", action="store_true", help="skip the unmeasured warm-up pass")
    args = ap.parse_args()
    if not 1 <= args.claims <= MAX_CLAIMS or args.clients < 1:
        raise SystemExit(f"--claims must be 1..{MAX_CLAIMS} and --clients at least 1")
    args.out.mkdir(parents=True, exist_ok=True)
    claims = load_claims(args)
    claims_path = args.out / "claims.jsonl"
    claims_path.write_text("".join(json.dumps(c) + "\n" for c in claims), encoding="utf-8")
    home = args.out / "home"
    home.mkdir(exist_ok=True)
    cli_out = args.out / "cli-results.jsonl"
    cli_out.unlink(missing_ok=True)
    port = free_port()

    def run_api() -> tuple[dict, list[str]]:
        proc, cmd = start_app(args, home, port)
        try:
            return asyncio.run(api_side(args, claims, port)), cmd
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()

    if not args.no_warmup:
        warm = args.out / "warmup.jsonl"
        warm.unlink(missing_ok=True)
        cli_side(args, claims_path, warm, home)
    if args.cli_first:
        cli = cli_side(args, claims_path, cli_out, home)
        api, app_cmd = run_api()
    else:
        api, app_cmd = run_api()
        cli = cli_side(args, claims_path, cli_out, home)
    api["command"] = (f"{shlex.join(app_cmd)}  +  {args.clients} httpx clients POST /v1/verify "
                      f"(method {args.method}, labels {args.labels})")
    ratio = api["claims_per_min"] / cli["claims_per_min"] if cli["claims_per_min"] > 0 else float("nan")
    report = {"claims": len(claims), "clients": args.clients, "method": args.method,
              "warmup": not args.no_warmup,
              "order":
              "cli first" if args.cli_first else "api first", "api": api, "cli": cli,
              "api_over_cli_claims_per_min": ratio,
              "benchmark": shlex.join([sys.executable] + sys.argv)}
    (args.out / "api_load.json").write_text(json.dumps(report, indent=2))
    print(f"# API load: {len(claims)} claims, {args.clients} clients / --concurrency {args.clients}, "
          f"method {args.method} ({report['order']}, "
          f"{'after a warm-up pass' if report['warmup'] else 'no warm-up'})\n")
    print("| side | answered | errors | p50 s | p99 s | claims/min |")
    print("|---|---|---|---|---|---|")
    for name, side in (("API", api), ("CLI", cli)):
        errs = ", ".join(f"{k}: {v}" for k, v in side["errors"].items()) or "0"
        print(f"| {name} | {side['answered']} | {errs} | {side['latency_p50_s']:.2f} | "
              f"{side['latency_p99_s']:.2f} "
              f"| {side['claims_per_min']:.1f} |")
    print(f"\nAPI / CLI claims per minute: {ratio:.2f}")
    print(f"\nbenchmark: {report['benchmark']}\nAPI: {api['command']}\nCLI: {cli['command']}")


if __name__ == "__main__":
    main()
