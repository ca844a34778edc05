"""Build an index directory from one or more corpus sources.

Layout of ``DIR``::

    manifest.json        what was built from what, how (written last)
    passages.sqlite      passage id / FAISS row -> title, text (open_page, hit text)
    bm25/                Lucene index (pyserini / Anserini), unless --no-bm25
    dense/index.faiss    FAISS index over normalized embeddings, unless --no-dense
    dense/ids.txt        passage id of FAISS row i on line i

The build runs in ``.DIR.building`` next to ``DIR`` and is renamed into place at the end, so nothing
half-written looks like an index. Stages: read + chunk + store + BM25 (restarted when interrupted),
then embedding in shards (resumed where it stopped: run the same command again), then FAISS.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import hashlib
import json
import re
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from veracity.errors import ConfigError, CorpusError, IndexDirError
from veracity.indexes.ann import AUTO, check_factory, resolve_factory
from veracity.indexes.embedding import (acquire, claim_is_stale, claim_owner, embed_claimed_shards,
                                        embed_on_devices, embed_with_ray, plan_workers, release)
from veracity.indexes.dense import (DEFAULT_FACTORY, FAISS_FILE, IDS_FILE, build_faiss, estimate_resources,
                                    write_ids)
from veracity.models.encoders import DEFAULT_ENCODER, canonical_encoder, load_encoder
from veracity.indexes.manifest import (MANIFEST_FILE, MANIFEST_KIND, MANIFEST_VERSION, index_dump_date,
                                       package_versions, write_manifest)
from veracity.indexes.passages import Chunking, bm25_document, chunk_article
from veracity.indexes.plan import check_fits, detect_hardware, expected_passages, format_plan, make_plan
from veracity.indexes.parallel import DumpPlan, check_dump, check_workers, default_workers
from veracity.indexes.readers import CLEANERS, FORMATS, ON_ERROR, SourceInfo
from veracity.indexes.sources import detect_format, read_articles, sha256_file, source_mtime, source_size
from veracity.indexes.store import STORE_FILE, PassageStore, PassageWriter

STATE_FILE = "build-state.json"
READING_CLAIM = "reading.claim"   # held by the one process running stage 1
FAISS_CLAIM = "faiss.claim"       # held by the one process assembling the FAISS index
BACKENDS = ("local", "ray")
# a dimension most PQ / SQ / OPQ sizes divide: checks a factory string before the encoder loads
PARSE_DIM = 3840
SHARDS_DIR = "dense-shards"

Progress = Callable[[str, int, "int | None"], None]  # (stage, done, total)


@dataclass(frozen=True)
class Source:
    path: Path
    format: str


@dataclass
class BuildOptions:
    bm25: bool = True
    dense: bool = True
    encoder: str = DEFAULT_ENCODER
    faiss_factory: str = DEFAULT_FACTORY
    chunking: Chunking = field(default_factory=Chunking)
    limit: int | None = None          # at most this many passages in all
    on_error: str = "raise"           # "skip": bad JSONL lines are skipped and counted
    dump_date: str | None = None      # for sources whose format carries no date (JSONL, HoVer, FEVER)
    overwrite: bool = False
    shard_size: int = 4096
    batch_size: int | None = None     # None: 64 on CPU, sized to the device's memory on a GPU
    workers_per_device: int | None = None  # GPU embedding workers per device (None: up to 4, as the cores go)
    backend: str = "local"            # embedding: local (processes on this machine) | ray (Ray Data actors)
    ray_address: str | None = None    # --backend ray: a cluster's address (None: start a local instance)
    bm25_threads: int = field(default_factory=default_workers)  # Lucene indexing threads
    workers: int = field(default_factory=default_workers)       # dump parser processes (stage 1)
    cleaner: str = "fast"                                       # wikitext -> plain: fast | mwparser
    multistream_index: Path | None = None                       # else found beside a *-multistream dump
    # a Lucene index to use instead of building one
    bm25_prebuilt: Path | None = None
    # take a passage's vector from a shipped seed file when it has one (veracity.indexes.seed; checked first)
    seed_vectors: bool = True

    def check(self) -> None:
        """Refuse options no build can use (one-line ConfigError), before any source is read."""
        check_workers(self.workers)
        if self.bm25_prebuilt is not None and not Path(self.bm25_prebuilt).is_dir():
            raise ConfigError(f"--bm25-prebuilt {self.bm25_prebuilt} is not a directory",
                              hint="pass the folder of a Lucene index (e.g. pyserini's wikipedia-dpr-100w, "
                                   "unpacked)")
        if self.bm25_prebuilt is not None and not self.bm25:
            raise ConfigError("--bm25-prebuilt and --no-bm25 contradict each other", hint="drop one of them")
        check_workers(self.bm25_threads, "--bm25-threads")
        if self.cleaner not in CLEANERS:
            raise ConfigError(f"unknown --cleaner {self.cleaner!r}", hint=f"one of {', '.join(CLEANERS)}")
        for flag, value, example in (("--batch-size", self.batch_size, 64), ("--shard-size", self.shard_size,
                                                                             4096),
                                     ("--limit", self.limit, 1000), ("--workers-per-device",
                                                                     self.workers_per_device, 2)):
            if flag in ("--batch-size", "--workers-per-device") and value is None:
                continue
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ConfigError(f"{flag} must be an integer of at least 1, got {value!r}",
                                  hint=f"e.g. {flag} {example}" if flag.startswith("--")
                                  else f"e.g. {example}")
        if self.on_error not in ON_ERROR:
            raise ConfigError(f"--on-error must be one of {', '.join(ON_ERROR)}, got {self.on_error!r}",
                              hint="raise stops at a bad line (file:line), skip counts it")
        if self.backend not in BACKENDS:
            raise ConfigError(f"unknown --backend {self.backend!r}", hint=f"one of {', '.join(BACKENDS)}")
        if self.backend == "ray" and self.dense:
            import importlib.util

            if importlib.util.find_spec("ray") is None:
                raise ConfigError("--backend ray needs Ray, which is not installed",
                                  hint="pip install 'veracity[ray]', or drop --backend ray")
        if not self.bm25 and not self.dense:
            raise ConfigError("--no-bm25 and --no-dense together leave nothing to build",
                              hint="drop one of them")
        _check_date(self.dump_date)
        if self.dense and self.faiss_factory.strip().lower() != AUTO:
            # a string FAISS rejects, before anything loads
            check_factory(self.faiss_factory, PARSE_DIM, None)

    def key(self) -> dict:
        """Options that change the result: a resumed build must have the same."""
        return {"bm25": self.bm25, "dense": self.dense,
                "encoder": canonical_encoder(self.encoder) if self.dense else None,
                "faiss_factory": self.faiss_factory if self.dense else None,
                "chunking": self.chunking.to_dict(),
                "limit": self.limit, "on_error": self.on_error, "dump_date": self.dump_date,
                "shard_size": self.shard_size, "cleaner": self.cleaner,
                "bm25_prebuilt": str(Path(self.bm25_prebuilt).resolve()) if self.bm25_prebuilt else None}


def resolve_sources(specs: Iterable[str | Path], fmt: str = "auto") -> list[Source]:
    """Paths (or the word ``demo``) -> sources with their format; ``fmt`` applies to every path."""
    if fmt not in FORMATS:
        raise ConfigError(f"unknown --format {fmt!r}", hint=f"one of {', '.join(FORMATS)}")
    out = []
    for spec in specs:
        if str(spec) == "demo":
            from veracity.indexes.demo import demo_archive

            out.append(Source(demo_archive(), "demo"))
            continue
        path = Path(spec).expanduser()
        if path.is_dir() and fmt in ("auto", "hotpot-abstracts"):
            out.append(Source(path.resolve(), detect_format(path) if fmt == "auto" else fmt))
            continue
        if not path.is_file():
            raise CorpusError(f"corpus source {path} does not exist or is not a file",
                              hint="pass a Wikipedia dump (*.xml.bz2), a JSONL file, or `demo`")
        out.append(Source(path.resolve(), detect_format(path) if fmt == "auto" else fmt))
    if not out:
        raise ConfigError("no corpus source given", hint="e.g. veracity index build demo --out DIR")
    return out


def check_first_records(sources: list[Source], on_error: str = "raise") -> None:
    """Read the first record of every JSONL-family source (JSONL, HoVer, FEVER): a file that is not
    JSON, or an empty one, is one CorpusError naming file:line before anything is loaded or written.
    With ``on_error="skip"`` bad lines are the build's to skip and count, so only emptiness is checked."""
    for source in sources:
        if source.format not in ("jsonl", "hover", "fever", "dpr-tsv", "kilt", "hotpot-abstracts"):
            continue
        info = SourceInfo(str(source.path), source.format)
        articles = read_articles(source.path, source.format, info, on_error=on_error)
        try:
            first = next(articles, None)
        finally:
            articles.close()
        if first is None and len(sources) == 1:
            skipped = ", ".join(f"{k} {v}" for k, v in info.skipped.items()) or "none"
            raise CorpusError(f"the corpus is empty: {source.path} holds no usable record (skipped: "
                              f"{skipped})",
                              hint="check the file and --format (JSONL: one {title, text} object per line)")


