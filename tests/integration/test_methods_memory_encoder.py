"""MERMAID's semantic memory recall with the real bundled encoder (all-MiniLM-L6-v2, offline)."""

from __future__ import annotations

import pytest

from tests.fixtures.index import need_module

from veracity.pipeline.methods.mermaid.memory import EvidenceMemory
from veracity.pipeline.types import Evidence

pytestmark = pytest.mark.integration


def test_semantic_recall_with_the_bundled_encoder(tmp_path):
    need_module("sentence_transformers", "pip install -e '.[memory]'")
    path = tmp_path / "memory.sqlite"
    plain = EvidenceMemory(path)
    plain.store([Evidence("Eiffel Tower#0", "Eiffel Tower",
                          "A wrought-iron lattice tower on the Champ de Mars in Paris."),
                 Evidence("Nile#0", "Nile",
                          "The Nile is a major north-flowing river in northeastern Africa.")])
    claim = "The tower in Paris was built for a world fair."
    assert plain.recall([], "Which metal structure stands in the French capital?") == []  # no shared key
    sem = EvidenceMemory(path, semantic=True)  # embeds the stored passages on first semantic recall
    hits = sem.recall([], claim, k=2)
    assert hits and hits[0].evidence.passage_id == "Eiffel Tower#0" and hits[0].similarity >= 0.45
    assert "Nile#0" not in {h.evidence.passage_id for h in hits}
    river = sem.recall([], "The longest river in Africa flows north.", k=2)
    assert [h.evidence.passage_id for h in river][:1] == ["Nile#0"]


def test_loading_the_bundled_encoder_draws_no_transformers_bar(capfd, monkeypatch):
    """transformers draws a raw "Loading weights" bar on stderr for every model it loads; a search or a batch
    that loads the encoder shows none of it, and the bars are left on for other code afterwards. Both ways of
    loading: torch alone (the default encoder on CPU) and sentence-transformers (any other folder)."""
    need_module("sentence_transformers", "pip install -e '.[memory]'")
    from transformers.utils import logging as hf_logging

    import veracity.models.bert_encoder as bert_mod
    from veracity.models.encoders import SentenceEncoder

    assert hf_logging.is_progress_bar_enabled()
    enc = SentenceEncoder()  # a fresh load, not load_encoder's per-process instance
    assert enc.backend == "torch"
    monkeypatch.setattr(bert_mod, "plain_bert_layout", lambda path: None)  # as a folder of another layout
    other = SentenceEncoder()
    assert other.backend == "sentence-transformers"
    err = capfd.readouterr().err
    assert enc.dimension == other.dimension == 384 and "Loading weights" not in err and "it/s" not in err, err
    assert enc.max_seq_length == other.max_seq_length == 256
    assert hf_logging.is_progress_bar_enabled()


TEXTS = ["The Eiffel Tower is in Paris.", "  Marie Curie won two Nobel Prizes.  ", "", "x",
         "Ålesund lies on the coast of Møre og Romsdal; 東京 is Japan's capital.",
         " ".join(["The river flows north through the valley past the old mill and the bridge."] * 30),
         "Carnegie Hall Tower is a skyscraper on West 57th Street in Manhattan, New York City."]


def test_the_torch_encoder_gives_the_vectors_of_sentence_transformers():
    """The default encoder on torch alone (veracity/models/bert_encoder.py) against sentence-transformers on
    the same folder: the same vectors, whatever the batch (padding masked), long texts truncated the same."""
    need_module("sentence_transformers", "pip install -e '.[memory]'")
    import numpy as np
    from sentence_transformers import SentenceTransformer

    from veracity.models.bert_encoder import BertSentenceEncoder, plain_bert_layout
    from veracity.models.encoders import packaged_minilm_path

    path = packaged_minilm_path()
    layout = plain_bert_layout(path)
    assert layout is not None and layout["pooling"] == "mean"
    ours = BertSentenceEncoder(path, layout)
    theirs = SentenceTransformer(str(path), device="cpu")
    want = theirs.encode(TEXTS, batch_size=4, normalize_embeddings=True, convert_to_numpy=True)
    for batch in (1, 3, 64):
        got = ours.encode(TEXTS, batch_size=batch)
        assert got.dtype == np.float32 and got.shape == want.shape
        assert float(np.abs(got - want).max()) < 1e-5, batch
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)


def test_a_search_imports_neither_sentence_transformers_nor_transformers(demo_style_index_dir):
    """A process that opens an index and searches it (BM25 + dense) loads no sentence-transformers,
    transformers, scikit-learn or pyserini encoders: together about 20 s of CPU on the 2-core machine before
    the first search (BENCHMARKS.md, "Process start-up")."""
    import subprocess
    import sys

    code = ("import sys; from veracity.indexes.searcher import Searcher; "
            f"s = Searcher({str(demo_style_index_dir)!r}); hits = s.search('Eiffel Tower Paris', k=3); "
            "assert hits, 'no hit'; "
            "print(' '.join(sorted(m for m in ('sentence_transformers', 'transformers', 'sklearn', "
            "'pyserini.encode', 'pyserini.search.lucene') if m in sys.modules)) or 'none'); "
            "print('veracity.models.bert_encoder' in sys.modules)")  # the dense half ran, on torch alone
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip().splitlines()[-2:] == ["none", "True"], run.stdout
