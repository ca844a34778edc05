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
- the claim must keep at least one content word of its sentence (a claim with none is another sentence's);
- an antecedent is a name or a number: more than :data:`MAX_CARRIED_COMMON_WORDS` lower-case words from
  other sentences ("Argentina won the FIFA world cup once." under "They won the tournament in 1986") is
  another sentence's content, and fails;
- an antecedent names what the sentence refers to; it does not describe it: a run of foreign words that
  opens with a common noun or adjective after ``a`` / ``an`` ("The Danube is *a river* in Africa", with
  "river in Africa" from the sentence before) adds another sentence's description, and fails.

A claim that fails is re-asked once (:mod:`veracity.check.extract`), then dropped and counted.

Three more model-free readings, added after the seed-11 measurement (BENCHMARKS.md, issue 44) showed where
precision went:

- a fragment ("held on a dirt track circuit", "in Victoria, Australia": it starts with a lower-case word, or
  has fewer than three words) is not a claim: it fails like a copied sentence (re-asked, then dropped);
- a claim that starts with a pronoun or a demonstrative ("It was contested over 40 laps", "They won the
  tournament in 1986", "This win was led by ...") was not decontextualised: it is re-asked once with the
  pronoun named (:func:`unresolved_reference`), and kept as it is when the re-ask gives nothing better;
- a claim that starts with a short description of something the text named before ("The race was won by
  Bill Thompson" after "The 1932 Australian Grand Prix was a motorsport race") is re-asked the same way with
  the description named (:func:`unresolved_description`; issue 44: 10 of seed 11's unmatched claims said "the
  race" or "the paper" where the annotators wrote the name);
- of two claims of one sentence where one's content words are the other's but for at most
  :data:`NEAR_DUPLICATE_WORDS` ("The race was won by Bill Thompson" beside "... by driver Bill Thompson"),
  the shorter is dropped (:func:`without_near_duplicates`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from veracity.pipeline.words import CONNECTORS, STOPWORDS, content, stem, words, written_words

MAX_ANTECEDENTS = 2  # "He told her ...": two referents resolved in one claim
MAX_RUN_WORDS = 5  # the longest antecedent phrase, in content words ("University of California, Los Angeles")
MIN_CLAIM_WORDS = 3  # "Paris is beautiful": fewer words is a fragment
# lower-case content words a claim may take from other sentences ("The elements and processes to form stars
# are ...": the annotators of Factcheck-GPT add at most two to the claims of seeds 8 and 11's responses)
MAX_CARRIED_COMMON_WORDS = 2
NEAR_DUPLICATE_WORDS = 2  # a claim whose content words are another's but for this many is that claim again
_REFERENCES = frozenset("it its they their them he his him she her this these those".split())
_FIRST_WORD = re.compile(r"[^\w]*([^\W\d_][\w'’-]*)")
_QUOTES = "\"'“‘«"
_AUXILIARIES = frozenset("is are was were be been has have had can could will would may might must shall "
                         "should do does did".split())

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
    why = fragment(claim)
    if why:
        return Verdict(False, why)
    own = set(content(sentence))
    written = written_words(claim)
    toks = [w for w, _, _ in written]
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
    # an antecedent is a name (capitalised) or a number; common words from elsewhere are another sentence's
    # content: "Argentina won the FIFA world cup once." under "They won the tournament in 1986, ..." carries
    # "world", "cup", "once" from the sentence before (seed 11's copied claim, BENCHMARKS.md issue 44)
    carried = [w for (w, as_written, _), s in zip(written, stems, strict=True)
               if s is not None and s not in own and not w.isdigit() and not as_written[:1].isupper()]
    if len(carried) > MAX_CARRIED_COMMON_WORDS:
        return Verdict(False, "carries common words from other sentences: "
                       + ", ".join(dict.fromkeys(carried)), tuple(dict.fromkeys(foreign)))
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
                       + "; ".join(" ".join(toks[k] for k in r) for r in runs) + ")",
                       tuple(dict.fromkeys(foreign)))
    for r in runs:
        _, as_written, before = written[r[0]]
        if before in ("a", "an") and as_written[:1].islower():
            return Verdict(False,
                           f"adds a description from other sentences: {before} "
                           + " ".join(toks[k] for k in r), tuple(dict.fromkeys(foreign)))
        phrase = [stem(toks[k]) for k in r]
        if sum(1 for k in r if stems[k] is not None) > MAX_RUN_WORDS:
            return Verdict(False,
                           "carries a long phrase from other sentences: " + " ".join(toks[k] for k in r),
                           tuple(dict.fromkeys(foreign)))
        if not _phrase_in(phrase, text_tokens):
            return Verdict(False,
                           "joins words that are not one phrase of the text: " + " ".join(toks[k] for k in r),
                           tuple(dict.fromkeys(foreign)))
    return Verdict(True, "", tuple(dict.fromkeys(foreign)))


def fragment(claim: str) -> str:
    """Why ``claim`` is a fragment rather than a sentence (empty when it is a sentence): it starts with a
    lower-case word ("held on a dirt track circuit"; a name such as "iPhone" has a capital inside, and a
    quoted term such as '"land" can be found on Earth' is the sentence's subject), it is a gerund phrase
    with no verb after it ("Extracting data from the legacy system": a how-to list's step, not a claim), or it
    has fewer than :data:`MIN_CLAIM_WORDS` words."""
    m = _FIRST_WORD.match(claim)
    quoted = claim.lstrip()[:1] in _QUOTES
    if m and m.group(1).islower() and not quoted:
        return f"is not a full sentence (starts with {m.group(1)!r})"
    if m and _gerund_phrase(claim):
        return f"is not a full sentence (no verb after {m.group(1)!r})"
    if len(words(claim)) < MIN_CLAIM_WORDS:
        return "is not a full sentence (too short)"
    return ""


def _gerund_phrase(claim: str) -> bool:
    """A capitalised -ing word first and, after it, no auxiliary or modal and no word that may be a verb in
    the third person or the past (-s, -ed): "Smoking causes cancer." is a sentence, "Integrating it into the
    lakehouse" is not."""
    ws = re.findall(r"[^\W\d_][\w'’-]*", claim)
    if not ws or not (ws[0].endswith("ing") and ws[0][0].isupper()):
        return False
    return not any(w.lower() in _AUXILIARIES or len(w) > 3 and (w.endswith("ed") or w.endswith("s")
                                                                 and not w.endswith("ss"))
                   for w in ws[1:])


def unresolved_reference(claim: str) -> str:
    """The pronoun or demonstrative ``claim`` starts with ("It", "They", "This"), lower-cased; empty when it
    starts otherwise. Such a claim does not stand on its own: the extractor was asked to name the referent."""
    m = _FIRST_WORD.match(claim)
    w = m.group(1).lower() if m else ""
    return w if w in _REFERENCES else ""


# "The race was won by ...", "The paper's cover ...", "The production quantity can vary ...": "The", one or
# two lower-case words, then a verb of being / having / a modal or a possessive (not "of": "The domestication
# of cattle ..." describes itself)
_DESCRIPTION = re.compile(r"^\W*(The)\s+([a-z][\w-]*)(?:\s+([a-z][\w-]*))?(?:'s\b|’s\b|\s+(?:is|was|are|"
                          r"were|has|had|have|can|could|will|would|may|might)\b)")


def unresolved_description(claim: str, before: str) -> str:
    """The short description ``claim`` starts with ("the race"), when one of its words names something the
    text before the sentence (``before``) already spoke of: the annotators of Factcheck-Bench write the name
    ("The 1932 Australian Grand Prix was a handicap race", not "The race was a handicap race"); empty
    otherwise. Such a claim is re-asked like a pronoun, and kept when the re-ask gives nothing better."""
    m = _DESCRIPTION.match(claim)
    if not m or not before:
        return ""
    seen = {stem(w) for w in words(before)}
    nouns = [w for w in (m.group(2), m.group(3)) if w and w not in STOPWORDS]
    if not any(stem(w) in seen for w in nouns):
        return ""
    return " ".join(w for w in m.group(1, 2, 3) if w).lower()


def replaces(new: str, old: str) -> bool:
    """Whether ``new`` (a re-asked claim) is ``old`` with its reference resolved: it starts with no pronoun
    and keeps all of ``old``'s content words but one."""
    if unresolved_reference(new):
        return False
    mine, theirs = set(content(old)), set(content(new))
    return len(mine - theirs) <= 1 and bool(mine & theirs)


def without_near_duplicates(claims: list[str]) -> tuple[list[str], list[str]]:
    """``claims`` without the near-duplicates of another (module docstring), and the ones left out."""
    sets = [set(content(c)) for c in claims]
    out: list[str] = []
    dup: list[str] = []
    for i, c in enumerate(claims):
        covered = any(j != i and sets[i] <= sets[j] and len(sets[j] - sets[i]) <= NEAR_DUPLICATE_WORDS
                      and (sets[i] != sets[j] or j < i) for j in range(len(claims)))
        (dup if covered and sets[i] else out).append(c)
    return out, dup