def check_dumps(sources: list[Source], multistream_index: Path | None = None) -> dict[Path, DumpPlan]:
    """Check every Wikipedia dump cheaply before anything slow (truncated bz2, not MediaWiki, a multistream
    index that does not match): the plan to read each, by path."""
    dumps = [s for s in sources if s.format == "wiki-xml"]
    if multistream_index is not None and len(dumps) != 1:
        raise ConfigError("--multistream-index needs exactly one Wikipedia dump among the sources, got "
                          f"{len(dumps)}",
                          hint="build one dump at a time, or drop --multistream-index")
    return {s.path: check_dump(s.path, multistream_index) for s in dumps}


def _check_date(value: str | None) -> None:
    if value is None:
        return
    try:
        _dt.date.fromisoformat(value)
    except ValueError:
        raise ConfigError(f"--dump-date must be YYYY-MM-DD, got {value!r}",
                          hint="e.g. --dump-date 2017-10-01") from None


def _prepare_out(out: Path, overwrite: bool) -> None:
    """Refuse an ``--out`` that a build may not replace, before anything is read or written.

    ``--overwrite`` replaces only a folder this project can prove it wrote: an index whose ``manifest.json``
    says ``kind: veracity-index`` with a ``format_version`` we know (a ``build-state.json`` in it proves
    nothing); the ``.NAME.building`` folder beside it is removed only when it holds our build state and
    nothing else a build does not write. Any other non-empty folder is refused and left as it is."""
    if out.exists() and not out.is_dir():
        raise IndexDirError(f"output {out} exists and is not a directory", hint="pick another --out")
    if out.is_dir() and any(out.iterdir()):
        if not overwrite:
            raise IndexDirError(f"output directory {out} already exists",
                                hint="pass --overwrite to replace it, "
                                "or pick another --out")
        why = _not_ours(out)
        if why:
            raise IndexDirError(f"{out} is not an index veracity built ({why}): refusing to overwrite it",
                                hint="pick another --out (--overwrite replaces only an index veracity built)")
    work = build_dir_for(out)
    why = _not_our_work(work) if work.is_dir() and any(work.iterdir()) else None
    if why:
        raise IndexDirError(f"{work} exists and is not a partial build of veracity's ({why}): refusing to "
                            "remove it",
                            hint="move it away, or pick another --out")


