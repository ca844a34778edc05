"""Serving speed of llama-server binaries side by side (issue 39: the build's optimisation plan must not
slow serving). Each binary serves the same GGUF in turn, round after round (A/B/A/B, so a load that changes
over time falls on both): 8 schema-constrained claim checks of at most 96 tokens at temperature 0, one at a
time and then 4 in flight. Prints each run's seconds and completion tokens (equal tokens: the same greedy
replies), then the per-binary lists.

    python benchmarks/llama_server_ab.py --model ~/.veracity/downloads/SmolLM2-135M-Instruct.Q4_1.gguf \\
        ~/.veracity/engines/llama.cpp/bin/llama-server /path/to/other/llama-server
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import subprocess
import time
import urllib.request

SCHEMA = {"type": "object", "required": ["label", "explanation"], "properties": {
    "label": {"type": "string", "enum": ["SUPPORTED", "REFUTED", "NOT_ENOUGH_INFO"]},
    "explanation": {"type": "string", "maxLength": 300}}}
CLAIMS = ["The Eiffel Tower is in Berlin.", "Marie Curie won two Nobel prizes.",
          "The Nile flows into the Mediterranean Sea.", "Tokyo hosted the 1964 Summer Olympics.",
          "Albert Einstein was born in Ulm.", "Mount Everest is in Peru.",
          "The Amazon River flows into the Pacific Ocean.", "Paris is the capital of France."]


def ask(port: int, claim: str) -> int:
    body = {"model": "m", "max_tokens": 96, "temperature": 0, "seed": 0,
            "messages": [{"role": "system",
                          "content": "You check claims against your knowledge. Reply in JSON."},
                         {"role": "user",
                          "content": f"Claim: {claim}\nGive the label and a short explanation."}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "v", "schema": SCHEMA}}}
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())["usage"]["completion_tokens"]


def one_run(binary: str, model: str, port: int, threads: int) -> tuple[float, int, float, int]:
    proc = subprocess.Popen([binary, "--model", model, "--port", str(port), "--host", "127.0.0.1",
                             "--ctx-size",
                             "16384", "--parallel", "4", "--threads", str(threads), "--no-webui"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"})
    try:
        for _ in range(1200):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).read()
                break
            except OSError:
                time.sleep(0.5)
        ask(port, "warm up")
        t0 = time.monotonic()
        tokens = sum(ask(port, c) for c in CLAIMS)
        one = time.monotonic() - t0
        t0 = time.monotonic()
        with cf.ThreadPoolExecutor(4) as ex:
            tokens4 = sum(ex.map(lambda c: ask(port, c), CLAIMS))
        four = time.monotonic() - t0
    finally:
        proc.terminate()
        proc.wait()
    return round(one, 2), tokens, round(four, 2), tokens4


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("binaries", nargs="+")
    ap.add_argument("--model", required=True, help="a GGUF file")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    runs: dict[str, list] = {b: [] for b in a.binaries}
    for rnd in range(a.rounds):
        for i, binary in enumerate(a.binaries):
            runs[binary].append(one_run(binary, a.model, 18600 + i, a.threads))
            print(json.dumps({"round": rnd, "binary": binary, "one_at_a_time_s": runs[binary][-1][0],
                              "tokens": runs[binary][-1][1], "four_in_flight_s": runs[binary][-1][2],
                              "tokens_4": runs[binary][-1][3]}), flush=True)
    for binary, rows in runs.items():
        print(binary, "one at a time:", [r[0] for r in rows], "4 in flight:", [r[2] for r in rows])


if __name__ == "__main__":
    main()
