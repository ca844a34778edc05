"""Run a method over many claims: bounded concurrency, atomic appends, resume, clear bad-input lines.

Input: JSONL, one object per line with ``claim`` (required), ``id`` (optional: default ``sha1(claim)[:12]``),
``date`` (optional); other keys are kept in ``Claim.meta``. A bad line (not UTF-8, not JSON, not an
object, no ``claim``, empty claim, claim over ``MAX_CLAIM_CHARS``) is reported as one ``file:line:
reason`` and skipped; the rest of the batch runs. Duplicate ids are an error for the whole file
(naming the lines), since it is ambiguous which claim a result would belong to.

Output: JSONL, one object per claim in completion order, written as ONE ``write`` + flush + fsync
under a lock, so a killed run leaves whole lines only (a torn last line, if the OS leaves one, is
cut off on the next run). Each line is ``Verdict.to_dict(claim)``: id, claim, label, explanation,
method, evidence, and the claim's full ``trace`` (LLM calls, tool calls, memory hits, timings) in the
same line, so results and traces can never get out of step. Beside it, ``<out>.manifest.json``
records method, parameters, label space, each role's token budget and effective temperature, the run's
seed and the rule that derives each request's seed from it (``roles.SEED_RULE``), model, endpoint, index
manifest, state directory and package version.

Label space (:mod:`veracity.pipeline.labels`): every claim of a run gets the run's ``label_space`` (3way
unless given) as ``ctx.label_space``; in ``binary`` no verdict is NOT_ENOUGH_INFO.

Evidence setting (:data:`EVIDENCE_SETTINGS`): what a claim's tools search. ``open`` (default): the run's
index (``searcher``). ``gold``: only the claim's own gold passages, ``Claim.meta["evidence"]`` (a list of
``{title, text}``; the benchmark readers attach it, a claims file may carry it), served by a
:class:`~veracity.indexes.gold.GoldRetriever` built for that claim. ``none``: closed book, a
:class:`~veracity.indexes.gold.NoEvidenceRetriever` (every search and page is empty, traced as
``evidence.none``). The engine only sees a per-claim retriever factory, ``retriever_for(claim) ->
Retriever`` (:func:`claim_retrievers` builds the one of a setting); it knows nothing of the methods. The
manifest records the setting, and a run is resumed only in the same one.

Run state: a method that keeps state across claims (``spec.state_cls``, e.g. MERMAID's evidence memory)
gets it opened once per run from a state directory and passed to every claim as ``ctx.state``; whoever
opens it closes it (:func:`run_claims` when given ``state_dir`` and no ``state``, else the caller). The
runner knows nothing else about it.

Resume: ids already in the output are skipped. If the model endpoint fails (``EndpointError``) or the
results cannot be written (``OutputError``: disk full, file size limit) the run stops at once, in-flight claims are dropped (not written), and the error is raised with the
run's statistics attached as ``err.stats``; rerunning the same command resumes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import os
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from veracity.errors import ConfigError, DataError, EndpointError, OutputError, VeracityError
from veracity.indexes.gold import GOLD_KEY, GoldRetriever, NoEvidenceRetriever
from veracity.indexes.retriever import Retriever
from veracity.pipeline.labels import THREE_WAY, LabelSpace
from veracity.pipeline.labels import label_space as label_space_of
from veracity.pipeline.methods import MethodContext, MethodSpec, get_method
from veracity.pipeline.roles import SEED_RULE, role_settings_record
from veracity.pipeline.tools import SourceIdentity, Tools
from veracity.pipeline.types import MAX_CLAIM_CHARS, Claim, Trace, Verdict
from veracity.serving.client import usage_scope
from veracity.serving.pool import affinity_scope


# -- input ------------------------------------------------------------------------------------
@dataclass
class RejectedLine:
    path: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.reason}"


def claim_problem(text: Any) -> str | None:
    """Why ``text`` cannot be verified, or None."""
    if not isinstance(text, str):
        return f"`claim` must be a string, not {type(text).__name__}"
    if not text.strip():
        return "empty claim"
    if len(text) > MAX_CLAIM_CHARS:
        return f"claim has {len(text):,} characters, over the limit of {MAX_CLAIM_CHARS:,}"
    return None


def default_claim_id(text: str) -> str:
    return hashlib.sha1(text.strip().encode("utf-8")).hexdigest()[:12]


def make_claim(text: str | Claim, id: str | None = None, date: str | None = None,
               meta: dict[str, Any] | None = None) -> Claim:
    """A validated Claim; DataError (one line) for an empty or over-long claim."""
    if isinstance(text, Claim):
        claim = text
    else:
        claim = Claim(id=id or "", text=text, date=date, meta=dict(meta or {}))
    problem = claim_problem(claim.text)
    if problem:
        raise DataError(f"cannot verify this claim: {problem}",
                        hint=f"pass a non-empty claim of at most {MAX_CLAIM_CHARS:,} characters")
    if not claim.id:
        claim.id = default_claim_id(claim.text)
    return claim


@dataclass
class ClaimsFile:
    claims: list[Claim]
    rejected: list[RejectedLine]


def read_claims_jsonl(path: Path | str) -> ClaimsFile:
    """Parse a claims file; bad lines are collected (file:line: reason), duplicate ids raise DataError."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise DataError(f"claims file {path} does not exist", hint="pass a JSONL file: one {\"claim\": ...} per line") from None
    except OSError as exc:
        raise DataError(f"cannot read claims file {path} ({exc.strerror})") from None
    claims: list[Claim] = []
    rejected: list[RejectedLine] = []
    first_line: dict[str, int] = {}
    dups: dict[str, list[int]] = {}
    for n, raw in enumerate(data.split(b"\n"), 1):
        if not raw.strip():
            continue
        try:
            line = raw.decode("utf-8")
            if n == 1:
                line = line.lstrip("\ufeff")  # a byte-order mark written by some editors
        except UnicodeDecodeError as exc:
            rejected.append(RejectedLine(str(path), n, f"not UTF-8 (byte 0x{raw[exc.start]:02x} at column {exc.start + 1})"))
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            rejected.append(RejectedLine(str(path), n, f"not JSON ({exc.msg} at column {exc.colno})"))
            continue
        if not isinstance(obj, dict):
            rejected.append(RejectedLine(str(path), n, f"not a JSON object (got {type(obj).__name__})"))
            continue
        if "claim" not in obj:
            rejected.append(RejectedLine(str(path), n, "no `claim` field"))
            continue
        problem = claim_problem(obj["claim"])
        if problem:
            rejected.append(RejectedLine(str(path), n, problem))
            continue
        raw_id = obj.get("id")
        if raw_id is not None and not isinstance(raw_id, (str, int)):
            rejected.append(RejectedLine(str(path), n, f"`id` must be a string or an integer, not {type(raw_id).__name__}"))
            continue
        cid = str(raw_id) if raw_id is not None and str(raw_id).strip() else default_claim_id(obj["claim"])
        if cid in first_line:
            dups.setdefault(cid, [first_line[cid]]).append(n)
            continue
        first_line[cid] = n
        date = obj.get("date")
        meta = {k: v for k, v in obj.items() if k not in ("id", "claim", "date")}
        claims.append(Claim(id=cid, text=obj["claim"], date=str(date) if date is not None else None, meta=meta))
    if dups:
        cid, lines = next(iter(dups.items()))
        more = f" (and {len(dups) - 1} more duplicated ids)" if len(dups) > 1 else ""
        raise DataError(
            f"{path}: duplicate id {cid!r} on lines {', '.join(map(str, lines))}{more}",
            hint="give every claim a unique `id` (claims without one get an id from their text)",
        )
    if not claims:  # nothing to run: say why before any index or server is touched
        if rejected:
            first = rejected[0]
            more = f" ({len(rejected)} bad lines)" if len(rejected) > 1 else ""
            raise DataError(f"no claims in {path}: line {first.line}: {first.reason}{more}",
                            hint="one JSON object per line, e.g. {\"id\": \"c1\", \"claim\": \"Paris is in France.\"}")
        raise DataError(f"no claims in {path}: the file is empty",
                        hint="one JSON object per line, e.g. {\"id\": \"c1\", \"claim\": \"Paris is in France.\"}")
    return ClaimsFile(claims, rejected)