# what a build writes in its ``.NAME.building`` folder (see build_index): nothing else may be in one we remove
_WORK_ENTRY = re.compile(r"(build-state\.json|build-state\.\d+\.tmp|(reading|faiss)\.claim"
                         r"|\.(reading|faiss)\.claim\.[0-9a-f]{32}\.tmp|passages\.sqlite(-wal|-shm|-journal)?"
                         r"|bm25|dense|dense-shards|manifest\.json)")
_KEY = re.compile(r"[0-9a-f]{64}")  # a build's key: sha256 of its sources and options


def _not_ours(folder: Path) -> str | None:
    """Why ``folder`` (an ``--out``) is not an index veracity built (None: it is one). Only a manifest proves
    it: ``kind: veracity-index`` with a ``format_version`` this veracity knows. A ``build-state.json`` in it
    proves nothing (a build writes that file in its ``.NAME.building`` folder, never in the index)."""
    path = folder / MANIFEST_FILE
    if not path.is_file():
        return f"no {MANIFEST_FILE}"
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, OSError):
        return f"its {MANIFEST_FILE} is not readable JSON"
    if not isinstance(manifest, dict) or manifest.get("kind") != MANIFEST_KIND:
        return f"its {MANIFEST_FILE} is not a veracity index manifest"
    version = manifest.get("format_version")
    if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version <= MANIFEST_VERSION:
        return (f"its {MANIFEST_FILE} has format_version {version!r}, "
                f"this veracity knows 1 to {MANIFEST_VERSION}")
    return None


