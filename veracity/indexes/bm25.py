"""BM25 through pyserini (Lucene): build an index of ``{id, contents}`` documents, search it, and the
BM25 retriever over it.

The Lucene index in ``bm25/`` is a plain Anserini index (Porter stemming, stopwords removed, raw JSON
stored), readable by pyserini directly: ``LuceneSearcher("DIR/bm25")``.

A prebuilt Lucene index can serve instead (``index build psgs_w100.tsv --bm25-prebuilt DIR``, e.g. pyserini's
``wikipedia-dpr-100w``). Its document ids are either our passage ids (``title#n``) or DPR's passage numbers:
DPR passage ``k`` is row ``k - 1`` of the passage store built from the same ``psgs_w100.tsv`` (the DPR
reader keeps every row, in order), so a hit on document ``k`` is the store's passage at row ``k - 1``.
:func:`check_prebuilt` verifies that mapping on sampled rows when the index is built.
"""

from __future__ import annotations

import json
import queue
import re
import threading
from pathlib import Path

from veracity.errors import IndexDirError
from veracity.indexes.java import ensure_jvm
from veracity.indexes.passages import Passage, bm25_document, split_passage_id
from veracity.indexes.retriever import StoredPassagesRetriever, TitleFilter, filtered_top

BM25_DIR = "bm25"
_WORD = re.compile(r"\w+")  # comparing corpus text with a prebuilt index's stored documents
MAX_QUERY_WORDS = 512  # Lucene's BooleanQuery allows 1024 clauses; long inputs (news articles) are cut


class BM25Writer:
    """Feeds Lucene in batches of ``batch`` JSON documents from a feeder thread, so the build's writer goes on
    storing passages while Lucene indexes. Anserini's ``addRawDocuments`` returns only when its pool of
    ``threads`` threads has indexed the whole batch; called from the writer's own thread it stopped the
    writer for that long on every batch (issue 28: the writer, not the parsers, bounded stage 1). pyjnius
    releases the GIL during the Java call, so the writer, the dump reader thread and Lucene's threads run
    side by side. At most ``ahead`` batches wait for the feeder; a Lucene error is raised by the next
    :meth:`add` or by :meth:`close`."""

    def __init__(self, path: Path, threads: int = 1, batch: int = 1024, ahead: int = 2):
        ensure_jvm()
        from pyserini.index.lucene import LuceneIndexer

        path.mkdir(parents=True, exist_ok=True)
        self._indexer = LuceneIndexer(args=["-index", str(path), "-storeRaw"], threads=threads)
        self._batch = batch
        self._pending: list[str] = []
        self._queue: queue.Queue = queue.Queue(maxsize=ahead)
        self._error: BaseException | None = None
        self._feeder = threading.Thread(target=self._feed, name="bm25-feeder", daemon=True)
        self._feeder.start()

    def _feed(self) -> None:
        try:
            while (docs := self._queue.get()) is not None:
                if self._error is None:  # after an error the rest is drained, not indexed
                    try:
                        self._indexer.add_batch_raw(docs)
                    except BaseException as exc:  # noqa: BLE001 - re-raised in the writer's thread
                        self._error = exc
        finally:
            _detach_jvm_thread()

    def add(self, passage: Passage) -> None:
        self.add_documents((bm25_document(passage),))

    def add_documents(self, documents) -> None:
        """Documents already serialised with :func:`~veracity.indexes.passages.bm25_document`."""
        self._raise_error()
        self._pending.extend(documents)
        if len(self._pending) >= self._batch:
            self.flush()

    def flush(self) -> None:
        if self._pending:
            self._queue.put(self._pending)
            self._pending = []

    def _raise_error(self) -> None:
        if self._error is not None:
            exc, self._error = self._error, None
            raise IndexDirError("Lucene failed while indexing BM25 documents "
                                f"({str(exc).splitlines()[0][:160]})",
                                hint="run the build again; if it repeats, build with --no-bm25") from exc

    def close(self, discard: bool = False) -> None:
        """Index what is pending (``discard``: drop it, the build is being abandoned), wait for the feeder,
        then commit Lucene's index to disk."""
        if discard:
            self._pending = []
            self._error = self._error or RuntimeError("discarded")  # the feeder drains what is queued
        self.flush()
        self._queue.put(None)
        self._feeder.join()
        if discard:
            self._error = None
        else:
            self._raise_error()
        self._indexer.close()


