"""Persisted state of the web app: batch jobs and the history of single checks (SQLite under
``$VERACITY_HOME/web``), and the worker that runs jobs one after another.

A job is a claims file uploaded once. Its folder is ``<home>/web/jobs/<job id>/`` with ``claims.jsonl``
(the upload as received) and ``results.jsonl`` (appended by the batch runner, one line per claim, with
its manifest beside it). The job id is made here (32 hex digits) and checked against that form before
any path is built from it, so no request can name a path. Running a job is
:meth:`~veracity.pipeline.api.Verifier.averify_many` with ``out=results.jsonl``: the same no-loss,
no-duplicate guarantee as ``veracity verify -i``. A job still ``queued`` or ``running`` when the app
stops is queued again when it starts, and resumes where its results file ends (ids already written are
skipped). A job stopped by the model endpoint is ``stopped`` and resumes on request
(``POST /v1/jobs/{id}/resume``) or at the next start.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import sqlite3
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from veracity.errors import DataError, EndpointError, OutputError, VeracityError

JOB_ID = re.compile(r"^[0-9a-f]{32}$")
CHECK_ID = re.compile(r"^[0-9a-f]{32}$")
ACTIVE = ("queued", "running")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id       TEXT PRIMARY KEY,
    created  REAL NOT NULL,
    method   TEXT NOT NULL,
    labels   TEXT NOT NULL,
    params   TEXT NOT NULL,         -- JSON object
    state    TEXT NOT NULL,         -- queued | running | done | stopped | error
    total    INTEGER NOT NULL,
    rejected TEXT NOT NULL,         -- JSON list of {line, reason}
    failed   TEXT NOT NULL DEFAULT '[]',  -- JSON list of {id, reason} of the last run
    error    TEXT,
    finished REAL,
    claims_per_min REAL
);
CREATE TABLE IF NOT EXISTS checks (
    id      TEXT PRIMARY KEY,
    created REAL NOT NULL,
    claim   TEXT NOT NULL,
    label   TEXT NOT NULL,
    method  TEXT NOT NULL,
    record  TEXT NOT NULL           -- the verdict JSON, as `veracity verify --json` prints it
);
"""


def new_id() -> str:
    return uuid.uuid4().hex


class Store:
    """The app's SQLite file (``<home>/web/web.sqlite``) and the jobs' folders. One connection, used
    under a lock (calls are short)."""

    def __init__(self, root: Path):
        self.root = Path(root)
        (self.root / "jobs").mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(self.root / "web.sqlite"), check_same_thread=False,
                                   isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(_SCHEMA)
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _q(self, sql: str, args: tuple = ()) -> list[sqlite3.Row]:
        with self._lock:
            cur = self._db.execute(sql, args)
            cur.row_factory = sqlite3.Row
            return cur.fetchall()

    # -- job folders (the id is ours and checked, never a user's path) --------------------------------
    def job_dir(self, job_id: str) -> Path:
        if not JOB_ID.match(job_id):
            raise ValueError(f"not a job id: {job_id!r}")
        return self.root / "jobs" / job_id

    def claims_path(self, job_id: str) -> Path:
        return self.job_dir(job_id) / "claims.jsonl"

    def results_path(self, job_id: str) -> Path:
        return self.job_dir(job_id) / "results.jsonl"

    # -- jobs ----------------------------------------------------------------------------------------
    def create_job(self, body: bytes, method: str, labels: str, params: dict[str, Any]) -> dict[str, Any]:
        """Save an upload as a new queued job; a file without a single claim is a DataError (nothing kept)."""
        from veracity.pipeline.claims import read_claims_jsonl

        job_id = new_id()
        folder = self.job_dir(job_id)
        folder.mkdir(parents=True)
        path = folder / "claims.jsonl"
        path.write_bytes(body)
        try:
            loaded = read_claims_jsonl(path)
        except DataError as exc:
            shutil.rmtree(folder, ignore_errors=True)
            raise DataError(str(exc).replace(str(path), "the uploaded file"), hint=exc.hint) from None
        rejected = [{"line": r.line, "reason": r.reason} for r in loaded.rejected]
        self._q("INSERT INTO jobs(id, created, method, labels, params, state, total, rejected) "
                "VALUES (?, ?, ?, ?, ?, 'queued', ?, ?)",
                (job_id, time.time(), method, labels, json.dumps(params), len(loaded.claims),
                 json.dumps(rejected)))
        return self.job(job_id)  # type: ignore[return-value]

    def job(self, job_id: str) -> dict[str, Any] | None:
        if not JOB_ID.match(job_id):
            return None
        rows = self._q("SELECT * FROM jobs WHERE id = ?", (job_id,))
        return _job_dict(rows[0]) if rows else None

    def jobs(self, limit: int = 50) -> list[dict[str, Any]]:
        return [_job_dict(r) for r in self._q("SELECT * FROM jobs ORDER BY created DESC LIMIT ?", (limit,))]

    def active_jobs(self) -> list[dict[str, Any]]:
        return [_job_dict(r) for r in self._q(
            "SELECT * FROM jobs WHERE state IN ('queued', 'running') ORDER BY created")]

    def count_active(self) -> int:
        return int(self._q("SELECT COUNT(*) AS n FROM jobs WHERE state IN ('queued', 'running')")[0]["n"])

    def set_state(self, job_id: str, state: str, **cols: Any) -> None:
        sets = ", ".join(["state = ?"] + [f"{k} = ?" for k in cols])
        assert all(k in ("failed", "error", "finished", "claims_per_min") for k in cols)
        self._q(f"UPDATE jobs SET {sets} WHERE id = ?", (state, *cols.values(), job_id))

    def results_written(self, job_id: str) -> int:
        """Complete result lines in the job's results file."""
        try:
            return self.results_path(job_id).read_bytes().count(b"\n")
        except OSError:
            return 0

    # -- checks (history of single claims) -------------------------------------------------------------
    def add_check(self, record: dict[str, Any]) -> str:
        check_id = new_id()
        self._q("INSERT INTO checks(id, created, claim, label, method, record) VALUES (?, ?, ?, ?, ?, ?)",
                (check_id, time.time(), record["claim"], record["label"], record["method"],
                 json.dumps(record, ensure_ascii=False, default=str)))
        return check_id

    def check(self, check_id: str) -> dict[str, Any] | None:
        if not CHECK_ID.match(check_id):
            return None
        rows = self._q("SELECT record FROM checks WHERE id = ?", (check_id,))
        return json.loads(rows[0]["record"]) if rows else None

    def checks(self, limit: int = 50) -> list[dict[str, Any]]:
        rows = self._q("SELECT id, created, claim, label, method FROM checks ORDER BY created DESC LIMIT ?",
                       (limit,))
        return [dict(r) for r in rows]


