"""ZoFia stage 1 (Entity-Guided Retrieval), the parts that need no LLM: entity filtering, Hierarchical
Saliency, SC-MMR keyword selection and context-aware disambiguation (ZoFia §3, Appendix A).

Equations are implemented as the paper states them; comments name their numbers. The sentence encoder
is injectable: any object with ``encode(list[str]) -> np.ndarray`` (one row per text). Cosines are
computed with explicit norms, as the equations write them, so unnormalised test vectors work too. The
run's encoder is all-MiniLM-L6-v2 (paper §5.1), loaded by the one offline loader
:func:`veracity.models.encoders.load_encoder` (see
:class:`~veracity.pipeline.methods.zofia.method.ZofiaState`).
A local token-classification NER model (``ner_model``; paper §5.1: dslim/bert-base-NER) is loaded here;
the packaged spaCy model and its reading of eqs. 1-2 are in :mod:`~veracity.pipeline.methods.zofia.ner`.
"""

from __future__ import annotations

import math
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from veracity.errors import ConfigError
from veracity.models.encoders import Encoder


# ----------------------------------------------------------------------------- the NER model
_LOCK = threading.Lock()
_NER: dict[str, Any] = {}


def load_token_classifier(path: str):
    """A transformers ``token-classification`` pipeline (aggregation "simple") on a local model folder."""
    with _LOCK:
        if path in _NER:
            return _NER[path]
        if not Path(path).exists():
            raise ConfigError(f"NER model folder {path} does not exist",
                              hint="pass ner_model=PATH to a local token-classification model "
                                   "(the paper uses dslim/bert-base-NER), or leave it unset for the packaged "
                                   "spaCy "
                                   "model (ner=supervised) or the LLM extractor (ner=llm)")
        from transformers import pipeline

        _NER[path] = pipeline("token-classification", model=path, aggregation_strategy="simple", device=-1)
        return _NER[path]


# ----------------------------------------------------------------------------- text helpers
# Sentence ends for C(U_i) (§3.2) and the chunks of eq. 9. News bodies come cased (PolitiFact) or
# lower-cased (the GossipCop release: no capital ever follows a period), so an end is . ! ? (and any
# closing quotes / brackets) followed by white space, whatever the next letter's case, or a line break;
# except after an abbreviation or an initial (below) and inside numbers ("3.5" has no space after the
# point). An ellipsis or an abbreviation that can also end a sentence ("etc.", "u.s.", "inc.") ends one
# only before a capital letter; a title ("mr.", "dr.") never does.
_END = re.compile(r"(\.{3}|…|[.!?]+)([\"'”’)\]]*)(?=\s|$)|\n+")
_TITLES = frozenset("mr mrs ms dr prof sr jr st rev gen col lt sgt capt cmdr gov sen rep pres supt mt ft "
                    "approx dept est vs v".split())
_NUMBERING = frozenset("no nos fig vol pp sec ch art".split())  # abbreviations only before a number: "no. 5"
_ABBREVIATIONS = frozenset("etc inc ltd co corp bros jan feb mar apr jun jul aug sep sept oct nov dec "
                           "mon tue tues wed thu thur thurs fri sat sun a.m p.m u.s u.k u.n e.u d.c "
                           "e.g i.e al".split())
_WORD_BEFORE = re.compile(r"([\w.]+)$")


def _is_end(text: str, m: re.Match) -> bool:
    if m.group(0).startswith("\n"):
        return True
    rest = text[m.end():].lstrip()
    capital_next = bool(rest) and (rest[0].isupper() or rest[0] in "\"'“‘([")
    if m.group(1) in ("...", "…"):
        return capital_next or not rest
    if m.group(1) != ".":
        return True  # ! ? !! ?! end a sentence
    word = _WORD_BEFORE.search(text, 0, m.start())
    token = word.group(1).casefold().rstrip(".") if word else ""
    if token in _TITLES or (token in _NUMBERING and rest[:1].isdigit()):
        return False
    if len(token) == 1 and token.isalpha():  # an initial: "j. k. rowling", "george w. bush"
        return False
    if token in _ABBREVIATIONS or ("." in token and all(len(p) == 1 and p.isalpha()
                                                        for p in token.split("."))):
        return capital_next or not rest  # "u.s." / "etc." end a sentence only before a capital
    return True


def split_sentences(text: str) -> list[tuple[int, int, str]]:
    """Sentences as (start, end, text) character spans (see the rules above). Deterministic."""
    spans: list[tuple[int, int, str]] = []
    start = 0
    for m in _END.finditer(text):
        if not _is_end(text, m):
            continue
        end = m.end() if not m.group(0).startswith("\n") else m.start()
        if text[start:end].strip():
            s = start + (len(text[start:end]) - len(text[start:end].lstrip()))
            spans.append((s, end, text[s:end].strip()))
        start = m.end()
    if text[start:].strip():
        s = start + (len(text[start:]) - len(text[start:].lstrip()))
        spans.append((s, len(text), text[s:].strip()))
    return spans


