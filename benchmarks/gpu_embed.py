"""Embedding on a GPU through the build's own code path (issue 28 points 4 and 8: the GPU rows).

Two steps, because the GPU machine has no model hub, no FAISS and carries at most 64 MiB:

  python benchmarks/gpu_embed.py prepare CARRY [--index ~/.veracity/indexes/demo] [--refs 4000] [--queries
  500]
      here: the default encoder saved in fp16 (45 MB), the index's passage store, its CPU float32 vectors of
      the
      first REFS passages (read back from the index's Flat FAISS file, so exactly what `index build` wrote on
      this machine) and QUERIES HoVer claims with their CPU vectors.
  python benchmarks/gpu_embed.py run CARRY --out DIR [--copies 20]
      on the GPU machine: a passage store of COPIES times the index's passages (the same real text repeated,
      fresh ids), then
        1. the encoder alone at batch 256 / 1024 / the planned batch (passages/s, peak GPU memory);
        2. `embed_on_devices(plan_workers())`, the code `index build` runs on a GPU machine: one spawned
        worker
           per visible device, shards claimed and written, end to end (including each worker's start);
        3. agreement of the GPU fp16 vectors with the CPU float32 ones: cosine per passage, and recall@10 of
           exact search over the REFS passages for the QUERIES claims (GPU query and passage vectors against
           CPU ones);
        4. FAISS GPU k-means, if the machine's faiss has GPUs (else said).
      Everything lands in DIR/gpu_embed.json as it is measured.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from onnx_encoder import _recall  # noqa: E402  (benchmarks/ is on sys.path when run as a script)


def prepare(carry: Path, index: Path, refs: int, queries: int) -> None:
    import faiss
    from sentence_transformers import SentenceTransformer

    from veracity.models.encoders import load_encoder, resolve_encoder

    carry.mkdir(parents=True, exist_ok=True)
    _, path = resolve_encoder(None)
    model = SentenceTransformer(str(path), device="cpu")
    model.half()
    model.save(str(carry / "encoder-fp16"))
    shutil.copy(index / "passages.sqlite", carry / "passages.sqlite")
    flat = faiss.read_index(str(index / "dense" / "index.faiss"))
    ref = flat.reconstruct_n(0, refs).astype(np.float32)
    np.save(carry / "ref_passages.npy", ref)
    claims = []
    with open(ROOT.parent / "shared" / "data" / "hover" / "hover_dev_release_v1.1.json",
              encoding="utf-8") as f:
        for row in json.load(f)[:queries]:
            claims.append(row["claim"])
    (carry / "queries.json").write_text(json.dumps(claims), encoding="utf-8")
    enc = load_encoder(None, device="cpu")
    np.save(carry / "ref_queries.npy", enc.encode(claims))
    size = sum(p.stat().st_size for p in carry.rglob("*") if p.is_file())
    print(f"carry {carry}: {size / 2**20:.1f} MiB")


def build_store(base: Path, out: Path, copies: int) -> int:
    src = sqlite3.connect(base)
    rows = src.execute("SELECT id, title, n, text FROM passages ORDER BY idx").fetchall()
    dst = sqlite3.connect(out)
    dst.execute("PRAGMA journal_mode=OFF")
    dst.execute("PRAGMA synchronous=OFF")
    dst.executescript("CREATE TABLE passages (idx INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, title TEXT "
                      "NOT NULL,"
                      " n INTEGER NOT NULL, text TEXT NOT NULL); CREATE INDEX passages_title ON "
                      "passages(title, n);")
    k = 0
    for c in range(copies):
        batch = []
        for _pid, title, n, text in rows:
            t = title if c == 0 else f"{title} ({c})"
            batch.append((k, f"{t}#{n}", t, n, text))
            k += 1
        dst.executemany("INSERT INTO passages VALUES (?, ?, ?, ?, ?)", batch)
    dst.commit()
    dst.close()
    return k


def run(carry: Path, out: Path, copies: int, scaling: list[int] | None = None) -> None:
    import torch

    from veracity.indexes.embedding import embed_on_devices, plan_workers, shard_path
    from veracity.indexes.store import PassageStore
    from veracity.models.encoders import load_encoder

    out.mkdir(parents=True, exist_ok=True)
    result: dict = {"devices": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())],
                    "torch": torch.__version__}

    def save():
        (out / "gpu_embed.json").write_text(json.dumps(result, indent=2), encoding="utf-8")
        print(json.dumps(result)[-1500:], flush=True)

    work = Path("/tmp/gpu_embed")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    t = time.perf_counter()
    n = build_store(carry / "passages.sqlite", work / "passages.sqlite", copies)
    result["store"] = {"passages": n, "copies": copies, "seconds": round(time.perf_counter() - t, 1)}
    plans = plan_workers()
    result["plans"] = [p.__dict__ for p in plans]
    save()

    encoder_dir = str(carry / "encoder-fp16")
    if scaling:  # only: several workers sharing each device (tokenising on the CPU overlaps the GPU's work)
        from dataclasses import replace
        store = PassageStore(work / "passages.sqlite")
        texts = [f"{t}\n{x}" for _, t, x in store.iter_rows(0, min(n, 100_000))]
        enc = load_encoder(encoder_dir, device="cuda:0")
        t = time.perf_counter()
        enc.model.tokenize(texts[:20_000])
        result["tokenize_20k_one_thread_s"] = round(time.perf_counter() - t, 2)
        result["workers_per_device"] = []
        for k in scaling:
            folder = work / f"shards-{k}"
            t = time.perf_counter()
            embedded = embed_on_devices(work / "passages.sqlite", n, folder, encoder_dir,
                                        [replace(p) for p in plans for _ in range(k)], shard_size=8192)
            dt = time.perf_counter() - t
            result["workers_per_device"].append({"workers": k, "passages": embedded, "seconds": round(dt, 1),
                                                 "passages_per_s": round(embedded / dt)})
            save()
        return
    store = PassageStore(work / "passages.sqlite")
    sample = store.iter_rows(0, min(n, 100_000))
    texts = [f"{t}\n{x}" for _, t, x in sample]
    enc = load_encoder(encoder_dir, device="cuda:0")
    enc.encode(texts[:2048], batch_size=256)  # warm-up (kernels, allocator)
    result["encoder_only"] = []
    for bs in sorted({256, 1024, plans[0].batch_size}):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        t = time.perf_counter()
        enc.encode(texts, batch_size=bs)
        torch.cuda.synchronize()
        dt = time.perf_counter() - t
        result["encoder_only"].append({"batch": bs, "passages": len(texts), "seconds": round(dt, 2),
                                       "passages_per_s": round(len(texts) / dt),
                                       "peak_gpu_mib": round(torch.cuda.max_memory_allocated() / 2**20)})
        save()

    # 3. agreement with the CPU float32 vectors
    ref_p = np.load(carry / "ref_passages.npy")
    ref_q = np.load(carry / "ref_queries.npy")
    claims = json.loads((carry / "queries.json").read_text(encoding="utf-8"))
    gpu_p = enc.encode(texts[:len(ref_p)], batch_size=plans[0].batch_size)
    gpu_q = enc.encode(claims, batch_size=256)
    cos = np.sum(gpu_p * ref_p, axis=1)
    result["agreement"] = {"passages": len(ref_p), "queries": len(claims),
                           "cosine_mean": round(float(cos.mean()), 6), "cosine_min": round(float(cos.min()),
                                                                                           6),
                           "recall_at_10": round(_recall(ref_p, ref_q, gpu_p, gpu_q), 4)}
    save()

    # 2. the build's own path: one spawned worker per device, shards claimed and written
    folder = work / "shards"
    shard_size = 16384
    t = time.perf_counter()
    embedded = embed_on_devices(work / "passages.sqlite", n, folder, encoder_dir, plans,
                                shard_size=shard_size)
    dt = time.perf_counter() - t
    first = np.load(shard_path(folder, 0))
    result["embed_on_devices"] = {"passages": embedded, "shard_size": shard_size, "seconds": round(dt, 1),
                                  "passages_per_s": round(embedded / dt), "workers": len(plans),
                                  "first_shard_matches_encoder": bool(np.allclose(first[:len(ref_p)], gpu_p,
                                                                                  atol=2e-3))}
    save()

    # 4. FAISS GPU k-means, when this machine's faiss has GPUs
    try:
        import faiss
        ngpu = faiss.get_num_gpus()
    except Exception as exc:  # no faiss at all on this machine
        result["faiss_gpu"] = f"not measured: faiss not importable ({type(exc).__name__})"
        save()
        return
    if not ngpu:
        result["faiss_gpu"] = "not measured: this faiss sees no GPU"
        save()
        return
    vecs = np.concatenate([np.load(p) for p in sorted(folder.glob("shard-*.npy"))])
    for nlist in (1024, 4096):
        sample_n = min(len(vecs), nlist * 40)
        km = faiss.Kmeans(vecs.shape[1], nlist, niter=20, gpu=True, seed=1)
        t = time.perf_counter()
        km.train(vecs[:sample_n])
        result.setdefault("faiss_gpu", []).append({"nlist": nlist, "train_points": sample_n,
                                                   "seconds": round(time.perf_counter() - t, 2)})
        save()


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("carry", type=Path)
    p.add_argument("--index", type=Path, default=Path("~/.veracity/indexes/demo").expanduser())
    p.add_argument("--refs", type=int, default=4000)
    p.add_argument("--queries", type=int, default=500)
    r = sub.add_parser("run")
    r.add_argument("carry", type=Path)
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--copies", type=int, default=20)
    r.add_argument("--workers-per-device", type=lambda v: [int(x) for x in v.split(",")], default=None,
                   help="only time embed_on_devices with K workers sharing each device, e.g. 1,2,4")
    a = ap.parse_args(argv)
    if a.cmd == "prepare":
        prepare(a.carry, a.index, a.refs, a.queries)
    else:
        run(a.carry, a.out, a.copies, a.workers_per_device)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
