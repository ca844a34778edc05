"""Which FAISS index a corpus gets, how it is trained, and how accurate it is.

``auto`` (the default factory) picks by corpus size, after FAISS's own guidelines for choosing an index
(the faiss wiki, "Guidelines to choose an index"): an exact ``Flat`` index up to :data:`AUTO_FLAT_MAX`
vectors; above that an inverted file with 8-bit scalar quantization, ``IVF{nlist},SQ8`` with ``nlist`` the
smallest power of two of at least 4·√N (the guideline's range is 4–16·√N), and an HNSW coarse quantizer
(``IVF{nlist}_HNSW32,SQ8``) from :data:`HNSW_QUANTIZER_FROM` lists on, where assigning millions of vectors to
a flat list of centroids would dominate the build. SQ8 was chosen by measurement on real MiniLM vectors
(benchmarks/BENCHMARKS.md, "The index at full scale"): PQ codes level off far below exact search
(IVF256,PQ48: recall@10 0.75) while SQ8 keeps 1 byte per dimension and follows exact search closely.

Training samples :data:`TRAIN_PER_LIST` vectors per list (FAISS's k-means warns below 39); a factory whose
corpus cannot give :data:`MIN_PER_LIST` per list is refused (:func:`check_factory`). After the vectors are
added, :func:`tune_search` measures recall@10 against exact search on held-out passages for several
``nprobe`` (IVF) or ``efSearch`` (HNSW) values and keeps the smallest that reaches :data:`RECALL_TARGET`; the
manifest records it with the measured recall.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from veracity.errors import ConfigError

AUTO = "auto"
AUTO_FLAT_MAX = 100_000          # exact search up to here (Flat: ~12 ms/query at 100k x 384 on one core)
HNSW_QUANTIZER_FROM = 8192       # lists from which the coarse quantizer is an HNSW graph
TRAIN_PER_LIST = 39              # FAISS k-means: "please provide at least 39 training points per centroid"
MIN_PER_LIST = 30                # fewer per list than this: refused
PQ_TRAIN_MIN = 256 * 39          # a PQ / SQ codebook of 256 centroids wants as many
RECALL_TARGET = 0.95
RECALL_QUERIES = 1000
NPROBES = (8, 16, 32, 64, 128, 256)
EF_SEARCHES = (16, 32, 64, 128, 256, 512)
DEFAULT_NPROBE = 32              # for indexes built before the manifest recorded one
DEFAULT_EF_SEARCH = 128


def auto_factory(n: int) -> str:
    """The factory ``auto`` picks for ``n`` vectors."""
    if n <= AUTO_FLAT_MAX:
        return "Flat"
    nlist = 1 << math.ceil(math.log2(4 * math.sqrt(n)))
    while nlist > 1024 and n < TRAIN_PER_LIST * nlist:  # a small corpus: fewer lists, each well trained
        nlist //= 2
    quantizer = "_HNSW32" if nlist >= HNSW_QUANTIZER_FROM else ""
    return f"IVF{nlist}{quantizer},SQ8"


def resolve_factory(factory: str, n: int) -> str:
    return auto_factory(n) if factory.strip().lower() == AUTO else factory


@dataclass(frozen=True)
class FactoryFacts:
    """What a factory string means for training: how many lists, whether it trains at all."""

    factory: str
    needs_training: bool
    nlist: int | None
    hnsw: bool
    min_train: int       # fewer training vectors than this: refused
    train_size: int      # what the build samples (capped by the corpus)


def factory_facts(factory: str, dim: int) -> FactoryFacts:
    """Parse ``factory`` by letting FAISS build it (a string FAISS rejects is a one-line ConfigError)."""
    import faiss

    try:
        index = faiss.index_factory(dim, factory, faiss.METRIC_INNER_PRODUCT)
    except RuntimeError as exc:
        raise ConfigError(f"FAISS rejects the factory string {factory!r}: "
                          f"{str(exc).strip().splitlines()[-1][:160]}",
                          hint="e.g. --faiss-factory auto | Flat | HNSW32 | IVF4096,SQ8") from None
    nlist = None
    try:
        nlist = int(faiss.extract_index_ivf(index).nlist)
    except RuntimeError:
        pass
    needs = not index.is_trained
    min_train = 0
    if needs:
        min_train = max(MIN_PER_LIST * (nlist or 0), PQ_TRAIN_MIN if "PQ" in factory else 0, 1)
    train_size = max(TRAIN_PER_LIST * (nlist or 0), PQ_TRAIN_MIN if needs else 0)
    return FactoryFacts(factory, needs, nlist, search_kind(index) == "hnsw", min_train, train_size)


def check_factory(factory: str, dim: int, n: int | None) -> FactoryFacts:
    """Refuse, in one line, a factory FAISS rejects or one whose training sample would be too small for ``n``
    vectors (None: only the string is checked)."""
    facts = factory_facts(factory, dim)
    if n is not None and facts.needs_training and n < facts.min_train:
        per = f"{MIN_PER_LIST} per list x {facts.nlist:,} lists" if facts.nlist else "its codebooks"
        raise ConfigError(f"--faiss-factory {factory} needs at least {facts.min_train:,} training vectors "
                          f"({per}); "
                          f"the corpus has {n:,} passages",
                          hint=f"use --faiss-factory auto (here: {auto_factory(n)}), or fewer IVF lists "
                               f"(at most {max(1, n // MIN_PER_LIST):,})")
    return facts


def train_index(index, sample: np.ndarray, *, gpus: int | None = None, seed: int = 0) -> bool:
    """Train ``index`` on ``sample``; the IVF coarse quantizer's k-means runs on the GPUs when FAISS sees any
    (faiss-gpu). Returns whether a GPU trained it."""
    import faiss

    gpus = faiss.get_num_gpus() if gpus is None and hasattr(faiss, "get_num_gpus") else (gpus or 0)
    on_gpu = False
    # our floor is MIN_PER_LIST (checked before): FAISS's own warning below 39 would only be noise on stderr
    try:
        faiss.extract_index_ivf(index).cp.min_points_per_centroid = MIN_PER_LIST
    except RuntimeError:
        pass
    if gpus > 0:
        try:
            ivf = faiss.extract_index_ivf(index)
        except RuntimeError:
            ivf = None
        if ivf is not None and ivf.quantizer.ntotal == 0:
            km = faiss.Kmeans(index.d, int(ivf.nlist), niter=20, seed=seed, gpu=gpus,
                              max_points_per_centroid=256,
                              min_points_per_centroid=MIN_PER_LIST)
            km.train(sample)
            # IndexIVF.train skips a quantizer that already holds nlist centroids
            ivf.quantizer.add(km.centroids)
            on_gpu = True
    index.train(sample)
    return on_gpu


def set_search_params(index, *, nprobe: int | None = None, ef_search: int | None = None) -> None:
    """Apply nprobe (IVF) / efSearch (HNSW, also an HNSW coarse quantizer's) where the index has them."""
    import faiss

    try:
        ivf = faiss.extract_index_ivf(index)
    except RuntimeError:
        ivf = None
    if ivf is not None and nprobe is not None:
        ivf.nprobe = int(nprobe)
        q = faiss.downcast_index(ivf.quantizer)
        if hasattr(q, "hnsw"):
            q.hnsw.efSearch = max(int(nprobe) * 2, 64)
    if ivf is None and ef_search is not None:
        h = faiss.downcast_index(index)
        if hasattr(h, "hnsw"):
            h.hnsw.efSearch = int(ef_search)


def search_kind(index) -> str:
    """``ivf`` (takes nprobe), ``hnsw`` (takes efSearch) or ``exact``."""
    import faiss

    try:
        faiss.extract_index_ivf(index)
        return "ivf"
    except RuntimeError:
        pass
    return "hnsw" if hasattr(faiss.downcast_index(index), "hnsw") else "exact"


def exact_top(shards: list[Path], queries: np.ndarray, k: int) -> np.ndarray:
    """Exact inner-product top-``k`` rows of ``queries`` over the vectors in ``shards`` (streamed, one shard
    in
    memory at a time)."""
    import faiss

    best_s = np.full((len(queries), k), -np.inf, dtype=np.float32)
    best_i = np.full((len(queries), k), -1, dtype=np.int64)
    base = 0
    for path in shards:
        vecs = np.load(path)
        flat = faiss.IndexFlatIP(vecs.shape[1])
        flat.add(vecs)
        s, i = flat.search(queries, min(k, len(vecs)))
        i = np.where(i >= 0, i + base, -1)
        base += len(vecs)
        all_s = np.concatenate([best_s, s], axis=1)
        all_i = np.concatenate([best_i, i], axis=1)
        order = np.argsort(-all_s, axis=1, kind="stable")[:, :k]
        best_s = np.take_along_axis(all_s, order, axis=1)
        best_i = np.take_along_axis(all_i, order, axis=1)
    return best_i


def recall_at(exact: np.ndarray, found: np.ndarray, query_rows: np.ndarray, k: int = 10) -> float:
    """Mean |top-k(found) ∩ top-k(exact)| / k, each list without the query's own row (a held-out passage is
    its own nearest neighbour in both)."""
    total = 0.0
    for e, f, q in zip(exact, found, query_rows, strict=True):
        e10 = [r for r in e if r != q and r >= 0][:k]
        f10 = {r for r in [r for r in f if r != q and r >= 0][:k]}
        total += len(set(e10) & f10) / max(1, len(e10))
    return total / max(1, len(exact))


def tune_search(index, shards: list[Path], query_rows: np.ndarray, queries: np.ndarray, *,
                target: float = RECALL_TARGET, k: int = 10,
                progress: Callable[[int, int], None] | None = None) -> dict:
    """Recall@k of ``index`` against exact search for each nprobe / efSearch candidate; the smallest reaching
    ``target`` is the default (else the best measured). Returns facts for the manifest."""
    kind = search_kind(index)
    if kind == "exact":
        return {"kind": "exact", "recall_at_10": 1.0, "queries": 0, "measured": False}
    exact = exact_top(shards, queries, k + 1)
    values = NPROBES if kind == "ivf" else EF_SEARCHES
    if kind == "ivf":
        import faiss

        # probing every list is the last candidate, if in range
        nlist = int(faiss.extract_index_ivf(index).nlist)
        values = tuple(v for v in values if v < nlist) + ((nlist,) if nlist <= NPROBES[-1] else ())
    by = {}
    chosen = None
    for j, v in enumerate(values):
        set_search_params(index, nprobe=v if kind == "ivf" else None, ef_search=v if kind == "hnsw" else None)
        _, found = index.search(queries, k + 1)
        by[v] = round(recall_at(exact, found, query_rows, k), 4)
        if progress:
            progress(j + 1, len(values))
        if by[v] >= target:
            chosen = v
            break
    if chosen is None:
        chosen = max(by, key=lambda v: (by[v], -v))
    key = "nprobe" if kind == "ivf" else "ef_search"
    set_search_params(index, nprobe=chosen if kind == "ivf" else None,
                      ef_search=chosen if kind == "hnsw" else None)
    return {"kind": kind, key: chosen, "recall_at_10": by[chosen], "target": target,
            "queries": int(len(queries)),
            "measured": True,
            "against": "exact inner-product search over every vector, the query's own row left out",
            f"recall_by_{key}": {str(v): r for v, r in by.items()}}
