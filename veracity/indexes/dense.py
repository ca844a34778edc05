"""Dense retrieval: a sentence-transformers encoder and a FAISS index over normalized vectors, and the
dense retriever over them.

Embeddings are written in shards (``shard-00000.npy`` ...), each saved atomically, so a build of
millions of passages that is interrupted continues from the first missing shard. The FAISS index is
then assembled from the shards (training on a sample first when the factory needs it, e.g. IVF/PQ).
Similarity is the inner product of L2-normalized vectors (= cosine).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Callable, Iterable

import numpy as np

from veracity.errors import ConfigError, IndexDirError
from veracity.indexes.ann import (AUTO, DEFAULT_EF_SEARCH, DEFAULT_NPROBE, RECALL_QUERIES, check_factory,
                                  resolve_factory, search_kind, set_search_params, train_index, tune_search)
from veracity.indexes.embedding import embed_claimed_shards, shard_path
from veracity.indexes.retriever import StoredPassagesRetriever, TitleFilter, filtered_top
from veracity.models.encoders import SentenceEncoder, load_encoder

DEFAULT_FACTORY = AUTO
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
    # an HNSW index links every vector (an HNSW coarse quantizer: only lists)
    if f.split(",")[0].startswith("HNSW"):
        links = int("".join(ch for ch in f.split("HNSW",
                                                 1)[1].split(",")[0].split("_")[0] if ch.isdigit()) or 32)
        per += links * 2 * 4 * 1.1
    return per


def estimate_resources(n_passages: int, dim: int, factory: str = DEFAULT_FACTORY, *,
                       avg_text_bytes: int = 700, bm25: bool = True, dense: bool = True) -> dict:
    """Rough RAM and disk needs of an index (bytes). The embedding shards live on disk during the build.
    ``factory`` ``auto`` is the factory :func:`~veracity.indexes.ann.auto_factory` picks for
    ``n_passages``."""
    factory = resolve_factory(factory, n_passages)
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

def embed_shards(rows: Callable[[int, int], list[tuple[int, str, str]]], n_passages: int, folder: Path,
                 encoder: SentenceEncoder, *, shard_size: int = 4096, batch_size: int = 64,
                 progress: Callable[[int, int], None] | None = None,
                 on_shard: Callable[[int], None] | None = None) -> int:
    """Embed rows [0, n) into shard files, in this process; existing shards are kept (resume), shards other
    workers hold are waited for (:func:`veracity.indexes.embedding.embed_claimed_shards`)."""
    return embed_claimed_shards(rows, n_passages, folder, encoder, shard_size=shard_size,
                                batch_size=batch_size,
                                progress=progress, on_shard=on_shard)


def _to_gpu(index):
    import faiss

    if hasattr(faiss, "get_num_gpus") and faiss.get_num_gpus() > 0 and hasattr(faiss,
                                                                               "index_cpu_to_all_gpus"):
        try:
            return faiss.index_cpu_to_all_gpus(index), True
        except Exception:  # index type without a GPU implementation (e.g. HNSW)
            pass
    return index, False


def shard_paths(folder: Path, n_passages: int, shard_size: int) -> list[Path]:
    return [shard_path(folder, i) for i in range((n_passages + shard_size - 1) // shard_size)]


def read_rows(folder: Path, rows: np.ndarray, shard_size: int) -> np.ndarray:
    """The vectors of the global ``rows`` (sorted), read shard by shard through a memory map."""
    out = []
    shard_of = rows // shard_size
    for i in np.unique(shard_of):
        vecs = np.load(shard_path(folder, int(i)), mmap_mode="r")
        out.append(np.asarray(vecs[rows[shard_of == i] - int(i) * shard_size], dtype=np.float32))
    return np.concatenate(out) if out else np.zeros((0, 0), dtype=np.float32)


def build_faiss(folder: Path, n_passages: int, dim: int, factory: str, out_file: Path, *, shard_size: int,
                seed: int = 0, recall_queries: int = RECALL_QUERIES, progress: Callable[[int, int],
                                                                                        None] | None = None,
                recall_progress: Callable[[int, int], None] | None = None) -> dict:
    """Assemble the FAISS index from the shards, measure its recall against exact search and write it.

    ``factory`` ``auto`` picks by size (:func:`veracity.indexes.ann.auto_factory`). A trained factory samples
    :data:`~veracity.indexes.ann.TRAIN_PER_LIST` vectors per list; the recall queries are passages outside
    that sample. Returns facts for the manifest (the factory used, training, the search setting chosen and
    its measured recall@10)."""
    import faiss

    used = resolve_factory(factory, n_passages)
    facts = check_factory(used, dim, n_passages)
    index = faiss.index_factory(dim, used, faiss.METRIC_INNER_PRODUCT)
    shards = shard_paths(folder, n_passages, shard_size)
    rng = np.random.default_rng(seed)
    train_rows = np.zeros(0, dtype=np.int64)
    trained_on_gpu = False
    if facts.needs_training:
        # leave the recall queries out of the sample where the corpus allows it (held-out passages)
        take = max(facts.min_train, min(facts.train_size, n_passages - min(recall_queries, n_passages // 10)))
        take = min(take, n_passages)
        train_rows = np.sort(rng.choice(n_passages, size=take, replace=False))
        sample = read_rows(folder, train_rows, shard_size)
        try:
            trained_on_gpu = train_index(index, sample, seed=seed)
        except RuntimeError as exc:
            raise ConfigError(f"FAISS factory {used!r} cannot be trained on {len(sample):,} vectors: "
                              f"{str(exc).strip().splitlines()[-1][:160]}",
                              hint="use --faiss-factory auto, or fewer IVF lists") from None
        del sample
    work, on_gpu = _to_gpu(index)
    added = 0
    for i, path in enumerate(shards):
        vecs = np.load(path)
        if vecs.ndim != 2 or vecs.shape[1] != dim:
            raise IndexDirError(f"shard {i} has shape {vecs.shape}, expected (*, {dim})",
                                hint="delete the partial build and start again")
        work.add(vecs)
        added += len(vecs)
        if progress:
            progress(added, n_passages)
    if on_gpu:
        index = faiss.index_gpu_to_cpu(work)
    search = {"kind": "exact", "recall_at_10": 1.0, "queries": 0, "measured": False}
    if search_kind(index) != "exact":
        held_out = np.setdiff1d(np.arange(n_passages), train_rows, assume_unique=True)
        pool = held_out if len(held_out) else np.arange(n_passages)
        query_rows = np.sort(rng.choice(pool, size=min(recall_queries, len(pool)), replace=False))
        queries = read_rows(folder, query_rows, shard_size)
        search = tune_search(index, shards, query_rows, queries, progress=recall_progress)
        search["held_out"] = bool(len(held_out))
    out_file.parent.mkdir(parents=True, exist_ok=True)
    faiss.write_index(index, str(out_file))
    return {"faiss_factory": used, "faiss_factory_requested": factory, "ntotal": int(index.ntotal),
            "trained_on": int(len(train_rows)), "trained_on_gpu": trained_on_gpu, "built_on_gpu": on_gpu,
            "search": search}


def _faiss_failure(exc: Exception, path: Path) -> str:
    """FAISS's own words for a file it cannot read, without its C++ signature and the path told already;
    shortened at a word, never in the middle of a path (issue 29)."""
    first = (str(exc).splitlines() or [""])[0]
    why = first.rsplit("Error: ", 1)[-1].replace(str(path), "the file").strip() or type(exc).__name__
    if len(why) > 160:
        why = why[:160].rsplit(" ", 1)[0] + " …"
    return why


MMAP_FROM_BYTES = 256 * 2**20  # index files from this size on are memory-mapped when opened


def read_faiss(path: Path, expected: int | None = None, *, mmap: bool | None = None):
    """Read a FAISS index file; IndexDirError when missing, corrupt, truncated or not ``expected`` vectors
    long.

    ``mmap`` (None: files of at least :data:`MMAP_FROM_BYTES`) maps the vectors from the file instead of
    reading them into memory (the IVF inverted lists, or a flat index's codes), so an index larger than RAM
    opens, the page cache is shared between processes, and ``index info`` checks a large index in a moment;
    a truncated file is still noticed."""
    import faiss

    if not path.exists():
        raise IndexDirError(f"FAISS index {path} is missing",
                            hint="rebuild the dense part (`veracity index build ... --overwrite`) or search "
                                 "--mode bm25")
    if mmap is None:
        mmap = path.stat().st_size >= MMAP_FROM_BYTES
    index = None
    if mmap:
        # IO_FLAG_MMAP maps IVF inverted lists; IO_FLAG_MMAP_IFC maps the codes of flat-code indexes (Flat,
        # SQ, HNSW's storage). FAISS refuses the two together on IVF, so the IVF form is tried first.
        for flags in (faiss.IO_FLAG_MMAP, faiss.IO_FLAG_MMAP_IFC):
            try:
                index = faiss.read_index(str(path), flags | faiss.IO_FLAG_READ_ONLY)
            except RuntimeError:
                continue
            if flags == faiss.IO_FLAG_MMAP and search_kind(index) != "ivf":
                index = faiss.read_index(str(path), faiss.IO_FLAG_MMAP_IFC | faiss.IO_FLAG_READ_ONLY)
            break
    if index is None:
        try:
            index = faiss.read_index(str(path))
        except RuntimeError as exc:
            raise IndexDirError(f"FAISS index {path} is corrupt or unreadable ({_faiss_failure(exc, path)})",
                                hint="rebuild the index with --overwrite, or search --mode bm25") from None
    if expected is not None and index.ntotal != expected:
        raise IndexDirError(f"FAISS index {path} holds {index.ntotal} vectors, the manifest says {expected}",
                            hint="rebuild the index with --overwrite")
    return index


def load_faiss(path: Path, expected: int | None = None, *, nprobe: int | None = None,
               ef_search: int | None = None,
               mmap: bool | None = None):
    """Read a FAISS index (:func:`read_faiss`) set up for search. ``nprobe`` / ``ef_search`` default to those
    recorded at build time by the caller, else :data:`~veracity.indexes.ann.DEFAULT_NPROBE` /
    ``DEFAULT_EF_SEARCH``. Goes to the GPU when there is one (unless memory-mapped)."""
    if mmap is None:
        mmap = path.exists() and path.stat().st_size >= MMAP_FROM_BYTES
    index = read_faiss(path, expected, mmap=mmap)
    set_search_params(index, nprobe=DEFAULT_NPROBE if nprobe is None else nprobe,
                      ef_search=DEFAULT_EF_SEARCH if ef_search is None else ef_search)
    if not mmap:
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
                        raise IndexDirError(
                            f"cannot load the index's encoder: {exc}",
                            hint="pass --encoder with a local copy of the same model") from None
                    if enc.dimension != self.dimension:
                        raise IndexDirError(f"encoder {enc.name} gives {enc.dimension}-d vectors, the index "
                                            "holds "
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
