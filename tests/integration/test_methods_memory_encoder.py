"""MERMAID's semantic memory recall with the real bundled encoder (all-MiniLM-L6-v2, offline)."""

from __future__ import annotations

import pytest

from veracity.pipeline.methods.mermaid.memory import EvidenceMemory
from veracity.pipeline.types import Evidence

pytestmark = pytest.mark.integration


def test_semantic_recall_with_the_bundled_encoder(tmp_path):
    pytest.importorskip("sentence_transformers")
    path = tmp_path / "memory.sqlite"
    plain = EvidenceMemory(path)
    plain.store([Evidence("Eiffel Tower#0", "Eiffel Tower", "A wrought-iron lattice tower on the Champ de Mars in Paris."),
                 Evidence("Nile#0", "Nile", "The Nile is a major north-flowing river in northeastern Africa.")])
    claim = "The tower in Paris was built for a world fair."
    assert plain.recall([], "Which metal structure stands in the French capital?") == []  # no shared key
    sem = EvidenceMemory(path, semantic=True)  # embeds the stored passages on first semantic recall
    hits = sem.recall([], claim, k=2)
    assert hits and hits[0].evidence.passage_id == "Eiffel Tower#0" and hits[0].similarity >= 0.45
    assert "Nile#0" not in {h.evidence.passage_id for h in hits}
    river = sem.recall([], "The longest river in Africa flows north.", k=2)
    assert [h.evidence.passage_id for h in river][:1] == ["Nile#0"]
