"""The time of ``veracity check`` on one text against ``verify -i`` on the same claims (issue 44 point 5).

    python benchmarks/check_speed.py benchmarks/texts/longform-150.txt --endpoint http://127.0.0.1:8401/v1 \
        --model qwen2.5-coder-1.5b-instruct --index ~/.veracity/indexes/demo --out runs/check-speed

Both commands run as a user types them, one after the other, on the same endpoint with their default
concurrency and method (rag):

1. ``veracity check TEXT --json``: the whole long-form path (sentences, extraction with the sentence guard,
   check-worthiness, verification of the factual claims); its factual claims are read from the JSON;
2. ``veracity verify -i CLAIMS.jsonl -o OUT.jsonl``: the same factual claims, verified as a batch.

claims/min = factual claims verified / wall seconds * 60 for each; the ratio check / verify is what issue 44
asks to be at least 0.8. The result (``OUT/check-speed.json``) keeps both walls, the claim count, the labels
of both runs, and the endpoint.

``--server CMD`` (a shell command that serves the model on ``--endpoint``) starts a fresh server before each
command and stops it after, so neither pays the server's start and neither finds the other's prompts in the
server's prompt cache: run back to back on one server, ``verify -i`` sends exactly the prompts ``check``
just sent and llama-server answers them from its cache (measured: 107 s against 286 s for the same 12 claims'
verification). Without it, both use the running server as it is.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import httpx


@contextlib.contextmanager
def fresh_server(cmd: str | None, endpoint: str, log: Path) -> Iterator[None]:
    """``cmd`` started in its own process group, awaited until ``endpoint`` lists a model, stopped after."""
    if not cmd:
        yield
        return
    with log.open("a") as out:
        proc = subprocess.Popen(cmd, shell=True, stdout=out, stderr=out, start_new_session=True)
    try:
        deadline = time.monotonic() + 600
        while True:
            if proc.poll() is not None:
                sys.exit(f"error: the server command exited {proc.returncode} (see {log})")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(endpoint.rstrip("/") + "/models", timeout=2).status_code == 200:
                    break
            if time.monotonic() > deadline:
                sys.exit(f"error: no answer from {endpoint} 600 s after starting the server (see {log})")
            time.sleep(1)
        yield
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait()


def _run(cmd: list[str], stdout: Path, stderr: Path) -> float:
    t0 = time.monotonic()
    with stdout.open("w") as out, stderr.open("w") as err:
        rc = subprocess.run(cmd, stdout=out, stderr=err).returncode
    wall = time.monotonic() - t0
    if rc != 0:
        sys.exit(f"error: {' '.join(cmd[:4])} ... exited {rc} (see {stderr})")
    return wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("text", type=Path)
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--index", required=True)
    ap.add_argument("--method", default="rag")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--server", help="shell command serving the model on --endpoint, fresh per command")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    common = ["--endpoint", a.endpoint, "--model", a.model, "--index", a.index, "--method", a.method]
    cli = [sys.executable, "-m", "veracity"]

    with fresh_server(a.server, a.endpoint, a.out / "server.log"):
        check_wall = _run(cli + ["check", str(a.text), "--json", *common], a.out / "check.json",
                          a.out / "check.err")
    record = json.loads((a.out / "check.json").read_text())
    claims = [c for s in record["sentences"] for c in s["claims"] if c.get("category") == "factual"]
    with (a.out / "claims.jsonl").open("w") as f:
        for c in claims:
            f.write(json.dumps({"id": c["id"], "claim": c["text"]}) + "\n")
    verified = a.out / "verify.jsonl"
    verified.unlink(missing_ok=True)
    with fresh_server(a.server, a.endpoint, a.out / "server.log"):
        verify_wall = _run(cli + ["verify", "-i", str(a.out / "claims.jsonl"), "-o", str(verified), *common],
                           a.out / "verify.out", a.out / "verify.err")
    again = {r["id"]: r.get("label") for r in map(json.loads, verified.read_text().splitlines())}
    n = len(claims)
    result = {
        "text": str(a.text), "words": len(a.text.read_text().split()), "sentences": len(record["sentences"]),
        "factual_claims": n, "endpoint": a.endpoint, "model": a.model, "method": a.method,
        "server": a.server or "the running one, as it was",
        "check_wall_s": round(check_wall, 1), "verify_wall_s": round(verify_wall, 1),
        "check_claims_per_min": round(n / check_wall * 60, 2) if n else None,
        "verify_claims_per_min": round(n / verify_wall * 60, 2) if n else None,
        "ratio": round(verify_wall / check_wall, 3) if n else None,
        "labels": {c["id"]: {"check": c.get("label"), "verify": again.get(c["id"])} for c in claims},
        "measured_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    (a.out / "check-speed.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "labels"}, indent=1))


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:  # the server (--server) is stopped by fresh_server; files written so far stay
        print("interrupted: what was measured so far is in --out's folder; run the script again to measure",
              file=sys.stderr)
        raise SystemExit(130) from None