def _detach_jvm_thread() -> None:
    """A thread that called into the JVM must detach before it ends (pyjnius)."""
    try:
        ensure_jvm()  # started already by this thread's calls; every way into jnius goes through it
        from jnius import detach

        detach()
    except Exception:  # noqa: BLE001 - nothing to detach, or no pyjnius
        pass


def java_reason(exc: BaseException) -> str:
    """A Java exception in a few words: its class's simple name and the first sentence of its message, without
    the package path, the stack or a cut in the middle (``IndexNotFoundException: no segments* file
    found``)."""
    text = " ".join(str(exc).split())
    m = re.search(r"(?:[a-z_$][\w$]*\.)+([A-Z][\w$]*(?:Exception|Error))\s*:?\s*(.*)", text)
    name, message = (m.group(1), m.group(2)) if m else (type(exc).__name__, text)
    # drop parenthesised asides, nested ones included: "(resource BufferedChecksumIndexInput(...))"
    while True:
        shorter = re.sub(r"\s*\([^()]*\)", "", message)
        if shorter == message:
            break
        message = shorter
    message = re.split(r"(?<=[.;])\s|\s+at\s+[\w$.]+\(|: ", message, maxsplit=1)[0].strip().rstrip(".;:")
    message = re.sub(r"\s*in\s+(?:MMap|NIOFS|FS)Directory@\S+.*$", "", message)  # Lucene's directory object
    if len(message) > 100:
        message = message[:100].rsplit(" ", 1)[0] + " ..."
    return f"{name}: {message}" if message else name


class _LuceneSearcher:
    """Anserini's ``SimpleSearcher`` through pyjnius: the part of pyserini's ``LuceneSearcher`` a BM25 search
    uses (BM25 parameters, search, stored documents). Imported this way because ``pyserini.search.lucene``
    also imports pyserini's neural encoders, and with them transformers, scikit-learn and SciPy: about 12 s
    of CPU on the 2-core machine before a process's first search (BENCHMARKS.md, "Process start-up"),
    where the Java classes themselves load in well under a second. The index is the same Anserini index
    pyserini reads."""

    def __init__(self, path: Path):
        ensure_jvm()  # the JVM with veracity's options (-Xrs), before anything of jnius
        from jnius import autoclass

        self._object = autoclass("io.anserini.search.SimpleSearcher")(str(path))
        self.num_docs = int(self._object.get_total_num_docs())

    def set_bm25(self, k1: float, b: float) -> None:
        self._object.set_bm25(float(k1), float(b))

    def search(self, query: str, k: int):
        return self._object.search(query, int(k))  # ScoredDoc objects: .docid, .score

    def doc(self, docid: str | int) -> _StoredDocument | None:
        found = self._object.doc(docid)
        return None if found is None else _StoredDocument(found)

    def close(self) -> None:
        self._object.close()


class _StoredDocument:
    """A Lucene document as stored by the build: its ``id`` and its ``raw`` JSON."""

    def __init__(self, document):
        self._document = document

    def docid(self) -> str:
        return self._document.getField("id").stringValue()

    def raw(self) -> str | None:
        return self._document.get("raw")


