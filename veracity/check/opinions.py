"""Opinions and non-statements recognised without a model (check-worthiness, before ``check.worthiness``).

The reference model sorts nearly every claim as checkable (BENCHMARKS.md, issue 32: 5 of 5 opinions called
factual), so an opinion piece was verified claim by claim and an opinion could turn its sentence red. This
rule reads the claim and the sentence it came from:

- a claim that judges, prefers, recommends or predicts: an evaluative word (``beautiful``, ``boring``,
  ``overrated``, ``worth``, ``better`` / ``best`` / ``greatest`` written in lower case — ``Best Picture`` and
  the
  ``Great Wall`` are names), a hedge (``probably``, ``arguably``, ``seems``), ``should`` / ``ought to``, or
  ``will`` without a year (a prediction);
- a claim from a sentence that marks itself as the writer's view (``I think``, ``we believe``, ``in my
  opinion``, ``personally``, ``frankly``), unless the claim holds a number (a fact stated inside an opinion:
  "I think Paris, with its 2 million people, is lovely");
- a question, a greeting, a thank-you or a sign-off states nothing (``not_a_claim``).

Measured, sizes and all, on the labelled set of ``benchmarks/opinion_eval.py`` (held-out part) in
BENCHMARKS.md. A claim the rule does not recognise goes to ``check.worthiness`` as before.

:func:`sentence_rule` reads a whole sentence before the extractor is asked for its claims (issue 44: of seed
11's 45 extracted claims that matched no annotated claim, 12 came from sentences Factcheck-Bench's
annotators gave no claim at all, BENCHMARKS.md). A sentence that only instructs or advises the reader
("Compare the quotes offered by each decorator.", "You can follow these steps:", "Wildflowers should never be
plucked ..."), that speaks of the writer as a program ("As a language model, I do not have access to ...")
or that announces a list ("Sure, here are some ...:") gets no claim and no extractor call. It holds only a
sentence with no number and no name (no capitalised word after its first): "Visit the Louvre, which holds the
Mona Lisa." still goes to the extractor, which may find the fact in it.
"""

from __future__ import annotations

import re

_EVALUATIVE = """
beautiful beautifully lovely wonderful wonderfully terrible terribly awful amazing amazingly boring overrated
underrated delicious charming stunning breathtaking disappointing disappointed inspiring impressive \
fascinating
pleasant unpleasant ugly uglier ugliest shameful outrageous foolish unfair masterpiece nightmare disaster \
eyesore
soulless mistake shame highlight entertaining exciting relaxing romantic funny funnier funniest friendly
delightful gorgeous magnificent superb excellent mediocre dull tedious pointless ridiculous absurd silly
brilliant fantastic horrible dreadful wasteful deserve deserves deserved worth worthwhile
best better worst worse greatest great good nicer nice finest weakest strongest favourite favorite
difficult easy easily appealing speculative unclear necessarily
""".split()
# names otherwise
_LOWER_ONLY = {"best", "better", "great", "greatest", "good", "finest", "nice", "strongest", "weakest"}
_HEDGES = (r"\b(?:probably|arguably|perhaps|maybe|seems?|seemed|may seem|feels?|"
           r"too (?:long|short|slow|expensive))\b")
_MODAL = r"\b(?:should|shouldn't|ought to|must-see|must visit|is a must|a waste of|ruining)\b"
_MARKERS = re.compile(r"\b(?:i|we)\s+(?:really\s+)?"
                      r"(?:think|believe|feel|guess|suppose|reckon|love|hate|prefer|find|adore|"
                      r"like|doubt|expect|hope)\b|\bin (?:my|our) "
                      r"(?:opinion|view)\b|\bpersonally\b|\bhonestly\b|"
                      r"\bfrankly\b|\bif you ask me\b|\bto me\b", re.IGNORECASE)
_NOT_A_CLAIM = re.compile(r"^\s*(?:thanks?\b|thank you|enjoy\b|hello\b|hi\b|dear\b|let me know|feel "
                          r"free|here (?:are|is)\b|"
                          r"i hope\b|good luck|have a\b|please\b|you're welcome)", re.IGNORECASE)
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*")
_NUMBER = re.compile(r"\d")
_YEAR = re.compile(r"\b(?:1[0-9]|20)\d\d\b")


