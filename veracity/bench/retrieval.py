"""Retrieval benchmark: recall of gold evidence titles, queries/s and latency for bm25, dense, hybrid.

For each claim, recall@k is the fraction of its distinct gold ``supporting_facts`` titles found among
the titles of the top-k passages; ``all@k`` is the share of claims with every gold title in the top k.
Claims whose gold titles are not all in the index are left out (and counted), so recall measures the
retriever, not corpus coverage. Queries run one after another in one thread: latency is per query.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path
from typing import Callable, Iterable

from veracity.errors import DataError

DATASETS = ("hover",)
DEFAULT_KS = (1, 5, 10, 20)
HOVER_DEV = Path("hover") / "hover_dev_release_v1.1.json"


def default_data_file(dataset: str) -> Path:
    """The dataset file under $VERACITY_DATA_DIR, else ../shared/data next to the working directory."""
    if dataset != "hover":
        raise DataError(f"unknown retrieval dataset {dataset!r}", hint=f"one of {', '.join(DATASETS)}")
    roots = []
    if os.environ.get("VERACITY_DATA_DIR"):
        roots.append(Path(os.environ["VERACITY_DATA_DIR"]).expanduser())
    roots += [Path.cwd().parent / "shared" / "data", Path.cwd() / "data"]
    for root in roots:
        if (root / HOVER_DEV).exists():
            return root / HOVER_DEV
    raise DataError("HoVer dev file not found (looked under " + ", ".join(str(r) for r in roots) + ")",
                    hint="pass --data-file path/to/hover_dev_release_v1.1.json or set VERACITY_DATA_DIR")


def load_hover(path: Path, limit: int | None = None) -> list[dict]:
    """[{uid, claim, gold: [distinct titles in order]}] from a HoVer release file."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DataError(f"cannot read HoVer file {path}: {exc}",
                        hint="pass the official hover_*_release_v1.1.json") \
            from exc
    if not isinstance(data, list):
        raise DataError(f"{path} is not a HoVer release file (expected a JSON list)", hint="pass --data-file")
    claims = []
    for i, rec in enumerate(data):
        if not isinstance(rec, dict) or "claim" not in rec:
            raise DataError(f"{path}: record {i} has no 'claim'", hint="pass the official HoVer dev file")
        facts = rec.get("supporting_facts") or []
        gold = list(dict.fromkeys(str(t) for t, *_ in facts))
        if not gold:
            continue  # unlabeled split: nothing to measure
        claims.append({"uid": rec.get("uid", str(i)), "claim": rec["claim"], "gold": gold})
        if limit is not None and len(claims) >= limit:
            break
    if not claims:
        raise DataError(f"{path} holds no claims with supporting_facts",
                        hint="use the dev file, not the test file")
    return claims


def covered_claims(searcher, claims: list[dict]) -> tuple[list[dict], int]:
    """Claims whose gold titles all have passages in the index, and how many were left out."""
    known: dict[str, bool] = {}
    kept = []
    for c in claims:
        for t in c["gold"]:
            if t not in known:
                known[t] = bool(searcher.store.page(t))
        if all(known[t] for t in c["gold"]):
            kept.append(c)
    return kept, len(claims) - len(kept)


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    s = sorted(values)
    pos = (len(s) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def bench_mode(searcher, claims: list[dict], mode: str, ks: Iterable[int] = DEFAULT_KS,
               progress: Callable[[int, int], None] | None = None) -> dict:
    ks = sorted(set(ks))
    depth = max(ks)
    searcher.search(claims[0]["claim"], k=depth, mode=mode)  # warm-up (loads the encoder, JIT, caches)
    recall = {k: [] for k in ks}
    full = {k: 0 for k in ks}
    latencies = []
    t_all = time.perf_counter()
    for i, c in enumerate(claims, 1):
        t0 = time.perf_counter()
        hits = searcher.search(c["claim"], k=depth, mode=mode)
        latencies.append(time.perf_counter() - t0)
        gold = set(c["gold"])
        for k in ks:
            found = gold & {h.title for h in hits[:k]}
            recall[k].append(len(found) / len(gold))
            full[k] += found == gold
        if progress:
            progress(i, len(claims))
    wall = time.perf_counter() - t_all
    return {
        "mode": mode,
        "claims": len(claims),
        "recall": {str(k): round(statistics.fmean(recall[k]), 4) for k in ks},
        "all_gold": {str(k): round(full[k] / len(claims), 4) for k in ks},
        "queries_per_s": round(len(claims) / wall, 2) if wall > 0 else None,
        "p50_latency_ms": round(1000 * _percentile(latencies, 0.5), 2),
        "p99_latency_ms": round(1000 * _percentile(latencies, 0.99), 2),
    }


def bench_retrieval(index_dir: Path | str, *, dataset: str = "hover", data_file: Path | None = None,
                    modes: Iterable[str] = ("bm25", "dense", "hybrid"), ks: Iterable[int] = DEFAULT_KS,
                    limit: int | None = None, encoder: str | None = None,
                    progress: Callable[[str, int, int], None] | None = None) -> dict:
    """Run the benchmark; returns a JSON-able report."""
    from veracity.indexes.searcher import Searcher

    data_file = Path(data_file) if data_file else default_data_file(dataset)
    searcher = Searcher(index_dir, encoder=encoder)
    try:
        modes = [m for m in modes]
        for m in modes:
            searcher._check_mode(m)
        claims = load_hover(data_file)
        kept, left_out = covered_claims(searcher, claims)
        if limit is not None:
            kept = kept[:limit]
        if not kept:
            raise DataError(f"no claim of {data_file.name} has all its gold titles in the index",
                            hint="build the index from a corpus holding the gold articles "
                                 "(e.g. wiki_corpus_hover_gold)")
        results = [bench_mode(searcher, kept, m, ks,
                              progress=(lambda i, n, m=m: progress(m, i,
                                                                   n)) if progress else None) for m in modes]
    finally:
        searcher.close()
    man = searcher.manifest
    build = man.get("build", {})
    return {
        "benchmark": "retrieval",
        "dataset": dataset,
        "data_file": str(data_file),
        "claims_total": len(claims),
        "claims_left_out_not_covered": left_out,
        "claims_used": len(kept),
        "index": str(index_dir),
        "index_passages": man.get("passages"),
        "index_dump_date": man.get("dump_date"),
        "encoder": (man.get("dense") or {}).get("encoder"),
        "faiss_factory": (man.get("dense") or {}).get("faiss_factory"),
        "build_rate_passages_per_s": {"read_bm25": build.get("read_bm25_passages_per_s"),
                                      "embed": build.get("embed_passages_per_s")},
        "build_seconds": build.get("seconds"),
        "modes": results,
    }