# -- output -----------------------------------------------------------------------------------
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


# -- one claim --------------------------------------------------------------------------------
class _NoIndex:
    """Stands in for the retriever of methods that need none; using it is a clear error."""

    name = "no-index"

    def search(self, query: str, k: int = 10, *, exclude_titles: Iterable[str] = (),
               exclude_patterns: Iterable[str] = ()) -> list:
        raise ConfigError("this method needs an index", hint="pass --index DIR")

    def open_page(self, title: str) -> list:
        raise ConfigError("this method needs an index", hint="pass --index DIR")


def retriever_of(searcher: Any, search_mode: str | None = None) -> Any:
    """What a claim's tools search: the index's retriever for ``search_mode`` (None: hybrid when the index
    has both parts, else the one it has); an object without ``retriever`` (a test stand-in) is one itself."""
    if searcher is None:
        return _NoIndex()
    return searcher.retriever(search_mode) if hasattr(searcher, "retriever") else searcher


# -- evidence settings ---------------------------------------------------------------------------
EVIDENCE_SETTINGS: dict[str, str] = {
    "open": "open book: search and open_page read the run's index",
    "gold": "gold evidence: search ranks only the claim's gold passages, open_page opens them by title",
    "none": "closed book: search and open_page return nothing (traced as evidence.none)",
}
GOLD_HINT = ('give every claim an "evidence" list of {"title": ..., "text": ...} passages, or use '
             '--evidence open (an index) or --evidence none (closed book)')
