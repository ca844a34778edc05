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
- names and numbers count too (:func:`carried_name_or_number`, issue 44: 4 of seed 765's 30 hand-read claims
  were another sentence's, carrying one or two common words plus names and numbers): a number or a date the
  sentence lacks is another sentence's fact ("The SM U-30 was commissioned on December 22, 1914." under the
  sentence before the one that says so), and a name the sentence lacks needs something in the sentence it
  resolves (a pronoun, a demonstrative, a "the ..." description).

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

import functools
import os
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
# words a sentence does not end on (an object pronoun such as "her" may, so the possessives are only those
# that cannot be objects)
_JOINING = frozenset("and or but nor".split())
_DANGLING = _JOINING | frozenset("a an the at of in on to for with by from into onto about as than its their "
                                 "our my your whose".split())
_AUXILIARIES = frozenset("is are was were be been has have had can could will would may might must shall "
                         "should do does did".split())

# the two reasons that say a claim is another sentence's altogether (not a word or a name too many): a reply
# that gives one has stopped splitting its sentence and is copying the text (is_another_sentences)
COPIED = "is another sentence of the text, word for word"
NOTHING_SHARED = "shares no content word with its sentence"


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
    if copies_another_sentence(claim, sentence, text):
        return Verdict(False, COPIED)
    own = set(content(sentence))
    written = written_words(claim)
    toks = [w for w, _, _ in written]
    stems = [stem(w) if w not in STOPWORDS else None for w in toks]
    mine = [s for s in stems if s is not None]
    if not mine:
        return Verdict(True)
    if own and not any(s in own for s in mine):
        return Verdict(False, NOTHING_SHARED, tuple(dict.fromkeys(mine)))
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
    why = carried_name_or_number(claim, sentence, text, runs=[[toks[k] for k in r] for r in runs],
                                 spans=runs, written=written, stems=stems, own=own)
    if why:
        return Verdict(False, why, tuple(dict.fromkeys(foreign)))
    # an antecedent comes before its reference: common words found only in the sentences after this one are a
    # later sentence's content ("Compressed air is also known as standard air." under the sentence before the
    # one that says so; seed 765's replayed hand-read). One such word is enough ("The peregrine falcon is the
    # fastest animal in the world." under "The fastest animal with wings and fur is the peregrine falcon.",
    # "world" from the next sentence; "... hydrochloric acid alone.", seeds 8422 and 4058's hand-reads) unless
    # it is the sentence's own word in another form the crude stem misses ("controlled" -> "control")
    at = where(sentence, text)
    seen = {stem(w) for w in words(text[:at])}
    mine_written = [w for w in words(sentence) if w not in STOPWORDS]
    later = [w for (w, as_written, _), s in zip(written, stems, strict=True)
             if s is not None and s not in own and s not in seen and not as_written[:1].isupper()
             and not w[:1].isdigit() and not any(_same_word(w, o) for o in mine_written)]
    if at >= 0 and later:
        return Verdict(False, "carries words from later sentences: " + ", ".join(dict.fromkeys(later)),
                       tuple(dict.fromkeys(foreign)))
    return Verdict(True, "", tuple(dict.fromkeys(foreign)))


# -- names and numbers carried from other sentences ---------------------------------------------------------
# number words a claim may write for the sentence's digits ("four albums" for "4 albums"); "one" is left out,
# being a pronoun as often as a number ("one of the largest ...")
_NUMBER_WORDS = {w: str(n) for n, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split()) if n != 1}
_NUMBER_WORDS.update({w: str(10 * n) for n, w in enumerate(
    "thirty forty fifty sixty seventy eighty ninety".split(), 3)})
# dates: carried like numbers, never a name
_DATE_WORDS = frozenset("january february march april may june july august september october november "
                        "december jan feb mar apr jun jul aug sep sept oct nov dec monday tuesday wednesday "
                        "thursday friday saturday sunday".split())
# what a sentence refers with: a claim may name its referent here (one name per reference)
_REFERRING = frozenset("it its they their them theirs he his him she her hers this these those such".split())
_DEMONSTRATIVES = frozenset("this that these those".split())
# a list's number ("4. “The Album\" (2020) - ...", "\n1.Abigail Adams"): not a number the sentence states
_LIST_MARK = re.compile(r"(?:^\s*|(?<=\n)\s*|(?<=:)\s+)\d{1,2}[.)](?!\d)")  # not "at 10:30."
# a time the text gave before ("Since then, China's Olympic success ..." -> "... since the 1980s")
_THEN = re.compile(r"\b(?:since|by|until|till|from) then\b|\bat that time\b|\b(?:that|the same) (?:year|"
                   r"decade|day|month|time)\b", re.IGNORECASE)
_RAW = re.compile(r"[^\W_]+(?:[’'][^\W_]+)*")


def _value(word: str) -> str | None:
    """A number token's value as digits ("four" -> "4", "1,000" is already "1000"); None for a word."""
    if word[:1].isdigit():
        return word
    return _NUMBER_WORDS.get(word)


