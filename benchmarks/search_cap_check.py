"""Trification's SEARCH role with its query list capped at ``max_queries`` against the old 5-query schema, at
the role level: the same prompts (HoVer dev claims, a ``random.Random(SEED)`` sample) at temperature 0 on a
server that repeats itself; prints, per claim, whether the queries the node keeps (the first max_queries)
are equal, then the count and both schemas' completion tokens.

    veracity serve --engine llama.cpp --repeatable --detach --port 8421
    python benchmarks/search_cap_check.py --endpoint http://127.0.0.1:8421/v1 --data-dir ../shared/data
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
from pathlib import Path

from veracity.pipeline.methods.trification.graph import NodeSpec
from veracity.pipeline.methods.trification.method import NodeRun
from veracity.pipeline.methods.trification.roles import SEARCH, SearchQueries, search_queries_model
from veracity.serving.client import LLMClient


async def compare(endpoint: str, model: str | None, claims: list[dict], max_queries: int) -> None:
    llm = LLMClient(endpoint, model, concurrency=1, max_tokens=320, temperature=0.0)
    same, tokens = 0, {"uncapped": 0, "capped": 0}
    async with llm:
        for c in claims:
            spec = NodeSpec("s_1", "SEARCH", c["claim"], "the facts the claim states", [])
            node = NodeRun(spec, input=c["claim"])
            msgs = SEARCH.messages(node=node, parents=[], max_queries=max_queries)
            kept = {}
            for name, output in (("uncapped", SearchQueries), ("capped", search_queries_model(max_queries))):
                first = len(llm.usage)
                out = await llm.generate(msgs, output, role="trification.search")
                tokens[name] += sum(r.completion_tokens for r in llm.usage[first:])
                kept[name] = [q.strip() for q in out.queries if q.strip()][:max_queries]
            same += kept["uncapped"] == kept["capped"]
            print(json.dumps({"uid": c["uid"], "equal": kept["uncapped"] == kept["capped"], **kept})[:400],
                  flush=True)
    print(f"kept queries equal on {same}/{len(claims)}; completion tokens uncapped {tokens['uncapped']}, "
          f"capped {tokens['capped']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--model", default=None)
    ap.add_argument("--data-dir", type=Path, required=True)
    ap.add_argument("--n", type=int, default=10)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--max-queries", type=int, default=3)
    a = ap.parse_args()
    claims = json.loads((a.data_dir / "hover" / "hover_dev_release_v1.1.json").read_text())
    asyncio.run(compare(a.endpoint, a.model, random.Random(a.seed).sample(claims, a.n), a.max_queries))


if __name__ == "__main__":
    main()