def _not_our_work(work: Path) -> str | None:
    """Why ``work`` (the ``.NAME.building`` folder beside an ``--out``) is not a half-built index of ours
    (None: it is one): it must hold our ``build-state.json`` (a JSON object whose ``key`` is a build key) and
    nothing a build does not write there."""
    try:
        state = json.loads((work / STATE_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return f"no {STATE_FILE}"
    except (ValueError, OSError):
        return f"its {STATE_FILE} is not readable JSON"
    if not isinstance(state, dict) or not isinstance(state.get("key"),
                                                     str) or not _KEY.fullmatch(state["key"]):
        return f"its {STATE_FILE} is not a veracity build state"
    strangers = sorted(p.name for p in work.iterdir() if not _WORK_ENTRY.fullmatch(p.name))
    if strangers:
        return (f"it holds {', '.join(strangers[:3])}{' ...' if len(strangers) > 3 else ''}, "
                "which a build does not write")
    return None


def _source_fingerprint(sources: list[Source]) -> list[dict]:
    out = []
    for s in sources:
        out.append({"path": str(s.path), "format": s.format, "bytes": source_size(s.path),
                    "mtime": source_mtime(s.path)})
    return out


@dataclass
class BuildState:
    """What a partial build keeps in ``build-state.json`` so an interrupted build resumes (several processes
    may share one build, so it is written atomically). ``key`` ties it to the sources and options; the
    other fields are filled as the stages finish."""

    key: str
    started: str = field(
        default_factory=lambda: _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))
    timings: dict[str, float | None] = field(default_factory=dict)
    sources: list[dict] | None = None  # each source's record (hash first, counters after stage 1)
    passages_done: bool = False  # stage 1 (read, chunk, store, BM25) is finished
    n_passages: int | None = None
    bm25_docids: str | None = None  # a prebuilt BM25 half: how its ids map to the store's
    estimate: dict | None = None

    @classmethod
    def load(cls, path: Path) -> "BuildState | None":
        """The state at ``path`` (None: absent or unreadable)."""
        try:
            raw = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(raw, dict) or "key" not in raw:
            return None
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in raw.items() if k in known})

    def save(self, path: Path) -> None:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")  # several processes may share one build
        tmp.write_text(json.dumps({k: v for k, v in dataclasses.asdict(self).items() if v is not None},
                                  indent=2))
        tmp.replace(path)


def build_dir_for(out: Path) -> Path:
    return out.parent / f".{out.name}.building"


