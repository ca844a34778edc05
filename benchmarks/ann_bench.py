"""The index at full scale: embedding speed, and the default ANN index against exact search.

Steps (each writes its results as it goes, so a long run can be read while it works):

``corpus``  gathers real text the machine holds — the demo's Vital-Article summaries, the HoVer gold
paragraphs
            and the dump sample's articles cut into ~100-word passages, plus the claim / statement sentences
            of
            the benchmark sets in ``../shared/data`` (LIAR, FEVER, HoVer, FEVEROUS, Factcheck-Bench) — and
            embeds
            it with the default encoder (all-MiniLM-L6-v2) into resumable shards under ``--work``; it records
            passages/s per kind of text.
``recall``  the real vectors: ``--faiss-factory auto`` (what a build of that many passages picks, trained the
way
            the build trains) against exact search, recall@10 over held-out queries for several nprobe values.
``speed``   synthetic unit vectors at ``--n`` (default 1,000,000): the index ``auto`` picks for that size, its
            recall@10 at the default nprobe against exact search (synthetic: clustered Gaussian, so not a
            stand-in for real recall), p50 / p99 ms per query on one thread, build time, peak RSS, disk.
``project`` the projection to 21,015,324 passages from the measured rates (GPU rows are projections).

Examples::

    nice -n 10 python benchmarks/ann_bench.py corpus --work ~/.veracity/bench/ann
    nice -n 10 python benchmarks/ann_bench.py recall --work ~/.veracity/bench/ann
    nice -n 10 python benchmarks/ann_bench.py speed --work ~/.veracity/bench/ann --n 1000000
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import time
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
if not DATA.is_dir():
    DATA = Path("/work/shared/data")


# ------------------------------------------------------------------------------------------- corpus

def _passages(texts_out: list[tuple[str, str]]) -> None:
    from veracity.indexes.demo import demo_archive
    from veracity.indexes.passages import Chunking, chunk_article
    from veracity.indexes.readers import SourceInfo
    from veracity.indexes.sources import read_articles

    sources = [(demo_archive(), "demo"), (DATA / "wiki_corpus_hover_gold" / "hover_dev_gold_paragraphs.jsonl",
                                          "hover")]
    sources += [(p, "wiki-xml") for p in sorted((DATA / "wiki_dump_sample").glob("*.bz2"))]
    seen = set()
    for path, fmt in sources:
        info = SourceInfo(str(path), fmt)
        for art in read_articles(path, fmt, info, workers=1):
            if art.title in seen:
                continue
            seen.add(art.title)
            for p in chunk_article(art, Chunking()):
                texts_out.append(("passage", f"{p.title}\n{p.text}"))


def _sentences(texts_out: list[tuple[str, str]]) -> None:
    for name in ("train.tsv", "valid.tsv", "test.tsv"):
        with open(DATA / "liar" / name, encoding="utf-8") as f:
            for row in csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
                if len(row) > 2 and row[2].strip():
                    texts_out.append(("sentence", row[2].strip()))
    with open(DATA / "fever" / "paper_dev.jsonl", encoding="utf-8") as f:
        texts_out.extend(("sentence", json.loads(line)["claim"]) for line in f if line.strip())
    for name in ("hover_dev_release_v1.1.json", "hover_test_release_v1.1.json"):
        texts_out.extend(("sentence", r["claim"]) for r in json.loads((DATA / "hover" / name).read_text()))
    with open(DATA / "feverous_s" / "feverous_s_dev_gold_sentences.jsonl", encoding="utf-8") as f:
        texts_out.extend(("sentence", json.loads(line)["sentence"]) for line in f if line.strip())
    with open(DATA / "factcheck_bench" / "subtask3_claim_evidence_stance.jsonl", encoding="utf-8") as f:
        for line in f:
            obj = json.loads(line)
            for key in ("claim", "evidence"):
                if isinstance(obj.get(key), str) and obj[key].strip():
                    texts_out.append(("sentence", obj[key].strip()))


def corpus(args) -> None:
    from veracity.indexes.dense import embed_shards
    from veracity.models.encoders import load_encoder

    work = Path(args.work).expanduser()
    work.mkdir(parents=True, exist_ok=True)
    texts: list[tuple[str, str]] = []
    # sentences first: several times cheaper to embed than passages, so most vectors come early
    _sentences(texts)
    n_pass = -len(texts)
    _passages(texts)
    n_pass += len(texts)
    # de-duplicate exact repeats (a query equal to a stored text would make recall trivially easy)
    seen, uniq = set(), []
    for kind, t in texts:
        if t not in seen:
            seen.add(t)
            uniq.append((kind, t))
    texts = uniq
    kinds = [k for k, _ in texts]
    (work / "corpus.json").write_text(json.dumps({"texts": len(texts), "passages": kinds.count("passage"),
                                                  "sentences": kinds.count("sentence"),
                                                  "passages_read": n_pass}))
    print(f"{len(texts)} texts ({kinds.count('passage')} passages, {kinds.count('sentence')} sentences)",
          flush=True)
    enc = load_encoder(None)
    rates = {}
    t0 = time.perf_counter()
    last = [t0, 0]

    def progress(done, total):
        now = time.perf_counter()
        if now - last[0] > 30:
            print(f"  {done}/{total} in {now - t0:.0f} s", flush=True)
            last[0] = now

    rows = lambda a, b: [(i, "", t) for i, (_, t) in zip(range(a, b), texts[a:b], strict=True)]  # noqa: E731
    shard = 1024
    t0 = time.perf_counter()
    log = open(work / "shard_times.jsonl", "a", encoding="utf-8")
    mark = [time.perf_counter()]

    def on_shard(i):  # per-shard wall time, so passages and sentences get their own rates
        now = time.perf_counter()
        a, b = i * shard, min(len(texts), (i + 1) * shard)
        log.write(json.dumps({"shard": i, "n": b - a, "passages": kinds[a:b].count("passage"),
                              "seconds": round(now - mark[0], 2), "load": os.getloadavg()[0]}) + "\n")
        log.flush()
        mark[0] = now

    embedded = embed_shards(rows, len(texts), work / "shards", enc, shard_size=shard, batch_size=64,
                            progress=progress, on_shard=on_shard)
    dt = time.perf_counter() - t0
    rates["all"] = {"embedded_now": embedded, "seconds": round(dt, 1),
                    "passages_per_s": round(embedded / dt, 2) if embedded else None}
    print(json.dumps(rates), flush=True)
    (work / "embed_rates.json").write_text(json.dumps(rates, indent=2))


def _load_real(work: Path) -> np.ndarray:
    shards = sorted((work / "shards").glob("shard-*[0-9].npy"))
    return np.concatenate([np.load(p) for p in shards]).astype(np.float32)


def _rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def _write(path: Path, obj: dict) -> None:
    path.write_text(json.dumps(obj, indent=2))
    print(json.dumps(obj), flush=True)


def recall(args) -> None:
    """Real vectors: the IVF-SQ8 index ``auto`` builds (its nlist for this many vectors, forced past the Flat
    threshold), trained and tuned by the build's own code, against exact search on held-out passages."""
    import shutil

    from veracity.indexes import ann
    from veracity.indexes.dense import build_faiss

    work = Path(args.work).expanduser()
    vecs = _load_real(work)
    n = len(vecs)
    nlist = 1 << int(np.log2(n / ann.TRAIN_PER_LIST))  # the most lists this many vectors can train
    out = {"vectors": n, "source": "real all-MiniLM-L6-v2 vectors of the texts `corpus` gathered", "runs": []}
    tmp = work / "recall-shards"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    shard = 4096
    for i in range(0, n, shard):
        np.save(tmp / f"shard-{i // shard:05d}.npy", vecs[i:i + shard])
    for factory in (f"IVF{nlist},SQ8", f"IVF{nlist // 4},SQ8", "HNSW32"):
        t0 = time.perf_counter()
        facts = build_faiss(tmp, n, vecs.shape[1], factory, work / "recall.faiss", shard_size=shard,
                            recall_queries=args.queries)
        facts["build_s"] = round(time.perf_counter() - t0, 1)
        out["runs"].append(facts)
        _write(work / "recall.json", out)
    shutil.rmtree(tmp, ignore_errors=True)


