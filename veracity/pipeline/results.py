"""Results out: the results file of a batch and its manifest, the same for every backend.

Output: JSONL, one object per claim in completion order, written as ONE ``write`` + flush + fsync
under a lock, so a killed run leaves whole lines only (a torn last line, if the OS leaves one, is
cut off on the next run). Each line is ``Verdict.to_dict(claim)``: id, claim, label, explanation,
method, evidence, and the claim's full ``trace`` (LLM calls, tool calls, memory hits, timings) in the
same line, so results and traces can never get out of step. :class:`ResultSink` is the one writer a
backend hands its results to: it writes a result once per claim id (an id already in the file, or one a
backend ran twice, is dropped), counts it into :class:`RunStats`, moves the progress bar and calls the
caller's ``on_result``.

Beside it, ``<out>.manifest.json`` (:func:`write_run_manifest`, the one manifest writer) records method,
parameters, label space, each role's token budget and effective temperature, the run's seed and the rule
that derives each request's seed from it (``roles.SEED_RULE``), the model and endpoint
(:class:`ServedModel`), index manifest, state directory and package version. A results file is resumed
only with the same method, parameters, label space and evidence setting (:func:`check_output`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from veracity.errors import ConfigError, DataError, OutputError, VeracityError
from veracity.pipeline.claims import RejectedLine
from veracity.pipeline.evidence import EVIDENCE_SETTINGS
from veracity.pipeline.labels import THREE_WAY, LabelSpace
from veracity.pipeline.labels import label_space as label_space_of
from veracity.pipeline.methods import MethodSpec
from veracity.pipeline.roles import SEED_RULE, role_settings_record


def read_done_ids(out_path: Path | str) -> set[str]:
    """Ids already written to ``out_path``. A torn final line (no newline, not JSON) is cut off."""
    path = Path(out_path)
    if not path.exists():
        return set()
    data = path.read_bytes()
    ids: set[str] = set()
    lines = data.split(b"\n")
    tail = lines.pop()  # b"" when the file ends with a newline
    for n, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw.decode("utf-8"))
            ids.add(str(obj["id"]))
        except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError):
            raise DataError(f"{path}:{n}: not a result line, so this file cannot be resumed",
                            hint="move the file aside or pass another -o") from None
    if tail.strip():
        try:
            obj = json.loads(tail.decode("utf-8"))
            ids.add(str(obj["id"]))
            with open(path, "ab") as f:  # complete object, only the newline is missing
                f.write(b"\n")
        except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError):
            with open(path, "r+b") as f:  # torn write of an interrupted run: drop it (that claim reruns)
                f.truncate(len(data) - len(tail))
    return ids


class ResultWriter:
    """Appends one JSON object per line: a single write, flush and fsync under a lock."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._f = open(self.path, "ab", buffering=0)
        self._lock = threading.Lock()

    def append(self, record: dict[str, Any]) -> None:
        line = (json.dumps(record, ensure_ascii=False, default=str) + "\n").encode("utf-8")
        with self._lock:
            view = memoryview(line)
            while view:
                n = self._f.write(view)
                view = view[n:]
            os.fsync(self._f.fileno())

    def close(self) -> None:
        with self._lock:
            self._f.close()


def claim_failure(exc: BaseException) -> str:
    """The one-line reason a claim failed (listed in ``RunStats.failed``; the claim is retried on a rerun):
    a VeracityError's message, else the exception's first 300 characters. Every backend reports it so."""
    if isinstance(exc, VeracityError):
        return f"{type(exc).__name__}: {exc}"
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"


@dataclass
class RunStats:
    out_path: Path
    total: int = 0  # claims in the input
    skipped: int = 0  # already in the output (resume)
    done: int = 0  # written by this run
    failed: list[tuple[str, str]] = field(default_factory=list)  # (claim id, one-line reason)
    rejected: list[RejectedLine] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    elapsed_s: float = 0.0
    stopped: str | None = None  # why the run stopped early (endpoint failure)
    results: list[dict[str, Any]] | None = None  # filled by Verifier.verify_many when no output file is given

    @property
    def claims_per_min(self) -> float:
        return 60.0 * self.done / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def tokens_per_s(self) -> float:
        return (self.prompt_tokens + self.completion_tokens) / self.elapsed_s if self.elapsed_s > 0 else 0.0