def _job_dict(row: sqlite3.Row) -> dict[str, Any]:
    d = dict(row)
    d["params"] = json.loads(d["params"])
    d["rejected"] = json.loads(d["rejected"])
    d["failed"] = json.loads(d["failed"])
    return d


@dataclass
class Progress:
    """A running job's live figures (this run only; earlier runs are in the results file)."""

    started: float = field(default_factory=time.perf_counter)
    done: int = 0

    def claims_per_min(self) -> float:
        elapsed = time.perf_counter() - self.started
        return 60.0 * self.done / elapsed if elapsed > 0 and self.done else 0.0


VerifierFor = Callable[[str, str, dict[str, Any]], Any]  # (method, labels, params) -> Verifier


class JobRunner:
    """Runs queued jobs one at a time on the app's event loop (each with the claims in flight of its
    Verifier's
    config: the app's run configuration)."""

    def __init__(self, store: Store, verifier_for: VerifierFor,
                 on_claim: Callable[[dict[str, Any] | None, float], None] | None = None):
        self.store = store
        self.verifier_for = verifier_for
        self.on_claim = on_claim  # metrics: (record or None for a failure, seconds)
        self.progress: dict[str, Progress] = {}
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        """Queue every job left queued or running by an earlier run of the app, then start the worker."""
        for job in self.store.active_jobs():
            self._queue.put_nowait(job["id"])
        self._task = asyncio.create_task(self._work())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
            self._task = None

    def submit(self, job_id: str) -> None:
        self._queue.put_nowait(job_id)

    async def _work(self) -> None:
        while True:
            job_id = await self._queue.get()
            job = self.store.job(job_id)
            if job is None or job["state"] not in ACTIVE:
                continue
            await self.run(job)

    async def run(self, job: dict[str, Any]) -> None:
        job_id = job["id"]
        self.store.set_state(job_id, "running", error=None)
        progress = self.progress[job_id] = Progress()
        last = [time.perf_counter()]

        def on_result(record: dict[str, Any]) -> None:
            progress.done += 1
            if self.on_claim is not None:
                now = time.perf_counter()
                self.on_claim(record, (record.get("trace") or {}).get("timings", {}).get("total_s",
                                                                                         now - last[0]))
                last[0] = now

        try:
            verifier = self.verifier_for(job["method"], job["labels"], job["params"])
            stats = await verifier.averify_many(self.store.claims_path(job_id),
                                                out=self.store.results_path(job_id),
                                                on_result=on_result)
        except asyncio.CancelledError:  # the app is stopping: the job stays running and resumes at start
            raise
        except (EndpointError, OutputError) as exc:
            self.store.set_state(job_id, "stopped", error=f"{exc} (resume: POST /v1/jobs/{job_id}/resume)",
                                 claims_per_min=progress.claims_per_min())
            return
        except VeracityError as exc:
            self.store.set_state(job_id, "error", error=str(exc), finished=time.time())
            return
        except Exception as exc:  # a bug must not stop the worker; the job says what happened
            self.store.set_state(job_id, "error", error=f"{type(exc).__name__}: {exc}", finished=time.time())
            return
        finally:
            self.progress.pop(job_id, None)
        failed = [{"id": cid, "reason": why} for cid, why in stats.failed]
        if self.on_claim is not None:
            for _ in failed:
                self.on_claim(None, 0.0)
        self.store.set_state(job_id, "done", failed=json.dumps(failed), finished=time.time(),
                             claims_per_min=round(stats.claims_per_min, 3))


def job_view(store: Store, runner: JobRunner | None, job: dict[str, Any]) -> dict[str, Any]:
    """What ``GET /v1/jobs/{id}`` answers: the job with its progress (done, failed, claims/min)."""
    live = runner.progress.get(job["id"]) if runner is not None else None
    done = store.results_written(job["id"])
    return {
        "id": job["id"], "state": job["state"], "method": job["method"], "labels": job["labels"],
        "params": job["params"], "created": job["created"], "finished": job["finished"],
        "total": job["total"], "done": done, "failed": len(job["failed"]), "failures": job["failed"],
        "rejected": job["rejected"], "error": job["error"],
        "claims_per_min": round(live.claims_per_min(), 3) if live is not None else job["claims_per_min"],
        "results": f"/v1/jobs/{job['id']}/results",
    }

