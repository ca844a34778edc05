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
- a list of three or more short items that ends the claim is one claim per item ("... found in the temperate
  regions of Europe, Asia, and North America": the annotators' and the extractor prompt's own rule, which the
  1.5B often leaves undone);
- examples after "such as" or "including" that end the claim (two or more, with "and" or "or") are the
  statement without them and one claim per example: "Epigenetic changes can be caused by various
  environmental factors, such as diet, stress, or exposure to toxins." -> "Epigenetic changes can be caused
  by various environmental factors." and "…, such as diet.", "…, such as stress.", "…, such as exposure to
  toxins.";
- two main clauses joined by ", but" or ", so" are two claims when the second has a subject of its own
  ("..., so even a small number of new stars can add up quickly"); "It sank 42 ships, but was sunk ..." is
  left whole.

Every piece must be a sentence (:func:`~veracity.check.guard.fragment` finds nothing to object to), else the
claim is only cleaned (markers and citations off) and kept whole. The pieces are the claim's own words, so
they stay in its sentence; the caller still reads each against the sentence guard.

:func:`resolve_reference` names a pronoun a claim still starts with after the guard's re-ask ("They won the
tournament in 1986." after "Argentina has won the FIFA world cup once."): the subject of the sentence's own
first clause, or of the nearest sentence before that does not itself start with a pronoun, when its number
agrees; otherwise the claim is kept as it is (issue 44: 21 of seed 11's kept claims started with a pronoun).
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
# a list of three or more short items that ends the claim: "... found in the temperate regions of Europe,
# Asia, and North America" (Factcheck-Bench's annotators write one claim per item)
_PREPOSITIONS = frozenset("in of on at for with by from to into along across near through under over "
                          "as".split())
# an item is a noun phrase: never one that opens with a conjunction or a verb ("peak optimization, and is
# regularly maintained and improved" is no list: seed 5911's hand-read)
_ITEM = (r"(?!(?:and|or|but|nor|is|are|was|were|be|been|has|have|had|can|could|will|would|may|might|must|"
         r"do|does|did)\b)(?:[\w'’-]+\s){0,3}[\w'’-]+")
_LIST_LEAD = r"(?:in|of|on|at|for|with|by|from|to|along|as|including|like|are|is|was|were|include|includes)"
_FINAL_LIST = re.compile(r"^(?P<pre>.+\b" + _LIST_LEAD + r"\s)(?P<items>" + _ITEM + r"(?:,\s" + _ITEM
                         + r")+),?\sand\s(?P<last>" + _ITEM + r")$")  # "or": a choice, not claims
# examples after "such as" / "including": a list of two or more, joined by "and" or "or" (here an "or" lists
# examples, not a choice: "caused by various environmental factors, such as diet, stress, or exposure to
# toxins"). Factcheck-Bench's annotators write the statement without its examples and one claim per example
# (seed 5911's development rows, 2026-11-29)
_EXAMPLES = re.compile(r"^(?P<base>.+?[\w'’)\]])(?P<comma>,?)\s(?P<lead>such as|including)\s"
                       r"(?P<items>" + _ITEM + r"(?:,\s" + _ITEM + r")*),?\s(?:and|or)\s(?P<last>" + _ITEM
                       + r")$")
# not "so that" / "so as to" (a purpose, not a second claim), "but also" / "but not" (no subject of their own)
_CLAUSES = re.compile(r",\s+(?:but|so)\s+(?!(?:that|as|far|much|long|also|not)\b)(?=\S)")
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
    m = _EXAMPLES.match(c)
    if m:
        items = [x.strip() for x in m.group("items").split(",") if x.strip()] + [m.group("last").strip()]
        pre = f"{m.group('base')}{m.group('comma')} {m.group('lead')} "
        return [m.group("base"), *(pre + it for it in items)]
    m = _FINAL_LIST.match(c)
    if m:
        items = [x.strip() for x in m.group("items").split(",") if x.strip()] + [m.group("last").strip()]
        pre = m.group("pre")
        out = []
        for it in items:
            first = it.split()[0].lower()
            # "found in fields, ... and along roadsides": the item's own preposition replaces the list's
            if first in _PREPOSITIONS and pre.split()[-1].lower() in _PREPOSITIONS:
                out.append(pre.rsplit(None, 1)[0] + " " + it)
            else:
                out.append(pre + it)
        return out
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


# -- a leading pronoun the re-ask left, named from the text (no model) ---------------------------------------
_PRONOUN = re.compile(r"^(?P<p>It|They|He|She|Its|Their|His|Her)\b\s*(?P<rest>.*)$")
_SINGULAR = frozenset("is was has does".split())
_PLURAL = frozenset("are were have do".split())
_MODALS = frozenset("can could will would may might must shall should".split())
_PRONOUNS = frozenset("it they he she this these those i we you".split())
# a sentence's opening phrase before its subject: "As a democratic politician, he served ..."
_OPENER = re.compile(r"^(?:as|in|on|at|during|after|before|since|when|while|according to|based on|for|with|"
                     r"by|from|unlike|like|despite|although|though|because|if)\b[^,]{0,80},\s+",
                     re.IGNORECASE)
_MAX_SUBJECT_WORDS = 6
# "It is difficult to ...", "It is generally thought that ...", "It seems ...": no referent
_EXPLETIVE = re.compile(r"^It\s+(?:is|was|seems|seemed|appears|appeared|may|might|can|could|will|would)\s+"
                        r"(?:\w+\s+){0,3}?(?:to|that|whether|if|how|what|why|when)\b|^It\s+(?:seems|appears)\b")


def _subject(sentence: str) -> tuple[str, str] | None:
    """The subject of ``sentence`` and its number ("singular" / "plural" / "" when a modal hides it): the
    words before its first auxiliary, at most :data:`_MAX_SUBJECT_WORDS`, no comma; None otherwise."""
    s = _OPENER.sub("", clean(sentence))
    toks = s.split()
    for i, t in enumerate(toks[:_MAX_SUBJECT_WORDS + 1]):
        w = t.lower()
        if i and (w in _SINGULAR or w in _PLURAL or w in _MODALS):
            subj = toks[:i]
            if any(x.endswith((",", ";", ":")) or x.lower() in ("which", "that", "who") for x in subj):
                return None
            number = "singular" if w in _SINGULAR else "plural" if w in _PLURAL else ""
            return " ".join(subj), number
    return None


def resolve_reference(claim: str, sentence: str, before: str) -> str:
    """``claim`` with the pronoun it starts with ("It was contested over 40 laps", "Their research ...")
    replaced by the subject the text gives it, or "" when no subject fits. The referent is the subject of the
    sentence's own first clause when the pronoun is not the sentence's first word ("Different types of
    proteins are necessary ..., and they are produced ..."), else the subject of the nearest sentence before
    that does not itself start with a pronoun ("Marcus Morton was born ... He left ..."); its number must
    agree (``It`` / ``He`` / ``She``: singular, ``They``: plural or a name, a name for ``He`` / ``She``). An
    "It is difficult to ..." / "It is thought that ..." names nothing and is left as it is."""
    m = _PRONOUN.match(claim.strip())
    if not m:
        return ""
    p = m.group("p").lower()
    if p == "it" and _EXPLETIVE.match(claim.strip()):
        return ""
    from veracity.pipeline.methods.zofia.keywords import split_sentences

    first = (_OPENER.sub("", clean(sentence)).split() or [""])[0].lower()
    candidates = [] if first == p or first in _PRONOUNS else [sentence]
    candidates += [t for _, _, t in reversed(split_sentences(before))] if before.strip() else []
    for cand in candidates[:4]:
        found = _subject(cand)
        if found is None:
            return ""
        subj, number = found
        if subj.lower() in _PRONOUNS or subj.lower().split()[0] in ("this", "these", "those"):
            if cand is sentence:
                return ""
            continue  # the sentence before refers too: look further back
        plural = number == "plural" or not number and subj.endswith("s") and not subj.endswith("ss")
        # a name: its words capitalised but for connectors ("The 1932 Australian Grand Prix", "Argentina");
        # "they" may stand for a team or a country, "he" / "she" only for a name
        name_like = all(w[:1].isupper() or w[:1].isdigit() or w.lower() in ("of", "the", "and", "de")
                        for w in subj.split())
        if p in ("they", "their") and not (plural or name_like):
            return ""
        if p in ("it", "its") and plural or p in ("he", "his", "she", "her") and (plural or not name_like):
            return ""
        name = subj
        if p in ("its", "their", "his", "her"):
            name = name + ("'" if name.endswith("s") else "'s")
        rest = m.group("rest")
        return f"{name} {rest}".strip()
    return ""


def resolve_references(claims: list[str], sentence: str, text: str, before: str) -> list[str]:
    """``claims`` with each leading pronoun :func:`resolve_reference` can name replaced, where the result
    passes the sentence guard; the others as they are."""
    out = []
    for c in claims:
        r = resolve_reference(c, sentence, before)
        out.append(r if r and check_claim(r, sentence, text).ok else c)
    return out
