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

import re
from dataclasses import dataclass

MAX_ANTECEDENTS = 2  # "He told her ...": two referents resolved in one claim
MAX_RUN_WORDS = 5  # the longest antecedent phrase, in content words ("University of California, Los Angeles")

_WORD = re.compile(r"\d+(?:[.,]\d+)*|[^\W_]+(?:[’'][^\W_]+)*", re.UNICODE)
# function words, pronouns, auxiliaries and light verbs a rewrite may add or drop freely
STOPWORDS = frozenset("""
a an the this that these those there here it its it's they them their theirs he him his she her hers we us our
ours you your yours i me my mine one ones who whom whose which what when where why how
and or but nor so yet if then than as because while although though whereas
of in on at by for with from to into onto upon about above below over under between among through during
before after since until till within without against along across around behind beyond near off out up down
is are was were be been being am has have had having do does did done doing will would shall should can could
may might must also too very not no only just still even both either neither each every all any some such
same other another more most much many few own well s
known called named located include includes including part example
""".split())
_CONNECTORS = frozenset({"of", "the", "and", "de", "du", "des", "la", "le", "von", "van", "der", "den", "da",
                         "di", "del", "y", "&", "s"})
_SUFFIXES = ("ings", "ing", "ies", "ied", "es", "ed", "s", "ly")


def words(text: str) -> list[str]:
    """Lower-cased word tokens (numbers keep their digits: ``1,000`` is ``1000``)."""
    out = []
    for m in _WORD.finditer(text):
        w = m.group(0).lower().replace("’", "'")
        if w[0].isdigit():
            w = w.replace(",", "")
        if w.endswith("'s"):
            w = w[:-2]
        if len(w) > 1 or w.isdigit():
            out.append(w)
    return out


def stem(word: str) -> str:
    """A crude stem: common inflectional suffixes off, so inflections of one word compare equal."""
    if word.isdigit():
        return word
    if len(word) <= 4:
        return word[:-1] if len(word) == 4 and word.endswith("s") and not word.endswith("ss") else word
    for suf in _SUFFIXES:
        if word.endswith(suf) and len(word) - len(suf) >= 4:
            base = word[: -len(suf)]
            if suf in ("ies", "ied"):
                base += "y"
            return base.rstrip("e") if len(base) > 4 else base
    return word.rstrip("e") if len(word) > 4 else word


def content(text: str) -> list[str]:
    """The stems of ``text``'s content words, in order."""
    return [stem(w) for w in words(text) if w not in STOPWORDS]


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
            elif toks[j] in _CONNECTORS and j + 1 < n and stems[j + 1] is not None and stems[j + 1] not in own:
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
