"""Write a HoVer claim file in which entities repeat, to measure MERMAID's evidence memory where it can help.

A random HoVer sample rarely returns to an entity (2 of the 50 seeded claims share a supporting article
with an earlier claim), so the memory has nothing to reuse there. Across HoVer dev, 68 articles support
claims of two or more different HotpotQA questions (67 of two, one of three), hence the defaults. This picks
ENTITIES articles that are
supporting facts of at least PER_ENTITY dev claims, takes PER_ENTITY claims for each (no claim twice, each
from a different HotpotQA question),
and interleaves them (A1 B1 ... A2 B2 ...): at a concurrency below ENTITIES, a claim's earlier
same-entity claim has finished before it starts, as in a run over a stream of related claims.

    python benchmarks/hover_repeats.py OUT.jsonl [--entities 15] [--per-entity 2] [--seed 0]
    veracity bench run --dataset jsonl:OUT.jsonl --method mermaid --concurrency 4 --index IDX \
        --allow-leakage --out runs/repeats-mermaid
    veracity bench run --dataset jsonl:OUT.jsonl --method mermaid --ablation no-memory --concurrency 4 \
        --index IDX --allow-leakage --out runs/repeats-mermaid-no-memory

Reads HoVer dev through veracity's loader (``$VERACITY_DATA_DIR``, as ``bench run`` does). Each line:
id (HoVer uid), claim, label (SUPPORTED / REFUTED), entity (the shared article), gold_titles, hops.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import defaultdict
from pathlib import Path

from veracity.bench.datasets import load_dataset
from veracity.errors import VeracityError
from veracity.pipeline.types import Claim


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--entities", type=int, default=15)
    ap.add_argument("--per-entity", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.entities < 1 or args.per_entity < 2:
        print("error: --entities must be >= 1 and --per-entity >= 2 (a repeat needs two claims)",
              file=sys.stderr)
        return 2
    try:
        records = load_dataset("hover", variant="dev").claims
    except VeracityError as exc:
        print(f"error: {exc}" + (f" (hint: {exc.hint})" if exc.hint else ""), file=sys.stderr)
        return 2
    by_title: dict[str, list[tuple[Claim, str]]] = defaultdict(list)
    for claim, label in records:
        for title in sorted(set(claim.meta["gold_titles"])):
            by_title[title].append((claim, str(label.value)))
    rng = random.Random(args.seed)
    candidates = sorted(t for t, claims in by_title.items() if len(claims) >= args.per_entity)
    rng.shuffle(candidates)
    used: set[str] = set()
    groups: list[tuple[str, list[tuple[Claim, str]]]] = []
    for title in candidates:
        # one claim per HotpotQA question: HoVer derives several claims from one question (the same
        # facts, mutated), and a repeat of those would test recall of near-duplicates, not of an entity
        by_question: dict[str, list[tuple[Claim, str]]] = defaultdict(list)
        for claim, label in by_title[title]:
            if claim.id not in used:
                by_question[str(claim.meta["hpqa_id"])].append((claim, label))
        if len(by_question) < args.per_entity:
            continue
        pick = [rng.choice(by_question[q]) for q in rng.sample(sorted(by_question), args.per_entity)]
        used.update(claim.id for claim, _ in pick)
        groups.append((title, pick))
        if len(groups) == args.entities:
            break
    if len(groups) < args.entities:
        print(f"error: only {len(groups)} entities have {args.per_entity} unused claims", file=sys.stderr)
        return 2
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as f:
        for i in range(args.per_entity):
            for title, pick in groups:
                claim, label = pick[i]
                f.write(json.dumps({
                    "id": claim.id, "claim": claim.text, "label": label, "entity": title,
                    "gold_titles": claim.meta["gold_titles"], "hops": claim.meta["hops"],
                }, ensure_ascii=False) + "\n")
    print(f"{args.out}: {args.entities * args.per_entity} claims, "
          f"entities: {', '.join(t for t, _ in groups)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
