"""Claims the extractor left as their sentence, split without a model (issue 44 point 1: coverage).

The reference 1.5B often returns a sentence, or a large part of it, as one claim: "So, while a pig has 38
chromosomes in each of its cells, there are no chromosomes in a pork chop ...", a list item with its number
and dash ("2. “Square Two\" (2016) - This is their second single album ..."), a sentence with its citation.
The annotators of Factcheck-Bench split such sentences into the claims they state, so a claim that keeps them
together matches one gold claim at best (seed 765's hand-read: 5 of 30 claims were their sentence unsplit).
:func:`split_claim` rewrites a claim where the sentence's own words say how, and nowhere else:

- a list's number, a citation in brackets (a URL, ``[3]``) and a discourse marker at the start ("So,",
  "However,", "For example,") are left out, as is "keep in mind that" / "it is important to note that";
- a title with a dash ("“Square Two\" (2016) - This is their second single album") reads "“Square Two\" (2016)
  is their second single album";
- a concessive clause is a claim of its own: "While A, B." -> "A." and "B." (also "Although", "Whereas");
- a non-restrictive relative clause on the subject is one: "The fins, which help control the board, are made
  of plastic." -> "The fins help control the board." and "The fins are made of plastic.";
- two main clauses joined by ", but" or ", so" are two claims when the second has a subject of its own
  ("..., so even a small number of new stars can add up quickly"); "It sank 42 ships, but was sunk ..." is
  left whole.

Every piece must be a sentence (:func:`~veracity.check.guard.fragment` finds nothing to object to), else the
claim is only cleaned (markers and citations off) and kept whole. The pieces are the claim's own words, so
they stay in its sentence; the caller still reads each against the sentence guard.
"""

from __future__ import annotations

import re

from veracity.check.guard import check_claim, fragment

_LIST_NUMBER = re.compile(r"^\s*\d{1,2}[.)](?!\d)\s*")
_CITATION = re.compile(r"\s*\((?:https?://|www\.)[^)]*\)|\s*\[\d+(?:\s*[,–-]\s*\d+)*\]")
_MARKER = re.compile(r"^(?:so|however|therefore|thus|hence|also|additionally|in addition|moreover|"
                     r"furthermore|in fact|overall|in summary|in conclusion|finally|for example|for instance|"
                     r"consequently|as a result|indeed|nevertheless|nonetheless|similarly|likewise|besides|"
                     r"in general|generally speaking|in short|that said|of course)\s*,\s+", re.IGNORECASE)
_NOTE = re.compile(r"^(?:(?:it(?:'s| is) )?(?:important|worth) (?:to note|noting|remembering|mentioning)|"
                   r"(?:keep|bear) in mind|note|remember)(?: that)?\s+", re.IGNORECASE)
_TITLE_DASH = re.compile(r"^(?P<title>[^-–—]{1,80}?)\s+[-–—]\s+(?:This|It)\s+(?P<verb>is|was)\b")
_CONCESSIVE = re.compile(r"^(?:while|although|though|whereas|even though)\s+(?P<a>[^,]+),\s+(?P<b>.+)$",
                         re.IGNORECASE)
_AUX = (r"(?:is|are|was|were|has|have|had|can|could|will|would|may|might|must|does|do|did|remains?|"
        r"became|becomes?)")
_SUBJECT_RELATIVE = re.compile(r"^(?P<subj>(?:The|A|An|Some|Many|Most|[A-Z][\w'’-]*)(?:\s+[\w'’-]+){0,5}),\s+"
                               r"(?:which|who)\s+(?P<rel>[^,]+),\s+(?P<rest>" + _AUX + r"\b.+)$")
_CLAUSES = re.compile(r",\s+(?:but|so)\s+(?=\S)")
# what a main clause may open with: a determiner, a pronoun, a quantifier, a name or a number
_SUBJECT_START = re.compile(r"^(?:the|a|an|this|these|those|that|it|its|they|their|he|his|she|her|there|some|"
                            r"many|most|each|every|all|no|even|only|[A-Z][\w'’-]*|\d)\b")


def _sentence(piece: str) -> str:
    piece = piece.strip().rstrip(",;:")
    if not piece:
        return ""
    piece = piece[0].upper() + piece[1:]
    return piece if piece[-1] in ".!?\"”’'" else piece + "."


def clean(claim: str) -> str:
    """``claim`` without a list's number, bracketed citations, a discourse marker or "note that" at its
    start, and with a title's dash read as "is" (module docstring)."""
    c = " ".join(claim.split())
    c = _CITATION.sub("", c)
    c = _LIST_NUMBER.sub("", c)
    for _ in range(2):  # "However, it is important to note that ..."
        c = _MARKER.sub("", c)
        c = _NOTE.sub("", c)
    c = _TITLE_DASH.sub(lambda m: f"{m.group('title')} {m.group('verb')}", c)
    out = _sentence(c)
    return out if out and not fragment(out) else " ".join(claim.split())


def _pieces(c: str) -> list[str]:
    m = _CONCESSIVE.match(c)
    if m:
        return [m.group("a"), m.group("b")]
    m = _SUBJECT_RELATIVE.match(c)
    if m:
        subj = m.group("subj")
        return [f"{subj} {m.group('rel')}", f"{subj} {m.group('rest')}"]
    parts = _CLAUSES.split(c)
    if len(parts) > 1 and all(_SUBJECT_START.match(p.strip()) or _NOTE.match(p.strip()) for p in parts[1:]):
        return parts
    return [c]


def split_claim(claim: str) -> list[str]:
    """``claim`` as the claims it states (module docstring): cleaned, then split where its words say how;
    ``[claim]`` cleaned when a piece would not be a sentence."""
    c = clean(claim)
    pieces = [c]
    for _ in range(3):  # "So, while A, B, but C": each piece may split again
        nxt = []
        for p in pieces:
            split = _pieces(p.rstrip("."))
            nxt += [clean(_sentence(x)) for x in split] if len(split) > 1 else [p]
        if nxt == pieces:
            break
        pieces = nxt
    if len(pieces) > 1 and any(fragment(p) or len(p.split()) < 4 for p in pieces):
        return [c]
    return list(dict.fromkeys(pieces))


def split_claims(claims: list[str], sentence: str, text: str) -> list[str]:
    """Each of ``claims`` (of ``sentence`` in ``text``) as :func:`split_claim` gives it, the pieces that fail
    the sentence guard left out (a claim none of whose pieces passes is kept as it was), repeats removed."""
    out: list[str] = []
    for c in claims:
        pieces = [p for p in split_claim(c) if check_claim(p, sentence, text).ok]
        out += pieces or [c]
    return list(dict.fromkeys(out))
