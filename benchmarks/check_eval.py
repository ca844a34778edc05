"""`veracity check` against human labels (issue 32 point 5): decomposition on Factcheck-GPT's annotated
responses, response- and claim-level verdicts on Factbench.

    # decomposition: claims per sentence, gold-claim coverage, check-worthiness accuracy
    python benchmarks/check_eval.py decomposition --n 40 --seed 1 --endpoint http://127.0.0.1:8000/v1 \
        --out runs/check-eval/decomposition.json
    # response level (FacTool-QA, FELM-wk, Factcheck-GPT in Factbench.jsonl) and claim level with gold claims
    python benchmarks/check_eval.py response --n 40 --seed 1 --method rag --index ~/.veracity/indexes/wiki \
        --endpoint http://127.0.0.1:8000/v1 --out runs/check-eval/response.json

Samples: ``--n`` items drawn with ``random.Random(seed).sample`` from the file's items in file order (for
``response``: from the sources named by ``--sources``, responses whose label is true or false), drawn after
the code is frozen; every figure carries its sample size and a seeded percentile-bootstrap 95 % interval
(1,000 resamples of the items).

decomposition (``factcheck_bench/factcheck-GPT-benchmark.jsonl``: each response's sentences with the
annotators' decontextualised claims and their check-worthiness):

- The extractor is given the *gold* sentences (with the whole response as context), so decomposition is
  measured apart from sentence splitting; how many gold sentences the splitter reproduces exactly is
  reported on its own (``splitter_exact``).
- claims per sentence: extracted vs the annotators' (means over the sample's sentences).
- coverage: the share of gold claims that some extracted claim of the same sentence matches. Matching
  rule: cosine similarity of the two claims' all-MiniLM-L6-v2 embeddings >= ``--match-threshold`` (0.75),
  each extracted claim matching at most one gold claim (greedy, most similar pair first). Precision (the
  share of extracted claims matching a gold one) is reported beside it.
- check-worthiness: ``check.worthiness`` on each *gold* claim, against the annotators' category
  (factual / opinion / not_a_claim): accuracy and the confusion counts.

response (``factcheck_bench/Factbench.jsonl``):

- response level: ``veracity check`` on the response; predicted "contains a false claim" when any claim is
  REFUTED; gold: ``response_label`` false. Macro-F1 of the two classes (and accuracy).
- claim level with the gold claims given (the extraction left out, so verification errors are seen apart
  from extraction errors): each gold claim verified with the method; SUPPORTED vs REFUTED against the
  claim label (true / false; claims labelled otherwise are left out). NOT_ENOUGH_INFO counts as a wrong
  answer; ``--labels binary`` makes the method decide. Macro-F1 and accuracy.

replay (no model; development only): a decomposition run's kept rows (``OUT.rows.jsonl``) re-read with
today's model-free rules — a sentence :func:`~veracity.check.opinions.sentence_rule` sorts out gets no claim,
the sentence guard's :func:`~veracity.check.guard.check_claim` and near-duplicate rule applied to the claims
as extracted (a failing claim dropped: its re-ask cannot be replayed without the model), a leading pronoun
named by :func:`~veracity.check.split.resolve_references` (what check does with one its re-ask left), a
claim left as its sentence split by :func:`~veracity.check.split.split_claims`, a sentence left with none
checked as itself — and scored as ``decomposition`` is; it also counts the claims today's extractor would
re-ask for a pronoun or a short description; with ``--out`` the replayed rows go to ``OUT.rows.jsonl``. It
says what the rules alone do to rows already looked at; a fresh seed is the measurement::

    python benchmarks/check_eval.py replay --rows runs/check-eval/decomposition-s11.rows.jsonl --seed 11

The papers' own figures (named as theirs) go beside these in BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("VERACITY_DATA_DIR") or ROOT.parent / "shared" / "data") / "factcheck_bench"
SOURCES = ("factool-qa", "felm-wk", "factcheckgpt")
Matcher = Callable[[list[str], list[str]], list[list[float]]]  # similarities, gold x extracted


# -- samples ---------------------------------------------------------------------------------------------
def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


def sample(items: list[Any], n: int | None, seed: int) -> list[Any]:
    """``n`` items drawn with a seeded generator (all, in file order, when n is None or larger)."""
    if n is None or n >= len(items):
        return list(items)
    idx = sorted(random.Random(seed).sample(range(len(items)), n))
    return [items[i] for i in idx]


def decomposition_items(path: Path, n: int | None, seed: int) -> list[dict[str, Any]]:
    """Factcheck-GPT responses: ``{id, text, sentences: [{text, claims, categories}]}``."""
    out = []
    for i, row in enumerate(read_jsonl(path)):
        sentences = [{"text": s["text"], "claims": list(s.get("claims") or []),
                      "categories": list(s.get("claim_checkworthiness") or [])}
                     for _, s in sorted(row["sentences"].items(),
                                        key=lambda kv: int(kv[0].removeprefix("sentence")))]
        out.append({"id": f"fcgpt-{i}", "text": row["response"], "sentences": sentences})
    return sample(out, n, seed)


def response_items(path: Path, n: int | None, seed: int, sources: Sequence[str] = SOURCES) -> list[dict[str,
                                                                                                        Any]]:
    """Factbench responses of ``sources`` with a true/false response label: ``{id, text, false, claims:
    [{text, label}]}``."""
    out = []
    for i, row in enumerate(read_jsonl(path)):
        if row.get("source") not in sources or not isinstance(row.get("response_label"), bool):
            continue
        claims = [{"text": c, "label": lab} for c, lab in zip(row.get("claims") or [],
                                                              row.get("claim_labels") or [],
                                                               strict=False)]
        out.append({"id": f"{row['source']}-{i}", "source": row["source"], "text": row["response"],
                    "false": row["response_label"] is False, "claims": claims})
    return sample(out, n, seed)


# -- statistics ------------------------------------------------------------------------------------------
def bootstrap(items: list[Any], stat: Callable[[list[Any]], float | None], *, seed: int = 0,
              resamples: int = 1000, level: float = 0.95) -> list[float] | None:
    """Percentile bootstrap interval of ``stat`` over ``items`` (resampled with replacement, seeded)."""
    if not items:
        return None
    rng = random.Random(seed)
    values = []
    for _ in range(resamples):
        v = stat([items[rng.randrange(len(items))] for _ in items])
        if v is not None:
            values.append(v)
    if not values:
        return None
    values.sort()
    lo = values[int((1 - level) / 2 * (len(values) - 1))]
    hi = values[int((1 + level) / 2 * (len(values) - 1))]
    return [lo, hi]


def macro_f1(pairs: list[tuple[bool, bool]]) -> float | None:
    """Macro-F1 of two classes over (gold, predicted) pairs; None when there are none."""
    if not pairs:
        return None
    f1s = []
    for cls in (True, False):
        tp = sum(1 for g, p in pairs if g == cls and p == cls)
        fp = sum(1 for g, p in pairs if g != cls and p == cls)
        fn = sum(1 for g, p in pairs if g == cls and p != cls)
        f1s.append(2 * tp / (2 * tp + fp + fn) if tp else 0.0)
    return sum(f1s) / 2


def accuracy(pairs: list[tuple[Any, Any]]) -> float | None:
    return sum(1 for g, p in pairs if g == p) / len(pairs) if pairs else None


def greedy_matches(sim: list[list[float]], threshold: float) -> list[tuple[int, int]]:
    """(gold, extracted) pairs, most similar first, each side used once, similarity >= threshold."""
    cells = sorted(((s, g, e) for g, row in enumerate(sim) for e, s in enumerate(row) if s >= threshold),
                   reverse=True)
    used_g: set[int] = set()
    used_e: set[int] = set()
    out = []
    for _, g, e in cells:
        if g not in used_g and e not in used_e:
            used_g.add(g)
            used_e.add(e)
            out.append((g, e))
    return out


def embedding_matcher() -> Matcher:
    """Cosine similarities of all-MiniLM-L6-v2 embeddings (the matching rule of the module docstring)."""
    from veracity.models.encoders import load_encoder

    enc = load_encoder()

    def sim(gold: list[str], extracted: list[str]) -> list[list[float]]:
        if not gold or not extracted:
            return [[] for _ in gold]
        a, b = enc.encode(gold), enc.encode(extracted)
        return (a @ b.T).tolist()

    return sim


# -- decomposition ---------------------------------------------------------------------------------------
async def decompose_item(item: dict[str, Any], llm: Any, params: Any, worthiness: bool = True) -> dict[str,
                                                                                                       Any]:
    """Extract claims from each gold sentence (the response as context) and classify each gold claim (not
    with ``worthiness`` false: ``--no-worthiness``, extraction alone, one call per gold claim fewer)."""
    from veracity.check.extract import Sentence, claims_in_sentence, sentences_of, worthiness_of
    from veracity.check.roles import EXTRACTOR, WORTHINESS
    from veracity.pipeline.methods.base import MethodContext
    from veracity.pipeline.types import Trace

    trace = Trace()

    async def one(i: int, s: dict[str, Any]) -> dict[str, Any]:
        # check's own path: the extractor, the sentence guard with its one re-ask, then check-worthiness (the
        # model-free opinion rule, then the role) on each gold claim with its sentence
        ctx = MethodContext(llm=llm, tools=None, trace=trace, params=params,  # type: ignore[arg-type]
                            seed=getattr(llm, "seed", None), claim_id=f"{item['id']}#s{i}")
        claims, lost = await claims_in_sentence(ctx, item["text"], Sentence(i, 0, 0, s["text"]), trace)
        cats = [(await worthiness_of(c, s["text"], llm, params,
                                     ctx=ctx))[0] for c in s["claims"]] if worthiness else []
        return {"extracted": claims, "dropped": [d["claim"] for d in lost], "predicted_categories": cats}

    results = await asyncio.gather(*(one(i, s) for i, s in enumerate(item["sentences"], 1)))
    split = {s.text for s in sentences_of(item["text"])}
    failed = {EXTRACTOR.fallback.event, WORTHINESS.fallback.event}  # type: ignore[union-attr]
    return {"id": item["id"], "sentences": [{**s, **r} for s, r in zip(item["sentences"], results,
                                                                       strict=True)],
            "splitter_exact": sum(1 for s in item["sentences"] if s["text"].strip() in split),
            "fallbacks": sum(1 for e in trace.events if e["kind"] in failed),
            "reasked": sum(1 for e in trace.events if e["kind"] == "check.claim_outside_sentence"),
            "dropped": sum(len(r["dropped"]) for r in results)}


def score_decomposition(rows: list[dict[str, Any]], matcher: Matcher, threshold: float,
                        seed: int) -> dict[str, Any]:
    from veracity.check.opinions import opinion_rule

    per_item = []
    for row in rows:
        gold_n = ext_n = matched = 0
        ruled_n = ruled_matched = 0  # the extracted claims the model-free opinion rule leaves to verification
        wpairs = []
        for s in row["sentences"]:
            sim = matcher(s["claims"], s["extracted"])
            m = greedy_matches(sim, threshold)
            gold_n += len(s["claims"])
            ext_n += len(s["extracted"])
            matched += len(m)
            left = {e for e, c in enumerate(s["extracted"]) if opinion_rule(c, s["text"]) is None}
            ruled_n += len(left)
            ruled_matched += sum(1 for _, e in m if e in left)
            wpairs += list(zip(s["categories"], s["predicted_categories"], strict=False))
        per_item.append({"sentences": len(row["sentences"]), "gold": gold_n, "extracted": ext_n,
                         "matched": matched,
                         "ruled": ruled_n, "ruled_matched": ruled_matched,
                         "worthiness": wpairs, "splitter_exact": row["splitter_exact"],
                         "fallbacks": row["fallbacks"],
                         "reasked": row.get("reasked", 0), "dropped": row.get("dropped", 0)})

    def ratio(num: str, den: str) -> Callable[[list[dict]], float | None]:
        return lambda xs: (sum(x[num] for x in xs) / sum(x[den] for x in xs)) if sum(x[den]
                                                                                     for x in xs) else None

    def wacc(xs: list[dict]) -> float | None:
        return accuracy([p for x in xs for p in x["worthiness"]])

    stats = {"claims_per_sentence_extracted": ratio("extracted", "sentences"),
             "claims_per_sentence_gold": ratio("gold", "sentences"),
             "coverage": ratio("matched", "gold"), "precision": ratio("matched", "extracted"),
             # beside it, not instead of it: precision over the claims `check` would still verify after the
             # model-free opinion rule (claims of "should ..." or "?" sentences, which annotators gave no
             # claim)
             "precision_rule_factual": ratio("ruled_matched", "ruled"),
             "worthiness_accuracy": wacc, "splitter_exact": ratio("splitter_exact", "sentences")}
    out: dict[str, Any] = {"n_responses": len(per_item), "n_sentences": sum(x["sentences"] for x in per_item),
                           "n_gold_claims": sum(x["gold"] for x in per_item),
                           "n_extracted_claims": sum(x["extracted"] for x in per_item),
                           "extraction_fallbacks": sum(x["fallbacks"] for x in per_item),
                           "sentence_guard_reasks": sum(x["reasked"] for x in per_item),
                           "sentence_guard_dropped": sum(x["dropped"] for x in per_item),
                           "matching_rule": f"all-MiniLM-L6-v2 cosine >= {threshold}, greedy one-to-one per "
                                            "sentence"}
    for name, fn in stats.items():
        out[name] = {"value": fn(per_item), "ci95": bootstrap(per_item, fn, seed=seed)}
    confusion: dict[str, dict[str, int]] = {}
    for x in per_item:
        for g, p in x["worthiness"]:
            confusion.setdefault(g, {}).setdefault(p, 0)
            confusion[g][p] += 1
    out["worthiness_confusion"] = confusion
    return out


def replay_rows(rows: list[dict[str, Any]], texts: dict[str, str]) -> tuple[list[dict[str, Any]], dict[str,
                                                                                                  int]]:
    """``rows`` (a decomposition run's) with the model-free rules of today re-applied to the claims as
    extracted (module docstring, "replay"); ``texts`` maps a row's id to its response. Returns the new rows
    and counts: sentences sorted out, claims the guard drops, claims that would be re-asked for a
    reference."""
    from veracity.check.extract import Sentence, text_before
    from veracity.check.guard import (check_claim, unresolved_description, unresolved_reference,
                                      without_near_duplicates)
    from veracity.check.opinions import sentence_rule
    from veracity.check.roles import MAX_CLAIMS_PER_SENTENCE
    from veracity.check.split import resolve_references, split_claims

    counts = {"sentences_ruled_out": 0, "claims_of_ruled_sentences": 0, "guard_dropped": 0,
              "references_named": 0, "split_claims": 0, "near_duplicates": 0, "sentence_as_claim": 0,
              "would_reask_reference": 0}
    out = []
    for row in rows:
        text = texts[row["id"]]
        sentences = []
        for s in row["sentences"]:
            if sentence_rule(s["text"]) is not None:
                counts["sentences_ruled_out"] += 1
                counts["claims_of_ruled_sentences"] += len(s["extracted"])
                sentences.append({**s, "extracted": []})
                continue
            kept = [c for c in s["extracted"] if check_claim(c, s["text"], text).ok]
            counts["guard_dropped"] += len(s["extracted"]) - len(kept)
            before = text_before(text, Sentence(0, 0, 0, s["text"]))
            resolved = resolve_references(kept, s["text"], text, before)
            counts["references_named"] += sum(1 for a, b in zip(kept, resolved, strict=True) if a != b)
            n = len(resolved)
            kept = split_claims(resolved, s["text"], text)
            counts["split_claims"] += len(kept) - n
            kept, dup = without_near_duplicates(kept)
            counts["near_duplicates"] += len(dup)
            if not kept:
                kept = split_claims([" ".join(s["text"].split())], s["text"], text)
                counts["sentence_as_claim"] += 1
            kept = kept[:MAX_CLAIMS_PER_SENTENCE]
            counts["would_reask_reference"] += sum(1 for c in kept if unresolved_reference(c)
                                                   or unresolved_description(c, before))
            sentences.append({**s, "extracted": kept})
        out.append({**row, "sentences": sentences})
    return out, counts


# -- response and claim level -----------------------------------------------------------------------------
async def response_item(item: dict[str, Any], cv: Any, params: Any) -> dict[str, Any]:
    from veracity.check.run import check_text
    from veracity.pipeline.types import Claim

    rec = await check_text(item["text"], cv, tid=item["id"], params=params)
    predicted_false = rec["summary"]["counts"]["REFUTED"] > 0
    gold_claims = [Claim(id=f"{item['id']}#g{j}", text=c["text"]) for j, c in enumerate(item["claims"], 1)
                   if isinstance(c["label"], bool)]
    async with cv.client() as llm:
        verdicts = await cv.verify_claims(gold_claims, llm)
    claim_pairs = []
    for c, gold in zip(gold_claims, [c["label"] for c in item["claims"] if isinstance(c["label"], bool)],
                       strict=True):
        said = {"SUPPORTED": True, "REFUTED": False}.get(verdicts[c.id].get("label"))
        claim_pairs.append((gold, (not gold) if said is None else said))  # undecided or failed: wrong
    return {"id": item["id"], "source": item["source"], "gold_false": item["false"],
            "predicted_false": predicted_false,
            "claim_pairs": claim_pairs, "summary": rec["summary"]}


def score_response(rows: list[dict[str, Any]], seed: int) -> dict[str, Any]:
    def resp_f1(xs):
        return macro_f1([(x["gold_false"], x["predicted_false"]) for x in xs])

    def resp_acc(xs):
        return accuracy([(x["gold_false"], x["predicted_false"]) for x in xs])

    def claim_f1(xs):
        return macro_f1([tuple(p) for x in xs for p in x["claim_pairs"]])

    def claim_acc(xs):
        return accuracy([tuple(p) for x in xs for p in x["claim_pairs"]])

    out: dict[str, Any] = {"n_responses": len(rows),
                           "n_gold_claims": sum(len(x["claim_pairs"]) for x in rows),
                           "by_source": {s: sum(1 for x in rows if x["source"] == s) for s in SOURCES},
                           "claim_rule": "NOT_ENOUGH_INFO or a failed claim counts as a wrong answer"}
    for name, fn in (("response_macro_f1", resp_f1), ("response_accuracy", resp_acc),
                     ("claim_macro_f1_gold_claims", claim_f1), ("claim_accuracy_gold_claims", claim_acc)):
        out[name] = {"value": fn(rows), "ci95": bootstrap(rows, fn, seed=seed)}
    return out


# -- command line -----------------------------------------------------------------------------------------
def _claim_verifier(args: argparse.Namespace, method: str) -> Any:
    from veracity.check.engine import ClaimVerifier

    return ClaimVerifier.build(method=method, index=args.index, endpoint=args.endpoint, model=args.model,
                               labels=args.labels, evidence=args.evidence, concurrency=args.concurrency)


async def run(args: argparse.Namespace, cv: Any = None, matcher: Matcher | None = None) -> dict[str, Any]:
    from veracity.check import STAGE

    params = STAGE.make_params({})
    t0 = time.time()
    if args.task == "replay":
        rows = read_jsonl(Path(args.rows))
        texts = {it["id"]: it["text"] for it in decomposition_items(
            Path(args.data or DATA / "factcheck-GPT-benchmark.jsonl"), None, 0)}
        matcher = matcher or embedding_matcher()
        as_run = score_decomposition(rows, matcher, args.match_threshold, args.seed)
        new_rows, counts = replay_rows(rows, texts)
        if args.out:  # the replayed rows beside the result, for a hand-read (benchmarks/hand_read_sample.py)
            with Path(args.out).with_suffix(".rows.jsonl").open("w", encoding="utf-8") as f:
                f.writelines(json.dumps(r) + "\n" for r in new_rows)
        result = {"as_run": as_run,
                  "replayed": score_decomposition(new_rows, matcher, args.match_threshold, args.seed),
                  "replay_counts": counts,
                  "note": "development data: the rules re-applied to rows already looked at, no model"}
        result.update(task=args.task, seed=args.seed, rows=args.rows, items=[r["id"] for r in rows])
        return result
    if args.task == "decomposition":
        items = decomposition_items(Path(args.data or DATA / "factcheck-GPT-benchmark.jsonl"), args.n,
                                    args.seed)
        cv = cv or _claim_verifier(args, "direct")  # only its client is used: no claim is verified here
        rows_file = Path(args.out).with_suffix(".rows.jsonl") if args.out else None  # each response's claims
        if rows_file is not None:
            rows_file.parent.mkdir(parents=True, exist_ok=True)
        gate = asyncio.Semaphore(max(1, args.items_concurrency))
        async with cv.client() as llm:
            async def one_item(item: dict[str, Any]) -> dict[str, Any]:
                async with gate:
                    # check-worthiness measured is the model's role after the rule (check's default asks
                    # the rule alone)
                    row = await decompose_item(item, llm, dataclasses.replace(params, worthiness=True),
                                               worthiness=not args.no_worthiness)
                if rows_file is not None:
                    with rows_file.open("a", encoding="utf-8") as f:
                        f.write(json.dumps(row) + "\n")
                print(f"{item['id']}: {sum(len(s['extracted']) for s in row['sentences'])} claims, "
                      f"{row.get('dropped', 0)} dropped", file=sys.stderr)
                return row

            rows = list(await asyncio.gather(*(one_item(item) for item in items)))
        result = score_decomposition(rows, matcher or embedding_matcher(), args.match_threshold, args.seed)
    else:
        items = response_items(Path(args.data or DATA / "Factbench.jsonl"), args.n, args.seed,
                               args.sources.split(","))
        cv = cv or _claim_verifier(args, args.method)
        # each finished response is appended to OUT.rows.jsonl at once; a run started again with the same
        # --out, --n and --seed takes its finished responses from there and checks only the others
        rows_file = Path(args.out).with_suffix(".rows.jsonl") if args.out else None
        done: dict[str, dict[str, Any]] = {}
        if rows_file is not None and rows_file.is_file():
            for line in rows_file.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    row = json.loads(line)
                    done[row["id"]] = row
            print(f"resuming: {sum(1 for i in items if i['id'] in done)} of {len(items)} responses already "
                  "checked "
                  f"({rows_file})", file=sys.stderr)
        if rows_file is not None:
            rows_file.parent.mkdir(parents=True, exist_ok=True)
        gate = asyncio.Semaphore(max(1, args.items_concurrency))

        async def one(item: dict[str, Any]) -> dict[str, Any]:
            if item["id"] in done:
                return done[item["id"]]
            async with gate:
                row = await response_item(item, cv, params)
            if rows_file is not None:
                with rows_file.open("a", encoding="utf-8") as f:
                    f.write(json.dumps(row) + "\n")
            print(f"{item['id']}: predicted false={row['predicted_false']} gold false={item['false']}",
                  file=sys.stderr)
            return row

        rows = list(await asyncio.gather(*(one(item) for item in items)))
        result = score_response(rows, args.seed)
    result.update(task=args.task, seed=args.seed, n_requested=args.n, elapsed_s=round(time.time() - t0, 1),
                  items=[r["id"] for r in rows])
    return result


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("task", choices=("decomposition", "response", "replay"))
    p.add_argument("--n", type=int, default=None, help="items in the seeded sample (default: all)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--data", default=None,
                   help="the dataset file (default: ../shared/data/factcheck_bench/...)")
    p.add_argument("--sources", default=",".join(SOURCES), help="response: Factbench sources to sample from")
    p.add_argument("--method", default="rag")
    p.add_argument("--index", default=None)
    p.add_argument("--endpoint", default=None)
    p.add_argument("--model", default=None)
    p.add_argument("--labels", default="3way")
    p.add_argument("--evidence", default="open")
    p.add_argument("--concurrency", type=int, default=None)
    p.add_argument("--match-threshold", type=float, default=0.75)
    p.add_argument("--items-concurrency", type=int, default=1,
                   help="response: texts checked at once (each verifies its claims --concurrency at a time)")
    p.add_argument("--no-worthiness", action="store_true",
                   help="decomposition: extraction alone, no check-worthiness call on the gold claims")
    p.add_argument("--rows", default=None, help="replay: a decomposition run's OUT.rows.jsonl")
    p.add_argument("--out", default=None, help="write the result JSON here (else stdout)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    result = asyncio.run(run(args))
    text = json.dumps(result, indent=1)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