def first_sentences(text: str, n: int) -> str:
    return " ".join(s for _, _, s in split_sentences(text)[:n])


def local_context(sentences: list[str], j: int) -> str:
    """C(U_i) = s_{j-1} ⊕ s_j ⊕ s_{j+1} (§3.2); missing neighbours at the edges are left out."""
    return " ".join(sentences[max(0, j - 1): j + 2])


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na == 0.0 or nb == 0.0:
        return 0.0
    return float(np.dot(a, b) / (na * nb))


def encode(encoder: Encoder, texts: list[str]) -> np.ndarray:
    vecs = np.asarray(encoder.encode(list(texts)), dtype=np.float64)
    if vecs.ndim != 2 or vecs.shape[0] != len(texts):
        raise ValueError(f"encoder returned shape {vecs.shape} for {len(texts)} texts")
    return vecs


# ----------------------------------------------------------------------------- §3.1 entity extraction
@dataclass
class EntityMention:
    text: str
    type: str
    confidence: float  # c(U_e): eq. 2, the mean of its tokens' confidences
    sentence: int = -1  # index of the sentence s_j it appears in
    start: int | None = None  # character offset in the text, when known

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "type": self.type, "confidence": round(self.confidence, 4),
                "sentence": self.sentence}


def mentions_from_token_classifier(results: list[dict], spans: list[tuple[int, int,
                                                                          str]]) -> list[EntityMention]:
    """Grouped pipeline output (aggregation "simple": a group's score is the mean of its tokens' scores —
    eq. 2) -> mentions placed in their sentences by character offset."""
    out = []
    for r in results:
        start = int(r.get("start", -1))
        sent = next((i for i, (s, e, _) in enumerate(spans) if s <= start < e), -1)
        word = str(r.get("word", "")).strip()
        if not word or sent < 0:
            continue
        out.append(EntityMention(word, str(r.get("entity_group", r.get("entity", "MISC"))), float(r["score"]),
                                 sent, start))
    return out


def place_mentions(names: list[tuple[str, str, float]], sentences: list[str]) -> tuple[list[EntityMention],
                                                                                       list[str]]:
    """Put extracted (text, type, confidence) entities into the first sentence that contains them
    (case-insensitive). Entities found in no sentence are returned separately (they have no context)."""
    out, dropped = [], []
    lowered = [s.casefold() for s in sentences]
    for text, etype, conf in names:
        t = text.strip()
        j = next((i for i, s in enumerate(lowered) if t and t.casefold() in s), -1)
        if j < 0:
            dropped.append(t)
            continue
        out.append(EntityMention(t, etype, min(1.0, max(0.0, float(conf))), j))
    return out, dropped


def dynamic_threshold(mentions: list[EntityMention], *, lambda_init: float = 0.8, step: float = 0.1,
                      n_min: int = 1, floor: float = 0.1) -> tuple[list[EntityMention], float | None]:
    """§3.1 / Algorithm 2: keep mentions with confidence >= λ, starting at λ_init and lowering λ by Δλ
    until at least ``n_min`` are kept or λ would fall below the lower bound (0.1). Returns the kept
    mentions and the λ that selected them (None when there was nothing to select)."""
    if not mentions:
        return [], None
    i = 0
    selected: list[EntityMention] = []
    lam = None
    while True:
        t = round(lambda_init - i * step, 10)
        if t < floor - 1e-12:
            break
        lam = t
        selected = [m for m in mentions if m.confidence >= t]
        if len(selected) >= n_min:
            break
        i += 1
    return selected, lam


# ----------------------------------------------------------------------------- §3.2 Hierarchical Saliency
@dataclass
class ScoredEntity:
    mention: EntityMention
    context: str
    s_local: float
    s_global: float
    saliency: float  # S_hier = S_local * S_global (eq. 3)
    vector: np.ndarray = field(repr=False, default=None)  # v_{U_i}

    def to_dict(self) -> dict[str, Any]:
        return {**self.mention.to_dict(), "s_local": round(self.s_local, 4), "s_global": round(self.s_global,
                                                                                               4),
                "saliency": round(self.saliency, 4)}


def hierarchical_saliency(mentions: list[EntityMention], sentences: list[str], text: str,
                          encoder: Encoder) -> list[ScoredEntity]:
    """Eq. 3: S_hier(U_i) = cos(v_{U_i}, v_{C(U_i)}) · cos(v_{C(U_i)}, v_T).

    Mentions of the same entity (case-insensitive text) are merged, keeping the mention whose context
    scores highest, so each entity is one candidate for SC-MMR."""
    if not mentions:
        return []
    contexts = [local_context(sentences, m.sentence) for m in mentions]
    vecs = encode(encoder, [m.text for m in mentions] + contexts + [text])
    n = len(mentions)
    v_t = vecs[-1]
    best: dict[str, ScoredEntity] = {}
    for i, m in enumerate(mentions):
        v_u, v_c = vecs[i], vecs[n + i]
        s_local = cosine(v_u, v_c)  # alignment of the entity with its immediate context
        s_global = cosine(v_c, v_t)  # contribution of that context to the whole text
        se = ScoredEntity(m, contexts[i], s_local, s_global, s_local * s_global, v_u)
        key = m.text.casefold()
        if key not in best or se.saliency > best[key].saliency:
            best[key] = se
    return list(best.values())