def _evaluative(claim: str) -> str | None:
    for i, m in enumerate(_WORD.finditer(claim)):
        w = m.group(0)
        low = w.lower().strip("'")
        if low in _EVALUATIVE:
            if low in _LOWER_ONLY and w[0].isupper() and i > 0:
                continue  # "Best Picture", "the Great Wall": part of a name
            if low in ("best", "better") and re.match(r"(?:best|better)[ -](?:known|selling|seller)",
                                                      claim[m.start():].lower()):
                continue
            return low
    return None


def opinion_rule(claim: str, sentence: str | None = None) -> tuple[str, str] | None:
    """``(category, why)`` when the rule recognises ``claim`` (from ``sentence``) as an opinion or as stating
    nothing; None when it does not (the claim goes to ``check.worthiness``)."""
    text = claim.strip()
    sent = (sentence or claim).strip()
    if text.endswith("?") or sent.endswith("?") and text.rstrip(".!").lower() == sent.rstrip("?").lower():
        return "not_a_claim", "a question"
    if _NOT_A_CLAIM.match(text) or text.endswith(":"):
        return "not_a_claim", "a greeting, sign-off or heading"
    word = _evaluative(text)
    if word:
        return "opinion", f"judges or prefers ({word!r})"
    m = re.search(_HEDGES, text, re.IGNORECASE) or re.search(_MODAL, text, re.IGNORECASE)
    if m:
        return "opinion", f"hedges or recommends ({m.group(0).lower()!r})"
    if re.search(r"\bwill\b|\bis going to\b", text, re.IGNORECASE) and not _YEAR.search(text):
        return "opinion", "predicts ('will' without a date)"
    m = _MARKERS.search(sent)
    if m and not _NUMBER.search(text):
        return "opinion", f"the sentence gives the writer's view ({m.group(0).lower()!r})"
    return None


# -- whole sentences that state nothing the annotators would check ------------------------------------------
# verbs that open a how-to step ("Compare the quotes ...", "Research online ..."); an imperative is told from
# a noun subject ("Research shows ...", "Water boils ...") by the word after it (:data:`_OBJECT_WORDS`)
_INSTRUCTION_VERBS = frozenset("""
add adjust apply arrange ask avoid bake boil book bring buy call change check choose clean click close collect
combine compare consult contact cook cover cut decide define delete determine discuss do download drink eat
enable ensure enter evaluate explore fill find follow gather get give go heat hire identify install join keep
learn leave let limit list look make measure mix monitor move negotiate open order pay pick place plan pour
prepare press print put read reduce register remove repeat replace request research review run save search
select send set share shortlist sign sort start stay stir stop submit take talk tell test try turn type update
use visit wait wash watch wear write
""".split())
# what may follow an imperative verb at a sentence's start: its object's determiner, a pronoun, an adverb
_OBJECT_WORDS = frozenset("""
the a an your yours their his her its our my this these those each every all any some more few several both it
them him me us yourself yourselves online carefully regularly sure out up how what whether which
""".split())
_PHRASAL = {"look": {"for", "at", "into"}, "ask": {"for", "about"}, "wait": {"for"}, "search": {"for"},
            "go": {"to"}, "talk": {"to", "with"}, "sign": {"in"}, "fill": {"in"}, "turn": {"on", "off"},
            "stay": {"away", "in"}, "pay": {"for"}}
# list numbering and step words before the verb: "1.", "-", "Step 2:", "First,", "Then", "Don't"
_STEP = re.compile(r"^(?:\s*(?:\d+[.)]|[-*•]|step \d+:?|first(?:ly)?,?|second(?:ly)?,?|then,?|next,?|"
                   r"finally,?|also,?|simply|just|always|never|don't|do not|please)\s+)+", re.IGNORECASE)
# "... these steps:\n\n1." (the splitter's cut): a list's number after a colon or a line break
_LIST_TAIL = re.compile(r"(?<=:)\s*\d{1,2}[.)]\s*$|\s*\n\s*\d{1,2}[.)]\s*$")
_SELF = re.compile(r"\bas an? (?:ai|artificial intelligence|(?:ai |large )?language model|chatbot|virtual "
                   r"assistant)\b|\bi(?:'m| am) (?:sorry|an ai|a language model|not able|unable)\b|"
                   r"\bi apologi[sz]e\b|"
                   r"\bi (?:do not|don't|cannot|can't|could not|couldn't) (?:have access|browse|access)\b",
                   re.IGNORECASE)