def check_output(out_path: Path | str, spec: MethodSpec, params: Any,
                 label_space: LabelSpace | str | None = None,
                 evidence: str | None = None) -> None:
    """Everything that can be wrong with a results file, checked before any server is contacted: its folder
    lies under a file, it cannot be written, it holds lines that are not results, or its manifest says it was
    written by another method, with other parameters, in another label space or with another evidence
    setting (resuming would mix them). Writes nothing (a torn last line of an interrupted run is repaired
    by :func:`read_done_ids` when the run starts)."""
    out_path = Path(out_path)
    if out_path.is_dir():
        raise DataError(f"output {out_path} is a directory", hint="pass a file path, e.g. -o results.jsonl")
    folder = out_path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise DataError(f"cannot write {out_path}: {folder} is a file, not a folder",
                        hint="pass an output path inside a folder")
    writable = os.access(out_path, os.W_OK) if out_path.exists() else os.access(folder, os.W_OK | os.X_OK)
    if writable and not out_path.exists() and folder == out_path.parent:
        try:  # access() says yes to root on read-only or virtual file systems: try it for real
            out_path.touch(exist_ok=False)
            out_path.unlink()
        except FileExistsError:
            pass
        except OSError:
            writable = False
    if not writable:
        raise DataError(f"cannot write {out_path}: permission denied or read-only file system",
                        hint="pass an output path in a folder you can write to")
    _check_manifest(out_path, spec, params, label_space_of(label_space), evidence or "open")
    if out_path.exists():
        _check_result_lines(out_path)


def _check_result_lines(path: Path) -> None:
    """Every complete line of an existing results file is a result (what :func:`read_done_ids` requires)."""
    lines = path.read_bytes().split(b"\n")
    lines.pop()  # the last piece is a torn line or b""; read_done_ids repairs it
    for n, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            str(json.loads(raw.decode("utf-8"))["id"])
        except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError):
            raise DataError(f"{path}:{n}: not a result line, so this file cannot be resumed",
                            hint="move the file aside or pass another -o") from None


def _params_dict(params: Any) -> dict[str, Any]:
    return dataclasses.asdict(params) if dataclasses.is_dataclass(params) else dict(vars(params))


def _check_manifest(out_path: Path, spec: MethodSpec, params: Any, space: LabelSpace, setting: str) -> None:
    """Refuse to resume a results file written by another method or with other settings."""
    path = out_path.with_name(out_path.name + ".manifest.json")
    if not path.exists():
        return
    try:
        old = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        old = {}
    if not isinstance(old, dict) or not old:
        return
    params_d = _params_dict(params)
    if old.get("method") != spec.name or old.get("params") != json.loads(json.dumps(params_d, default=str)):
        raise ConfigError(
            f"{out_path} holds results of method {old.get('method')} with other parameters; resuming would "
            "mix them",
            hint="pass another -o, or the same --method/--param as before",
        )
    if old.get("label_space", THREE_WAY.name) != space.name:
        raise ConfigError(
            f"{out_path} holds results in the {old.get('label_space', THREE_WAY.name)} label space; "
            f"resuming in the {space.name} space would mix them",
            hint=f"pass another -o (bench run: --out), or --labels {old.get('label_space', THREE_WAY.name)} "
                 "as before",
        )
    if old.get("evidence", "open") != setting:  # files from before evidence settings: open
        raise ConfigError(
            f"{out_path} holds results with --evidence {old.get('evidence', 'open')}; resuming with "
            f"--evidence {setting} would mix them",
            hint=f"pass another -o, or --evidence {old.get('evidence', 'open')} as before",
        )


