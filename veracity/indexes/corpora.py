"""Readers for the Wikipedia corpora research already shares, each with the date of the dump it was cut from
(for the leakage guard: a benchmark refuses an index newer than its dataset).

- ``dpr-tsv``: DPR's ``psgs_w100.tsv`` (Karpukhin et al. 2020, §4.1: the 2018-12-20 English Wikipedia cut
  into disjoint 100-word passages; 21,015,324 rows). Columns ``id``, ``text``, ``title`` behind a header
  line, text quoted as CSV. The passages are kept as DPR cut them and under DPR's own ids: DPR row ``id``
  ``k``
  is passage ``k`` (its chunk number ``n`` counts from 0 within its title, consecutive rows of one title
  being one article), so results compare with DPR's and pyserini's gold passage ids, ``index search IDX k``
  shows it, and with every row kept the store's row ``idx`` is ``k - 1``.
- ``kilt``: the KILT knowledge source ``kilt_knowledgesource.json`` (Petroni et al. 2021, §2: the
  2019-08-01 dump; one JSON object a line with ``wikipedia_title`` and ``text``, a list of paragraphs whose
  first is the title, sections marked ``Section::::``, list items ``BULLET::::``).
- ``fever``: FEVER's ``wiki-pages/wiki-NNN.jsonl`` (Thorne et al. 2018, §3.1: the June 2017 dump, the
  introductory sections only), one file or the whole ``wiki-pages/`` folder -- read by
  :func:`veracity.indexes.readers.read_jsonl`, its tokenised text detokenised, dated here.
- ``hotpot-abstracts``: HotpotQA's intro paragraphs ``enwiki-20171001-pages-meta-current-withlinks-
  abstracts/`` (Yang et al. 2018; the corpus HoVer was built on), a folder of ``AA/wiki_00.bz2`` ...
  files of JSON lines with ``title`` and ``text``, a list of sentences (hyperlinks as ``<a href>``).
"""

from __future__ import annotations

import csv
import io
import re
import sys
from pathlib import Path
from typing import Iterator

from veracity.errors import CorpusError
from veracity.indexes.passages import Article
from veracity.indexes.wikitext import SKIP_SECTIONS

DPR_DATE = "2018-12-20"
KILT_DATE = "2019-08-01"
HOTPOT_DATE = "2017-10-01"
DPR_COLUMNS = ["id", "text", "title"]
_ANCHOR = re.compile(r"</?a\b[^>]*>")


def _bad(info, path, lineno, what: str, on_error: str, hint: str) -> None:
    if on_error == "skip":
        info.skip("bad line")
        return
    raise CorpusError(f"{path}:{lineno}: {what}", hint=hint)


def _dated(info, date: str, what: str) -> None:
    if not info.dump_date:
        info.dump_date, info.dump_date_from = date, what


def check_dpr_header(path: Path, header: list[str]) -> None:
    if [h.strip().lower() for h in header] != DPR_COLUMNS:
        raise CorpusError(f"{path} is not a DPR passages TSV: its columns are {header[:6]}, not id, text, "
                          "title",
                          hint="pass psgs_w100.tsv as DPR's download_data.py fetches it (header "
                               "`id<TAB>text<TAB>title`)"
                               ", or --format jsonl for {title, text} lines")


def read_dpr_tsv(path: Path, info, *, on_error: str = "raise") -> Iterator[Article]:
    """DPR passages grouped by article (consecutive rows with one title), kept as DPR cut them and under DPR's
    own passage ids (so retrieval results compare with DPR / pyserini gold ids)."""
    from veracity.indexes.readers import open_maybe_compressed

    _dated(info, DPR_DATE, "DPR psgs_w100 (2018-12-20 dump)")
    csv.field_size_limit(sys.maxsize)
    hint = "fix the line, or pass --on-error skip to skip and count bad lines"
    with io.TextIOWrapper(open_maybe_compressed(path), encoding="utf-8", newline="") as f:
        rows = csv.reader(f, delimiter="\t")
        lineno = 1
        try:
            header = next(rows, None)
            if header is None:
                return
            check_dpr_header(path, header)
            title = None
            chunks: list[str] = []
            ids: list[str] = []  # DPR's passage ids, kept as the passages' ids
            for row in rows:
                lineno = rows.line_num
                if len(row) != 3:
                    _bad(info, path, lineno,
                         f"a DPR row has 3 columns (id, text, title), this one {len(row)}",
                         on_error, hint)
                    continue
                pid, text, row_title = row
                if not pid.strip().isdigit():
                    _bad(info, path, lineno, f"DPR passage id {pid[:20]!r} is not a number", on_error, hint)
                    continue
                row_title = row_title.strip()
                if row_title != title:
                    if title and chunks:
                        info.articles += 1
                        yield Article(title, " ".join(chunks), chunks=tuple(chunks), chunk_ids=tuple(ids))
                    title, chunks, ids = row_title, [], []
                if text.strip():
                    chunks.append(text.strip())
                    ids.append(pid.strip())
            if title and chunks:
                info.articles += 1
                yield Article(title, " ".join(chunks), chunks=tuple(chunks), chunk_ids=tuple(ids))
        except (EOFError, OSError) as exc:
            raise CorpusError(f"{path} is truncated or unreadable after line {lineno} ({exc})",
                              hint="re-download the file") from exc
        except csv.Error as exc:
            raise CorpusError(f"{path}:{lineno}: not a TSV row ({exc})", hint=hint) from exc