_TO_READER = re.compile(r"^\W*(?:if you\b[^,]*,\s*)?you (?:can|could|should|may|might|must|need to|have to|"
                        r"will need to|'ll need to|will want to)\b", re.IGNORECASE)
_ADVICE = re.compile(r"\b(?:should|shouldn't|ought to)\b", re.IGNORECASE)
# the program's knowledge cut-off and its date ("beyond my knowledge cutoff in September 2021")
_CUTOFF = re.compile(r"\b(?:knowledge|training data|training)\s*(?:cut-?off|update)\b[^,.;]*", re.IGNORECASE)
_ELSEWHERE = re.compile(
    r"\bi (?:would |'d )?(?:recommend|suggest|advise|encourage)\b[^.;]*?"
    r"\b(?:check|checking|consult|consulting|refer|referring|contact|contacting|visit|visiting|look at|"
    r"looking at|reach out|reaching out)\b[^.;]*?"
    r"\b(?:sources?|websites?|official|reputable|experts?|professionals?|doctor|authorities|documentation)\b",
    re.IGNORECASE)
_LIST_INTRO = re.compile(r"^\W*(?:(?:sure|certainly|of course|yes|ok|okay)\W+)?here (?:are|is)\b",
                         re.IGNORECASE)


def _has_name_or_number(sentence: str) -> bool:
    """A digit, or a capitalised word after the first (``I`` aside): the sentence names something
    checkable."""
    if _NUMBER.search(sentence):
        return True
    # a word that opens a sentence (first, or after . ! ? :) is capitalised as such, not as a name
    return any(m.group(0)[0].isupper() and m.group(0) != "I"
               and not re.search(r"(?:^|[.!?:]\s+)\W*$", sentence[:m.start()])
               for m in _WORD.finditer(sentence))


def _instruction(sentence: str) -> str | None:
    rest = _STEP.sub("", sentence.strip(), count=1)
    tokens = _WORD.findall(rest)
    if len(tokens) < 2:
        return None
    verb, after = tokens[0].lower(), tokens[1].lower()
    if verb in _INSTRUCTION_VERBS and (after in _OBJECT_WORDS or after in _PHRASAL.get(verb, ())):
        return verb
    return None


def sentence_rule(sentence: str) -> tuple[str, str] | None:
    """``(category, why)`` when ``sentence`` as a whole states nothing to check (module docstring): an
    instruction or a list's introduction (``not_a_claim``), the writer speaking of itself as a program
    (``not_a_claim``), advice to the reader (``opinion``); None when the extractor is to be asked."""
    text = _LIST_TAIL.sub("", sentence.strip())
    if not re.search(r"[^\W\d_]", text):  # "1." (a list's number the splitter cut off), "-", "2020."
        return "not_a_claim", "no words"
    if text.endswith(":") and (_LIST_INTRO.match(text) or not _has_name_or_number(text)):
        return "not_a_claim", "introduces a list"
    # "As an AI language model, I do not have access to news beyond my knowledge cutoff in September 2021":
    # its only name and date are the program's own (seed 765's hand-read: such a disclaimer came out a claim)
    if _SELF.search(text) and not _has_name_or_number(_CUTOFF.sub(" ", _SELF.sub(" ", text))):
        return "not_a_claim", "the writer speaks of itself"
    # "For the most up-to-date information ..., I recommend referring to official websites": the reader is
    # sent elsewhere, whatever the sentence names
    if _ELSEWHERE.search(text):
        return "not_a_claim", "refers the reader to other sources"
    if _has_name_or_number(text):
        return None
    verb = _instruction(text)
    if verb:
        return "not_a_claim", f"an instruction ({verb!r})"
    if _TO_READER.match(text):
        return "not_a_claim", "addresses the reader"
    m = _ADVICE.search(text)
    if m:
        return "opinion", f"advises ({m.group(0).lower()!r})"
    return None
