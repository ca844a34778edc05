"""Draw the hand-read sample of a decomposition run (issue 44): 30 extracted claims with ``random.Random(44)``
from the run's rows (``check_eval.py decomposition``'s ``OUT.rows.jsonl``), each beside its sentence.

    python benchmarks/hand_read_sample.py runs/check-eval/decomposition-s765.rows.jsonl
"""

from __future__ import annotations

import json
import random
import sys


def main(path: str, n: int = 30) -> None:
    rows = [json.loads(line) for line in open(path, encoding="utf-8")]
    claims = [(r["id"], i, s["text"], c) for r in rows for i, s in enumerate(r["sentences"])
              for c in s.get("extracted") or []]
    print(len(claims), "extracted claims in", len(rows), "responses")
    for k, (rid, i, sentence, claim) in enumerate(random.Random(44).sample(claims, min(n, len(claims))), 1):
        print(f"\n[{k}] {rid} s{i}\n  SENTENCE: {sentence.strip()[:400]}\n  CLAIM:    {claim}")


if __name__ == "__main__":
    main(sys.argv[1])