# ----------------------------------------------------------------------------- §3.3 SC-MMR
def lambda_schedule(k: int, *, alpha: float = 0.3, beta: float = 2.5, lambda_min: float = 0.1,
                    lambda_max: float = 1.0) -> float:
    """Eq. 5: λ_k = max(λ_min, λ_max − exp(α·k − β)); Algorithm 3 uses λ_min = 0.1, λ_max = 1.0."""
    return max(lambda_min, lambda_max - math.exp(alpha * k - beta))


@dataclass
class MMRStep:
    k: int  # |U_selected| when the step was scored
    lam: float
    best: str | None
    score: float
    accepted: bool

    def to_dict(self) -> dict[str, Any]:
        return {"k": self.k, "lambda": round(self.lam, 6), "best": self.best, "mmr": round(self.score, 6),
                "accepted": self.accepted}


def sc_mmr(saliency: dict[str, float], vectors: dict[str, np.ndarray], *, gamma: float = 0.5,
           alpha: float = 0.3,
           beta: float = 2.5, lambda_min: float = 0.1, lambda_max: float = 1.0,
           prev_init: float | None = None) -> tuple[list[str], list[MMRStep]]:
    """Algorithm 3 (SC-MMR). ``saliency`` maps entity -> S_hier (D); ``vectors`` entity -> v_U.

    Seed: the most salient entity. Then each round scores every candidate with eq. 4a,
    MMR(U_i) = λ_k·S_hier(U_i) − (1 − λ_k)·max_{U_j ∈ selected} S(U_i, U_j), S = cosine (eq. 4b),
    λ_k from eq. 5 with k = |U_selected|, and adds the best one unless MMR_best ≤ γ·MMR*_prev, which
    ends the selection. Ties keep the earlier candidate.

    MMR*_prev is "the optimal score adopted in the previous round" (Appendix A.2). Before the first
    round that is the seed, adopted on relevance alone, so by default (``prev_init=None``) MMR*_prev
    starts at the seed's score D[U*]. Algorithm 3's box writes the constant 1.0 (``prev_init=1.0``):
    S_hier is a product of two cosines (about 0.2-0.6 with all-MiniLM-L6-v2), so the first candidate
    would need λ_1·S_hier > γ = 0.5 and the selection stops at the seed on nearly every article, while
    the paper's case study (Appendix C) narrows to two keywords and §5.5 tunes λ_k for k up to about 6."""
    candidates = list(saliency)
    steps: list[MMRStep] = []
    if not candidates:
        return [], steps
    names = candidates
    sim = {(a, b): cosine(vectors[a], vectors[b]) for a in names for b in names}  # M_sim, computed once
    seed = max(candidates, key=lambda u: saliency[u])  # max() keeps the first of equal scores
    selected = [seed]
    remaining = [u for u in candidates if u != seed]
    prev = saliency[seed] if prev_init is None else prev_init  # MMR*_prev before the first round
    while remaining:
        k = len(selected)
        lam = lambda_schedule(k, alpha=alpha, beta=beta, lambda_min=lambda_min, lambda_max=lambda_max)
        best, best_score = None, -math.inf
        for u in remaining:
            sim_max = max(sim[(u, v)] for v in selected)
            score = lam * saliency[u] - (1 - lam) * sim_max  # eq. 4a
            if score > best_score:
                best, best_score = u, score
        if best_score <= gamma * prev:  # relative-change termination rule (§3.3)
            steps.append(MMRStep(k, lam, best, best_score, False))
            break
        steps.append(MMRStep(k, lam, best, best_score, True))
        prev = best_score
        selected.append(best)
        remaining.remove(best)
    return selected, steps


# ----------------------------------------------------------------------------- §3.4 disambiguation
def replace_mention(context: str, mention: str, replacement: str) -> str:
    """C(U_i ← o_m): the context with the entity's first mention replaced by the sense's description."""
    idx = context.casefold().find(mention.casefold())
    if idx < 0:
        return f"{replacement} {context}"
    return context[:idx] + replacement + context[idx + len(mention):]


def disambiguate(context: str, mention: str, descriptions: list[str], encoder: Encoder) -> tuple[int,
                                                                                                 list[float]]:
    """Eq. 7: o* = argmax_m cos(v_{C(U_i)}, v_{C(U_i ← o_m)}). Returns the best index and every cosine."""
    if not descriptions:
        raise ValueError("no candidate senses")
    modified = [replace_mention(context, mention, d) for d in descriptions]
    vecs = encode(encoder, [context] + modified)
    sims = [cosine(vecs[0], vecs[1 + i]) for i in range(len(descriptions))]
    best = max(range(len(sims)), key=lambda i: sims[i])
    return best, sims