class _Progress:
    """rich progress bar on stderr: claims done, claims/min, tokens/s, elapsed, ETA. When stderr is not a
    terminal (a log file, a pipe, a job runner) a bar draws nothing until the end, so one plain line per
    claim is written instead."""

    def __init__(self, total: int, name: str, stats: RunStats):
        import time

        from rich.console import Console
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                                   TimeRemainingColumn)

        self.stats = stats
        console = Console(stderr=True)
        self.lines = not console.is_terminal
        self.console, self.total, self.done, self.name, self.t0 = console, total, 0, name, time.monotonic()
        self.progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[rates]}"), TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(),
            console=console, transient=False,
        )
        self.task = self.progress.add_task(f"verify ({name})", total=total, rates="")

    def start(self) -> None:
        if self.lines:
            self.console.print(f"verify ({self.name}): {self.total} claims to verify", highlight=False,
                               markup=False)
        else:
            self.progress.start()

    def advance(self) -> None:
        import time

        s = self.stats
        rates = f"{s.claims_per_min:.1f} claims/min  {s.tokens_per_s:.0f} tok/s"
        self.done += 1
        if self.lines:
            self.console.print(f"verify ({self.name}): {self.done}/{self.total} claims  {rates}  "
                               f"{time.monotonic() - self.t0:.0f} s", highlight=False, markup=False)
            return
        self.progress.update(self.task, advance=1, rates=rates)

    def stop(self) -> None:
        if not self.lines:
            self.progress.stop()



@dataclass(frozen=True)
class ServedModel:
    """What a run records of its model: the model name, the endpoint, and the sampling settings every
    request starts from (the run's temperature and seed)."""

    model: str | None = None
    endpoint: str | None = None
    temperature: float | None = None
    seed: int | None = None

    @classmethod
    def of(cls, llm: Any) -> "ServedModel":
        """The record of an LLM client (or anything with its ``model`` / ``base_url`` / ``temperature`` /
        ``seed``)."""
        return cls(getattr(llm, "model", None), getattr(llm, "base_url", None), getattr(llm, "temperature",
                                                                                        None),
                   getattr(llm, "seed", None))


@dataclass(frozen=True)
class RunManifest:
    """THE record of a run: what verified the claims (method, parameters, label space, evidence setting, each
    role's budget and effective temperature, the seed and its rule, the state directory, the index) and on
    which model. :meth:`record` builds it, once for every caller: :meth:`write` puts it beside a results
    file as ``<out>.manifest.json`` (refusing to resume a file written by another method, other parameters,
    in another label space or with another evidence setting: :func:`check_output`, before the run); a
    ``bench run`` embeds the same record in
    its ``run.json``."""

    out_path: Path
    spec: MethodSpec
    params: Any
    searcher: Any
    state_dir: Path | str | None
    label_space: LabelSpace | str | None
    evidence: str | None  # ``open`` unless given; a custom per-claim retriever: the name the caller gives it
    # the verdicts' confidence settings for a served model: the calibration map applied (file, temperature,
    # the
    # split it was fitted on), the calibration setting and the abstention threshold (Engine.confidence_record)
    confidence_of: Callable[[str | None], dict[str, Any]] | None = None

    @classmethod
    def of(cls, engine: Any, out_path: Path | str) -> "RunManifest":
        """The manifest of a run of ``engine`` (:class:`~veracity.pipeline.engine.Engine`) into
        ``out_path``."""
        return cls(Path(out_path), engine.spec, engine.params, engine.searcher, engine.state_dir,
                   engine.label_space, engine.evidence, getattr(engine, "confidence_record", None))

    def record(self, served: Any) -> dict[str, Any]:
        """The run's record with the model it runs on (a :class:`ServedModel`, or an LLM client)."""
        from veracity import __version__

        if not isinstance(served, ServedModel):
            served = ServedModel.of(served)
        space = label_space_of(self.label_space)
        setting = self.evidence or "open"
        spec = self.spec
        return {
            "method": spec.name,
            "params": _params_dict(self.params),
            "label_space": space.name,
            "labels": list(space.values()),
            "evidence": setting,
            "evidence_meaning": EVIDENCE_SETTINGS.get(setting, "a per-claim retriever given by the caller"),
            "roles": role_settings_record(spec.roles, self.params, served),
            "state_dir": str(self.state_dir) if spec.state_cls is not None and self.state_dir is not None
                else None,
            "model": served.model,
            "endpoint": served.endpoint,
            "temperature": served.temperature,
            "seed": served.seed,
            "seed_rule": SEED_RULE,
            "index": getattr(self.searcher, "manifest", None),
            "index_dir": str(getattr(self.searcher, "index_dir", "")) or None,
            "veracity_version": __version__,
            "started_at": time.time(),
            **({"confidence": self.confidence_of(served.model)} if self.confidence_of is not None else {}),
        }

    def write(self, served: Any) -> None:
        """``<out>.manifest.json`` (the resume check against the one already there was made before the run,
        by :func:`check_output`)."""
        path = self.out_path.with_name(self.out_path.name + ".manifest.json")
        path.write_text(json.dumps(self.record(served), indent=2, default=str))


