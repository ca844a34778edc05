"""Check-worthiness against a labelled set of opinions and facts (issue 44 point 2).

    # the set's composition and split (no model)
    python benchmarks/opinion_eval.py show
    # measure veracity check's sorting on the held-out part (the model-free rule alone, then with the role)
    python benchmarks/opinion_eval.py measure --split held-out
    python benchmarks/opinion_eval.py measure --split held-out --endpoint http://127.0.0.1:8400/v1 \
        --model qwen2.5-coder-1.5b-instruct --out runs/opinions-heldout.json

The set (frozen in the commit that adds this script, before anything was measured on it):

- ``benchmarks/opinions/written.jsonl``: 105 items written for this set (60 opinions of the kinds a
  journalist's or a travel text holds — judgements, preferences, recommendations, predictions — 40 factual
  statements on the same topics, true and false alike, with superlatives, numbers and award names such as
  "Best Picture", and 5 non-statements). Each has its ``sentence`` and the ``claim`` an extractor would give
  (``I think Kyoto is a far better trip than Tokyo.`` -> ``Kyoto is a far better trip than Tokyo.``).
- from ``../shared/data/factcheck_bench/factcheck-GPT-benchmark.jsonl``: every claim its annotators labelled
  ``opinion`` or ``not_a_claim`` (17), and 40 claims they labelled ``factual`` (``random.Random(44)``), each
  with its sentence;
- from ``../shared/data/fever/paper_dev.jsonl``: 30 SUPPORTS / REFUTES claims (``random.Random(44)``), each
its
  own sentence (FEVER's refuted claims are false statements a checker must still verify).

The split: an item is held out when the sha1 of ``opinion-set-v1:<id>`` ends in a hex digit below ``a``
(about 5 of 8 of the items); the rest is the development part, the only part looked at while changing the
rules. What is measured: opinions (and non-statements) skipped, i.e. sorted as anything but ``factual``,
and factual claims kept (sorted ``factual``), each with its count.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("VERACITY_DATA_DIR") or ROOT.parent / "shared" / "data")
WRITTEN = Path(__file__).resolve().parent / "opinions" / "written.jsonl"
SALT = "opinion-set-v1"


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in Path(path).read_text(encoding="utf-8").splitlines() if x.strip()]


def split_of(item_id: str) -> str:
    return "held-out" if hashlib.sha1(f"{SALT}:{item_id}".encode()).hexdigest()[-1] < "a" else "dev"


def items(data: Path = DATA) -> list[dict[str, Any]]:
    """The whole set: ``{id, sentence, claim, label, source, split}``."""
    out = [{**x, "source": "written"} for x in read_jsonl(WRITTEN)]
    factual: list[dict[str, Any]] = []
    for i, row in enumerate(read_jsonl(data / "factcheck_bench" / "factcheck-GPT-benchmark.jsonl")):
        for k, s in sorted(row["sentences"].items(), key=lambda kv: int(kv[0].removeprefix("sentence"))):
            for j, (c, cat) in enumerate(zip(s.get("claims") or [], s.get("claim_checkworthiness") or [],
                                             strict=False)):
                item = {"id": f"fcgpt-{i}-{k}-{j}", "sentence": s["text"], "claim": c, "label": cat,
                        "source": "factcheck-gpt"}
                (factual if cat == "factual" else out).append(item)
    out += random.Random(44).sample(factual, 40)
    fever = [r for r in read_jsonl(data / "fever" / "paper_dev.jsonl") if r["label"] in ("SUPPORTS",
                                                                                         "REFUTES")]
    for r in random.Random(44).sample(fever, 30):
        out.append({"id": f"fever-{r['id']}", "sentence": r["claim"], "claim": r["claim"], "label": "factual",
                    "source": "fever", "fever_label": r["label"]})
    for x in out:
        x["split"] = split_of(x["id"])
    return out


def _rate(rows: list[dict[str, Any]], label_set: set[str], ok) -> dict[str, Any]:
    mine = [r for r in rows if r["label"] in label_set]
    hit = sum(1 for r in mine if ok(r["predicted"]))
    return {"n": len(mine), "hit": hit, "rate": round(hit / len(mine), 4) if mine else None}


def scores(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {"opinions_skipped": _rate(rows, {"opinion", "not_a_claim"}, lambda p: p != "factual"),
            "facts_kept": _rate(rows, {"factual"}, lambda p: p == "factual")}


async def _classify_all(rows: list[dict[str, Any]], endpoint: str | None, model: str | None,
                        concurrency: int) -> None:
    from veracity.check.extract import worthiness_of
    from veracity.check.roles import CheckParams

    params = CheckParams(worthiness=endpoint is not None)
    if endpoint is None:
        for r in rows:
            r["predicted"], r["why"] = await worthiness_of(r["claim"], r["sentence"], None, params)
        return
    from veracity.serving.client import LLMClient

    gate = asyncio.Semaphore(concurrency)
    async with LLMClient(endpoint, model=model) as llm:
        async def one(r: dict[str, Any]) -> None:
            async with gate:
                r["predicted"], r["why"] = await worthiness_of(r["claim"], r["sentence"], llm, params,
                                                               claim_id=r["id"])
        await asyncio.gather(*(one(r) for r in rows))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("show")
    m = sub.add_parser("measure")
    m.add_argument("--split", choices=("dev", "held-out", "all"), default="held-out")
    m.add_argument("--endpoint", default=None,
                   help="an OpenAI-compatible /v1 URL: with it check.worthiness is "
                   "asked too; without it only the model-free rule sorts")
    m.add_argument("--model", default=None)
    m.add_argument("--concurrency", type=int, default=4)
    m.add_argument("--out", type=Path, default=None)
    m.add_argument("--errors", action="store_true", help="print every wrongly sorted item (dev only)")
    a = ap.parse_args(argv)
    rows = items()
    if a.cmd == "show":
        from collections import Counter

        print(json.dumps({"items": len(rows), "by": {f"{k[0]}/{k[1]}/{k[2]}": v for k, v in sorted(
            Counter((r["split"], r["source"], r["label"]) for r in rows).items())}}, indent=1))
        return 0
    rows = [r for r in rows if a.split == "all" or r["split"] == a.split]
    if a.errors and a.split != "dev":
        print("--errors is for the development part only", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    asyncio.run(_classify_all(rows, a.endpoint, a.model, a.concurrency))
    result = {"split": a.split, "endpoint": a.endpoint, "model": a.model, **scores(rows),
              "elapsed_s": round(time.perf_counter() - t0, 1)}
    print(json.dumps(result, indent=1))
    if a.errors:
        for r in rows:
            if (r["predicted"] == "factual") != (r["label"] == "factual"):
                print(f"{r['label']:>11} -> {r['predicted']:<11} {r['claim']}  [{r['why']}]")
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps({**result, "rows": rows}, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
