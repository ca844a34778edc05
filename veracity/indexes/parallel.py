"""Reading a MediaWiki dump with N parser processes, articles coming out in source order.

Two ways to cut a dump into chunks of ``<page>`` elements:

- **multistream** (``*-pages-articles-multistream.xml.bz2`` with its ``*-multistream-index.txt.bz2``,
  lines ``offset:page_id:title``): every distinct offset starts a bz2 stream of about 100 pages; each
  parser process reads and decompresses its own streams straight from the file.
- **one stream** (any other dump, or no index): a reader thread decompresses the file (bz2 releases the
  GIL) and cuts it after a ``</page>`` about every megabyte; the chunks go to the parsers.

Either way the caller (the one writer of the build) receives the chunks' articles in file order, so
passage ids never depend on the number of workers. Parsers run in ``spawn``-ed processes (the writer
holds a JVM for Lucene, which must not be forked) that ignore SIGINT: Ctrl-C reaches the writer, which
shuts them down.

Checks made before any slow work (:func:`check_dump`): a bz2 file must end with a bz2 end-of-stream
marker (a truncated download does not); the decompressed start must be a MediaWiki export; a multistream
index must match its dump (a few offsets, first/middle/last, must start a bz2 stream whose first page id
is the one the index names).
"""

from __future__ import annotations

import bz2
import collections
import os
import queue
import signal
import threading
import xml.etree.ElementTree as ET
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from veracity.errors import ConfigError, CorpusError
from veracity.indexes.passages import Article

CHUNK_BYTES = 1 << 20  # decompressed XML per chunk on the one-stream path
_BZ2_EOS = 0x177245385090  # the 48-bit bz2 end-of-stream magic (sqrt(pi))
_TRUNCATED_HINT = "the download is incomplete: re-download the dump; check it with `bzip2 -t FILE`"


