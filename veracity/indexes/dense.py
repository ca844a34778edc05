"""Dense retrieval: a sentence-transformers encoder and a FAISS index over normalized vectors, and the
dense retriever over them.

Embeddings are written in shards (``shard-00000.npy`` ...), each saved atomically, so a build of
millions of passages that is interrupted continues from the first missing shard. The FAISS index is
then assembled from the shards (training on a sample first when the factory needs it, e.g. IVF/PQ).
Similarity is the inner product of L2-normalized vectors (= cosine).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Callable, Iterable

import numpy as np

from veracity.errors import ConfigError, IndexDirError
from veracity.indexes.retriever import StoredPassagesRetriever, TitleFilter, filtered_top
from veracity.models.encoders import SentenceEncoder, load_encoder

DEFAULT_FACTORY = "Flat"
FAISS_FILE = "index.faiss"
IDS_FILE = "ids.txt"


# ------------------------------------------------------------------------------------- estimates

def _factory_bytes_per_vector(factory: str, dim: int) -> float:
    f = factory.replace(" ", "")
    per = 4.0 * dim  # Flat
    parts = f.split(",")
    last = parts[-1]
    if last.startswith("PQ"):
        m = int("".join(ch for ch in last[2:].split("x")[0] if ch.isdigit()) or dim // 4)
        per = m + 8  # codes + id
    elif last.startswith("SQ8"):
        per = dim + 8
    elif last.startswith("SQfp16"):
        per = 2 * dim + 8
    if "HNSW" in f:
        links = int("".join(ch for ch in f.split("HNSW", 1)[1].split(",")[0].split("_")[0] if ch.isdigit()) or 32)
        per += links * 2 * 4 * 1.1
    return per


def estimate_resources(n_passages: int, dim: int, factory: str = DEFAULT_FACTORY, *,
                       avg_text_bytes: int = 700, bm25: bool = True, dense: bool = True) -> dict:
    """Rough RAM and disk needs of an index (bytes). The embedding shards live on disk during the build."""
    out = {"passages": n_passages, "dimension": dim, "faiss_factory": factory}
    text = n_passages * avg_text_bytes
    out["store_disk"] = int(text * 1.3)
    out["bm25_disk"] = int(text * 1.6) if bm25 else 0  # postings + stored raw text
    vec = n_passages * dim * 4
    index = int(n_passages * _factory_bytes_per_vector(factory, dim)) if dense else 0
    out["shards_disk_during_build"] = vec if dense else 0
    out["dense_disk"] = index
    out["dense_ram"] = index
    out["build_ram_peak"] = (index + min(vec, 2 * 10**9)) if dense else 0
    out["disk_total"] = out["store_disk"] + out["bm25_disk"] + out["dense_disk"]
    out["disk_peak_during_build"] = out["disk_total"] + out["shards_disk_during_build"]
    return out


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


# ----------------------------------------------------------------------------------- shards + FAISS

def shard_path(folder: Path, i: int) -> Path:
    return folder / f"shard-{i:05d}.npy"


def embed_shards(rows: Callable[[int, int], list[tuple[int, str, str]]], n_passages: int, folder: Path,
                 encoder: SentenceEncoder, *, shard_size: int = 4096, batch_size: int = 64,
                 progress: Callable[[int, int], None] | None = None,
                 on_shard: Callable[[int], None] | None = None) -> int:
    """Embed rows [0, n) into shard files; existing shards are kept (resume). Returns passages embedded now."""
    folder.mkdir(parents=True, exist_ok=True)
    n_shards = (n_passages + shard_size - 1) // shard_size
    done = sum(min(shard_size, n_passages - i * shard_size) for i in range(n_shards) if shard_path(folder, i).exists())
    if progress:
        progress(done, n_passages)
    embedded = 0
    for i in range(n_shards):
        path = shard_path(folder, i)
        if path.exists():
            continue
        start, stop = i * shard_size, min(n_passages, (i + 1) * shard_size)
        batch = rows(start, stop)
        if len(batch) != stop - start:
            raise IndexDirError(f"passage store returned {len(batch)} rows for [{start}, {stop})",
                                hint="delete the partial build and start again")
        vecs = []
        for j in range(0, len(batch), batch_size * 8):  # several encoder calls per shard for a live progress bar
            part = batch[j:j + batch_size * 8]
            vecs.append(encoder.encode([f"{t}\n{x}" for _, t, x in part], batch_size=batch_size))
            done += len(part)
            embedded += len(part)
            if progress:
                progress(done, n_passages)
        tmp = path.with_suffix(".tmp.npy")
        np.save(tmp, np.concatenate(vecs).astype(np.float32))
        os.replace(tmp, path)
        if on_shard:
            on_shard(i)
    return embedded


def _to_gpu(index):
    import faiss

    if faiss.get_num_gpus() > 0 and hasattr(faiss, "index_cpu_to_all_gpus"):
        try:
            return faiss.index_cpu_to_all_gpus(index), True
        except Exception:  # index type without a GPU implementation (e.g. HNSW)
            pass
    return index, False


def build_faiss(folder: Path, n_passages: int, dim: int, factory: str, out_file: Path, *, shard_size: int,
                train_size: int = 200_000, seed: int = 0, progress: Callable[[int, int], None] | None = None) -> dict:
    """Assemble the FAISS index from the shards and write it; returns facts for the manifest."""
    import faiss

    try:
        index = faiss.index_factory(dim, factory, faiss.METRIC_INNER_PRODUCT)
    except RuntimeError as exc:
        raise ConfigError(f"bad FAISS factory string {factory!r}: {str(exc).splitlines()[-1]}",
                          hint="e.g. --faiss-factory Flat | HNSW32 | IVF4096,PQ32") from None
    n_shards = (n_passages + shard_size - 1) // shard_size
    trained_on = 0
    if not index.is_trained:
        rng = np.random.default_rng(seed)
        per = max(1, train_size // max(1, n_shards))
        sample = []
        for i in range(n_shards):
            vecs = np.load(shard_path(folder, i), mmap_mode="r")
            take = np.sort(rng.choice(len(vecs), size=min(per, len(vecs)), replace=False))
            sample.append(np.asarray(vecs[take]))
        sample = np.concatenate(sample)
        trained_on = len(sample)
        gpu_index, _ = _to_gpu(index)
        try:
            gpu_index.train(sample)
        except RuntimeError as exc:
            raise ConfigError(f"FAISS factory {factory!r} cannot be trained on {len(sample)} vectors: "
                              f"{str(exc).splitlines()[-1]}",
                              hint="use --faiss-factory Flat for small corpora, or fewer IVF lists") from None
        if gpu_index is not index:
            index = faiss.index_gpu_to_cpu(gpu_index)
    work, on_gpu = _to_gpu(index)
    added = 0
    for i in range(n_shards):
        vecs = np.load(shard_path(folder, i))
        if vecs.shape[1] != dim:
            raise IndexDirError(f"shard {i} has dimension {vecs.shape[1]}, expected {dim}",
                                hint="delete the partial build and start again")
        work.add(vecs)
        added += len(vecs)
        if progress:
            progress(added, n_passages)
    if on_gpu:
        index = faiss.index_gpu_to_cpu(work)
    out_file.parent.mkdir(parents=True, exist_ok=True)
    faiss.write_index(index, str(out_file))
    return {"ntotal": int(index.ntotal), "trained_on": trained_on, "built_on_gpu": on_gpu}


def _faiss_failure(exc: Exception, path: Path) -> str:
    """FAISS's own words for a file it cannot read, without its C++ signature and the path told already;
    shortened at a word, never in the middle of a path (issue 29)."""
    first = (str(exc).splitlines() or [""])[0]
    why = first.rsplit("Error: ", 1)[-1].replace(str(path), "the file").strip() or type(exc).__name__
    if len(why) > 160:
        why = why[:160].rsplit(" ", 1)[0] + " …"
    return why


def read_faiss(path: Path, expected: int | None = None, *, mmap: bool = False):
    """Read a FAISS index file; IndexDirError when missing, corrupt, truncated or not ``expected`` vectors long.

    ``mmap``: map the vectors instead of reading them (``index info`` checks a large index this way in a
    moment; a truncated file is still noticed)."""
    import faiss

    if not path.exists():
        raise IndexDirError(f"FAISS index {path} is missing",
                            hint="rebuild the dense part (`veracity index build ... --overwrite`) or search --mode bm25")
    try:
        index = faiss.read_index(str(path), faiss.IO_FLAG_MMAP) if mmap else faiss.read_index(str(path))
    except RuntimeError as exc:
        raise IndexDirError(f"FAISS index {path} is corrupt or unreadable ({_faiss_failure(exc, path)})",
                            hint="rebuild the index with --overwrite, or search --mode bm25") from None
    if expected is not None and index.ntotal != expected:
        raise IndexDirError(f"FAISS index {path} holds {index.ntotal} vectors, the manifest says {expected}",
                            hint="rebuild the index with --overwrite")
    return index


def load_faiss(path: Path, expected: int | None = None, *, nprobe: int = 32, ef_search: int = 128):
    """Read a FAISS index (to the GPU when there is one); IndexDirError when missing, corrupt or short."""
    import faiss

    index = read_faiss(path, expected)
    try:
        ivf = faiss.extract_index_ivf(index)
        ivf.nprobe = nprobe
    except RuntimeError:
        pass
    if hasattr(index, "hnsw"):
        index.hnsw.efSearch = ef_search
    index, _ = _to_gpu(index)
    return index


def write_ids(ids: Iterable[str], path: Path) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for pid in ids:
            f.write(pid.replace("\n", " ") + "\n")


# ------------------------------------------------------------------------------------------ retriever

class DenseRetriever(StoredPassagesRetriever):
    """The :class:`~veracity.indexes.retriever.Retriever` over a FAISS index and its passage store: the
    query's vector against the passages' vectors (inner product of normalized vectors = cosine), the
    title filter applied by fetching deeper, texts from the store.

    The query encoder is loaded on the first search, once: ``encoder_loader(encoder_name)`` (None:
    :func:`veracity.models.encoders.load_encoder`); an encoder that cannot load, or whose vectors do not
    have the index's ``dimension`` (default: the FAISS index's), is an IndexDirError."""

    name = "dense"

    def __init__(self, store, faiss_index, encoder_loader: Callable | None = None, *,
                 encoder_name: str | None = None, dimension: int | None = None):
        self.store = store
        self.index = faiss_index
        self.encoder_name = encoder_name
        self.dimension = int(dimension if dimension is not None else faiss_index.d)
        self._load = encoder_loader
        self._encoder = None
        self._encoder_lock = threading.Lock()

    def encoder(self):
        if self._encoder is None:
            with self._encoder_lock:
                if self._encoder is None:
                    try:
                        enc = (self._load or load_encoder)(self.encoder_name)
                    except ConfigError as exc:
                        raise IndexDirError(f"cannot load the index's encoder: {exc}",
                                            hint="pass --encoder with a local copy of the same model") from None
                    if enc.dimension != self.dimension:
                        raise IndexDirError(f"encoder {enc.name} gives {enc.dimension}-d vectors, the index holds "
                                            f"{self.dimension}-d",
                                            hint="pass the encoder the index was built with")
                    self._encoder = enc
        return self._encoder

    def ranked(self, query: str, k: int, keep: TitleFilter) -> list[tuple[str, float]]:
        """The top ``k`` ``(passage id, cosine)`` pairs whose titles ``keep`` lets through."""
        if not query.strip() or k <= 0:
            return []
        vec = self.encoder().encode([query])
        rows_cache: dict[int, tuple[str, str, str]] = {}

        def fetch(depth: int) -> list[tuple[int, float]]:
            scores, rows = self.index.search(vec, depth)
            got = [(int(r), float(s)) for r, s in zip(rows[0], scores[0], strict=True) if r >= 0]
            missing = [r for r, _ in got if r not in rows_cache]
            if missing:
                rows_cache.update(self.store.by_rows(missing))
            return got

        ranked = filtered_top(fetch, lambda it: rows_cache[it[0]][1], k, keep, self.store.count)
        return [(rows_cache[r][0], s) for r, s in ranked]
