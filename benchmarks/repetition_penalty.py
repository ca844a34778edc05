"""SmolLM2's repetition loops: ``direct`` (closed book) and ``rag`` (the demo index) on 12 fixed claims, once
per sampling setting, against a served model. Prints, per setting and method: wall time, tokens generated,
LLM calls, how many explanations ran to the schema's 600-character cap, and the labels. Each setting replaces
the model's registry settings (veracity.models.registry.sampling_defaults) in every request, so ``{}`` is
the model without any penalty.

    veracity serve --engine llama.cpp     # SmolLM2, the CPU default
    python benchmarks/repetition_penalty.py --endpoint http://127.0.0.1:8000/v1 --out pen.jsonl \\
        '{}' '{"frequency_penalty": 0.3}' '{"frequency_penalty": 0.6}' '{"presence_penalty": 0.6}'

The claims are the fault suite's four and eight more written for this measurement (not drawn from a
benchmark), so nothing here is an evaluation result.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from veracity.pipeline.api import Verifier
from veracity.serving import client as client_module

CLAIMS = ["Zombieland was directed by Ruben Fleischer.", "Nicole Kidman is an Australian actress.",
          "The Eiffel Tower is in Berlin.", "Marie Curie won two Nobel prizes.",
          "The Eiffel Tower was finished in 1889.", "Rome is on the Arno.",
          "Kyoto was the capital of Japan for over a thousand years.",
          "The Amazon flows into the Pacific Ocean.",
          "Albert Einstein was born in Ulm.", "Mount Everest is in the Alps.",
          "The Great Wall of China is a UNESCO World Heritage Site.", "Paris is the capital of Italy."]
PENALTIES = ("frequency_penalty", "presence_penalty", "repetition_penalty", "repeat_penalty")
CAP = 550  # an explanation this long ran to (or near) the schema's 600 characters


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--index", default=str(Path("~/.veracity/indexes/demo").expanduser()))
    ap.add_argument("--out", required=True, help="one JSON line per setting and method, appended")
    ap.add_argument("settings", nargs="+", help="JSON objects of sampling settings, e.g. '{}'")
    args = ap.parse_args()
    setting: dict = {}
    tokens: list[int] = []
    post = client_module.LLMClient._post_with_retries

    async def with_setting(self, body, cut=None):
        body = {k: v for k, v in body.items() if k not in PENALTIES} | setting
        data, sent = await post(self, body, cut)
        tokens.append(int((data.get("usage") or {}).get("completion_tokens", 0)))
        return data, sent

    client_module.LLMClient._post_with_retries = with_setting
    with open(args.out, "a", encoding="utf-8") as out:
        for text in args.settings:
            for method in ("direct", "rag"):
                setting.clear()
                setting.update(json.loads(text))
                tokens.clear()
                where = {"index": args.index} if method == "rag" else {"evidence": "none"}
                v = Verifier(method=method, endpoint=args.endpoint, model=args.model, **where)
                t0 = time.time()
                verdicts = [v.verify(c) for c in CLAIMS]
                v.close()
                lengths = [len(x.explanation or "") for x in verdicts]
                row = {"setting": setting, "method": method, "wall_s": round(time.time() - t0, 1),
                       "tokens": sum(tokens), "calls": len(tokens), "capped": sum(n >= CAP for n in lengths),
                       "labels": [str(x.label.value) for x in verdicts], "explanation_chars": lengths}
                out.write(json.dumps(row) + "\n")
                out.flush()
                print(f"{json.dumps(setting):34} {method:6} {row['wall_s']:6.1f} s {row['tokens']:5} tokens "
                      f"{row['calls']:3} calls {row['capped']:2}/12 at the cap  "
                      f"{''.join(lb[0] for lb in row['labels'])}", flush=True)


if __name__ == "__main__":
    main()