def build_index(sources: list[Source], out: Path | str, options: BuildOptions | None = None, *,
                progress: Progress | None = None, log: Callable[[str], None] | None = None,
                on_shard: Callable[[int], None] | None = None, plan_only: bool = False) -> dict:
    """Build the index; returns its manifest. Raises typed errors; an interrupted build resumes.
    ``plan_only``: check everything, log the plan and return ``{"plan": ...}`` without writing anything."""
    options = options or BuildOptions()
    out = Path(out).expanduser().resolve()
    progress = progress or (lambda stage, done, total: None)
    log = log or (lambda msg: None)
    options.check()
    _prepare_out(out, options.overwrite)
    check_first_records(sources, options.on_error)  # a bad JSONL file fails before the encoder loads
    plans = check_dumps(sources, options.multistream_index)  # a truncated or mismatched dump, likewise
    if options.bm25_prebuilt is not None:  # a folder that is no Lucene index fails here, not after stage 1
        from veracity.indexes.bm25 import BM25Index

        prebuilt = Path(options.bm25_prebuilt).resolve()
        try:
            BM25Index(prebuilt).close()
        except IndexDirError as exc:
            raise IndexDirError(f"--bm25-prebuilt {prebuilt} is not a Lucene index that can be opened"
                                f"{' (' + exc.detail + ')' if getattr(exc, 'detail', '') else ''}",
                                hint="pass the folder of a Lucene index built from this corpus (e.g. "
                                     "pyserini's "
                                     "wikipedia-dpr-100w for psgs_w100.tsv), or drop --bm25-prebuilt to "
                                     "build "
                                     "BM25 from the corpus") from None
    expected, how = expected_passages(sources, options)  # the start of each source, read with the real reader
    if options.dense and options.faiss_factory.strip().lower() != AUTO:
        # a factory whose training sample cannot be had even from twice the expected passages: refused before
        # the encoder loads (the exact count is checked again after reading)
        check_factory(options.faiss_factory, PARSE_DIM, 2 * expected)
    encoder = load_encoder(options.encoder) if options.dense else None  # fail fast on a bad encoder
    if options.dense and options.faiss_factory.strip().lower() != AUTO:
        # e.g. PQ64 on a dimension 64 does not divide
        check_factory(options.faiss_factory, encoder.dimension, None)
    plan = make_plan(sources, options, encoder.dimension if encoder else 0, detect_hardware(out), expected,
                     how)
    for line in format_plan(plan):
        log(line)
    check_fits(plan)  # disk short, Flat larger than RAM: one line, before anything is written
    if plan_only:
        return {"plan": plan.to_dict()}

    work = build_dir_for(out)
    key = hashlib.sha256(json.dumps({"sources": _source_fingerprint(sources), "options": options.key()},
                                    sort_keys=True).encode()).hexdigest()
    state_path = work / STATE_FILE
    found: BuildState | None = None
    if state_path.exists():
        found = BuildState.load(state_path)
        if found is None or found.key != key:
            log(f"discarding a partial build of other sources/options in {work}")
            shutil.rmtree(work)
            found = None
        else:
            log(f"resuming the partial build in {work}")
    elif work.exists():
        # only a folder of ours is cleared (a stranger's stays)
        if any(work.iterdir()) and _not_our_work(work):
            raise IndexDirError(f"{work} exists and is not a partial build of veracity's: refusing to remove "
                                "it",
                                hint="move it away, or pick another --out")
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    state = found or BuildState(key)
    reading = None
    if not state.passages_done:  # stage 1 is one process's; others may join the embedding after it
        reading = acquire(work / READING_CLAIM)
        if reading is None:
            raise IndexDirError(f"another process ({claim_owner(work / READING_CLAIM) or 'unknown'}) is "
                                "reading the "
                                f"sources of this build in {work}",
                                hint="wait until it starts embedding, then run the same command again to "
                                     "help embed")

    def save_state() -> None:
        state.save(state_path)

    save_state()

    # -- hashes (once; kept across resumes)
    if state.sources is None:
        total = sum(source_size(s.path) for s in sources)
        done = 0
        infos = []
        for s in sources:
            def step(n: int) -> None:
                nonlocal done
                done += n
                progress("hash", done, total)
            info = SourceInfo(str(s.path), s.format, bytes=source_size(s.path))
            info.sha256 = sha256_file(s.path, step)
            infos.append(info.to_dict())
        state.sources = infos
        save_state()

    # -- stage 1: read, chunk, store, BM25 (one process; others may join the embedding once it is done)
    if not state.passages_done:
        t0 = time.perf_counter()
        try:
            state.sources = _read_into(work, sources, state.sources, options, progress, log, plans)
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)  # nothing in stage 1 is worth resuming
            raise
        release(reading)
        store_count = PassageStore(work / STORE_FILE).count
        dt = time.perf_counter() - t0
        state.timings["read_bm25_s"] = round(dt, 2)
        state.timings["read_bm25_passages_per_s"] = round(store_count / dt, 2) if dt > 0 else None
        state.n_passages = store_count
        if options.bm25_prebuilt is not None:
            try:
                state.bm25_docids = _check_prebuilt(Path(options.bm25_prebuilt).resolve(), work)
            except BaseException:
                shutil.rmtree(work, ignore_errors=True)  # a prebuilt index that does not fit: nothing is kept
                raise
        state.passages_done = True
        save_state()
    n = state.n_passages
    dim = encoder.dimension if encoder else 0
    est = estimate_resources(n, dim, options.faiss_factory, bm25=options.bm25, dense=options.dense)
    state.estimate = est
    save_state()
    log(f"estimate for {n} passages: " + format_estimate(est))
    # the exact count is known: a factory its training sample cannot serve stops before embedding
    if options.dense:
        check_factory(resolve_factory(options.faiss_factory, n), dim, n)

    # -- stage 2: dense
    dense_info = None
    if options.dense:
        store = PassageStore(work / STORE_FILE)
        shards = work / SHARDS_DIR
        t0 = time.perf_counter()
        from veracity.indexes.seed import SeededEncoder, seeds_for

        seeds = seeds_for(encoder.name, log=log) if options.seed_vectors else []
        seeded = SeededEncoder(encoder, seeds, log) if seeds else None
        embedded = _embed(work, store, n, seeded or encoder, options, progress, log, on_shard)
        dt = time.perf_counter() - t0
        if not state_path.exists():  # another process of this build finished it while this one waited
            store.close()
            return _wait_for_index(out, work / FAISS_CLAIM, log)
        if embedded:
            state.timings["embed_passages_per_s"] = round(embedded / dt, 2) if dt > 0 else None
            state.timings["embed_s"] = round((state.timings.get("embed_s") or 0) + dt, 2)
        save_state()
        faiss_claim = acquire(work / FAISS_CLAIM)
        if faiss_claim is None:  # another process of this build assembles the index: wait for it
            store.close()
            return _wait_for_index(out, work / FAISS_CLAIM, log)
        t0 = time.perf_counter()
        facts = build_faiss(shards, n, dim, options.faiss_factory, work / "dense" / FAISS_FILE,
                            shard_size=options.shard_size, progress=lambda d, t: progress("faiss", d, t),
                            recall_progress=lambda d, t: progress("recall", d, t))
        state.timings["faiss_s"] = round(time.perf_counter() - t0, 2)
        write_ids(store.iter_ids(), work / "dense" / IDS_FILE)
        store.close()
        dense_info = {"dir": "dense", "faiss_file": f"dense/{FAISS_FILE}", "ids_file": f"dense/{IDS_FILE}",
                      "encoder": encoder.name, "dimension": dim, "max_seq_length": encoder.max_seq_length,
                      "normalized": True, "similarity": "inner product of L2-normalized vectors (cosine)",
                      "shard_size": options.shard_size, **facts}
        if seeded is not None:  # how many vectors came from seed files, and their check
            dense_info["seed_vectors"] = seeded.facts()

    finished = _dt.datetime.now(_dt.timezone.utc)
    started = _dt.datetime.fromisoformat(state.started)
    manifest = {
        "kind": MANIFEST_KIND,
        "format_version": MANIFEST_VERSION,
        "sources": state.sources,
        "dump_date": None,
        "passages": n,
        "articles": sum(s["articles"] for s in state.sources or []),
        "chunking": options.chunking.to_dict(),
        "limit": options.limit,
        "passage_store": STORE_FILE,
        "bm25": {"dir": "bm25", "engine": "Lucene (pyserini/Anserini)",
                 "analyzer": "default English (Porter, stopwords)",
                 "stored": "raw JSON {id, contents}", "similarity": "BM25 k1=0.9 b=0.4",
                 **_prebuilt_info(options, state)} if options.bm25 else None,
        "dense": dense_info,
        "build": {"started": state.started, "finished": finished.isoformat(timespec="seconds"),
                  "seconds": round((finished - started).total_seconds(), 2), **state.timings},
        "estimate": est,
        "versions": package_versions(),
    }
    manifest["plan"] = {"passages": plan.passages, "how": plan.how, "faiss_factory": plan.factory,
                        "seconds": {st.name: round(st.seconds, 1) for st in plan.stages},
                        "disk_peak": plan.disk_peak, "hardware": plan.hardware.describe()}
    d = index_dump_date(manifest)
    manifest["dump_date"] = d.isoformat() if d else None
    if dense_info is not None:
        shutil.rmtree(work / SHARDS_DIR, ignore_errors=True)
    state_path.unlink(missing_ok=True)
    for claim in (work / FAISS_CLAIM, work / READING_CLAIM):
        claim.unlink(missing_ok=True)
    write_manifest(work, manifest)
    _move_into_place(work, out)
    return manifest


