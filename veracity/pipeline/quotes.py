"""The quote check: is each quote a verdict rests on really in the passage it cites?

A judging role that quotes (``--param quotes=show|check``) returns, for each passage it relies on, short
quotes copied from it. This module decides, without any model, whether each quote occurs in its cited
passage and where. Both texts are normalised the same way before an exact substring search:

- Unicode NFKC (per character cluster, so a base letter and its combining marks compose: ``u`` + U+0308
  is ``ü``; ligatures and full-width forms become plain letters; ``…`` becomes ``...``), then case folding;
- every quote mark, single or double, straight or typographic, becomes ``"`` (a model that copies
  ``'Romanian Paradise'`` from ``"Romanian Paradise"`` has copied the words); hyphens, en / em dashes and the
  minus sign become ``-``, and whitespace next to a dash is dropped (``Basin- Reno`` is ``Basin-Reno``);
  zero-width characters and soft hyphens are dropped;
- wiki link markup is read as the words it displays: ``[[Reno–Sparks_metropolitan_area|Reno–Sparks
  metropolitan area]]`` is ``Reno–Sparks metropolitan area`` (FEVEROUS's sentences and other marked-up
  corpora keep it; a quote of the displayed words, or of the markup, is the passage's words);
- every run of whitespace becomes one space;
- square brackets left after that are dropped: an editorial insertion (``"[for] the discovery``) reads as
  its words.

A quote cut by the passage's chunk edge (its start matches the end of the passage, or its end the
passage's start, over at least :data:`EDGE_MIN_CHARS` characters and half the quote) is found, marked
``at_edge``, with the offsets of the part the passage holds. Beside the check, :func:`quote_terms` reports
whether the quotes share the claim's key terms (its names and numbers): quotes copied word for word that
never mention the claim's subject ground nothing about it, and are flagged; and
:func:`unsupported_attributions` reads an explanation's "the passage states ..." spans the same way (their
content words must be in the passages; a span in quote marks must be a quote of one).

Diacritics stay significant (``Zurich`` is not a quote of ``Zürich``): a quote is the passage's words,
not a paraphrase. A quote is searched as written, then without the quote marks, ellipses and the closing full
stop around it. Nothing fuzzy: the same quote
and passage always give the same answer. A found quote records its character offsets in the passage's
ORIGINAL text (``passage.text[start:end]`` is the span), which is what the CLI and the page show.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Sequence

from veracity.pipeline.types import Evidence
from veracity.pipeline.words import content, key_terms, quote_terms  # noqa: F401 (quote_terms: part of the check)

QUOTE_MAX_CHARS = 200  # a quote is a short span, not the passage (bounded in the schema, checked by pydantic)

_QUOTES = {c: '"' for c in "'\u2018\u2019\u201a\u201b\u2032\u2035`\u00b4"
                           "\u201c\u201d\u201e\u201f\u2033\u2036\u00ab\u00bb"}
_DASHES = {c: "-" for c in "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\u2043\ufe58\ufe63\uff0d"}
_DROP = set("\u200b\u200c\u200d\u2060\ufeff\u00ad")
_STRIP = ' "'  # around a quote after normalisation: spaces and quote marks
_LINK = re.compile(r"\[\[(?:[^\[\]|]*\|)?([^\[\]|]*)\]\]")  # [[target|display]] or [[display]]


def _markup(text: str) -> set[int]:
    """Offsets of the characters of wiki link markup that are not displayed: ``[[target|`` and ``]]``."""
    hidden: set[int] = set()
    for m in _LINK.finditer(text):
        hidden.update(range(m.start(), m.start(1)))
        hidden.update(range(m.end(1), m.end()))
    return hidden


@dataclass(frozen=True)
class Quote:
    """One quote as the model gave it, and where it sits in its cited passage (offsets into the passage's
    original text; ``None`` when it is not there)."""

    passage_id: str
    text: str
    start: int | None = None
    end: int | None = None
    at_edge: bool = False  # only part of the quote is in the passage: it runs over the chunk's edge

    @property
    def found(self) -> bool:
        return self.start is not None

    def to_dict(self) -> dict[str, Any]:
        out = {**asdict(self), "found": self.found}
        if not self.at_edge:
            del out["at_edge"]
        return out


def _clusters(text: str) -> Iterable[tuple[int, int]]:
    """(start, end) of each base character with the combining marks that follow it."""
    i, n = 0, len(text)
    while i < n:
        j = i + 1
        while j < n and unicodedata.combining(text[j]):
            j += 1
        yield i, j
        i = j


def normalise(text: str) -> tuple[str, list[tuple[int, int]]]:
    """``text`` normalised (module docstring), and for each of its characters the (start, end) span of
    the original characters it comes from."""
    out: list[str] = []
    spans: list[tuple[int, int]] = []
    space_open = False  # a whitespace run in progress: one space for all of it
    hidden = _markup(text) if "[[" in text else set()
    for start, end in _clusters(text):
        if start in hidden:
            continue
        for ch in unicodedata.normalize("NFKC", text[start:end]).casefold():
            if ch in _DROP:
                continue
            if ch.isspace():
                if out and out[-1] == "-":
                    continue  # no space after a dash
                if out and not space_open:
                    out.append(" ")
                    spans.append((start, end))
                    space_open = True
                elif space_open:
                    spans[-1] = (spans[-1][0], end)
                continue
            if ch in "[]":
                continue  # editorial brackets: "[for] the discovery" is "for the discovery"
            space_open = False
            ch = _QUOTES.get(ch) or _DASHES.get(ch) or ch
            if ch == "-" and out and out[-1] == " ":  # no space before a dash
                out.pop()
                spans.pop()
            out.append(ch)
            spans.append((start, end))
    while out and out[-1] == " ":
        out.pop()
        spans.pop()
    return "".join(out), spans


def quote_core(quote: str) -> str:
    """The normalised quote without the quote marks, spaces and ellipses around it."""
    core, _ = normalise(quote)
    prev = None
    while prev != core:
        prev = core
        core = core.strip(_STRIP)
        core = core.removesuffix("...").removeprefix("...").removesuffix(".")
    return core


EDGE_MIN_CHARS = 20


def locate(quote: str, passage: str) -> tuple[int, int] | None:
    """Where ``quote`` occurs in ``passage`` (first occurrence after normalisation), as offsets into the
    original ``passage``; None when it does not occur or is empty."""
    norm, spans = normalise(passage)
    whole = normalise(quote)[0].strip()
    for core in dict.fromkeys((whole, quote_core(quote))):  # as written first, then without marks around it
        at = norm.find(core) if core.strip(_STRIP + ".") else -1
        if at >= 0:
            return spans[at][0], spans[at + len(core) - 1][1]
    return None


def locate_at_edge(quote: str, passage: str) -> tuple[int, int] | None:
    """The part of ``quote`` a chunk's edge cut: its start as the passage's end, or its end as the passage's
    start (at least EDGE_MIN_CHARS characters and half the quote, cut at a word boundary)."""
    norm, spans = normalise(passage)
    core = quote_core(quote)
    need = max(EDGE_MIN_CHARS, (len(core) + 1) // 2)
    if not norm or len(core) < need:
        return None
    for k in range(len(core) - 1, need - 1, -1):
        head = core[:k].rstrip()
        if len(head) >= need and (k == len(core) or core[k] == " ") and norm.endswith(head):
            at = len(norm) - len(head)
            return spans[at][0], spans[-1][1]
        tail = core[len(core) - k:].lstrip()
        if len(tail) >= need and core[len(core) - k - 1] == " " and norm.startswith(tail):
            return spans[0][0], spans[len(tail) - 1][1]
    return None


def check_quotes(pairs: Iterable[tuple[str, str]], passages: Sequence[Evidence]) -> list[Quote]:
    """Each ``(passage_id, quote)`` located in the passage of that id among ``passages`` (not found when
    the id is not among them)."""
    by_id = {e.passage_id: e for e in passages}
    out = []
    for pid, text in pairs:
        ev = by_id.get(pid.strip())
        at = locate(text, ev.text) if ev is not None else None
        edge = at is None and ev is not None and (at := locate_at_edge(text, ev.text)) is not None
        out.append(Quote(pid.strip(), text, *(at or (None, None)), at_edge=edge))
    return out


_ATTRIBUTION = re.compile(
    r"\b(?:the|this|that|a)?\s*(?:passages?|evidence|text|source|article)(?:\s*\[[^\]]{1,160}\])?(?:\s*\([^)]{0,160}\))?"
    r"\s+(?:clearly\s+|explicitly\s+|also\s+)?(?:states?|says?|mentions?|notes?|reads?|indicates?|confirms?|shows?|"
    r"explains?|reports?|describes?|specifies?|writes?)\s*(?:that\s+|:\s*)?(?P<span>[^.;\n]+)", re.IGNORECASE)
_CLAUSE_END = re.compile(r",?\s+(?:so|which|but|therefore|thus|hence|while|whereas|meaning|making|and so|and "
                         r"therefore|"
                        r"and thus|not|rather than|contradicting|supporting|confirming)\b|,\s", re.IGNORECASE)
_META = frozenset({"claim", "refut", "support", "verdict", "passag", "evidence", "information", "mention",
                   "stat",
                   "true", "false", "correct", "incorrect", "fact"})
_QUOTED = re.compile(r"[\"“”](?P<q>[^\"“”]{4,200})[\"“”]")


def unsupported_attributions(explanation: str, passages: Sequence[Evidence]) -> list[str]:
    """The words an explanation attributes to the passages that they lack: each "the passage states (that)
    X" whose content words are not all in the passages (titles included), and each span in quote marks that
    is not a quote of any passage. Empty: nothing attributed is missing."""
    if not explanation:
        return []
    have = set()
    for e in passages:
        have.update(content(e.title))
        have.update(content(e.text))
    out = []
    for m in _ATTRIBUTION.finditer(explanation):
        span = _CLAUSE_END.split(m.group("span"), 1)[0].strip()
        if re.match(r"(?:nothing|no|not|neither|none)\b", span, re.IGNORECASE):
            continue  # "the passage says nothing about ...": attributes no words
        lack = [w for w in dict.fromkeys(content(span)) if w not in have and w not in _META]
        if lack:
            out.append(f'the explanation attributes "{span}" to the passages, which lack {", ".join(lack)}')
    for m in _QUOTED.finditer(explanation):
        q = m.group("q")
        if len(q.split()) >= 3 and not any(locate(q, e.text) for e in passages):
            out.append(f'"{q}" is not in the passages')
    return list(dict.fromkeys(out))


def problems(quotes: Sequence[Quote], decisive: bool) -> list[str]:
    """Why these quotes do not ground a verdict (empty: they do). ``decisive``: the label claims the
    passages settle the claim, so it must quote at least one of them."""
    out = [f'"{q.text}" is not in passage [{q.passage_id}]' for q in quotes if not q.found]
    if decisive and not any(q.found for q in quotes) and not out:
        out.append("the verdict quotes no passage")
    return out