def default_workers() -> int:
    """The cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def check_workers(workers: int, flag: str = "--workers") -> None:
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ConfigError(f"{flag} must be an integer of at least 1, got {workers!r}",
                          hint=f"e.g. {flag} {default_workers()} (the cores here; the default)")


# ------------------------------------------------------------------------------------------ checks

def bz2_ends_complete(path: Path) -> bool:
    """Whether a bz2 file ends with an end-of-stream marker: 48 bits of magic, a 32-bit CRC and 0-7 bits of
    padding, not byte-aligned, so all eight bit shifts of the last 11 bytes are tried."""
    size = path.stat().st_size
    if size < 14:
        return False
    with open(path, "rb") as f:
        f.seek(size - 11)
        tail = int.from_bytes(f.read(11), "big")
    return any((tail >> (32 + pad)) & 0xFFFFFFFFFFFF == _BZ2_EOS for pad in range(8))


def is_bz2(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(3) == b"BZh"


def multistream_index_for(dump: Path) -> Path | None:
    """The ``*-multistream-index.txt[.bz2]`` beside a ``*-multistream.xml.bz2`` dump, if there is one."""
    name = dump.name
    if "multistream" not in name or ".xml" not in name:
        return None
    stem = name[:name.index(".xml")]
    for candidate in (f"{stem}-index.txt.bz2", f"{stem}-index.txt"):
        if (dump.parent / candidate).is_file():
            return dump.parent / candidate
    return None


@dataclass(frozen=True)
class StreamIndex:
    """The distinct stream offsets of a multistream dump and the first page id in each stream."""

    path: Path
    offsets: list[int]
    first_ids: list[int]


def read_multistream_index(path: Path) -> StreamIndex:
    opener = bz2.open if is_bz2(path) else open
    offsets: list[int] = []
    first_ids: list[int] = []
    try:
        with opener(path, "rb") as f:
            for lineno, line in enumerate(f, 1):
                try:
                    off, pid, _ = line.split(b":", 2)
                    off_i, pid_i = int(off), int(pid)
                except ValueError:
                    raise CorpusError(f"{path}:{lineno} is not an `offset:page_id:title` line of a "
                                      "multistream index",
                                      hint="pass the *-multistream-index.txt.bz2 downloaded with the "
                                           "dump") from None
                if not offsets or off_i != offsets[-1]:
                    if offsets and off_i < offsets[-1]:
                        raise CorpusError(f"{path}:{lineno}: offsets go backwards ({off_i} after "
                                          f"{offsets[-1]})",
                                          hint="pass the *-multistream-index.txt.bz2 downloaded with the "
                                               "dump")
                    offsets.append(off_i)
                    first_ids.append(pid_i)
    except (EOFError, OSError) as exc:
        raise CorpusError(f"cannot read the multistream index {path} ({exc})",
                          hint="re-download the *-multistream-index.txt.bz2; "
                               "check it with `bzip2 -t FILE`") from None
    if not offsets:
        raise CorpusError(f"the multistream index {path} is empty",
                          hint="pass the index downloaded with the dump")
    return StreamIndex(path, offsets, first_ids)


def _first_page_id(f, offset: int, limit: int = 1 << 20) -> int | None:
    """The id of the first <page> in the bz2 stream starting at ``offset``; None when no stream starts
    there."""
    f.seek(offset)
    dec = bz2.BZ2Decompressor()
    out = b""
    read = 0
    try:
        while read < limit and not dec.eof:
            block = f.read(1 << 14)
            if not block:
                break
            read += len(block)
            out += dec.decompress(block)
            page = out.find(b"<page>")
            if page >= 0:
                start = out.find(b"<id>", page)
                end = out.find(b"</id>", start)
                if start >= 0 and end >= 0:
                    return int(out[start + 4:end])
    except (OSError, ValueError):
        return None
    return None


def check_stream_index(dump: Path, index: StreamIndex, samples: int = 5) -> None:
    """Refuse an index that does not describe this dump: offsets past its end, or a few sampled offsets
    (first, last, evenly between) that do not start a bz2 stream whose first page has the indexed id."""
    size = dump.stat().st_size
    hint = ("pass the *-multistream-index.txt.bz2 downloaded with this dump (same wiki and date), or "
            "remove it / --multistream-index to read the dump as one stream")
    if index.offsets[-1] >= size:
        raise CorpusError(f"the multistream index {index.path} does not match {dump}: offset "
                          f"{index.offsets[-1]} "
                          f"is past the end of the dump ({size} bytes)", hint=hint)
    n = len(index.offsets)
    picks = sorted({0, n - 1, *(i * (n - 1) // (samples - 1) for i in range(samples))})
    with open(dump, "rb") as f:
        for i in picks:
            got = _first_page_id(f, index.offsets[i])
            if got != index.first_ids[i]:
                found = "no bz2 stream with a page" if got is None else f"page {got}"
                raise CorpusError(f"the multistream index {index.path} does not match {dump}: at offset "
                                  f"{index.offsets[i]} it names page {index.first_ids[i]}, the dump has "
                                  f"{found}",
                                  hint=hint)


@dataclass(frozen=True)
class DumpPlan:
    """How a dump will be read: one stream, or the streams of a multistream index."""

    path: Path
    index: StreamIndex | None = None


def check_dump(path: Path, multistream_index: Path | None = None) -> DumpPlan:
    """Everything about a dump that can be checked cheaply, before hashing or reading it: raises
    CorpusError."""
    from veracity.indexes.readers import open_maybe_compressed

    if multistream_index is not None and not Path(multistream_index).is_file():
        raise CorpusError(f"--multistream-index {multistream_index} does not exist or is not a file",
                          hint="pass the *-multistream-index.txt.bz2 downloaded with the dump")
    bz = is_bz2(path)
    if bz and not bz2_ends_complete(path):
        raise CorpusError(f"{path} is truncated: it does not end with a complete bz2 stream",
                          hint=_TRUNCATED_HINT)
    try:
        with open_maybe_compressed(path) as f:
            head = f.read(1 << 16)
    except (EOFError, OSError) as exc:
        raise CorpusError(f"{path} is truncated or not a readable dump ({exc})",
                          hint=_TRUNCATED_HINT) from None
    _check_head(path, head)
    index_path = Path(multistream_index) if multistream_index is not None else multistream_index_for(path)
    if index_path is None:
        return DumpPlan(path)
    if not bz:
        raise CorpusError(f"{path} is not bz2, so the multistream index {index_path} cannot describe it",
                          hint="drop --multistream-index (only *-multistream.xml.bz2 dumps have one)")
    index = read_multistream_index(index_path)
    check_stream_index(path, index)
    return DumpPlan(path, index)


def _check_head(path: Path, head: bytes) -> None:
    start = head.lstrip()[:1]
    if start != b"<":
        raise CorpusError(f"{path} is not XML",
                          hint="pass a *-pages-articles*.xml.bz2 dump, or another --format")
    if b"<mediawiki" not in head:
        tag = head.lstrip()[1:40].split(None, 1)[0].rstrip(b">").decode("utf-8", "replace")
        raise CorpusError(f"{path} is XML but not a MediaWiki export (root <{tag}>)",
                          hint="use a *-pages-articles*.xml.bz2 dump, or pass another --format")


# ------------------------------------------------------------------------------------ the parsers

_clean = None  # the cleaner of this parser process
_chunking = None  # the build's Chunking: articles are cut into passages here, not in the writer
_documents = False  # ... and their BM25 JSON documents serialised here too


def _init_parser(cleaner: str, in_process: bool = False, chunking=None, documents: bool = False) -> None:
    global _clean, _chunking, _documents
    if not in_process:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the writer's to handle
    from veracity.indexes.readers import cleaner_function

    _clean = cleaner_function(cleaner)
    _chunking = chunking
    _documents = documents and chunking is not None


def _prepared(title: str, text: str) -> tuple:
    """What a parser sends the writer for one article: ``(title, text, None)``, or with the build's chunking
    ``(title, "", (passage texts, BM25 documents or None))``: the writer then only stores and appends."""
    if _chunking is None:
        return (title, text, None)
    from veracity.indexes.passages import Article, bm25_document, chunk_article

    passages = chunk_article(Article(title, text), _chunking)
    docs = tuple(bm25_document(p) for p in passages) if _documents else None
    return (title, "", (tuple(p.text for p in passages), docs))


@dataclass
class ChunkResult:
    articles: list[tuple[str, str, tuple | None]]
    skipped: dict[str, int]
    newest: str
    error: tuple[str, str] | None = None  # (message, hint): typed errors do not cross processes intact


def parse_chunk(task: tuple) -> ChunkResult:
    """Articles of one chunk of <page> elements: ``("bytes", xml)`` or
    ``("stream", path, offset, length)``."""
    from veracity.indexes.readers import SourceInfo, page_article

    where = "a chunk"
    try:
        if task[0] == "stream":
            _, path, offset, length = task
            where = f"the bz2 stream at offset {offset}"
            with open(path, "rb") as f:
                f.seek(offset)
                raw = f.read(length) if length is not None else f.read()
            data = bz2.decompress(raw)
        else:
            data = task[1]
        start, end = data.find(b"<page>"), data.rfind(b"</page>")
        info = SourceInfo("", "wiki-xml")
        out: list[tuple[str, str, tuple | None]] = []
        newest = ""
        if start < 0 or end < 0:
            return ChunkResult(out, {}, newest)
        root = ET.fromstring(b"<pages>" + data[start:end + 7] + b"</pages>")
        for page in root:
            article, stamp = page_article(page, info, _clean)
            if stamp and stamp > newest:
                newest = stamp
            if article is not None:
                out.append(_prepared(article.title, article.text))
        return ChunkResult(out, info.skipped, newest)
    except (EOFError, OSError, ValueError) as exc:
        return ChunkResult([], {}, "", (f"cannot decompress {where}: {exc}", _TRUNCATED_HINT))
    except ET.ParseError as exc:
        return ChunkResult([], {}, "", (f"broken XML in {where} ({exc})",
                                        "the dump is truncated or corrupted; re-download it"))


# ----------------------------------------------------------------------------------- the chunkers

def _stream_tasks(plan: DumpPlan) -> Iterator[tuple]:
    offsets = plan.index.offsets
    for i, off in enumerate(offsets):
        length = offsets[i + 1] - off if i + 1 < len(offsets) else None
        yield ("stream", str(plan.path), off, length)


def _byte_tasks(path: Path) -> Iterator[tuple]:
    """Decompress the whole file (any number of bz2 streams) and cut it after ``</page>`` every ~1 MB."""
    from veracity.indexes.readers import open_maybe_compressed

    buf = b""
    with open_maybe_compressed(path) as f:
        while block := f.read(CHUNK_BYTES):
            buf += block
            cut = buf.rfind(b"</page>")
            if cut >= 0:
                yield ("bytes", buf[:cut + 7])
                buf = buf[cut + 7:]
    if buf.strip() and b"</mediawiki>" not in buf:
        raise CorpusError(f"{path} ends inside a page: the XML is truncated", hint=_TRUNCATED_HINT)
    if b"<page>" in buf:
        yield ("bytes", buf)


_END = object()


def _threaded(tasks: Iterator[tuple], depth: int) -> Iterator[tuple]:
    """Run a task generator in a reader thread, ``depth`` tasks ahead; its errors re-raised here."""
    q: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def run() -> None:
        try:
            for task in tasks:
                while not stop.is_set():
                    try:
                        q.put(task, timeout=0.2)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put(_END)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer
            q.put(exc)

    thread = threading.Thread(target=run, name="dump-reader", daemon=True)
    thread.start()
    try:
        while True:
            item = q.get()
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()


def read_wiki_dump(path: Path, info, *, cleaner: str = "fast", workers: int = 1,
                   plan: DumpPlan | None = None, chunking=None, documents: bool = False) -> Iterator[Article]:
    """Articles of a MediaWiki dump in file order, parsed by ``workers`` processes (1: in this process).
    With ``chunking`` (the build's :class:`~veracity.indexes.passages.Chunking`) the parsers also cut each
    article into passages (``Article.cut``) and, with ``documents``, serialise their BM25 documents
    (``Article.documents``), so the one writer only assigns ids, stores and appends: the ids are those
    :func:`~veracity.indexes.passages.chunk_article` gives in the writer, for any number of workers."""
    from veracity.indexes.readers import dump_date_from_name

    check_workers(workers)
    plan = plan or check_dump(path)
    info.dump_date = dump_date_from_name(path.name)
    info.dump_date_from = "file name" if info.dump_date else None
    tasks = _stream_tasks(plan) if plan.index is not None else _byte_tasks(path)
    tasks = _threaded(tasks, depth=2 * workers + 2)
    init = (cleaner, workers == 1, chunking, documents)
    newest = ""
    pool = None
    try:
        if workers == 1:
            _init_parser(*init)
            results: Iterator[ChunkResult] = (parse_chunk(t) for t in tasks)
        else:
            import multiprocessing

            pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                       initializer=_init_parser, initargs=init)
            results = _ordered(pool, tasks, ahead=2 * workers)
        for res in results:
            if res.error is not None:
                raise CorpusError(f"{path}: {res.error[0]}", hint=res.error[1])
            for reason, count in res.skipped.items():
                info.skipped[reason] = info.skipped.get(reason, 0) + count
            if res.newest > newest:
                newest = res.newest
            for title, text, cut in res.articles:
                info.articles += 1
                yield Article(title, text) if cut is None else Article(title, text, cut=cut[0],
                                                                       documents=cut[1])
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
    if newest:
        info.newest_revision = newest
        if not info.dump_date:
            info.dump_date = newest[:10]
            info.dump_date_from = "newest revision"


def _ordered(pool: ProcessPoolExecutor, tasks: Iterator[tuple], ahead: int) -> Iterator[ChunkResult]:
    """Results of ``parse_chunk`` over ``tasks`` in task order, at most ``ahead`` chunks in flight."""
    pending: collections.deque = collections.deque()
    for task in tasks:
        pending.append(pool.submit(parse_chunk, task))
        if len(pending) >= ahead:
            yield pending.popleft().result()
    while pending:
        yield pending.popleft().result()
