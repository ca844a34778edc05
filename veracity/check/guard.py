"""The sentence guard: does an extracted claim stay in its sentence? Decided without a model.

The extractor is asked for the atomic claims of ONE sentence, with the whole text as context so that
pronouns and vague references can be resolved. A small model often does more: it copies other sentences
of the text as claims of this one, or rewrites a word ("married" becomes "met"). Every extracted claim is
therefore read against its sentence:

- its content words (lower-cased, stop words and a few light verbs left out, compared by a crude stem so
  ``died`` / ``dies`` / ``dying`` and ``Curie's`` / ``Curie`` are one word) must be the sentence's;
- a word that is not the sentence's may only be an antecedent the sentence refers to: such words must
  occur in the text, and must come in at most :data:`MAX_ANTECEDENTS` runs of the claim (consecutive
  foreign words, joined only by ``of`` / ``the`` / ``and`` ...), each of at most :data:`MAX_RUN_WORDS` words
  and each found as one contiguous phrase of the text (``She`` -> ``Marie Curie``, ``The wall`` -> ``The
  Great Wall of China``; "Marie Curie was born in Budapest" copied into a sentence about her Nobel Prize is
  three runs, ``Marie Curie``, ``born``, ``Budapest``, and fails);
- the claim must keep at least one content word of its sentence (a claim with none is another sentence's).

A claim that fails is re-asked once (:mod:`veracity.check.extract`), then dropped and counted.
"""

from __future__ import annotations

from dataclasses import dataclass

from veracity.pipeline.words import CONNECTORS, STOPWORDS, content, stem, words

MAX_ANTECEDENTS = 2  # "He told her ...": two referents resolved in one claim
MAX_RUN_WORDS = 5  # the longest antecedent phrase, in content words ("University of California, Los Angeles")

@dataclass(frozen=True)
class Verdict:
    ok: bool
    reason: str = ""
    foreign: tuple[str, ...] = ()  # the claim's words that are not its sentence's


def _phrase_in(run: list[str], tokens: list[str]) -> bool:
    n = len(run)
    return any(tokens[i:i + n] == run for i in range(len(tokens) - n + 1))


def check_claim(claim: str, sentence: str, text: str) -> Verdict:
    """Whether ``claim`` stays in ``sentence`` of ``text`` (module docstring); the reason when it does not."""
    own = set(content(sentence))
    toks = [w for w in words(claim)]
    stems = [stem(w) if w not in STOPWORDS else None for w in toks]
    mine = [s for s in stems if s is not None]
    if not mine:
        return Verdict(True)
    if own and not any(s in own for s in mine):
        return Verdict(False, "shares no content word with its sentence", tuple(dict.fromkeys(mine)))
    foreign = [w for w, s in zip(toks, stems, strict=True) if s is not None and s not in own]
    if not foreign:
        return Verdict(True)
    text_tokens = [stem(w) for w in words(text)]
    text_set = set(text_tokens)
    absent = [w for w in foreign if stem(w) not in text_set]
    if absent:
        return Verdict(False, "adds words its text does not contain: " + ", ".join(dict.fromkeys(absent)),
                       tuple(dict.fromkeys(foreign)))
    # runs of foreign words (connectors allowed between two foreign words)
    runs: list[list[int]] = []
    i, n = 0, len(toks)
    while i < n:
        if stems[i] is None or stems[i] in own:
            i += 1
            continue
        run = [i]
        j = i + 1
        while j < n:
            if stems[j] is not None and stems[j] not in own:
                run.append(j)
                j += 1
            elif toks[j] in CONNECTORS and j + 1 < n and stems[j + 1] is not None and stems[j + 1] not in own:
                run.append(j)
                j += 1
            else:
                break
        runs.append(run)
        i = j
    if len(runs) > MAX_ANTECEDENTS:
        return Verdict(False, f"carries words from other sentences ({len(runs)} separate phrases: "
                       + "; ".join(" ".join(toks[k] for k in r) for r in runs) + ")", tuple(dict.fromkeys(foreign)))
    for r in runs:
        phrase = [stem(toks[k]) for k in r]
        if sum(1 for k in r if stems[k] is not None) > MAX_RUN_WORDS:
            return Verdict(False, "carries a long phrase from other sentences: " + " ".join(toks[k] for k in r),
                           tuple(dict.fromkeys(foreign)))
        if not _phrase_in(phrase, text_tokens):
            return Verdict(False, "joins words that are not one phrase of the text: " + " ".join(toks[k] for k in r),
                           tuple(dict.fromkeys(foreign)))
    return Verdict(True, "", tuple(dict.fromkeys(foreign)))
