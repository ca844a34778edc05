"""ZoFia stage-1 maths on known vectors: dynamic threshold, eq. 3, eq. 5 schedule, SC-MMR (eqs. 4-5 and
the termination rule), eq. 7 disambiguation. Expected numbers are worked out by hand in the comments."""

from __future__ import annotations

import math

import numpy as np
import pytest

from veracity.pipeline.methods.zofia.keywords import (
    EntityMention,
    cosine,
    disambiguate,
    dynamic_threshold,
    first_sentences,
    hierarchical_saliency,
    lambda_schedule,
    local_context,
    mentions_from_token_classifier,
    place_mentions,
    replace_mention,
    sc_mmr,
    split_sentences,
)


class DictEncoder:
    """Known vectors per text (unnormalised on purpose: the equations divide by the norms)."""

    def __init__(self, table):
        self.table = table
        self.seen: list[str] = []

    def encode(self, texts):
        self.seen.extend(texts)
        return np.array([self.table[t] for t in texts], dtype=float)


def m(text, conf, sent=0):
    return EntityMention(text, "PER", conf, sent)


# ------------------------------------------------------------------ §3.1 / Algorithm 2
def test_dynamic_threshold_starts_at_lambda_init():
    kept, lam = dynamic_threshold([m("a", 0.95), m("b", 0.5), m("c", 0.3)])
    assert [x.text for x in kept] == ["a"] and lam == 0.8


def test_dynamic_threshold_lowers_until_n_min():
    # 0.8 keeps 1, 0.7 keeps 1, 0.6 keeps 1, 0.5 keeps 2 -> stop at 0.5
    kept, lam = dynamic_threshold([m("a", 0.95), m("b", 0.5), m("c", 0.3)], n_min=2)
    assert [x.text for x in kept] == ["a", "b"] and lam == pytest.approx(0.5)


def test_dynamic_threshold_floor_and_empty():
    kept, lam = dynamic_threshold([m("a", 0.05)])
    assert kept == [] and lam == pytest.approx(0.1)  # never below the 0.1 lower bound
    kept, lam = dynamic_threshold([m("a", 0.1)])
    assert [x.text for x in kept] == ["a"] and lam == pytest.approx(0.1)  # 0.8 - 7*0.1 reaches 0.1 exactly
    assert dynamic_threshold([]) == ([], None)


# ------------------------------------------------------------------ eq. 3
def test_hierarchical_saliency_is_local_times_global():
    sents = ["Alice met Bob.", "They ate.", "Rain fell."]
    text = " ".join(sents)
    enc = DictEncoder({
        "Alice": [1, 0],
        "Alice met Bob. They ate.": [2, 2],  # context of sentence 0 = s0 ⊕ s1
        "Rain": [0, 3],
        "They ate. Rain fell.": [0, 1],  # context of sentence 2 = s1 ⊕ s2
        text: [0, 5],
    })
    scored = hierarchical_saliency([m("Alice", 0.9, 0), m("Rain", 0.9, 2)], sents, text, enc)
    alice, rain = scored
    # Alice: cos((1,0),(2,2)) = 1/√2 ; cos((2,2),(0,5)) = 1/√2 -> 0.5
    assert alice.s_local == pytest.approx(1 / math.sqrt(2))
    assert alice.s_global == pytest.approx(1 / math.sqrt(2))
    assert alice.saliency == pytest.approx(0.5)
    # Rain: cos((0,3),(0,1)) = 1 ; cos((0,1),(0,5)) = 1 -> 1.0
    assert rain.saliency == pytest.approx(1.0)
    assert local_context(sents, 0) == "Alice met Bob. They ate." and local_context(sents, 1) == text


def test_repeated_entity_keeps_best_mention():
    sents = ["Alice ran.", "Sun.", "Alice sat."]
    text = " ".join(sents)
    enc = DictEncoder({"Alice": [1, 0], "alice": [1, 0], "Alice ran. Sun.": [0, 1], "Sun. Alice sat.": [1, 0],
                       text: [1, 0]})
    scored = hierarchical_saliency([m("Alice", 0.9, 0), m("alice", 0.9, 2)], sents, text, enc)
    assert len(scored) == 1 and scored[0].mention.sentence == 2 and scored[0].saliency == pytest.approx(1.0)


