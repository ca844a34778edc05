"""Prompt and decode speed of one llama-server on GGUF files that differ only in their encoding (SmolLM2's
Q4_1 as published against its Q8_0 re-encoding, veracity/models/reencode.py). Each file is served in turn,
round after round (A/B/A/B, so a load that changes over time falls on both): a 1,143-token prompt read fresh
(no prompt cache) for one token, then a 96-token greedy reply under a JSON schema. Prints the server's own
timings (prompt tokens/s, decode tokens/s).

    cd ~/.veracity/downloads && python benchmarks/gguf_encoding_speed.py --rounds 3 \\
        SmolLM2-135M-Instruct.Q4_1.gguf SmolLM2-135M-Instruct.Q8_0.gguf
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
import urllib.request

PASSAGES = " ".join(f"Passage {i}: The Eiffel Tower in Paris was finished in 1889 and is {i} metres from the "
                    "river." for i in range(40))
SCHEMA = {"type": "object", "required": ["label", "explanation"], "properties": {
    "label": {"type": "string", "enum": ["SUPPORTED", "REFUTED", "NOT_ENOUGH_INFO"]},
    "explanation": {"type": "string", "maxLength": 300}}}


def post(port: int, path: str, body: dict) -> dict:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())


def measure(binary: str, gguf: str, port: int, tag: int) -> tuple[float, float, int]:
    proc = subprocess.Popen([binary, "-m", gguf, "--host", "127.0.0.1", "--port", str(port), "-c", "8192",
                             "--parallel", "4", "--threads", str(len(os.sched_getaffinity(0)))],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.2)
        read = post(port, "/completion", {"prompt": f"[{tag}] {PASSAGES}", "n_predict": 1,
                                          "cache_prompt": False, "temperature": 0})["timings"]
        reply = post(port, "/v1/chat/completions", {
            "model": "m", "max_tokens": 96, "temperature": 0, "seed": 0,
            "messages": [{"role": "user",
                          "content": "Claim: The Eiffel Tower is in Berlin. Give the label and a short "
                                     "explanation."}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "v", "schema": SCHEMA}}})
        return read["prompt_per_second"], reply["timings"]["predicted_per_second"], reply["usage"][
            "completion_tokens"]
    finally:
        proc.terminate()
        proc.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("gguf", nargs="+")
    ap.add_argument("--binary",
                    default=os.path.expanduser("~/.veracity/engines/llama.cpp/bin/llama-server"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--port", type=int, default=8471)
    args = ap.parse_args()
    seen: dict[str, list] = {g: [] for g in args.gguf}
    for r in range(args.rounds):
        for g in args.gguf:
            pp, tg, n = measure(args.binary, g, args.port, r)
            seen[g].append((pp, tg, n))
            print(f"round {r + 1} {os.path.basename(g)}: prompt {pp:.0f} tok/s, decode {tg:.1f} tok/s "
                  f"({n} tokens)", flush=True)
    for g, runs in seen.items():
        print(f"{os.path.basename(g)}: prompt {sorted(p for p, _, _ in runs)} decode "
              f"{sorted(round(t, 1) for _, t, _ in runs)}")


if __name__ == "__main__":
    main()
