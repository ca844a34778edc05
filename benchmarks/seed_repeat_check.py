"""Does a sampled run repeat? ``direct`` at temperature 1 on one claim, run seed 0 three times and run seed 1
once, against a server (a fresh one: its prompt cache empty before the first run); prints the start of each
explanation. On a batching server with a prompt cache the seed-0 runs can differ (the first reads the prompt
fresh, the others from the cache); on ``veracity serve --repeatable`` they must not.

    veracity serve --engine llama.cpp --detach --port 8411            # or with --repeatable
    python benchmarks/seed_repeat_check.py --endpoint http://127.0.0.1:8411/v1
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from veracity.config import Settings
from veracity.pipeline.api import Verifier
from veracity.pipeline.types import Claim

CLAIM = Claim("hover-dogs", "Greater Swiss Mountain Dog and Harrier are both dog breeds.")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--model", default=None)
    a = ap.parse_args()
    home = Path(tempfile.mkdtemp(prefix="seed-repeat."))
    replies = []
    for seed in (0, 0, 0, 1):
        v = Verifier(method="direct", endpoint=a.endpoint, model=a.model,
                     settings=Settings(home=home, seed=seed),
                     **{"judge.temperature": 1.0, "judge.max_tokens": 512})
        try:
            replies.append(v.verify(CLAIM).explanation)
        finally:
            v.close()
        print(seed, repr(replies[-1][:70]), flush=True)
    print("seed 0 repeated" if len(set(replies[:3])) == 1 else "seed 0 did NOT repeat",
          "| seed 1 differs" if replies[3] != replies[0] else "| seed 1 gave seed 0's reply")


if __name__ == "__main__":
    main()
