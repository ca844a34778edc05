"""Words as the model-free checks read them: tokens, a crude stem, content words, a claim's key terms.

Shared by the sentence guard of ``veracity check`` (:mod:`veracity.check.guard`: does an extracted claim stay
in its sentence?) and the quote check (:mod:`veracity.pipeline.quotes`: do the quotes mention the claim's
key terms? does an explanation attribute to a passage words it lacks?). No model, no state: the same
strings always give the same answer.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

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
CONNECTORS = frozenset({"of", "the", "and", "de", "du", "des", "la", "le", "von", "van", "der", "den", "da",
                         "di", "del", "y", "&", "s"})
_SUFFIXES = ("ings", "ing", "ies", "ied", "es", "ed", "s", "ly")


def _token(raw: str) -> str | None:
    """One token as :func:`words` keeps it (None: a one-letter word, which it leaves out)."""
    w = raw.lower().replace("’", "'")
    if w[0].isdigit():
        w = w.replace(",", "")
    if w.endswith("'s"):
        w = w[:-2]
    return w if len(w) > 1 or w.isdigit() else None


def words(text: str) -> list[str]:
    """Lower-cased word tokens (numbers keep their digits: ``1,000`` is ``1000``)."""
    return [w for m in _WORD.finditer(text) if (w := _token(m.group(0))) is not None]


def written_words(text: str) -> list[tuple[str, str, str]]:
    """:func:`words` of ``text``, each as ``(word, as written, the word before it lower-cased)``; the word
    before may be one :func:`words` leaves out (``a``), "" for the first."""
    out = []
    before = ""
    for m in _WORD.finditer(text):
        raw = m.group(0)
        w = _token(raw)
        if w is not None:
            out.append((w, raw, before))
        before = raw.lower()
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


_NAME = re.compile(r"\d[\d,.]*|[A-Z][\w'’.-]*(?:\s+(?:of|the|de|von|van|del|da|and|&)?\s*[A-Z][\w'’.-]*)*")


def key_terms(claim: str) -> list[str]:
    """A claim's key terms: its names (capitalised words and their runs, ``Great Wall of China``) and numbers,
    the first being its subject; a claim with none: its content words."""
    terms = []
    for m in _NAME.finditer(claim):
        t = m.group(0).strip(" .,'’").removesuffix("'s").removesuffix("’s")
        first = t.split()[0].lower() if t.split() else ""
        if m.start() == 0 and first in STOPWORDS:  # "The ..." / "It ..." at the start
            rest = t.split(None, 1)
            t = rest[1] if len(rest) > 1 and rest[1][:1].isupper() else ""
        if t and t.lower() not in STOPWORDS:
            terms.append(t)
    if not terms:
        terms = [w for w in words(claim) if w not in STOPWORDS][:3]
    return list(dict.fromkeys(terms))


def _mentions(term: str, text: str) -> bool:
    want = [stem(w) for w in content(term)] or [term.lower()]
    have = set(content(text))
    return all(w in have for w in want)


def quote_terms(claim: str, quotes: Sequence[Any]) -> dict[str, Any]:
    """Whether the quotes share the claim's key terms: ``{key_terms, quoted, missing, subject,
    subject_quoted, flag}``; ``flag`` names what is wrong (None: the quotes mention the subject and every
    key term)."""
    terms = key_terms(claim)
    said = " ".join(q.text for q in quotes if q.found)
    quoted = [t for t in terms if _mentions(t, said)]
    missing = [t for t in terms if t not in quoted]
    subject = terms[0] if terms else None
    subject_quoted = subject is None or subject in quoted
    flag = None
    if quotes and not said:
        flag = None  # nothing found: the quote check itself says so
    elif said and not subject_quoted:
        flag = f"the quotes never mention {subject}"
    elif said and missing:
        flag = "the quotes never mention " + ", ".join(missing)
    return {"key_terms": terms, "quoted": quoted, "missing": missing, "subject": subject,
            "subject_quoted": subject_quoted, "flag": flag}
