"""The FAISS side of a build: the factory ``auto`` picks, the refusal of factories that cannot be trained, the
measured recall recorded for the manifest, memory-mapped opening, and GPU training (faked device)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from veracity.errors import ConfigError
from veracity.indexes import ann
from veracity.indexes.dense import build_faiss, load_faiss, shard_path


def clustered(n: int, dim: int = 32, clusters: int = 40, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(clusters, dim))
    x = centres[rng.integers(0, clusters, n)] + 0.35 * rng.normal(size=(n, dim))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x.astype(np.float32)


def write_shards(folder, vecs, shard_size):
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(0, len(vecs), shard_size):
        np.save(shard_path(folder, i // shard_size), vecs[i:i + shard_size])


@pytest.mark.parametrize("n, expected", [(10_987, "Flat"), (100_000, "Flat"), (100_001, "IVF2048,SQ8"),
                                         (1_000_000, "IVF4096,SQ8"),
                                         # nlist at HNSW_QUANTIZER_FROM: HNSW
                                         (2_000_000, "IVF8192_HNSW32,SQ8"),
                                         (21_015_324, "IVF32768_HNSW32,SQ8")])
def test_auto_factory_by_size(n, expected):
    assert ann.auto_factory(n) == expected
    if expected != "Flat":
        nlist = int(expected[3:].split(",")[0].split("_")[0])
        assert 4 * math.sqrt(n) <= nlist <= 16 * math.sqrt(n)  # FAISS's guideline range
        assert n >= ann.TRAIN_PER_LIST * nlist  # the sample it trains on exists


def test_auto_factory_small_corpus_keeps_enough_points_per_list():
    for n in (100_001, 150_000, 300_000):
        facts = ann.check_factory(ann.auto_factory(n), 384, n)  # never refused
        assert n >= facts.train_size


def test_factory_too_small_a_sample_is_refused_in_one_line():
    with pytest.raises(ConfigError) as err:
        ann.check_factory("IVF65536,PQ64", 384, 200_000)
    assert "needs at least 1,966,080 training vectors" in str(err.value) and "\n" not in str(err.value)
    assert "auto" in err.value.hint
    assert ann.check_factory("IVF65536,PQ64", 384, 3_000_000).nlist == 65536


def test_factory_faiss_rejects_is_one_line():
    with pytest.raises(ConfigError) as err:
        ann.check_factory("IVF12,Bogus9", 384, None)
    assert str(err.value).startswith("FAISS rejects the factory string 'IVF12,Bogus9'")
    assert err.value.hint == "e.g. --faiss-factory auto | Flat | HNSW32 | IVF4096,SQ8"
    with pytest.raises(ConfigError):
        ann.check_factory("PQ7", 384, None)  # 7 does not divide 384
    # the line ends with FAISS's own last line, cut at 160 characters (its own is a C++ signature and path)
    import faiss

    with pytest.raises(RuntimeError) as raw:
        faiss.index_factory(32, "Bogus", faiss.METRIC_INNER_PRODUCT)
    with pytest.raises(ConfigError) as err:
        ann.check_factory("Bogus", 32, None)
    said = str(raw.value).strip().splitlines()[-1]
    assert str(err.value) == f"FAISS rejects the factory string 'Bogus': {said[:160]}" and said.strip()


def test_recall_at_leaves_the_query_row_out():
    exact = np.array([[5, 1, 2, 3], [0, 9, 8, 7]])
    found = np.array([[5, 1, 4, 2], [9, 0, 8, 6]])
    # query 5: exact {1,2,3} vs found {1,4,2} -> 2/3 ; query 0: exact {9,8,7} vs found {9,8,6} -> 2/3
    assert ann.recall_at(exact, found, np.array([5, 0]), k=3) == pytest.approx(2 / 3)


def test_ivf_build_measures_recall_on_held_out_passages_and_picks_nprobe(tmp_path):
    vecs = clustered(3000)
    write_shards(tmp_path / "shards", vecs, 500)
    facts = build_faiss(tmp_path / "shards", len(vecs), 32, "IVF32,SQ8", tmp_path / "index.faiss",
                        shard_size=500,
                        recall_queries=200)
    s = facts["search"]
    assert facts["faiss_factory"] == "IVF32,SQ8" and facts["ntotal"] == 3000
    assert facts["trained_on"] == 2800 and s["held_out"]  # the 200 recall queries were left out of training
    assert s["kind"] == "ivf" and s["measured"] and s["queries"] == 200
    chosen = s["nprobe"]
    by = {int(k): v for k, v in s["recall_by_nprobe"].items()}
    assert by[chosen] == s["recall_at_10"]
    # the smallest measured nprobe that reaches the target (or the best one)
    assert s["recall_at_10"] >= ann.RECALL_TARGET or s["recall_at_10"] == max(by.values())
    assert all(v < ann.RECALL_TARGET for k, v in by.items() if k < chosen)
    # checked independently: exact search by numpy, ANN at the chosen nprobe, on fresh queries
    index = load_faiss(tmp_path / "index.faiss", 3000, nprobe=chosen)
    q = clustered(100, seed=7)
    truth = np.argsort(-(q @ vecs.T), axis=1)[:, :10]
    _, got = index.search(q, 10)
    recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(truth, got, strict=True)])
    assert recall >= s["recall_at_10"] - 0.1


def test_auto_on_a_small_corpus_is_exact(tmp_path):
    vecs = clustered(700)
    write_shards(tmp_path / "shards", vecs, 256)
    facts = build_faiss(tmp_path / "shards", 700, 32, "auto", tmp_path / "index.faiss", shard_size=256)
    assert facts["faiss_factory"] == "Flat" and facts["faiss_factory_requested"] == "auto"
    assert facts["search"] == {"kind": "exact", "recall_at_10": 1.0, "queries": 0, "measured": False}
    assert facts["trained_on"] == 0


def test_build_refuses_a_factory_its_corpus_cannot_train(tmp_path):
    vecs = clustered(600)
    write_shards(tmp_path / "shards", vecs, 300)
    with pytest.raises(ConfigError, match="needs at least 3,840 training vectors"):
        build_faiss(tmp_path / "shards", 600, 32, "IVF128,SQ8", tmp_path / "index.faiss", shard_size=300)
    assert not (tmp_path / "index.faiss").exists()


@pytest.mark.parametrize("factory", ["Flat", "IVF16,SQ8", "HNSW16", "IVF16,Flat"])
def test_mmap_opening_searches_the_same(tmp_path, factory):
    vecs = clustered(1200)
    write_shards(tmp_path / "shards", vecs, 400)
    build_faiss(tmp_path / "shards", 1200, 32, factory, tmp_path / "index.faiss", shard_size=400,
                recall_queries=50)
    q = clustered(20, seed=3)
    plain = load_faiss(tmp_path / "index.faiss", 1200, nprobe=8, ef_search=64, mmap=False)
    mapped = load_faiss(tmp_path / "index.faiss", 1200, nprobe=8, ef_search=64, mmap=True)
    a, b = plain.search(q, 10), mapped.search(q, 10)
    np.testing.assert_array_equal(a[1], b[1])
    np.testing.assert_allclose(a[0], b[0], rtol=1e-6)
    if factory.startswith("IVF"):
        import faiss

        assert faiss.extract_index_ivf(mapped).nprobe == 8
        assert "OnDisk" in type(faiss.extract_index_ivf(mapped).invlists).__name__ \
            or faiss.extract_index_ivf(mapped).invlists is not None


def test_search_params_reach_the_index(tmp_path):
    import faiss

    vecs = clustered(1200)
    write_shards(tmp_path / "shards", vecs, 600)
    build_faiss(tmp_path / "shards", 1200, 32, "IVF16,SQ8", tmp_path / "i.faiss", shard_size=600,
                recall_queries=50)
    assert faiss.extract_index_ivf(load_faiss(tmp_path / "i.faiss", nprobe=3)).nprobe == 3
    assert faiss.extract_index_ivf(load_faiss(tmp_path / "i.faiss")).nprobe == ann.DEFAULT_NPROBE
    build_faiss(tmp_path / "shards", 1200, 32, "HNSW8", tmp_path / "h.faiss", shard_size=600,
                recall_queries=50)
    assert faiss.downcast_index(load_faiss(tmp_path / "h.faiss", ef_search=77)).hnsw.efSearch == 77


def test_gpu_training_runs_the_coarse_kmeans_on_the_devices(monkeypatch):
    """faiss-gpu is not here: the Kmeans FAISS would run on the GPUs is faked (CPU underneath), and the test
    checks that it is asked for the GPUs, trains the IVF lists, and that the index then searches."""
    import faiss

    asked = []
    real = faiss.Kmeans

    class GpuKmeans(real):
        def __init__(self, d, k, **kw):
            asked.append(kw.get("gpu"))
            kw["gpu"] = False
            super().__init__(d, k, **kw)

    monkeypatch.setattr(faiss, "Kmeans", GpuKmeans)
    vecs = clustered(2000)
    index = faiss.index_factory(32, "IVF16,SQ8", faiss.METRIC_INNER_PRODUCT)
    assert ann.train_index(index, vecs, gpus=2) is True
    assert asked == [2] and index.is_trained and faiss.extract_index_ivf(index).quantizer.ntotal == 16
    index.add(vecs)
    assert index.search(vecs[:3], 1)[1][:, 0].tolist() == [0, 1, 2]
    cpu = faiss.index_factory(32, "IVF16,SQ8", faiss.METRIC_INNER_PRODUCT)
    assert ann.train_index(cpu, vecs, gpus=0) is False and asked == [2]


def test_few_lists_still_get_a_measured_nprobe(tmp_path):
    vecs = clustered(400)
    write_shards(tmp_path / "shards", vecs, 100)
    facts = build_faiss(tmp_path / "shards", 400, 32, "IVF2,SQ8", tmp_path / "i.faiss", shard_size=100,
                        recall_queries=40)
    assert facts["search"]["nprobe"] == 2 and list(facts["search"]["recall_by_nprobe"]) == ["2"]


@pytest.mark.parametrize("factory, needs, nlist, hnsw, min_train, train_size", [
    ("Flat", False, None, False, 0, 0),                      # exact: nothing to train
    ("HNSW32", False, None, True, 0, 0),                     # a graph: nothing to train, searched by efSearch
    ("SQ8", True, None, False, 1, ann.PQ_TRAIN_MIN),         # a scalar codebook: any sample, 256 x 39 drawn
    ("PQ4", True, None, False, ann.PQ_TRAIN_MIN, ann.PQ_TRAIN_MIN),  # PQ codebooks want 256 x 39
    ("IVF64,SQ8", True, 64, False, 30 * 64, ann.PQ_TRAIN_MIN),      # 30 per list, the codebook's sample
    ("IVF64,PQ4", True, 64, False, ann.PQ_TRAIN_MIN, ann.PQ_TRAIN_MIN),
    ("IVF1024,SQ8", True, 1024, False, 30 * 1024, 39 * 1024),       # 39 per list once that is more
])
def test_factory_facts_say_what_training_needs(factory, needs, nlist, hnsw, min_train, train_size):
    facts = ann.factory_facts(factory, 8)
    assert (facts.factory, facts.needs_training, facts.nlist, facts.hnsw, facts.min_train,
            facts.train_size) == \
        (factory, needs, nlist, hnsw, min_train, train_size)


def test_factory_check_refuses_one_vector_short_of_the_sample_and_says_the_fix():
    assert ann.check_factory("IVF64,SQ8", 8, 1920).nlist == 64  # exactly 30 per list: accepted
    with pytest.raises(ConfigError) as err:
        ann.check_factory("IVF64,SQ8", 8, 1919)
    assert str(err.value) == ("--faiss-factory IVF64,SQ8 needs at least 1,920 training vectors (30 per list "
                              "x 64 "
                              "lists); the corpus has 1,919 passages")
    assert err.value.hint == "use --faiss-factory auto (here: Flat), or fewer IVF lists (at most 63)"
    with pytest.raises(ConfigError) as err:
        ann.check_factory("PQ4", 8, 10)
    assert ("needs at least 9,984 training vectors (its codebooks); the corpus has 10 passages"
            in str(err.value))
    assert err.value.hint.endswith("(at most 1)")
    assert ann.check_factory("PQ4", 8, None).min_train == ann.PQ_TRAIN_MIN  # None: only the string is checked
    assert ann.check_factory("Flat", 8, 1).needs_training is False


def test_auto_is_resolved_by_corpus_size_whatever_its_case():
    assert ann.resolve_factory(" AUTO ", 100_001) == "IVF2048,SQ8" and ann.resolve_factory("auto",
                                                                                           5) == "Flat"
    assert ann.resolve_factory("IVF64,SQ8", 100_001) == "IVF64,SQ8"
    assert ann.auto_factory(4_194_305) == "IVF16384_HNSW32,SQ8"  # the next power of two above 4 x sqrt(n)
