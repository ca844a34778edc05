"""Do two runs of the same claims behave the same? Per claim: label, LLM calls (with their roles in order),
tool calls and prompt tokens, compared between two `veracity bench run` directories (or two `verify -o` JSONL
files).

A behaviour-preserving refactor proves itself with this on a fixed sample at temperature 0 and
concurrency 1 (docs/architecture.md; BENCHMARKS.md "Issue 12: behaviour before and after").

Usage: python benchmarks/same_behaviour.py BEFORE AFTER [--json]
Exit code 0 when every shared claim matches and both runs hold the same claims, 1 otherwise.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def load(path: Path) -> dict[str, dict]:
    """id -> result line, from a run directory (predictions.jsonl) or a JSONL file."""
    file = path / "predictions.jsonl" if path.is_dir() else path
    rows = {}
    for line in file.read_text(encoding="utf-8").splitlines():
        if line.strip():
            r = json.loads(line)
            rows[str(r["id"])] = r
    return rows


def signature(r: dict) -> dict:
    trace = r.get("trace") or {}
    return {
        "label": r.get("label"),
        "llm_calls": len(trace.get("llm_calls") or []),
        "roles": [c.get("role") for c in trace.get("llm_calls") or []],
        "tool_calls": len(trace.get("tool_calls") or []),
        "prompt_tokens": sum(int(c.get("prompt_tokens") or 0) for c in trace.get("llm_calls") or []),
    }


def compare(before: dict[str, dict], after: dict[str, dict]) -> dict:
    shared = sorted(set(before) & set(after))
    diffs = []
    for cid in shared:
        a, b = signature(before[cid]), signature(after[cid])
        if a != b:
            diffs.append({"id": cid, "before": a, "after": b})
    return {
        "claims_before": len(before), "claims_after": len(after), "shared": len(shared),
        "only_before": sorted(set(before) - set(after)), "only_after": sorted(set(after) - set(before)),
        "same_label": sum(1 for c in shared if before[c].get("label") == after[c].get("label")),
        "same_llm_calls": sum(1 for c in shared
                              if signature(before[c])["llm_calls"] == signature(after[c])["llm_calls"]),
        "llm_calls_before": sum(signature(before[c])["llm_calls"] for c in shared),
        "llm_calls_after": sum(signature(after[c])["llm_calls"] for c in shared),
        "prompt_tokens_before": sum(signature(before[c])["prompt_tokens"] for c in shared),
        "prompt_tokens_after": sum(signature(after[c])["prompt_tokens"] for c in shared),
        "differences": diffs,
    }


def main(argv: list[str]) -> int:
    args = [a for a in argv if not a.startswith("--")]
    if len(args) != 2:
        print(__doc__.strip().splitlines()[-2], file=sys.stderr)
        return 2
    out = compare(load(Path(args[0])), load(Path(args[1])))
    if "--json" in argv:
        print(json.dumps(out, indent=2))
    else:
        print(f"claims: {out['shared']} shared ({out['claims_before']} before, {out['claims_after']} after); "
              f"same label {out['same_label']}/{out['shared']}; same LLM-call count "
              f"{out['same_llm_calls']}/{out['shared']} ({out['llm_calls_before']} vs "
              f"{out['llm_calls_after']} calls); "
              f"prompt tokens {out['prompt_tokens_before']} vs {out['prompt_tokens_after']}")
        for d in out["differences"]:
            print(f"  {d['id']}: before {d['before']['label']} {d['before']['llm_calls']} calls "
                  f"{d['before']['tool_calls']} tools; after {d['after']['label']} {d['after']['llm_calls']} "
                  "calls "
                  f"{d['after']['tool_calls']} tools")
    same = not out["differences"] and not out["only_before"] and not out["only_after"]
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