class BM25Index:
    """Thread-safe BM25 search (pyserini's LuceneSearcher is not safe for concurrent use: one lock)."""

    def __init__(self, path: Path, k1: float = 0.9, b: float = 0.4):
        if not path.is_dir():
            raise IndexDirError(f"BM25 index {path} is missing",
                                hint="rebuild with --overwrite, or use --mode dense")
        self.path = path
        ensure_jvm()  # outside the try: a missing Java runtime is its own one-line error, not a bad index
        try:
            self._searcher = _LuceneSearcher(path)
            self._searcher.set_bm25(k1, b)
        except Exception as exc:  # a Java exception: corrupt or foreign index
            err = IndexDirError(f"BM25 index {path} cannot be opened ({java_reason(exc)})",
                                hint="rebuild the index with --overwrite")
            err.detail = java_reason(exc)
            raise err from None
        self.num_docs = int(self._searcher.num_docs)
        self._lock = threading.Lock()
        self.docids = "passage-id"  # or "dpr-row": DPR passage numbers (a prebuilt wikipedia-dpr-100w)
        if self.num_docs:
            first = self._searcher.doc(0)
            if first is not None and str(first.docid()).isdigit():
                self.docids = "dpr-row"

    def raw(self, docid: str) -> str | None:
        """The stored raw document of ``docid`` (None when there is none)."""
        with self._lock:
            doc = self._searcher.doc(docid)
            return None if doc is None else doc.raw()

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        words = query.split()
        if not words or k <= 0:
            return []
        query = " ".join(words[:MAX_QUERY_WORDS])
        with self._lock:
            hits = self._searcher.search(query, k=min(k, max(1, self.num_docs)))
            return [(h.docid, float(h.score)) for h in hits]

    def close(self) -> None:
        with self._lock:
            try:
                self._searcher.close()
            except Exception:
                pass


class BM25Retriever(StoredPassagesRetriever):
    """The :class:`~veracity.indexes.retriever.Retriever` over a BM25 index and its passage store: Lucene's
    ranking, the title filter applied by fetching deeper, texts from the store."""

    name = "bm25"

    def __init__(self, store, bm25_index: BM25Index):
        self.store = store
        self.index = bm25_index

    def ranked(self, query: str, k: int, keep: TitleFilter) -> list[tuple[str, float]]:
        """The top ``k`` ``(passage id, BM25 score)`` pairs whose titles ``keep`` lets through."""
        return filtered_top(lambda d: self._hits(query, d), self._title_of, k, keep, self.store.count)

    def _title_of(self, item: tuple[str, float]) -> str:
        """A ranked passage's title: from its id ``title#n``, or from the store for a corpus's own id
        (DPR's)."""
        pid = item[0]
        if "#" in pid:
            return split_passage_id(pid)[0]
        return (self.store.by_ids([pid]).get(pid) or ("", ""))[0]

    def _hits(self, query: str, depth: int) -> list[tuple[str, float]]:
        hits = self.index.search(query, depth)
        if getattr(self.index, "docids", "passage-id") != "dpr-row":  # stand-ins in tests have none
            return hits
        rows = self.store.by_rows([int(d) - 1 for d, _ in hits])
        return [(rows[int(d) - 1][0], score) for d, score in hits if int(d) - 1 in rows]


def _contents(raw: str) -> str:
    try:
        doc = json.loads(raw)
    except ValueError:
        return raw
    return str(doc.get("contents", raw)) if isinstance(doc, dict) else raw


def check_prebuilt(index: BM25Index, store, samples: int = 5) -> str:
    """Check that a prebuilt Lucene index holds the store's passages under ids we can map (see the module
    docstring); returns its id scheme. Raises IndexDirError in one line otherwise."""
    path = index.path
    if index.num_docs != store.count:
        raise IndexDirError(f"the prebuilt BM25 index {path} holds {index.num_docs:,} documents, the corpus "
                            f"{store.count:,} passages",
                            hint="build from the corpus the prebuilt index was made of "
                            "(wikipedia-dpr-100w: DPR's psgs_w100.tsv), or drop --bm25-prebuilt")
    n = store.count
    rows = sorted({0, n - 1, *(i * (n - 1) // max(1, samples - 1) for i in range(samples))})
    for row, (pid, _title, text) in sorted(store.by_rows(rows).items()):
        docid = str(row + 1) if index.docids == "dpr-row" else pid
        raw = index.raw(docid)
        words = " ".join(_WORD.findall(text)[:8])
        if raw is None or words not in " ".join(_WORD.findall(_contents(raw))):
            raise IndexDirError(f"the prebuilt BM25 index {path} does not match the corpus: document {docid} "
                                "is not "
                                f"passage {pid!r} ({words[:60]!r}...)",
                                hint="build from the same psgs_w100.tsv the index was made of, or drop "
                                     "--bm25-prebuilt")
    return index.docids