def _check_prebuilt(path: Path, work: Path) -> str:
    from veracity.indexes.bm25 import BM25Index, check_prebuilt

    index, store = BM25Index(path), PassageStore(work / STORE_FILE)
    try:
        return check_prebuilt(index, store)
    finally:
        index.close()
        store.close()


def _prebuilt_info(options: BuildOptions, state: BuildState) -> dict:
    """Manifest fields of a prebuilt BM25 half: where it is (used in place, not copied) and how its ids
    map."""
    if options.bm25_prebuilt is None:
        return {}
    return {"dir": str(Path(options.bm25_prebuilt).resolve()), "prebuilt": True, "docids": state.bm25_docids,
            "stored": "the prebuilt index's documents"}
def _embed(work: Path, store: PassageStore, n: int, encoder, options: BuildOptions, progress: Progress,
           log: Callable[[str], None], on_shard: Callable[[int], None] | None) -> int:
    """Stage 2: the shards, by this process (CPU, one GPU), one process per GPU, or Ray Data actors; then any
    shard other workers still hold is waited for, so on return every shard exists."""
    shards = work / SHARDS_DIR
    report = lambda d, t: progress("embed", d, t)  # noqa: E731
    embedded = 0
    if options.backend == "ray":
        import ray

        from veracity.indexes.java import jvm_signals_kept

        started = not ray.is_initialized()
        if started and options.ray_address is None:  # a local instance: no cloud metadata asked (offline.py)
            from veracity.config import default_home
            from veracity.offline import local_ray_start

            with local_ray_start(default_home()), jvm_signals_kept():
                ray.init(include_dashboard=False, log_to_driver=False)
        elif started:
            with jvm_signals_kept():
                ray.init(address=options.ray_address, include_dashboard=False, log_to_driver=False)
        try:
            res = ray.cluster_resources()
            log(f"embedding with Ray Data: {int(res.get('GPU', 0))} GPU(s), {int(res.get('CPU', 0))} CPU(s)")
            embedded = embed_with_ray(work / STORE_FILE, n, shards, encoder.name,
                                      shard_size=options.shard_size,
                                      batch_size=options.batch_size, progress=report)
        finally:
            if started:
                with jvm_signals_kept():
                    ray.shutdown()
    else:
        plans = plan_workers(options.batch_size, per_device=options.workers_per_device)
        if len(plans) > 1:
            devices = sorted({p.device for p in plans})
            log(f"embedding on {len(devices)} GPU(s), {len(plans) // len(devices)} worker(s) each: "
                + ", ".join(f"{d} (fp16, batch {next(p.batch_size for p in plans if p.device == d)})"
                            for d in devices))
            embedded = embed_on_devices(work / STORE_FILE, n, shards, encoder.name, plans,
                                        shard_size=options.shard_size, progress=report)
        else:
            plan = plans[0]
            embedded = embed_claimed_shards(store.iter_rows, n, shards, encoder,
                                            shard_size=options.shard_size,
                                            batch_size=plan.batch_size, progress=report, on_shard=on_shard,
                                            device=plan.device)
    return embedded + embed_claimed_shards(store.iter_rows, n, shards, encoder, shard_size=options.shard_size,
                                           batch_size=options.batch_size or 64, progress=report,
                                           on_shard=on_shard)