def _same_word(a: str, b: str) -> bool:
    """Two forms of one word, as far as spelling shows: a common start of at least four letters that is most
    of the shorter ("controlled" / "control", "chemistry" / "chemical" too: a guard that lets a word through
    rather than drop a claim)."""
    n = len(os.path.commonprefix([a, b]))
    return n >= 4 and n >= 0.6 * min(len(a), len(b))


def is_another_sentences(verdict: Verdict) -> bool:
    """The guard's verdict says the claim is another sentence's altogether: one of the text's other sentences
    word for word, or without one content word of its own sentence."""
    return not verdict.ok and verdict.reason in (COPIED, NOTHING_SHARED)


def _initials(words_as_written: list[str]) -> str:
    return "".join(w[0] for w in words_as_written if w[:1].isupper()).lower()


def copies_another_sentence(claim: str, sentence: str, text: str) -> bool:
    """``claim`` is, word for word, a sentence of ``text`` other than ``sentence`` (seed 3356's hand-read: "In
    1980, the oldest justice on the United States Supreme Court was Justice William O. Douglas." under
    "Therefore, in 1980, Justice Douglas was still alive and would have been the oldest serving justice on
    the Court at that time.", the response's first sentence, passed because every word it carries is an
    antecedent name of the sentence's own "Justice Douglas" and "the Court")."""
    mine = tuple(words(claim))
    return bool(mine) and mine != tuple(words(sentence)) and mine in _sentence_words(text)


@functools.lru_cache(maxsize=64)
def _sentence_words(text: str) -> frozenset[tuple[str, ...]]:
    """The words of each sentence of ``text``: split once per text, not once per claim checked."""
    from veracity.pipeline.methods.zofia.keywords import split_sentences

    return frozenset(tuple(words(t)) for _, _, t in split_sentences(text))


