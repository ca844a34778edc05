"""Probe (issue 44 point 5): check-worthiness through an assistant prefill on llama-server, against the role's
JSON schema, on the same prompts.

Each prompt is sent twice at temperature 0: as ``check.worthiness`` sends it (``response_format`` with the
role's JSON schema), and with an assistant message ``{ "kind": "`` appended (llama-server continues it: its
``--prefill-assistant`` is on by default) and a grammar of the three values alone. It prints each kind both
ways, the generated tokens and the seconds, and the totals. Not part of the product: a measurement of what
the JSON frame costs on a CPU server.

    python benchmarks/worthiness_prefill_probe.py --endpoint http://127.0.0.1:8400/v1
"""

from __future__ import annotations

import argparse
import json
import time

import httpx

from veracity.check.roles import WORTHINESS, CheckWorthiness

# the 11 factual claims `check` extracted from benchmarks/texts/longform-150.txt (the 0.70 run), with their
# sentences, then an opinion, advice and a question
PAIRS = [
    ("Marie Curie was a Polish and naturalised-French physicist and chemist.",
     "Marie Curie was a Polish and naturalised-French physicist and chemist."),
    ("Marie Curie shared the 1903 Nobel Prize in Physics with her husband, Pierre Curie, for their research "
     "on radioactivity.",
     "She shared the 1903 Nobel Prize in Physics with her husband, Pierre Curie, for their research on "
     "radioactivity."),
    ("In 1911 she won the Nobel Prize in Chemistry for the discovery of radium and polonium.",
     "In 1911 she won the Nobel Prize in Chemistry for the discovery of radium and polonium."),
    ("Marie Curie was the first woman to win a Nobel Prize.",
     "She was the first woman to win a Nobel Prize."),
    ("The Eiffel Tower is a lattice tower on the Champ de Mars in Paris, France.",
     "The Eiffel Tower is a lattice tower on the Champ de Mars in Paris, France."),
    ("The Eiffel Tower was named after the engineer Gustave Eiffel, whose company designed and built the "
     "tower.",
     "It was named after the engineer Gustave Eiffel, whose company designed and built the tower."),
    ("Rome is the capital city of Italy.",
     "Rome is the capital city of Italy, and it lies along the shores of the Arno Valley."),
    ("Rome lies along the shores of the Arno Valley.",
     "Rome is the capital city of Italy, and it lies along the shores of the Arno Valley."),
    ("Mount Everest is the highest mountain on Earth above sea level.",
     "Mount Everest is the highest mountain on Earth above sea level."),
    ("Mount Everest's height was measured in 2020 by a joint survey of Nepalese and Chinese authorities.",
     "Its height was measured in 2020 by a joint survey of Nepalese and Chinese authorities."),
    ("The Great Wall of China is a series of fortifications.",
     "The Great Wall of China is a series of fortifications."),
    ("Kyoto is a far better trip than Tokyo.", "I think Kyoto is a far better trip than Tokyo."),
    ("Everyone should visit Rome once.", "Everyone should visit Rome once."),
    ("Is the Nile the longest river?", "Is the Nile the longest river?"),
]
PREFILL = '{ "kind": "'
VALUES = 'root ::= "checkable_statement" | "opinion" | "no_statement"'


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--endpoint", default="http://127.0.0.1:8400/v1")
    ap.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    args = ap.parse_args()
    url = args.endpoint.rstrip("/") + "/chat/completions"
    schema = {"type": "json_schema",
              "json_schema": {"name": "w", "schema": CheckWorthiness.model_json_schema()}}
    same, tokens, seconds = 0, [0, 0], [0.0, 0.0]
    for claim, sentence in PAIRS:
        messages = [{"role": "system", "content": WORTHINESS.instructions},
                    *WORTHINESS.messages(claim=claim, sentence=sentence)]
        base = {"model": args.model, "temperature": 0, "seed": 3}
        t = time.perf_counter()
        a = httpx.post(url, json={**base, "messages": messages, "max_tokens": 32, "response_format": schema},
                       timeout=600).json()
        seconds[0] += time.perf_counter() - t
        t = time.perf_counter()
        b = httpx.post(url, json={**base, "messages": [*messages, {"role": "assistant", "content": PREFILL}],
                                  "max_tokens": 8, "grammar": VALUES}, timeout=600).json()
        seconds[1] += time.perf_counter() - t
        kind_a = json.loads(a["choices"][0]["message"]["content"])["kind"]
        # llama-server returns the prefill with the continuation
        kind_b = b["choices"][0]["message"]["content"].removeprefix(PREFILL)
        same += kind_a == kind_b
        tokens[0] += a["usage"]["completion_tokens"]
        tokens[1] += b["usage"]["completion_tokens"]
        print(f"{kind_a:20s} {kind_b:20s} {a['usage']['completion_tokens']:3d} "
              f"{b['usage']['completion_tokens']:3d}  {claim[:60]}")
    print(f"same kind {same} of {len(PAIRS)}; generated tokens {tokens[0]} (schema) vs {tokens[1]} "
          f"(prefill); {seconds[0]:.1f} s vs {seconds[1]:.1f} s")


if __name__ == "__main__":
    main()
