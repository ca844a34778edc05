"""Seed vectors: passage vectors computed once and shipped, so that a build of the same passages need not
encode them again on a laptop (issue 39: the demo index's 10,987 passages cost ~580 CPU-seconds of
all-MiniLM-L6-v2 on a 2-core CPU, half the quick start's CPU with the llama-server compile beside it).

A seed file (``seeds/<name>.npz``) holds, for one encoder, the first 8 bytes of the sha1 of each passage's
encoder input (``"<title>\\n<text>"``, as :func:`veracity.indexes.embedding.embed_one_shard` sends it) and its
L2-normalised vector in float16 (a cosine within ~1e-3 of the float32 one), with a JSON header naming the
encoder, the dimension and where the vectors came from. Nothing is trusted blindly: before the first seeded
vector is used, :class:`SeededEncoder` encodes a sample of the seeded passages itself and uses the seed only
if every one agrees (cosine >= :data:`MIN_COSINE`); otherwise it says so and encodes everything. A passage the
seed lacks is encoded as before, so any corpus can be built with a seed present.

Make one from a built index with a flat FAISS index (its vectors are exact)::

    python -m veracity.indexes.seed ~/.veracity/indexes/demo veracity/indexes/seeds/demo-all-MiniLM-L6-v2.npz
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
from pathlib import Path
from typing import Callable

import numpy as np

SEEDS_DIR = Path(__file__).resolve().parent / "seeds"
MIN_COSINE = 0.995  # float16 storage and CPU arithmetic differ by ~1e-3 at most
SAMPLE = 16  # seeded passages encoded again before the seed is trusted


def passage_key(encoder_input: str) -> int:
    return int.from_bytes(hashlib.sha1(encoder_input.encode("utf-8")).digest()[:8], "little")


class Seed:
    def __init__(self, path: Path):
        with np.load(path, allow_pickle=False) as z:
            self.header = json.loads(bytes(z["header"]).decode("utf-8"))
            keys, vectors = z["keys"], z["vectors"]
        self.path = path
        self.encoder = str(self.header["encoder"])
        self.vectors = vectors
        self.row = {int(k): i for i, k in enumerate(keys.tolist())}

    def get(self, encoder_input: str) -> np.ndarray | None:
        i = self.row.get(passage_key(encoder_input))
        return None if i is None else self.vectors[i].astype(np.float32)


def seeds_for(encoder_name: str, folder: Path | None = None,
              log: Callable[[str], None] | None = None) -> list[Seed]:
    """The seed files made with ``encoder_name`` in ``folder`` (default: the ones veracity ships; none when
    the folder is missing). An unreadable file is passed over, said through ``log`` (default: stderr)."""
    folder = SEEDS_DIR if folder is None else folder
    log = log or (lambda line: print(line, file=sys.stderr))
    found = []
    for path in sorted(folder.glob("*.npz")) if folder.is_dir() else []:
        try:
            seed = Seed(path)
        except (OSError, ValueError, KeyError) as exc:  # a damaged file is ignored, not fatal
            log(f"note: seed vectors {path.name} unreadable ({exc}); encoding instead")
            continue
        if seed.encoder == encoder_name:
            found.append(seed)
    return found


class SeededEncoder:
    """``encoder`` with seeded vectors taken instead of encoding, once a sample agrees (module docstring).
    ``used`` counts the vectors taken from seeds, ``checked`` / ``min_cosine`` the sample's check, and
    ``refused`` is set when the sample disagreed (the seeds are then ignored)."""

    def __init__(self, encoder, seeds: list[Seed], log: Callable[[str], None] = lambda s: None):
        self.inner = encoder
        self.name = encoder.name
        self.dimension = encoder.dimension
        self.max_seq_length = getattr(encoder, "max_seq_length", 0)
        self.seeds = [s for s in seeds if s.vectors.shape[1] == encoder.dimension]
        self.log = log
        self.used = 0
        self.checked = 0
        self.min_cosine: float | None = None
        self.refused = False
        self._trusted = False

    def _lookup(self, text: str) -> np.ndarray | None:
        for seed in self.seeds:
            v = seed.get(text)
            if v is not None:
                return v
        return None

    def _trust(self, hits: dict[int, np.ndarray], texts: list[str]) -> bool:
        if self._trusted or self.refused:
            return self._trusted
        sample = random.Random(0).sample(sorted(hits), min(SAMPLE, len(hits)))
        own = self.inner.encode([texts[i] for i in sample], batch_size=SAMPLE)
        cos = [float(np.dot(own[j], hits[i])) for j, i in enumerate(sample)]
        self.checked, self.min_cosine = len(cos), round(min(cos), 5)
        if self.min_cosine >= MIN_COSINE:
            self._trusted = True
            self.log(f"seed vectors: {len(cos)} of them encoded again agree (cosine >= "
                     f"{self.min_cosine:.5f}); the seeded passages are not encoded")
        else:
            self.refused = True
            self.log(f"seed vectors disagree with {self.name} (cosine {self.min_cosine:.4f} < {MIN_COSINE}); "
                     "encoding every passage")
        return self._trusted

    def encode(self, texts: list[str], batch_size: int = 64) -> np.ndarray:
        hits = {}
        if not self.refused:
            for i, t in enumerate(texts):
                v = self._lookup(t)
                if v is not None:
                    hits[i] = v
        if hits and not self._trust(hits, texts):
            hits = {}
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        missing = [i for i in range(len(texts)) if i not in hits]
        if missing:
            out[missing] = self.inner.encode([texts[i] for i in missing], batch_size=batch_size)
        for i, v in hits.items():
            out[i] = v
        self.used += len(hits)
        return out

    def facts(self) -> dict:
        """What the manifest records of the seeds (this process's part of the build)."""
        return {"files": [s.path.name for s in self.seeds], "used": self.used, "checked": self.checked,
                "min_cosine": self.min_cosine, "refused": self.refused}


def make_seed(index_dir: Path, out: Path) -> int:
    """A seed file from a built index whose dense part is a flat FAISS index; returns the vectors written."""
    import faiss

    from veracity.indexes.manifest import read_manifest
    from veracity.indexes.store import PassageStore

    manifest = read_manifest(index_dir)
    dense = manifest.get("dense") or {}
    if dense.get("faiss_factory") != "Flat":
        raise SystemExit(f"{index_dir}: the dense index is {dense.get('faiss_factory')}, not Flat (its "
                         "vectors are not exact)")
    index = faiss.read_index(str(index_dir / dense["faiss_file"]))
    vectors = index.reconstruct_n(0, index.ntotal)
    store = PassageStore(index_dir / manifest["passage_store"])
    keys = [passage_key(f"{t}\n{x}") for _, t, x in store.iter_rows(0, store.count)]
    store.close()
    if len(keys) != len(vectors) or len(set(keys)) != len(keys):
        raise SystemExit(f"{index_dir}: {len(keys)} passages ({len(set(keys))} distinct) for {len(vectors)} "
                         "vectors")
    src = (manifest.get("sources") or [{}])[0]
    header = {"encoder": dense["encoder"], "dimension": int(dense["dimension"]), "normalized": True,
              "dtype": "float16", "passages": len(keys), "chunking": manifest.get("chunking"),
              "source": {"file": Path(str(src.get("path", ""))).name, "sha256": src.get("sha256")},
              "made_from": "a flat FAISS index of the same passages (veracity.indexes.seed.make_seed)"}
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez(out, header=np.frombuffer(json.dumps(header).encode("utf-8"), dtype=np.uint8),
             keys=np.array(keys, dtype=np.uint64), vectors=vectors.astype(np.float16))
    return len(keys)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit("usage: python -m veracity.indexes.seed INDEX_DIR OUT.npz")
    print(f"{make_seed(Path(sys.argv[1]), Path(sys.argv[2]))} vectors written to {sys.argv[2]}")
