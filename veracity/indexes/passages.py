"""Passages: articles cut into ~100-word chunks with the title kept and stable ids ``title#n``."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from veracity.errors import ConfigError


@dataclass(frozen=True)
class Article:
    """One document from a corpus reader, before chunking. ``chunks``: passages the corpus already cut
    (DPR's 100-word passages), kept as they are instead of being cut again. ``cut``: the passage texts a
    dump parser process already cut with the build's chunking (``text`` is then empty: it is not sent
    between processes twice), and ``documents``: their BM25 JSON documents (:func:`bm25_document`),
    serialised there too, so the one writer process only stores and appends them."""

    title: str
    text: str
    chunks: tuple[str, ...] | None = None
    cut: tuple[str, ...] | None = None
    # the corpus's own ids of ``chunks`` (DPR's passage ids), kept as the passages' ids so results compare
    # with gold passage ids of the corpus (DPR, pyserini); None: ids are ``title#n``
    chunk_ids: tuple[str, ...] | None = None
    documents: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Passage:
    """A retrievable unit. ``id`` is ``title#n`` with n the 0-based chunk number in the article, or the
    corpus's own id (DPR's), then ``chunk`` holds n."""

    id: str
    title: str
    text: str
    chunk: int | None = field(default=None, compare=False)

    @property
    def n(self) -> int:
        return self.chunk if self.chunk is not None else int(self.id.rsplit("#", 1)[1])

    def indexed_text(self) -> str:
        """What BM25 and the encoder see: the title, then the passage text."""
        return f"{self.title}\n{self.text}"

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Chunking:
    """Passage size in words, words shared by consecutive passages, and the shortest tail kept on its own
    (a shorter last piece joins the previous passage)."""

    words: int = 100
    overlap: int = 0
    min_tail: int = 25

    def __post_init__(self):
        if self.words < 1:
            raise ConfigError(f"chunk size must be >= 1 word, got {self.words}",
                              hint="e.g. --chunk-words 100")
        if not 0 <= self.overlap < self.words:
            raise ConfigError(f"chunk overlap must be in [0, {self.words}), got {self.overlap}",
                              hint="e.g. --chunk-overlap 0")

    def to_dict(self) -> dict:
        return {"unit": "words", "words": self.words, "overlap": self.overlap, "min_tail": self.min_tail}


def passage_id(title: str, n: int) -> str:
    return f"{title}#{n}"


def split_passage_id(pid: str) -> tuple[str, int]:
    title, _, n = pid.rpartition("#")
    return title, int(n)


def bm25_document(passage: Passage) -> str:
    """The JSON document Lucene indexes and stores for a passage (``bm25/``, raw JSON ``{id, contents}``)."""
    return json.dumps({"id": passage.id, "contents": passage.indexed_text()})


def chunk_article(article: Article, chunking: Chunking = Chunking()) -> list[Passage]:
    """Cut one article into passages; deterministic, so ids are stable across builds (and the same whether
    a parser process cut them, ``article.cut``, or this call does)."""
    if article.cut is not None:
        return [Passage(passage_id(article.title, i), article.title, t) for i, t in enumerate(article.cut)]
    if article.chunks is not None:
        ids = article.chunk_ids
        return [Passage(ids[i] if ids else passage_id(article.title, i), article.title, " ".join(c.split()),
                        chunk=i)
                for i, c in enumerate(article.chunks)]
    words = article.text.split()
    if not words:
        return []
    step = chunking.words - chunking.overlap
    pieces: list[list[str]] = []
    start = 0
    while True:
        pieces.append(words[start:start + chunking.words])
        if start + chunking.words >= len(words):
            break
        start += step
    if len(pieces) > 1:
        tail_new = len(words) - (start + chunking.overlap) if start > 0 else len(pieces[-1])
        if tail_new < chunking.min_tail:  # a short last piece joins the previous passage
            last = pieces.pop()
            pieces[-1] = pieces[-1] + last[chunking.overlap:]
    return [Passage(passage_id(article.title, i), article.title, " ".join(p)) for i, p in enumerate(pieces)]

