"""Passage text store: ``passages.sqlite`` (table ``passages``) maps passage ids and FAISS row numbers to
title and text, and serves ``open_page``. Plain SQLite so any tool can open it::

    sqlite3 DIR/passages.sqlite "select id, text from passages where title = 'Paris' order by n"

Row ``idx`` (0-based) is the passage's row in the FAISS index and its line in ``dense/ids.txt``.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Iterable

from veracity.errors import IndexDirError
from veracity.indexes.passages import Passage

STORE_FILE = "passages.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS passages (
    idx   INTEGER PRIMARY KEY,   -- 0-based; FAISS row number
    id    TEXT NOT NULL UNIQUE,  -- "title#n"
    title TEXT NOT NULL,
    n     INTEGER NOT NULL,      -- chunk number within the article
    text  TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS passages_title ON passages(title, n);
"""


class PassageWriter:
    """Append-only writer used while building."""

    def __init__(self, path: Path):
        self.path = path
        self.conn = sqlite3.connect(path)
        self.conn.execute("PRAGMA journal_mode=OFF")
        self.conn.execute("PRAGMA synchronous=OFF")
        self.conn.executescript(_SCHEMA)
        self.count = self.conn.execute("SELECT COUNT(*) FROM passages").fetchone()[0]

    def has_title(self, title: str) -> bool:
        return self.conn.execute("SELECT 1 FROM passages WHERE title = ? LIMIT 1",
                                 (title,)).fetchone() is not None

    def add(self, passages: Iterable[Passage]) -> None:
        rows = []
        for p in passages:
            rows.append((self.count, p.id, p.title, p.n, p.text))
            self.count += 1
        self.conn.executemany("INSERT INTO passages(idx, id, title, n, text) VALUES (?, ?, ?, ?, ?)", rows)

    def commit(self) -> None:
        self.conn.commit()

    def close(self) -> None:
        self.conn.commit()
        self.conn.close()


class PassageStore:
    """Read-only lookups, safe from many threads (one connection per thread)."""

    def __init__(self, path: Path):
        if not path.exists():
            raise IndexDirError(f"passage store {path} is missing",
                                hint="rebuild the index with `veracity index build`")
        self.path = path
        self._local = threading.local()
        try:
            self.count = self._conn().execute("SELECT COUNT(*) FROM passages").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            raise IndexDirError(f"passage store {path} is corrupt ({exc})", hint="rebuild the index") from exc

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, check_same_thread=False)
            self._local.conn = conn
        return conn

    def by_ids(self, ids: list[str]) -> dict[str, tuple[str, str]]:
        """passage id -> (title, text)."""
        out: dict[str, tuple[str, str]] = {}
        for i in range(0, len(ids), 500):
            part = ids[i:i + 500]
            q = f"SELECT id, title, text FROM passages WHERE id IN ({','.join('?' * len(part))})"
            out.update({r[0]: (r[1], r[2]) for r in self._conn().execute(q, part)})
        return out

    def by_rows(self, rows: list[int]) -> dict[int, tuple[str, str, str]]:
        """FAISS row -> (passage id, title, text)."""
        out: dict[int, tuple[str, str, str]] = {}
        for i in range(0, len(rows), 500):
            part = [int(r) for r in rows[i:i + 500]]
            q = f"SELECT idx, id, title, text FROM passages WHERE idx IN ({','.join('?' * len(part))})"
            out.update({r[0]: (r[1], r[2], r[3]) for r in self._conn().execute(q, part)})
        return out

    def page(self, title: str) -> list[tuple[str, str, str]]:
        """(passage id, title, text) of an article's passages in order."""
        rows = self._conn().execute("SELECT id, title, text FROM passages WHERE title = ? ORDER BY n",
                                    (title,))
        return [tuple(r) for r in rows]

    def iter_rows(self, start: int, stop: int) -> list[tuple[int, str, str]]:
        """(idx, title, text) for rows start <= idx < stop."""
        rows = self._conn().execute("SELECT idx, title, text FROM passages WHERE idx >= ? AND idx < ? ORDER "
                                    "BY idx",
                                    (start, stop))
        return [tuple(r) for r in rows]

    def iter_ids(self, batch: int = 10000):
        last = -1
        while True:
            rows = self._conn().execute("SELECT idx, id FROM passages WHERE idx > ? ORDER BY idx LIMIT ?",
                                        (last, batch)).fetchall()
            if not rows:
                return
            for r in rows:
                yield r[1]
            last = rows[-1][0]

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