def _timed(index, queries) -> dict:
    """Per-query latency, one query at a time on one thread: wall time, and the thread's CPU time (what the
    query costs on an idle core; on a loaded machine the wall time also holds the waits for a core)."""
    wall, cpu = [], []
    for q in queries:
        t, c = time.perf_counter(), time.thread_time()
        index.search(q[None, :], 10)
        cpu.append((time.thread_time() - c) * 1000)
        wall.append((time.perf_counter() - t) * 1000)
    pct = lambda xs, p: round(float(np.percentile(xs, p)), 3)  # noqa: E731
    return {"p50_ms": pct(wall, 50), "p99_ms": pct(wall, 99), "cpu_p50_ms": pct(cpu, 50),
            "cpu_p99_ms": pct(cpu, 99),
            "queries": len(wall), "threads": 1}


def speed(args) -> None:
    """1M vectors derived from the real ones (each a real vector plus Gaussian noise of norm ~0.6,
    re-normalized:
    the real vectors' spread, at 1M): the factory ``auto`` picks, built by the build's code (recall tuned on
    held-out vectors), then opened memory-mapped and searched one query at a time on one thread."""
    import shutil

    import faiss

    from veracity.indexes.dense import build_faiss, load_faiss

    work = Path(args.work).expanduser()
    base = _load_real(work)
    rng = np.random.default_rng(0)
    n, dim, shard = args.n, base.shape[1], 65536
    tmp = work / "speed-shards"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    t0 = time.perf_counter()
    for i in range(0, n, shard):
        m = min(shard, n - i)
        x = base[rng.integers(0, len(base), m)] + rng.normal(scale=0.6 / np.sqrt(dim), size=(m, dim))
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        np.save(tmp / f"shard-{i // shard:05d}.npy", x.astype(np.float32))
    res = {"vectors": n, "base_real_vectors": len(base), "dim": dim,
           "generate_s": round(time.perf_counter() - t0, 1),
           "load_1min_at_start": os.getloadavg()[0]}
    t0 = time.perf_counter()
    facts = build_faiss(tmp, n, dim, "auto", work / "speed.faiss", shard_size=shard,
                        recall_queries=args.queries)
    res.update(build_s=round(time.perf_counter() - t0, 1), facts=facts, peak_rss_gib_build=round(_rss_gib(),
                                                                                                 2),
               index_bytes=(work / "speed.faiss").stat().st_size,
               shards_bytes=sum(p.stat().st_size for p in tmp.glob("*.npy")))
    _write(work / "speed.json", res)
    faiss.omp_set_num_threads(1)
    queries = base[rng.integers(0, len(base), args.queries)] + rng.normal(scale=0.6 / np.sqrt(dim),
                                                                          size=(args.queries, dim))
    queries = (queries / np.linalg.norm(queries, axis=1, keepdims=True)).astype(np.float32)
    for label, kw in (("ann_mmap", dict(mmap=True)), ("ann_in_ram", dict(mmap=False))):
        index = load_faiss(work / "speed.faiss", n, nprobe=facts["search"].get("nprobe"), **kw)
        res[label] = _timed(index, queries)
        _write(work / "speed.json", res)
        del index
    flat = faiss.IndexFlatIP(dim)
    for p in sorted(tmp.glob("*.npy")):
        flat.add(np.load(p))
    res["flat_in_ram"] = _timed(flat, queries[:200])
    res["peak_rss_gib"] = round(_rss_gib(), 2)
    res["load_1min_at_end"] = os.getloadavg()[0]
    _write(work / "speed.json", res)
    shutil.rmtree(tmp, ignore_errors=True)