ClaimRetrievers = Callable[[Claim], Retriever]


def evidence_setting(value: str | None) -> str:
    """``open`` / ``gold`` / ``none`` (None: open); anything else is a one-line ConfigError."""
    if value is None:
        return "open"
    key = str(value).strip().lower()
    key = {"closed": "none", "closed-book": "none", "open-book": "open"}.get(key, key)
    if key not in EVIDENCE_SETTINGS:
        raise ConfigError(f"unknown evidence setting {value!r}",
                          hint="use --evidence open (the index), gold (each claim's gold evidence only) "
                               "or none (closed book)")
    return key


def gold_retriever(claim: Claim) -> GoldRetriever:
    """The retriever over ``claim``'s gold passages (``Claim.meta["evidence"]``); a claim without any is a
    one-line DataError."""
    items = claim.meta.get(GOLD_KEY)
    if not items:
        raise DataError(f"claim {claim.id} has no gold evidence (no {GOLD_KEY!r} passages)", hint=GOLD_HINT)
    return GoldRetriever(items, where=f"claim {claim.id}: {GOLD_KEY!r}")


_NO_EVIDENCE = NoEvidenceRetriever()


def claim_retrievers(evidence: str | None) -> ClaimRetrievers | None:
    """The per-claim retriever factory of an evidence setting: None for ``open`` (the index), the gold
    retriever of each claim for ``gold``, the closed book for ``none``."""
    setting = evidence_setting(evidence)
    if setting == "gold":
        return gold_retriever
    if setting == "none":
        return lambda claim: _NO_EVIDENCE
    return None


def check_gold_evidence(claims: Iterable[Claim]) -> None:
    """Every claim carries valid gold passages, else one DataError naming the first that does not (and how
    many more): checked before a gold run contacts any server."""
    bad: list[str] = []
    first = ""
    for claim in claims:
        try:
            gold_retriever(claim)
        except DataError as exc:
            if not bad:
                first = str(exc)
            bad.append(claim.id)
    if bad:
        more = f" (and {len(bad) - 1} more claims)" if len(bad) > 1 else ""
        raise DataError(f"--evidence gold: {first}{more}", hint=GOLD_HINT)