# ------------------------------------------------------------------ eq. 5 schedule
def test_lambda_schedule_values():
    # λ_k = max(0.1, 1 - exp(0.3k - 2.5))
    assert lambda_schedule(1) == pytest.approx(1 - math.exp(-2.2))  # 0.889197
    assert lambda_schedule(1) == pytest.approx(0.889197, abs=1e-6)
    assert lambda_schedule(2) == pytest.approx(0.850431, abs=1e-6)
    assert lambda_schedule(6) == pytest.approx(0.503415, abs=1e-6)
    assert lambda_schedule(7) == pytest.approx(0.329680, abs=1e-6)
    assert lambda_schedule(8) == 0.1  # 1 - e^-0.1 = 0.0952 < λ_min
    assert all(lambda_schedule(k) >= lambda_schedule(k + 1) for k in range(20))  # monotone non-increasing


# ------------------------------------------------------------------ SC-MMR (Algorithm 3)
VECS = {"A": np.array([1.0, 0, 0]), "B": np.array([1.0, 0, 0]), "C": np.array([0, 1.0, 0]), "D": np.array([0,
                                                                                                           0,
                                                                                                           1.0])}


def test_sc_mmr_prefers_diversity_and_stops_on_decay():
    sal = {"A": 0.9, "B": 0.7, "C": 0.6, "D": 0.2}
    selected, steps = sc_mmr(sal, VECS)
    # seed A (highest saliency). k=1, λ=0.889197:
    #   B = 0.889197*0.7 - 0.110803*1 = 0.511635 ; C = 0.889197*0.6 - 0 = 0.533518 ; D = 0.177839
    #   best C 0.533518 > 0.5*1.0 -> add C (B, a duplicate of A, loses despite higher saliency)
    # k=2, λ=0.850431: B = 0.595302 - 0.149569 = 0.445733 ; D = 0.170086 -> best B, 0.445733 > 0.5*0.533518 ->
    # add
    # k=3, λ=0.798103: D = 0.159621 <= 0.5*0.445733 = 0.222867 -> stop
    assert selected == ["A", "C", "B"]
    assert [(s.k, s.best, s.accepted) for s in steps] == [(1, "C", True), (2, "B", True), (3, "D", False)]
    assert [s.score for s in steps] == pytest.approx([0.533518, 0.445733, 0.159621], abs=1e-6)
    assert [s.lam for s in steps] == pytest.approx([0.889197, 0.850431, 0.798103], abs=1e-6)


def test_sc_mmr_first_step_compares_with_one_when_asked():
    # Algorithm 3's box: MMR*_prev starts at 1.0: D = 0.889197*0.5 = 0.444598 <= 0.5 -> only the seed is kept
    selected, steps = sc_mmr({"A": 0.9, "D": 0.5}, VECS, prev_init=1.0)
    assert selected == ["A"] and steps[0].accepted is False
    # with γ = 0.4 the same candidate passes (0.444598 > 0.4)
    assert sc_mmr({"A": 0.9, "D": 0.5}, VECS, gamma=0.4, prev_init=1.0)[0] == ["A", "D"]
    # default: MMR*_prev starts at the seed's score 0.9: 0.444598 <= 0.45 -> also stops, just
    assert sc_mmr({"A": 0.9, "D": 0.5}, VECS)[0] == ["A"]
    assert sc_mmr({"A": 0.85, "D": 0.5}, VECS)[0] == ["A", "D"]  # 0.444598 > 0.425


def _vectors_with_cosines(names, sim):
    """Unit vectors whose pairwise cosines are ``sim`` (rows of its Cholesky factor)."""
    rows = np.linalg.cholesky(np.array(sim, dtype=float))
    return {n: rows[i] for i, n in enumerate(names)}


def test_sc_mmr_reproduces_the_case_study():
    # Appendix C's GossipCop article (lower-cased, as the GossipCop release is, headline ended by a period):
    # the packaged spaCy NER finds these four entities (all kept at λ = 0.8), all-MiniLM-L6-v2 gives these
    # S_hier and pairwise cosines (measured, rounded to 3 places). The paper: "Hierarchical Salience and
    # SC-MMR narrow the keywords to Jamie Foxx and Katie Holmes".
    names = ["jamie foxx", "katie holmes", "paris", "zac posen"]
    sal = dict(zip(names, [0.445, 0.431, 0.176, 0.243], strict=True))
    vecs = _vectors_with_cosines(names, [[1.0, 0.43, 0.207, 0.411], [0.43, 1.0, 0.306, 0.239],
                                         [0.207, 0.306, 1.0, 0.213], [0.411, 0.239, 0.213, 1.0]])
    selected, steps = sc_mmr(sal, vecs)
    # k=1, λ=0.889197: katie holmes = 0.889197*0.431 - 0.110803*0.43 = 0.335599 > 0.5*0.445 -> added
    # k=2, λ=0.850431: zac posen = 0.850431*0.243 - 0.149569*0.411 = 0.145182 <= 0.5*0.335599 -> stop
    assert selected == ["jamie foxx", "katie holmes"]
    assert [s.score for s in steps] == pytest.approx([0.335599, 0.145182], abs=1e-5)
    # Algorithm 3's box read literally (MMR*_prev = 1.0) keeps the seed only: 0.335599 <= 0.5
    assert sc_mmr(sal, vecs, prev_init=1.0)[0] == ["jamie foxx"]