def sweep(args) -> None:
    """The 1M index of ``speed`` searched at larger nprobe (real data needs more lists probed than the derived
    vectors did: 32 of 128 lists on the 8,192 real vectors): per-query latency on one thread for each."""
    import faiss

    from veracity.indexes.dense import load_faiss

    work = Path(args.work).expanduser()
    base = _load_real(work)
    rng = np.random.default_rng(1)
    q = base[rng.integers(0, len(base), args.queries)] + rng.normal(scale=0.6 / np.sqrt(base.shape[1]),
                                                                     size=(args.queries, base.shape[1]))
    q = (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32)
    faiss.omp_set_num_threads(1)
    out = {"index": "speed.faiss (1M, IVF4096,SQ8)", "load_1min": os.getloadavg()[0], "by_nprobe": {}}
    for mmap in (True, False):
        for nprobe in (8, 32, 64, 128, 256):
            index = load_faiss(work / "speed.faiss", nprobe=nprobe, mmap=mmap)
            out["by_nprobe"][f"{nprobe}{' mmap' if mmap else ''}"] = _timed(index, q)
            _write(work / "sweep.json", out)


def project(args) -> None:
    """The plan's model (veracity/indexes/plan.py RATES) for 21,015,324 passages of a Wikipedia dump on idle
    machines: 2 cores, 16 cores, 16 cores + 1 GPU, 16 cores + 8 GPUs (GPU embedding at the rates measured on
    one H200, benchmarks/gpu_embed.py; k-means on GPU a projection)."""
    from veracity.indexes.build import BuildOptions, Source
    from veracity.indexes.plan import Hardware, make_plan

    gib = 2**30
    src = [Source(Path("enwiki-pages-articles-multistream.xml.bz2"), "wiki-xml")]
    rows = []
    for label, hw in (("2 cores", Hardware(2, [], 24 * gib, 10**13)), ("16 cores", Hardware(16, [], 128 * gib,
                                                                                            10**13)),
                      ("16 cores + 1 GPU", Hardware(16, [(0, 80 * gib)], 128 * gib, 10**13)),
                      ("16 cores + 8 GPUs", Hardware(16, [(i, 80 * gib) for i in range(8)], 128 * gib,
                                                     10**13))):
        plan = make_plan(src, BuildOptions(workers=hw.cores), 384, hw, passages=args.passages)
        rows.append({"hardware": label, "factory": plan.factory,
                     **{st.name: round(st.seconds / 3600, 2) for st in plan.stages},
                     "total_h": round(sum(st.seconds for st in plan.stages) / 3600, 2),
                     "disk_peak_gib": round(plan.disk_peak / gib, 1),
                     "disk_final_gib": round(plan.disk_final / gib, 1),
                     "faiss_ram_gib": round(plan.search_ram / gib, 1)})
    work = Path(args.work).expanduser()
    work.mkdir(parents=True, exist_ok=True)
    _write(work / "project.json", {"passages": args.passages, "rows": rows})


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=["corpus", "recall", "speed", "sweep", "project"])
    ap.add_argument("--passages", type=int, default=21_015_324, help="project: passages")
    ap.add_argument("--work", default="~/.veracity/bench/ann")
    ap.add_argument("--n", type=int, default=1_000_000, help="speed: vectors")
    ap.add_argument("--queries", type=int, default=1000, help="recall queries / timed queries")
    args = ap.parse_args(argv)
    {"corpus": corpus, "recall": recall, "speed": speed, "sweep": sweep, "project": project}[args.step](args)


if __name__ == "__main__":
    main()