def index_namespace(searcher: Any) -> str:
    """A stable name for the index a searcher reads, passed to a method's run state (so state gathered
    on one index, such as MERMAID's memory, is not recalled on another)."""
    manifest = getattr(searcher, "manifest", None)
    if not isinstance(manifest, dict) or not manifest:
        return "default"
    # what fixes the passages and their ids (sources with their hashes, chunking, count), not build
    # times, versions or the dense encoder: a rebuild of the same corpus keeps its state
    identity = ("kind", "sources", "chunking", "passages", "limit", "dump_date")
    picked = {k: manifest[k] for k in identity if k in manifest}
    if not picked:
        picked = {k: v for k, v in manifest.items() if k not in ("build", "versions", "estimate", "created", "created_at")}
    blob = json.dumps(picked, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def open_run_state(spec: MethodSpec, params: Any, searcher: Any, state_dir: Path | str | None,
                   evidence: str | None = None) -> Any:
    """The run state of ``spec`` opened from ``state_dir`` for the index ``searcher`` reads (None when the
    method keeps none); with per-claim evidence (``gold`` / ``none``) its namespace is ``evidence-<setting>``,
    so state gathered from gold passages is never recalled in an open-book run. The caller closes it
    (``state.close()``)."""
    setting = evidence or "open"
    namespace = index_namespace(searcher) if setting == "open" else f"evidence-{setting}"
    return spec.open_state(state_dir, params, namespace)


def resolve_label_space(value: LabelSpace | str | None) -> LabelSpace:
    """The run's label space: a LabelSpace, its name (``3way`` / ``binary``), or None for 3way."""
    return label_space_of(value)


def resolve_params(spec: MethodSpec, params: Any) -> Any:
    if params is None or isinstance(params, dict):
        return spec.make_params(params or {})
    if isinstance(params, spec.params_cls):
        return params
    raise ConfigError(f"parameters of type {type(params).__name__} do not belong to method {spec.name}")


async def verify_one(claim: Claim, spec: MethodSpec, llm: Any, searcher: Any, params: Any, state: Any = None, *,
                     exclude_titles: Iterable[str] = (), search_mode: str | None = None,
                     label_space: LabelSpace | str | None = None,
                     retriever_for: ClaimRetrievers | None = None,
                     on_event: Callable[[dict[str, Any]], None] | None = None) -> Verdict:
    """Run ``spec`` on one claim; the verdict's trace holds every LLM call and tool call it made.

    ``state`` is the method's open run state (:func:`open_run_state`), required when the method keeps one.
    ``label_space`` (default 3way) is passed to the method as ``ctx.label_space``; a verdict outside it
    (a method path that still returned NOT_ENOUGH_INFO in the binary space) gets the binary rule
    (:meth:`LabelSpace.undecided`, traced). ``retriever_for`` (a per-claim retriever factory, e.g.
    :func:`claim_retrievers`) replaces the index's retriever: the claim's tools use
    ``retriever_for(claim)``. ``on_event`` hears each step as it happens (the trace's ``listener``: role
    calls started / finished, tool calls with their hits, method events)."""
    if state is None and spec.state_cls is not None:
        raise ConfigError(f"method {spec.name} keeps state across claims and was given none",
                          hint="open it with open_run_state(spec, params, searcher, state_dir) and pass state=")
    space = resolve_label_space(label_space)
    trace = Trace(listener=on_event)
    retriever = retriever_for(claim) if retriever_for is not None else retriever_of(searcher, search_mode)
    manifest = getattr(searcher, "manifest", None) if retriever_for is None else None
    tools = Tools(retriever, trace, exclude_titles=exclude_titles, source=SourceIdentity.of(retriever, manifest))
    ctx = MethodContext(llm=llm, tools=tools, trace=trace, params=params, state=state, label_space=space,
                        seed=getattr(llm, "seed", None), claim_id=claim.id)
    t0 = time.perf_counter()
    # affinity: with several endpoints, one claim's calls (prompts sharing prefixes) stay on one server
    with usage_scope() as sink, affinity_scope(claim.id):
        trace.llm_calls = sink  # filled as the method calls the model
        verdict = await spec.fn(claim, ctx)
    if verdict.label not in space:
        verdict.label = space.undecided(trace, f"the method returned {verdict.label.value}: {verdict.explanation}",
                                        path="runner")
    trace.llm_calls = list(sink)
    trace.timings["total_s"] = round(time.perf_counter() - t0, 4)
    trace.timings["llm_s"] = round(sum(getattr(c, "latency_s", 0.0) for c in trace.llm_calls), 4)
    trace.timings["tools_s"] = round(sum(t.latency_s for t in trace.tool_calls), 4)
    verdict.trace = trace
    verdict.method = verdict.method or spec.name
    return verdict


# -- many claims ------------------------------------------------------------------------------
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


def check_output(out_path: Path | str, spec: MethodSpec, params: Any, label_space: LabelSpace | str | None = None,
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
    _check_manifest(out_path, spec, params, resolve_label_space(label_space), evidence or "open")
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
            f"{out_path} holds results of method {old.get('method')} with other parameters; resuming would mix them",
            hint="pass another -o, or the same --method/--param as before",
        )
    if old.get("label_space", THREE_WAY.name) != space.name:
        raise ConfigError(
            f"{out_path} holds results in the {old.get('label_space', THREE_WAY.name)} label space; "
            f"resuming in the {space.name} space would mix them",
            hint=f"pass another -o, or --labels {old.get('label_space', THREE_WAY.name)} as before",
        )
    if old.get("evidence", "open") != setting:  # files from before evidence settings: open
        raise ConfigError(
            f"{out_path} holds results with --evidence {old.get('evidence', 'open')}; resuming with "
            f"--evidence {setting} would mix them",
            hint=f"pass another -o, or --evidence {old.get('evidence', 'open')} as before",
        )


def write_run_manifest(out_path: Path, spec: MethodSpec, params: Any, llm: Any, searcher: Any,
                       state_dir: Path | str | None = None, label_space: LabelSpace | str | None = None,
                       evidence: str | None = None) -> None:
    """``<out>.manifest.json``; refuses to resume a file written by another method, other parameters, in
    another label space or with another evidence setting (``evidence``: ``open`` unless given; a custom
    per-claim retriever is recorded by the name the caller gives it)."""
    from veracity import __version__

    path = out_path.with_name(out_path.name + ".manifest.json")
    space = resolve_label_space(label_space)
    setting = evidence or "open"
    params_d = _params_dict(params)
    _check_manifest(out_path, spec, params, space, setting)
    manifest = {
        "method": spec.name,
        "params": params_d,
        "label_space": space.name,
        "labels": list(space.values()),
        "evidence": setting,
        "evidence_meaning": EVIDENCE_SETTINGS.get(setting, "a per-claim retriever given by the caller"),
        "roles": role_settings_record(spec.roles, params, llm),
        "state_dir": str(state_dir) if spec.state_cls is not None and state_dir is not None else None,
        "model": getattr(llm, "model", None),
        "endpoint": getattr(llm, "base_url", None),
        "temperature": getattr(llm, "temperature", None),
        "seed": getattr(llm, "seed", None),
        "seed_rule": SEED_RULE,
        "index": getattr(searcher, "manifest", None),
        "index_dir": str(getattr(searcher, "index_dir", "")) or None,
        "veracity_version": __version__,
        "started_at": time.time(),
    }
    path.write_text(json.dumps(manifest, indent=2, default=str))


async def run_claims(
    claims: Iterable[Claim],
    method: str | MethodSpec,
    llm: Any,
    searcher: Any,
    out_path: Path | str,
    *,
    concurrency: int = 4,
    params: Any = None,
    state: Any = None,
    state_dir: Path | str | None = None,
    rejected: Iterable[RejectedLine] = (),
    progress: bool = False,
    exclude_titles: Iterable[str] = (),
    search_mode: str | None = None,
    on_result: Callable[[dict[str, Any]], None] | None = None,
    write_manifest: bool = True,
    label_space: LabelSpace | str | None = None,
    retriever_for: ClaimRetrievers | None = None,
    evidence: str | None = None,
) -> RunStats:
    """Verify ``claims`` with ``concurrency`` claims in flight; append each result to ``out_path``.

    A method that keeps run state gets ``state`` (opened and closed by the caller) or, without one, a
    state opened here from ``state_dir`` and closed when the run ends. Returns :class:`RunStats`.
    Claims whose method fails (e.g. the model's reply never validates) are listed in ``stats.failed``
    and not written, so a rerun retries them. An ``EndpointError`` (or an ``OutputError``: results cannot
    be written) stops the run; it is re-raised with ``err.stats`` set. ``label_space`` (default 3way) is every claim's ``ctx.label_space`` and is recorded in
    the manifest. ``retriever_for`` gives each claim its own retriever instead of the index's (then no index
    is needed); ``evidence`` names the setting in the manifest (default: ``open`` without ``retriever_for``,
    ``custom`` with one).
    """
    spec = get_method(method) if isinstance(method, str) else method
    params = resolve_params(spec, params)
    space = resolve_label_space(label_space)
    spec.check_label_space(params, space)
    setting = evidence or ("open" if retriever_for is None else "custom")
    claims = list(claims)
    if retriever_for is gold_retriever:  # every claim has its gold passages, before anything is written
        check_gold_evidence(claims)
    if spec.needs_index and searcher is None and retriever_for is None:
        raise ConfigError(f"method {spec.name} needs an index", hint="pass --index DIR (build one: veracity index build demo)")
    if concurrency < 1:
        raise ConfigError("concurrency must be at least 1")
    out_path = Path(out_path)
    check_output(out_path, spec, params, space, setting)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    stats = RunStats(out_path=out_path, total=len(claims), rejected=list(rejected))
    done_ids = read_done_ids(out_path)
    pending = deque(c for c in claims if c.id not in done_ids)
    stats.skipped = len(claims) - len(pending)
    if write_manifest:
        write_run_manifest(out_path, spec, params, llm, searcher, state_dir, space, setting)
    writer = ResultWriter(out_path)
    own_state = state is None and spec.state_cls is not None and bool(pending)
    if own_state:
        try:
            state = open_run_state(spec, params, searcher, state_dir, setting)
        except BaseException:
            writer.close()
            raise
    stop: list[EndpointError | OutputError] = []  # what ends the whole run (the others stop at their claim)
    tasks: list[asyncio.Task] = []
    outcomes: list = []
    t0 = time.perf_counter()
    bar = _Progress(len(pending), spec.name, stats) if progress and pending else None

    def halt(exc: EndpointError | OutputError) -> None:
        if not stop:
            stop.append(exc)
            me = asyncio.current_task()
            for t in tasks:
                if t is not me:
                    t.cancel()

    async def worker() -> None:
        while pending and not stop:
            claim = pending.popleft()
            try:
                verdict = await verify_one(claim, spec, llm, searcher, params, state,
                                           exclude_titles=exclude_titles, search_mode=search_mode,
                                           label_space=space, retriever_for=retriever_for)
            except EndpointError as exc:
                halt(exc)
                return
            except Exception as exc:  # a bug in one claim's run must not sink the batch
                stats.failed.append((claim.id, claim_failure(exc)))
                continue
            record = verdict.to_dict(claim)
            try:
                writer.append(record)
            except OSError as exc:  # disk full, file size limit, ...: stop; a torn line is cut on resume
                halt(OutputError(f"cannot write results to {out_path}: {exc.strerror or exc}",
                                 hint="free space or fix the folder, then run the same command again to resume"))
                return
            summary = verdict.trace.summary()
            stats.done += 1
            stats.prompt_tokens += summary["prompt_tokens"]
            stats.completion_tokens += summary["completion_tokens"]
            stats.elapsed_s = time.perf_counter() - t0
            if bar is not None:
                bar.advance()
            if on_result is not None:
                on_result(record)

    try:
        if bar is not None:
            bar.start()
        tasks.extend(asyncio.create_task(worker()) for _ in range(min(concurrency, len(pending))))
        outcomes = await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        for t in tasks:
            t.cancel()
        try:
            writer.close()
        except OSError:  # the failed write was already reported (stop)
            pass
        if own_state:  # the run state this call opened (e.g. the evidence memory's SQLite connection)
            state.close()
        stats.elapsed_s = time.perf_counter() - t0
        if bar is not None:
            bar.stop()
    if stop:
        err = stop[0]
        stats.stopped = str(err)
        err.stats = stats  # type: ignore[attr-defined]
        raise err
    for outcome in outcomes:  # e.g. an on_result callback that raised: surface it, results stay written
        if isinstance(outcome, BaseException) and not isinstance(outcome, asyncio.CancelledError):
            raise outcome
    return stats


class _Progress:
    """rich progress bar on stderr: claims done, claims/min, tokens/s, elapsed, ETA."""

    def __init__(self, total: int, name: str, stats: RunStats):
        from rich.console import Console
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                                   TimeRemainingColumn)

        self.stats = stats
        self.progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[rates]}"), TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(),
            console=Console(stderr=True), transient=False,
        )
        self.task = self.progress.add_task(f"verify ({name})", total=total, rates="")

    def start(self) -> None:
        self.progress.start()

    def advance(self) -> None:
        s = self.stats
        self.progress.update(self.task, advance=1,
                             rates=f"{s.claims_per_min:.1f} claims/min  {s.tokens_per_s:.0f} tok/s")

    def stop(self) -> None:
        self.progress.stop()