def kilt_paragraphs(title: str, paragraphs: list[str]) -> str:
    """KILT's paragraph list as plain text: the title paragraph dropped, section markers made headings (and
    the
    page cut at end matter, as the dump cleaner does), list-item markers removed."""
    lines = []
    for i, para in enumerate(paragraphs):
        p = str(para).strip()
        if not p or (i == 0 and p == title.strip()):
            continue
        if p.startswith("Section::::"):
            heading = p[len("Section::::"):].split(":::")[-1].strip().rstrip(".").strip()
            if heading.lower() in SKIP_SECTIONS:
                break
            lines.append(heading)
            continue
        if p.startswith("BULLET::::"):
            p = p[len("BULLET::::"):].lstrip("-* ").strip()
        lines.append(p)
    return "\n".join(line for line in lines if line)


def kilt_record(obj) -> Article | None:
    if not isinstance(obj, dict):
        raise TypeError(f"expected a JSON object, got {type(obj).__name__}")
    if "wikipedia_title" not in obj or "text" not in obj:
        raise ValueError(f"a KILT record has wikipedia_title and text, this one {sorted(obj)[:6]}")
    paragraphs = obj["text"]
    if isinstance(paragraphs, str):
        paragraphs = paragraphs.split("\n")
    title = str(obj["wikipedia_title"]).strip()
    return Article(title, kilt_paragraphs(title, paragraphs))


def hotpot_record(obj) -> Article | None:
    if not isinstance(obj, dict):
        raise TypeError(f"expected a JSON object, got {type(obj).__name__}")
    if "title" not in obj or "text" not in obj:
        raise ValueError(f"a HotpotQA abstract has title and text, this one {sorted(obj)[:6]}")
    text = obj["text"]
    if isinstance(text, list):  # sentences, each but the first with its leading space
        text = "".join(s if isinstance(s, str) else " ".join(map(str, s)) for s in text)
    return Article(str(obj["title"]).strip(), " ".join(_ANCHOR.sub("", str(text)).split()))


def read_kilt(path: Path, info, *, on_error: str = "raise") -> Iterator[Article]:
    _dated(info, KILT_DATE, "KILT knowledge source (2019-08-01 dump)")
    from veracity.indexes.readers import json_articles

    yield from json_articles(path, info, kilt_record, "kilt", on_error=on_error)


def hotpot_files(folder: Path) -> list[Path]:
    """The abstract files of a HotpotQA folder in order (``AA/wiki_00.bz2``, ``AA/wiki_01.bz2``, ...)."""
    return sorted(p for p in folder.glob("*/wiki_*") if p.is_file())


def read_hotpot_abstracts(path: Path, info, *, on_error: str = "raise") -> Iterator[Article]:
    from veracity.indexes.readers import dump_date_from_name, json_articles

    named = dump_date_from_name(path.name)
    _dated(info, named or HOTPOT_DATE, "folder name" if named else "HotpotQA abstracts (2017-10-01 dump)")
    files = hotpot_files(path) if path.is_dir() else [path]
    if not files:
        raise CorpusError(f"{path} holds no HotpotQA abstract files (*/wiki_*.bz2)",
                          hint="pass the unpacked enwiki-20171001-pages-meta-current-withlinks-abstracts "
                               "folder")
    for file in files:
        yield from json_articles(file, info, hotpot_record, "hotpot-abstracts", on_error=on_error)


def looks_like_hotpot_folder(path: Path) -> bool:
    return path.is_dir() and bool(hotpot_files(path))