def carried_name_or_number(claim: str, sentence: str, text: str, *, runs: list[list[str]],
                           spans: list[list[int]], written: list[tuple[str, str, str]],
                           stems: list[str | None], own: set[str]) -> str:
    """Why ``claim`` carries a name or a number from another sentence of ``text`` (empty when it does not).
    ``runs`` / ``spans`` are the claim's runs of words foreign to ``sentence`` (:func:`check_claim`).

    - A number (digits or a number word) or a date word (a month, a weekday) the sentence lacks is another
      sentence's fact ("The SM U-30 was commissioned on December 22, 1914." under the sentence before the one
      that says so), unless it belongs to a carried name ("The 1932 Australian Grand Prix" for "The race")
      or describes the referent of the sentence's "this ..." from the text before it ("Diego Maradona led
      Argentina's win in 1986." under "This win was led by ... Diego Maradona.").
    - A name (a capitalised word; the claim's first word only when the text also writes it capitalised
      inside a sentence) the sentence lacks, and the text writes only after it, is a later sentence's: an
      antecedent comes before its reference.
    - A name the sentence lacks is an antecedent only where the sentence refers to something:
      each such name needs a pronoun or demonstrative of the sentence, or a "the ..." description whose
      words the claim leaves out ("The U-boat was armed ..." -> "The SM U-30 was armed ..."). A name next to
      one of the sentence's own names ("Marie" before "Curie"), and an acronym of the sentence's name or
      its expansion ("NIH", "National Institutes of Health"), are the sentence's own.
    """
    bare = _LIST_MARK.sub(" ", sentence)
    sent_words = words(bare)
    values = {v for w in sent_words if (v := _value(w)) is not None}
    sent_raw = _RAW.findall(bare)
    sent_initials = {_initials(sent_raw[i:j]) for i in range(len(sent_raw))
                     for j in range(i + 2, min(len(sent_raw), i + 8) + 1) if sent_raw[i][:1].isupper()}
    sent_acronyms = {w.lower().replace(".", "") for w in re.findall(r"\b[A-Z](?:\.?[A-Z])+\b\.?", bare)}
    claim_stems = {s for s in stems if s is not None}
    # capitalised inside a sentence of the text (not only as a sentence's first word): a name
    inner_caps = {m.group(0).lower() for m in re.finditer(r"(?<![.!?:\n]\s)(?<!^)\b[A-Z][\w'’-]*", text)}

    def is_name(k: int) -> bool:
        w, as_written, _ = written[k]
        if not as_written[:1].isupper() or w in _DATE_WORDS or w in STOPWORDS:
            return False
        # "The Cashmere production" where the text writes "cashmere": a common word, capitalised by the claim
        return w in inner_caps or any(c.isupper() for c in as_written[1:])

    def is_number(k: int) -> bool:  # a month or a weekday is a date when capitalised ("march" is a verb)
        return _value(written[k][0]) is not None or (written[k][0] in _DATE_WORDS
                                                     and written[k][1][:1].isupper())

    # the sentence's references a carried name may resolve: its pronouns and demonstratives, and its "the ..."
    # descriptions, each either left out of the claim (replaced by the name) or kept and qualified by it
    # ("The four female presidents" -> "a female president of the United States"), the latter only when the
    # claim carries nothing but names (a claim that also carries common words is another sentence's)
    slots = sum(1 for w in sent_words if w in _REFERRING)
    kept_slots = 0
    raw_lower = [w.lower() for w in sent_raw]
    for i, w in enumerate(raw_lower):
        if w == "the":
            head = []
            for x, as_written in zip(raw_lower[i + 1:i + 4], sent_raw[i + 1:i + 4], strict=False):
                if len(x) < 2:
                    continue
                if x in STOPWORDS or as_written[:1].isupper():
                    break
                head.append(stem(x))
            if head and not any(h in claim_stems for h in head):
                slots += 1
            elif head:
                kept_slots += 1
    only_names = all(any(is_name(k) or is_number(k) for k in span) for span in spans)
    if only_names:
        slots += kept_slots
    # "this win", "these reactions": the nouns the claim keeps
    kept_nouns = {stem(raw_lower[i + 1]) for i, w in enumerate(raw_lower[:-1])
                  if w in _DEMONSTRATIVES and raw_lower[i + 1] not in STOPWORDS
                  and stem(raw_lower[i + 1]) in claim_stems}
    at = where(sentence, text)
    before = text[:at] if at >= 0 else ""
    before_stems = {stem(w) for w in words(before)}
    before_values = {v for w in words(before) if (v := _value(w)) is not None} | {
        w for w in words(before) if w in _DATE_WORDS}
    need = 0
    for span in spans:
        names = [k for k in span if is_name(k)]
        own_value = [k for k in span if is_number(k) and (_value(written[k][0]) in values
                                                          or written[k][0] in sent_words)]
        if names:
            phrase = [written[k][1] for k in span if written[k][1][:1].isupper()]
            if _initials(phrase) in sent_acronyms or (len(names) == 1 and written[names[0]][0] in
                                                       sent_initials):
                continue
            # an antecedent comes before its reference: a name the text writes only after this sentence is a
            # later sentence's ("ECharts Java is based on the ECharts JavaScript library." under "ECharts
            # Java is a Java-based library for data visualization.", the next sentence's fact; seeds 5911 and
            # 3937's hand-reads), even beside one of the sentence's own names
            later = [written[k][1] for k in names if stem(written[k][0]) not in before_stems]
            if at >= 0 and later:
                return f"carries a name from later sentences: {' '.join(later)}"
            left, right = span[0] - 1, span[-1] + 1
            # the sentence's own name spelled out further ("Marie" + "Curie"), or a name that qualifies the
            # sentence's own noun ("She won a prize" -> "... a Nobel prize")
            if any(0 < j < len(written) and stems[j] is not None and stems[j] in own
                   and written[j][1][:1].isupper() for j in (left, right)) or (
                    right < len(written) and stems[right] is not None and stems[right] in own):
                continue
            need += 1
            continue
        for k in span:
            if not is_number(k) or k in own_value:
                continue
            w = written[k][0]
            v = _value(w) or w
            near = any(stems[j] in kept_nouns for j in range(max(0, k - 3), min(len(written), k + 4))
                       if stems[j] is not None)
            if (near or _THEN.search(bare)) and v in before_values:
                continue
            return f"carries a number or date from other sentences: {written[k][1]}"
    if need > slots:
        return (f"carries a name from other sentences: {'; '.join(' '.join(r) for r in runs)} "
                f"(the sentence refers to {slots} thing{'s' if slots != 1 else ''})")
    return ""


def where(sentence: str, text: str) -> int:
    """Where ``sentence`` starts in ``text``: its first occurrence, else (a sentence given apart from the
    text, such as an annotator's edited copy in Factcheck-Bench) the start of the text's sentence holding most
    of its words, at least 60 %; -1 when none does."""
    at = text.find(sentence.strip()) if sentence.strip() else -1
    if at >= 0:
        return at
    from veracity.pipeline.methods.zofia.keywords import split_sentences

    mine = set(words(sentence))
    best, start = 0.0, -1
    for s, _, t in split_sentences(text):
        share = len(mine & set(words(t))) / max(1, len(mine))
        if share > best:
            best, start = share, s
    return start if best >= 0.6 else -1


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
    if claim.rstrip().endswith(":"):  # "The four female presidents were:" (a list's introduction)
        return "is not a full sentence (ends with ':')"
    cut = _cut_at(claim)
    if cut:
        return f"is not a full sentence (ends with {cut!r})"
    return ""


def _cut_at(claim: str) -> str:
    """The words a claim cut mid-phrase ends with ("... processes at the.", "... completes or is."), else "":
    an article, a preposition, a conjunction or a possessive last, or an auxiliary right after a conjunction.
    Seed 758's hand-read (BENCHMARKS.md, issue 44) found both in the extractor's own replies: one re-ask cut
    its claim short, one reply split its sentence in the middle of a clause."""
    ws = [w.lower() for w in _RAW.findall(claim)]  # numbers too: "... in 1895." ends on 1895
    if len(ws) >= 2 and ws[-2] in _JOINING and ws[-1] in _AUXILIARIES:
        return " ".join(ws[-2:])
    if ws and ws[-1] in _DANGLING:
        return ws[-1]
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
