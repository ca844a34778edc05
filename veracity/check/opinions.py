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
