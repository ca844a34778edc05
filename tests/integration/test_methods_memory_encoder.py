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


def test_loading_the_bundled_encoder_draws_no_transformers_bar(capfd):
    """transformers draws a raw "Loading weights" bar on stderr for every model it loads; a search or a batch
    that loads the encoder shows none of it, and the bars are left on for other code afterwards."""
    need_module("sentence_transformers", "pip install -e '.[memory]'")
    from transformers.utils import logging as hf_logging

    from veracity.models.encoders import SentenceEncoder

    assert hf_logging.is_progress_bar_enabled()
    enc = SentenceEncoder()  # a fresh load, not load_encoder's per-process instance
    err = capfd.readouterr().err
    assert enc.dimension == 384 and "Loading weights" not in err and "it/s" not in err, err
    assert hf_logging.is_progress_bar_enabled()
