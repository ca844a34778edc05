"""Seed vectors (veracity.indexes.seed, issue 39): a passage whose vector ships is not encoded again, but
only after a sample of the seeded passages, encoded here, agrees; a seed that disagrees is refused and
everything is encoded; a passage the seed lacks is encoded as before."""

from __future__ import annotations

import json

import numpy as np
import pytest

from veracity.indexes.seed import SAMPLE, SeededEncoder, passage_key, seeds_for


class Fake:
    """A deterministic encoder (a text's vector from its sha1) that counts what it encodes."""

    name, dimension, max_seq_length = "enc-a", 8, 128

    def __init__(self):
        self.encoded: list[str] = []

    def encode(self, texts, batch_size=64):
        self.encoded.extend(texts)
        return np.stack([vector(t) for t in texts]).astype(np.float32)


def vector(text: str) -> np.ndarray:
    v = np.random.default_rng(passage_key(text)).normal(size=8)
    return v / np.linalg.norm(v)


def write_seed(folder, texts, *, encoder="enc-a", flip=False):
    folder.mkdir(parents=True, exist_ok=True)
    vecs = np.stack([-vector(t) if flip else vector(t) for t in texts]).astype(np.float16)
    header = {"encoder": encoder, "dimension": 8}
    np.savez(folder / f"{encoder}-{len(texts)}.npz", header=np.frombuffer(json.dumps(header).encode(),
                                                                         dtype=np.uint8),
             keys=np.array([passage_key(t) for t in texts], dtype=np.uint64), vectors=vecs)


TEXTS = [f"Title {i}\nPassage number {i} of the corpus." for i in range(40)]


def test_seeded_passages_are_taken_after_a_sample_agrees_and_the_rest_encoded(tmp_path):
    write_seed(tmp_path, TEXTS[:30])
    write_seed(tmp_path, TEXTS[:5], encoder="enc-b")  # another encoder's seed is never used
    inner, said = Fake(), []
    enc = SeededEncoder(inner, seeds_for("enc-a", tmp_path), said.append)
    out = enc.encode(TEXTS)
    assert np.allclose(out, np.stack([vector(t) for t in TEXTS]), atol=2e-3)
    # encoded: the sample of seeded passages (the check), then the ten the seed lacks
    assert len(inner.encoded) == SAMPLE + 10 and inner.encoded[SAMPLE:] == TEXTS[30:]
    assert enc.facts() == {"files": ["enc-a-30.npz"], "used": 30, "checked": SAMPLE,
                           "min_cosine": enc.min_cosine, "refused": False}
    assert enc.min_cosine >= 0.995 and "agree" in said[0]
    enc.encode(TEXTS[:30])  # checked once: no second sample
    assert len(inner.encoded) == SAMPLE + 10 and enc.used == 60


def test_a_seed_that_disagrees_with_the_encoder_is_refused_and_everything_encoded(tmp_path):
    write_seed(tmp_path, TEXTS, flip=True)
    inner, said = Fake(), []
    enc = SeededEncoder(inner, seeds_for("enc-a", tmp_path), said.append)
    out = enc.encode(TEXTS)
    assert np.allclose(out, np.stack([vector(t) for t in TEXTS]), atol=1e-6)
    assert enc.refused and enc.used == 0 and inner.encoded[SAMPLE:] == TEXTS and "disagree" in said[0]
    enc.encode(TEXTS[:3])
    assert inner.encoded[-3:] == TEXTS[:3] and enc.used == 0


def test_an_unreadable_seed_file_is_passed_over(tmp_path, capsys):
    tmp_path.joinpath("broken.npz").write_bytes(b"not a zip")
    assert seeds_for("enc-a", tmp_path) == [] and "unreadable" in capsys.readouterr().err
    assert seeds_for("enc-a", tmp_path / "missing") == []


def test_the_shipped_demo_seed_names_its_encoder_and_passages():
    (seed,) = seeds_for("sentence-transformers/all-MiniLM-L6-v2")
    assert seed.header["passages"] == len(seed.row) == seed.vectors.shape[0] == 10987
    assert seed.vectors.shape[1] == seed.header["dimension"] == 384 and seed.vectors.dtype == np.float16
    norms = np.linalg.norm(seed.vectors[:100].astype(np.float32), axis=1)
    assert np.allclose(norms, 1.0, atol=2e-3)


def test_the_plan_counts_a_sources_shipped_vectors_out_of_its_embedding_time(tmp_path, monkeypatch):
    import hashlib

    from veracity.indexes import plan as P
    from veracity.indexes import seed as seed_mod
    from veracity.indexes.build import BuildOptions, Source
    from veracity.indexes.passages import Chunking
    from veracity.models.encoders import canonical_encoder

    src = tmp_path / "corpus.jsonl"
    src.write_text('{"title": "A", "text": "a"}\n')
    folder = tmp_path / "seeds"
    folder.mkdir()
    header = {"encoder": canonical_encoder("all-MiniLM-L6-v2"), "dimension": 8, "passages": 5000,
              "chunking": Chunking().to_dict(),
              "source": {"file": src.name, "sha256": hashlib.sha256(src.read_bytes()).hexdigest()}}
    np.savez(folder / "s.npz", header=np.frombuffer(json.dumps(header).encode(), dtype=np.uint8),
             keys=np.arange(3, dtype=np.uint64), vectors=np.zeros((3, 8), dtype=np.float16))
    monkeypatch.setattr(seed_mod, "SEEDS_DIR", folder)
    hw = P.Hardware(cores=2, gpus=[], ram_available=2**34, disk_free=2**40)

    def embed_s(**kw):
        plan = P.make_plan([Source(src, "jsonl")], BuildOptions(**kw), 384, hw, passages=6000)
        return next(s for s in plan.stages if s.name == "embedding")

    seeded, unseeded = embed_s(), embed_s(seed_vectors=False)
    assert "5,000 vectors ship" in seeded.note and "ship" not in unseeded.note
    fixed = P.RATES["embed_fixed_cpu_s"]
    assert seeded.seconds - fixed == pytest.approx((unseeded.seconds - fixed) / 6, rel=1e-6)
    src.write_text('{"title": "B", "text": "b"}\n')  # another file of the same name: nothing ships for it
    assert "ship" not in embed_s().note
