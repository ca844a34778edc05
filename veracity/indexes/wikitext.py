"""Wikitext -> plain text, fast: a scanner over the markup instead of a full parse tree.

What is dropped, what is kept (the same rules as the mwparserfromhell cleaner it replaces, which stays
selectable as ``--cleaner mwparser``):

- comments; the contents of ``<ref>``, ``<math>``, ``<gallery>``, ``<timeline>``, ``<imagemap>``,
  ``<score>`` and the other tags MediaWiki does not show as text; templates ``{{...}}`` and tables
  ``{| ... |}`` (nested in each other to any depth); file / image / media / category links and
  interlanguage links ``[[xx:...]]``; magic words (``__NOTOC__``);
- the page is cut at the first end-matter heading (See also, References, External links, Notes, ...);
- links keep their shown text (``[[Paris|the capital]]`` -> "the capital", ``[[Paris]]`` -> "Paris"),
  bracketed external links their label, other tags their contents, headings their title on a line of
  their own; bold / italic quotes and list markers go; HTML entities are decoded.

A page whose top-level templates include a disambiguation template is reported as such (the reader
skips it). One pass per construct, each a compiled regular expression or a bracket scanner: about an
order of magnitude faster than building and editing mwparserfromhell's tree (see
``benchmarks/index_build.py cleaner``).
"""

from __future__ import annotations

import html
import re

SKIP_SECTIONS = frozenset({"see also", "references", "external links", "further reading", "notes",
                           "bibliography",
                           "sources", "footnotes", "citations", "notes and references"})
DISAMBIG_TEMPLATES = frozenset({"disambiguation", "disambig", "dab", "disamb", "hndis", "geodis", "set index",
                                "surname", "given name", "letter disambiguation", "number disambiguation",
                                "place name disambiguation", "human name disambiguation", "mathdab",
                                "hospitaldis",
                                "schooldis", "shipindex", "sia"})
DROP_LINK_PREFIXES = ("file:", "image:", "category:", "media:")
# tags whose contents are not text: the ones the old cleaner removed, plus those MediaWiki never shows as text
DROP_TAGS = ("ref", "references", "table", "gallery", "math", "timeline", "imagemap", "score", "categorytree",
             "graph", "inputbox", "section", "templatedata")

_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.S)
_TAG_NAMES = "|".join(DROP_TAGS)
_DROP_TAG_PAIR = re.compile(rf"<({_TAG_NAMES})\b[^>]*?(?<!/)>.*?</\1\s*>", re.S | re.I)
_DROP_TAG_SINGLE = re.compile(rf"<(?:{_TAG_NAMES})\b[^>]*/>", re.I)
_BRACES = re.compile(r"\{\{|\}\}|^[ \t]*\{\||^[ \t]*\|\}", re.M)
_TEMPLATE_NAME = re.compile(r"\{\{\s*([^|{}\n]*)")
_LINKS = re.compile(r"\[\[|\]\]")
_INTERWIKI = re.compile(r"[a-z-]{2,12}:")
_EXTERNAL = re.compile(r"\[(?:https?:|ftp:|//|mailto:)[^\s\]]*(?:[ \t]+([^\]\n]*))?\]", re.I)
_HEADING = re.compile(r"^(={1,6})[ \t]*(.+?)[ \t]*\1[ \t]*$", re.M)
_ANY_TAG = re.compile(r"</?[a-zA-Z][a-zA-Z0-9]*\b[^>]*>")
_QUOTES = re.compile(r"'{2,}")
_LIST_MARKER = re.compile(r"^[*#:;]+[ \t]*", re.M)
_MAGIC = re.compile(r"__[A-Z]+__")
_LEFTOVER_TABLE = re.compile(r"\{\|.*?\|\}", re.S)


def _balanced(text: str, tokens: re.Pattern, is_open) -> list[tuple[int, int]]:
    """Top-level balanced spans [start, end) of a bracket pair; an opener never closed is left as text."""
    spans = []
    depth = 0
    start = 0
    for m in tokens.finditer(text):
        if is_open(m.group()):
            if depth == 0:
                start = m.start()
            depth += 1
        elif depth:
            depth -= 1
            if depth == 0:
                spans.append((start, m.end()))
    if depth:  # unclosed: keep the opener as text, scan what follows it again
        rest = _balanced(text[start + 2:], tokens, is_open)
        spans.extend((a + start + 2, b + start + 2) for a, b in rest)
    return spans


def _is_brace_open(tok: str) -> bool:
    return tok.endswith("{") or tok.endswith("{|")


def _cut(text: str, spans: list[tuple[int, int]], repl=None) -> str:
    if not spans:
        return text
    out = []
    last = 0
    for a, b in spans:
        out.append(text[last:a])
        if repl is not None:
            out.append(repl(text[a:b]))
        last = b
    out.append(text[last:])
    return "".join(out)


def _link_text(link: str) -> str:
    inner = link[2:-2]
    title, bar, shown = inner.partition("|")
    low = title.strip().lower()
    if low.startswith(DROP_LINK_PREFIXES) or _INTERWIKI.match(title):
        return ""
    if bar and shown:
        if "[[" in shown:
            shown = _cut(shown, _balanced(shown, _LINKS, lambda t: t == "[["), _link_text)
        return shown
    return title


def _heading(m: re.Match) -> str:
    return m.group(2)


def is_disambiguation(text: str, spans: list[tuple[int, int]] | None = None) -> bool:
    """Whether a top-level template of ``text`` is a disambiguation template."""
    for a, _ in spans if spans is not None else _balanced(text, _BRACES, _is_brace_open):
        if text.startswith("{{", a):
            m = _TEMPLATE_NAME.match(text, a)
            if m and m.group(1).strip().lower().replace("_", " ") in DISAMBIG_TEMPLATES:
                return True
    return False


def wikitext_to_plain(text: str) -> tuple[str, bool]:
    """Plain text of wiki markup, and whether the page is a disambiguation page (then the text is "")."""
    text = _COMMENT.sub("", text)
    text = _DROP_TAG_PAIR.sub("", text)
    text = _DROP_TAG_SINGLE.sub("", text)
    spans = _balanced(text, _BRACES, _is_brace_open)
    if is_disambiguation(text, spans):
        return "", True
    text = _cut(text, spans)
    for m in _HEADING.finditer(text):  # end matter: everything from the first such heading on
        title = _QUOTES.sub("", _ANY_TAG.sub("", m.group(2))).strip().lower()
        if title in SKIP_SECTIONS:
            text = text[:m.start()]
            break
    text = _cut(text, _balanced(text, _LINKS, lambda t: t == "[["), _link_text)
    text = _EXTERNAL.sub(lambda m: m.group(1) or "", text)
    text = _HEADING.sub(_heading, text)
    text = _ANY_TAG.sub("", text)
    text = _QUOTES.sub("", text)
    text = _LIST_MARKER.sub("", text)
    text = _MAGIC.sub("", text)
    text = html.unescape(text)
    text = _LEFTOVER_TABLE.sub(" ", text)
    lines = (" ".join(line.split()) for line in text.splitlines())
    return "\n".join(line for line in lines if line), False