class ResultSink:
    """Where a backend puts what it verified: :meth:`accept` writes a result line once per claim id (the
    file's :class:`ResultWriter`: one write + fsync per line), counts it into ``stats``, advances the
    progress bar and calls ``on_result``; :meth:`reject` lists a claim that failed. Ids already in the file
    (``done_ids``, from :func:`read_done_ids`) and results a backend delivers twice (a task Ray re-ran
    after a worker died) are dropped, so a duplicate can never be written."""

    def __init__(self, path: Path | str, stats: RunStats, done_ids: Iterable[str] = (), *, bar: Any = None,
                 on_result: Callable[[dict[str, Any]], None] | None = None,
                 manifest: RunManifest | None = None):
        self.manifest = manifest
        self.path = Path(path)
        self.writer: ResultWriter | None = None  # opened with the run: a run that never starts writes nothing
        self.stats = stats
        self.ids: set[str] = {str(i) for i in done_ids}
        self.bar = bar
        self.on_result = on_result
        self.opened = False
        self.t0 = time.perf_counter()

    def open(self, served: ServedModel) -> None:
        """Before the first result: the run manifest, with the model the backend runs on (none is written
        for a run without a results file of the caller's)."""
        self.writer = ResultWriter(self.path)  # creates the folders of the results file (mkdir -p)
        if self.manifest is not None:
            self.manifest.write(served)
        self.opened = True
        self.t0 = time.perf_counter()
        if self.bar is not None:  # the bar appears once the run is under way (not before Ray has started)
            self.bar.start()

    def accept(self, record: dict[str, Any]) -> bool:
        """Write ``record`` unless its id is written already (False then). A write that fails (disk full, file
        size limit) is an :class:`OutputError`; a torn line it leaves is cut on resume."""
        cid = str(record["id"])
        if cid in self.ids:
            return False
        if self.writer is None:
            self.writer = ResultWriter(self.path)
        try:
            self.writer.append(record)
        except OSError as exc:
            raise OutputError(f"cannot write results to {self.path}: {exc.strerror or exc}",
                              hint="free space or fix the folder, then run the same command again to "
                                   "resume") from None
        self.ids.add(cid)
        summary = (record.get("trace") or {}).get("summary") or {}
        self.stats.done += 1
        self.stats.prompt_tokens += int(summary.get("prompt_tokens", 0))
        self.stats.completion_tokens += int(summary.get("completion_tokens", 0))
        self.stats.elapsed_s = time.perf_counter() - self.t0
        if self.bar is not None:
            self.bar.advance()
        if self.on_result is not None:
            self.on_result(record)
        return True

    def reject(self, claim_id: str, reason: str) -> None:
        """A claim that failed (listed in ``stats.failed``, not written: a rerun retries it); a claim already
        written (a re-run task) is no failure."""
        if str(claim_id) not in self.ids:
            self.stats.failed.append((str(claim_id), reason))

    def close(self) -> None:
        if self.writer is None:
            return
        try:
            self.writer.close()
        except OSError:  # the failed write was already reported
            pass


__all__ = ["ResultSink", "ResultWriter", "RunManifest", "RunStats", "ServedModel", "check_output",
           "claim_failure",
           "read_done_ids"]