def test_sc_mmr_edge_cases():
    assert sc_mmr({}, {}) == ([], [])
    assert sc_mmr({"A": 0.3}, VECS) == (["A"], [])


# ------------------------------------------------------------------ eq. 7
def test_disambiguation_picks_sense_closest_to_context():
    ctx = "Fans gathered in Paris for the fashion week."
    enc = DictEncoder({
        ctx: [1, 0],
        "Fans gathered in Paris, capital of France for the fashion week.": [3, 1],
        "Fans gathered in Paris, a city in Texas for the fashion week.": [1, 2],
    })
    best, sims = disambiguate(ctx, "Paris", ["Paris, a city in Texas", "Paris, capital of France"], enc)
    assert best == 1
    assert sims == pytest.approx([1 / math.sqrt(5), 3 / math.sqrt(10)])
    assert replace_mention("x PARIS y", "Paris", "P") == "x P y"


def test_sentences_and_placement():
    text = "Jamie Foxx met Katie Holmes. They wed in Paris!\nSources said so."
    spans = split_sentences(text)
    assert [s for _, _, s in spans] == ["Jamie Foxx met Katie Holmes.", "They wed in Paris!",
                                        "Sources said so."]
    assert all(text[a:b].strip() == s for a, b, s in spans)
    assert first_sentences(text, 2) == "Jamie Foxx met Katie Holmes. They wed in Paris!"
    placed, dropped = place_mentions([("katie holmes", "PER", 1.4), ("Paris", "LOC", 0.9), ("Mars", "LOC",
                                                                                            0.9)],
                                     [s for _, _, s in spans])
    assert [(x.text, x.sentence, x.confidence) for x in placed] == [("katie holmes", 0, 1.0), ("Paris", 1,
                                                                                               0.9)]
    assert dropped == ["Mars"]
    ner = [{"entity_group": "LOC", "score": 0.99, "word": "Paris", "start": text.index("Paris"), "end": 0}]
    assert [(x.text, x.sentence, x.type) for x in mentions_from_token_classifier(ner, spans)] == [("Paris", 1,
                                                                                                   "LOC")]


def test_lower_cased_news_splits_into_sentences():
    # the GossipCop release is lower-cased: no capital ever follows a period
    text = ("jamie foxx and katie holmes have been the subject of dating rumors. the couple has rarely been "
            "spotted! is it true? sources close to the couple told radar online.")
    assert [s for _, _, s in split_sentences(text)] == [
        "jamie foxx and katie holmes have been the subject of dating rumors.",
        "the couple has rarely been spotted!", "is it true?",
                                                        "sources close to the couple told radar online."]


def test_sentence_split_keeps_abbreviations_initials_and_decimals():
    def split(t):
        return [s for _, _, s in split_sentences(t)]

    assert split("Mr. Smith paid $3.5 million to Dr. Jones on Jan. 5 in the U.S. The deal closed.") == [
        "Mr. Smith paid $3.5 million to Dr. Jones on Jan. 5 in the U.S.", "The deal closed."]
    assert split("mr. smith met j. k. rowling in the u.s. on tuesday. they talked.") == [
        "mr. smith met j. k. rowling in the u.s. on tuesday.", "they talked."]
    assert split("it ranked no. 1 with 2.5 stars. She said \"no.\" Then left.") == [
        "it ranked no. 1 with 2.5 stars.", 'She said "no."', "Then left."]
    # an ellipsis ends a sentence only before a capital
    assert split("they had struggles... it changed things... Then it ended") == [
        "they had struggles... it changed things...", "Then it ended"]
    text = "a. b. c! d"
    assert all(text[a:b] == s for a, b, s in split_sentences(text))


def test_global_saliency_varies_on_lower_cased_text():
    # with one sentence the local context is the whole text and S_global = 1 for every entity
    sents = [s for _, _, s in split_sentences("alice won the prize. bob lost his keys. carol sang.")]
    assert len(sents) == 3 and local_context(sents, 0) != local_context(sents, 2)


def test_cosine_of_zero_vector_is_zero():
    assert cosine(np.zeros(3), np.ones(3)) == 0.0