def _wait_for_index(out: Path, claim: Path, log: Callable[[str], None], poll: float = 2.0) -> dict:
    """This process helped embed; another one assembles the FAISS index. Wait for the finished index (or take
    over if that process dies: IndexDirError asking to run again)."""
    from veracity.indexes.manifest import read_manifest

    log(f"embedding done; {claim_owner(claim) or 'another process'} builds the FAISS index, waiting for it")
    while not (out / MANIFEST_FILE).exists():
        if claim.exists() and claim_is_stale(claim):
            raise IndexDirError("the process building the FAISS index stopped",
                                hint="run the same command again: it builds the index from the embedded "
                                     "shards")
        if not claim.parent.exists():  # renamed into place (or given up): the manifest tells which
            time.sleep(poll)
            if not (out / MANIFEST_FILE).exists():
                raise IndexDirError(f"the build folder {claim.parent} went away without an index at {out}",
                                    hint="run the same command again")
        time.sleep(poll)
    return read_manifest(out)


def _move_into_place(work: Path, out: Path) -> None:
    old = None
    if out.exists():
        old = out.parent / f".{out.name}.old-{os.getpid()}"
        out.rename(old)
    work.rename(out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _read_into(work: Path, sources: list[Source], infos: list[dict], options: BuildOptions,
               progress: Progress, log: Callable[[str], None], plans: dict[Path, DumpPlan] | None = None
               ) -> list[dict]:
    """Stage 1 from scratch: passages.sqlite + bm25/. Returns the source infos with counts filled. Dumps are
    parsed by ``options.workers`` processes; this process is the one writer, so ids follow source order."""
    if plans is None:
        plans = check_dumps(sources, options.multistream_index)
    for stale in (work / STORE_FILE, work / "bm25"):
        if stale.is_dir():
            shutil.rmtree(stale)
        elif stale.exists():
            stale.unlink()
    t0 = time.perf_counter()
    writer = PassageWriter(work / STORE_FILE)
    bm25 = None
    if options.bm25 and options.bm25_prebuilt is None:
        from veracity.indexes.bm25 import BM25Writer

        bm25 = BM25Writer(work / "bm25", threads=options.bm25_threads)
    out_infos = []
    limit = options.limit
    duplicates = 0
    try:
        for source, raw in zip(sources, infos, strict=True):
            info = SourceInfo(**raw)
            info.articles, info.skipped = 0, {}
            # dump parsers cut the passages and serialise their BM25 documents; this process stores them
            articles = read_articles(source.path, source.format, info, on_error=options.on_error,
                                     cleaner=options.cleaner, workers=options.workers,
                                     plan=plans.get(source.path),
                                     chunking=options.chunking, documents=bm25 is not None)
            with contextlib.closing(articles):  # stops the parser processes when --limit ends the read early
                for article in articles:
                    if limit is not None and writer.count >= limit:
                        break
                    if writer.has_title(article.title):
                        duplicates += 1
                        info.skip("duplicate title")
                        continue
                    passages = chunk_article(article, options.chunking)
                    if limit is not None:
                        passages = passages[:limit - writer.count]
                    writer.add(passages)
                    if bm25 is not None:
                        if article.documents is not None:
                            bm25.add_documents(article.documents[:len(passages)])
                        else:
                            bm25.add_documents([bm25_document(p) for p in passages])
                    if writer.count % 2000 < len(passages):
                        writer.commit()
                    progress("passages", writer.count, limit)
            if info.dump_date is None and options.dump_date:
                info.dump_date, info.dump_date_from = options.dump_date, "user"
            out_infos.append(info.to_dict())
    except BaseException:
        writer.close()
        if bm25 is not None:
            bm25.close(discard=True)  # the build folder is removed: no need to index what is queued
        raise
    writer.close()
    if bm25 is not None:
        bm25.close()
    if writer.count == 0:
        raise CorpusError("the corpus is empty: no passages were read from "
                          + ", ".join(str(s.path) for s in sources),
                          hint="check the file and --format (skipped: "
                               + (", ".join(f"{k} {v}" for i in out_infos for k,
                                            v in i["skipped"].items()) or "none")
                               + ")")
    dt = time.perf_counter() - t0
    progress("passages", writer.count, writer.count)
    log(f"read {writer.count} passages from {sum(i['articles'] for i in out_infos)} articles in {dt:.1f} s"
        + (f" ({duplicates} duplicate titles skipped)" if duplicates else ""))
    return out_infos


def format_estimate(est: dict) -> str:
    from veracity.indexes.dense import human_bytes

    parts = [f"disk {human_bytes(est['disk_total'])}"]
    if est.get("shards_disk_during_build"):
        parts.append(f"+ {human_bytes(est['shards_disk_during_build'])} of embedding shards while building")
    if est.get("dense_ram"):
        parts.append(f"RAM for the FAISS index {human_bytes(est['dense_ram'])} "
                     f"(peak while building {human_bytes(est['build_ram_peak'])})")
    return ", ".join(parts)
