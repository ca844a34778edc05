"""The plan printed before a build: expected passages, disk, RAM and time per stage for the hardware seen,
and the refusal of a build that cannot fit.

Passages are estimated by *reading the start of each source with the build's own reader and chunker* (up to
:data:`SAMPLE_BYTES` of decompressed text, cut at a page / line boundary) and scaling the passages found by
the share of the file that start is (compressed bytes for bz2, so no fixed compression ratio is assumed). A
source smaller than the sample is counted exactly. Times come from per-core rates measured on this project's
machines (:data:`STAGE1_US`, :data:`RATES`, with where each was measured); GPU embedding rates are
projections until measured.
"""

from __future__ import annotations

import bz2
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from veracity.errors import ConfigError
from veracity.indexes.ann import resolve_factory
from veracity.indexes.parallel import multistream_index_for

SAMPLE_BYTES = 8 * 2**20

# Stage 1 in CPU-microseconds per passage, by the thread that spends them (a thread cannot go faster than its
# own
# CPU time; all of them together share the cores). From the per-thread CPU accounting of
# `benchmarks/index_build.py stage1` (benchmarks/BENCHMARKS.md, "1 vs 2 workers", 2026-11-26: the 10x copy
# of the dump sample, 43,610 passages, with 1 and 2 workers): the reader thread's bz2 decompression 3.1-3.3
# CPU-s, the parser processes 4.32 CPU-s (clean, chunk, serialise the BM25 documents), the writer's main
# thread 0.58 CPU-s with 2 workers (SQLite), the rest of the writer process 5.6-7.0 CPU-s (Lucene's indexing
# threads in the JVM).
STAGE1_US = {
    # bz2: in the reader thread (one stream) or in the parsers (multistream with its index)
    "decompress": 73.0,
    "parse": {"wiki-xml": 99.0,
              # JSONL-family readers run in the writer's thread: the HoVer paragraphs' 7.43 CPU-s for 3,908
              # passages (`index build --no-dense --workers 1`, 2026-11-25) less the fixed cost, store and
              # Lucene
              "jsonl": 467.0},
    "store": 13.0,         # the writer's main thread: SQLite rows
    "lucene": 140.0,       # Lucene's analysis and indexing, spread over --bm25-threads
}

# passages per CPU-second (one core, nothing else running), measured (benchmarks/BENCHMARKS.md, "The index at
# full scale — embedding and ANN"); a busy machine is accounted for by the share of a core this build can
# expect
RATES = {
    # fixed CPU of stage 1: imports, starting the JVM, Lucene's commit (the dump sample's 6.55 CPU-s for 4,361
    # passages less 4,361 x the per-passage costs above, 2026-11-25); without BM25 no JVM starts
    "read_fixed_cpu_s": 5.0,
    "read_fixed_cpu_s_no_bm25": 1.0,
    # all-MiniLM-L6-v2 on CPU, 100-word passages: 27.4 passages/s on 2 idle cores (the demo build, issue 28)
    "embed_cpu_per_core": 13.7,
    "embed_fixed_cpu_s": 6.0,     # loading torch and the encoder
    # all-MiniLM-L6-v2 fp16 through embed_on_devices on one H200 (16 cores), 219,740 demo passages, each
    # worker's
    # start included: 1 / 2 / 4 workers on the device 2,929 / 4,881 / 6,654 passages/s
    # (benchmarks/gpu_embed.py,
    # 2026-11-26); the tokeniser on the CPU is the limit, so a smaller GPU is assumed to do the same
    "embed_per_gpu_by_workers": {1: 2929.0, 2: 4881.0, 3: 5770.0, 4: 6654.0},  # 3: interpolated
    # FAISS work (k-means training, assigning every vector to a list, the exact search of the recall check)
    # in multiply-adds per second per core: benchmarks/ann_bench.py speed (1M vectors), from its CPU time
    "faiss_flops_per_core": 20e9,
    "gpu_speedup_training": 50.0,  # PROJECTION: k-means on a GPU against one CPU core
}


def stage1_seconds(passages: int, *, fmt: str, workers: int, cores: int, bm25: bool, bm25_threads: int,
                   multistream: bool = False) -> float:
    """Stage 1's wall time on idle cores: the fixed cost, then per passage the largest of the busiest thread's
    CPU time (the writer's main thread, the reader thread, each parser, each Lucene thread) and all the CPU
    over the cores (:data:`STAGE1_US`)."""
    us = STAGE1_US
    dump = fmt == "wiki-xml"
    parse = us["parse"]["wiki-xml" if dump else "jsonl"]
    decompress = us["decompress"] if dump else 0.0
    lucene = us["lucene"] if bm25 else 0.0
    in_parsers = parse + (decompress if multistream else 0.0)
    reader = 0.0 if multistream else decompress
    parallel = dump and workers > 1
    main = us["store"] + (0.0 if parallel else in_parsers)
    busiest = max(main, reader, in_parsers / workers if parallel else 0.0, lucene / max(1, bm25_threads))
    total = us["store"] + in_parsers + reader + lucene
    fixed = RATES["read_fixed_cpu_s"] if bm25 else RATES["read_fixed_cpu_s_no_bm25"]
    return fixed + passages * max(busiest, total / max(1, cores)) / 1e6


def faiss_flops(n: int, dim: int, factory: str, recall_queries: int = 1000) -> tuple[float, float]:
    """Multiply-adds of the FAISS stage: 10 k-means iterations over the training sample (IVF), one
    assignment per vector (a flat coarse quantizer: every list; an HNSW one: ~1,000 distances), the recall
    check's exact search over every vector."""
    from veracity.indexes.ann import factory_facts

    if factory == "Flat" or not factory:
        return 0.0, 0.0
    facts = factory_facts(factory, dim)
    nlist = facts.nlist or 0
    train = min(n, facts.train_size) * nlist * dim * 10
    assign = n * dim * (1000 if "HNSW" in factory.split(",")[0] else max(nlist, 1))
    check = recall_queries * n * dim
    return float(train), float(assign + check)


@dataclass(frozen=True)
class Hardware:
    cores: int
    gpus: list[tuple[int, int]]   # (index, memory bytes)
    ram_available: int
    disk_free: int
    load: float = 0.0             # 1-minute load average when the plan was made

    @property
    def share(self) -> float:
        """The share of each core this build can expect: 1 on an idle machine, cores / load on a busy one."""
        return 1.0 if self.load <= self.cores else self.cores / self.load

    def describe(self) -> str:
        gpus = f"{len(self.gpus)} GPU(s)" if self.gpus else "no GPU"
        busy = f", busy: load {self.load:.0f}, times scaled by {1 / self.share:.1f}" if self.share < 1 else ""
        return (f"{self.cores} core(s), {gpus}, {self.ram_available / 2**30:.1f} GiB RAM available, "
                f"{self.disk_free / 2**30:.1f} GiB disk free{busy}")


def _ram_available() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def detect_hardware(out: Path) -> Hardware:
    from veracity.indexes.embedding import cuda_devices

    folder = Path(out).expanduser().resolve()
    while not folder.exists():
        folder = folder.parent
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    return Hardware(cores, cuda_devices(), _ram_available(), shutil.disk_usage(folder).free, load)


# ------------------------------------------------------------------------------------------ passages

def _count(path: Path, fmt: str, chunking) -> int:
    from veracity.indexes.passages import chunk_article
    from veracity.indexes.readers import SourceInfo
    from veracity.indexes.sources import read_articles

    n = 0
    articles = read_articles(path, fmt, SourceInfo(str(path), fmt), on_error="skip", workers=1)
    try:
        for art in articles:
            n += len(chunk_article(art, chunking))
    finally:
        articles.close()
    return n


def _bz2_prefix(path: Path, limit: int) -> tuple[bytes, int, bool]:
    """(decompressed start of ``path`` up to ``limit`` bytes, compressed bytes it came from, whole file read);
    multistream files are followed across streams."""
    out, used, chunk = bytearray(), 0, 1 << 18
    dec = bz2.BZ2Decompressor()
    with open(path, "rb") as f:
        while len(out) < limit:
            raw = f.read(chunk)
            if not raw:
                return bytes(out), used, True
            used += len(raw)
            while raw:
                out += dec.decompress(raw)
                raw = dec.unused_data if dec.eof else b""
                if dec.eof:
                    dec = bz2.BZ2Decompressor()
        # the decompressor holds undecoded input: credit only what the output came from, proportionally
        return bytes(out), used, False


def estimate_passages(path: Path, fmt: str, chunking) -> tuple[int, str]:
    """(expected passages of one source, how it was estimated)."""
    # a folder source (HotpotQA's abstracts, FEVER's wiki-pages): its first file, scaled by size
    if path.is_dir():
        from veracity.indexes.sources import source_files

        files = source_files(path)
        if not files:
            return 0, "a folder with no corpus files"
        total = sum(f.stat().st_size for f in files)
        if total <= SAMPLE_BYTES:
            return _count(path, fmt, chunking), f"counted ({len(files)} files read)"
        n, how = estimate_passages(files[0], fmt, chunking)
        if len(files) == 1:
            return n, how
        return (int(n * total / max(1, files[0].stat().st_size)),
                f"{len(files)} files: the first {how.split(' (')[0]}, scaled by the folder's size")
    size = path.stat().st_size
    if fmt == "wiki-xml" and path.suffix == ".bz2":
        text, used, whole = _bz2_prefix(path, SAMPLE_BYTES)
        if whole:
            return _count(path, fmt, chunking), "counted (whole file read)"
        cut = text.rfind(b"</page>")
        if cut < 0:
            return 0, "no complete page in the sample"
        head = text[:cut + len(b"</page>")] + b"\n</mediawiki>\n"
        share = used * (cut / len(text))
        return (_scaled(head, ".xml", fmt, chunking, size / max(1.0, share)),
                f"scaled from the first {SAMPLE_BYTES / 2**20:g} MiB")
    if fmt == "demo" or size <= SAMPLE_BYTES or path.suffix in (".bz2", ".gz"):
        return _count(path, fmt, chunking), "counted (whole file read)"
    with open(path, "rb") as f:
        head = f.read(SAMPLE_BYTES)
    head = head[:head.rfind(b"\n") + 1]
    return (_scaled(head, path.suffix or ".txt", fmt, chunking, size / max(1, len(head))),
            f"scaled from the first {SAMPLE_BYTES / 2**20:g} MiB")


def _scaled(head: bytes, suffix: str, fmt: str, chunking, factor: float) -> int:
    with tempfile.TemporaryDirectory(prefix="veracity-plan-") as tmp:
        path = Path(tmp) / f"head{suffix}"
        path.write_bytes(head)
        return int(_count(path, fmt, chunking) * factor)


# ------------------------------------------------------------------------------------------ the plan

@dataclass
class Stage:
    name: str
    seconds: float
    ram: int
    disk: int
    note: str = ""


@dataclass
class Plan:
    passages: int
    how: list[str]
    factory: str
    hardware: Hardware
    stages: list[Stage] = field(default_factory=list)
    disk_peak: int = 0
    disk_final: int = 0
    ram_peak: int = 0
    search_ram: int = 0

    def to_dict(self) -> dict:
        return {"passages": self.passages, "how": self.how, "faiss_factory": self.factory,
                "hardware": {"cores": self.hardware.cores, "gpus": len(self.hardware.gpus),
                             "ram_available": self.hardware.ram_available,
                             "disk_free": self.hardware.disk_free},
                "stages": [s.__dict__ for s in self.stages], "disk_peak": self.disk_peak,
                "disk_final": self.disk_final, "ram_peak": self.ram_peak}


def expected_passages(sources, options) -> tuple[int, list[str]]:
    """(expected passages of all ``sources``, how each was estimated), ``--limit`` applied."""
    total, how = 0, []
    for s in sources:
        n, why = estimate_passages(s.path, s.format, options.chunking)
        total += n
        how.append(f"{s.path.name}: {n:,} ({why})")
    if options.limit:
        total = min(total, options.limit)
    return total, how


def seeded_passages(sources, options) -> int:
    """Passages whose vectors ship as seed vectors (veracity.indexes.seed) for this build: those of a seed
    file made from one of ``sources`` (the same file name and sha256) with the same encoder and chunking."""
    if not (options.dense and options.seed_vectors):
        return 0
    from veracity.indexes.seed import seeds_for
    from veracity.indexes.sources import sha256_file
    from veracity.models.encoders import canonical_encoder

    total = 0
    for seed in seeds_for(canonical_encoder(options.encoder)):
        src = seed.header.get("source") or {}
        for s in sources:
            same_chunks = seed.header.get("chunking") == options.chunking.to_dict()
            if (Path(s.path).name == src.get("file") and same_chunks
                    and sha256_file(Path(s.path)) == src.get("sha256")):
                total += int(seed.header.get("passages") or 0)
    return total


def stage1_name(options) -> str:
    """Stage 1 named by what it runs: reading (parse, clean, chunk), the passage store, and BM25 unless it is
    off (``--no-bm25``) or another index serves it (``--bm25-prebuilt``)."""
    if not options.bm25:
        return "read + store"
    if options.bm25_prebuilt is not None:
        return "read + store (BM25 prebuilt)"
    return "read + store + BM25"


def make_plan(sources, options, dim: int, hardware: Hardware, passages: int | None = None,
              how: list[str] | None = None) -> Plan:
    """The plan for ``sources`` built with ``options`` (``passages`` given: already estimated or counted)."""
    from veracity.indexes.dense import estimate_resources

    if passages is None:
        passages, how = expected_passages(sources, options)
    how = how or ["counted"]
    factory = resolve_factory(options.faiss_factory, passages) if options.dense else ""
    est = estimate_resources(passages, dim, factory or "Flat", bm25=options.bm25, dense=options.dense)
    plan = Plan(passages, how, factory, hardware)
    workers = max(1, min(options.workers, hardware.cores))
    share = hardware.share
    fmts = {s.format for s in sources}
    multistream = any(s.format == "wiki-xml" and (options.multistream_index is not None
                                                  or multistream_index_for(s.path) is not None)
                      for s in sources)
    read_s = stage1_seconds(passages, fmt="wiki-xml" if "wiki-xml" in fmts else "jsonl", workers=workers,
                            cores=hardware.cores, bm25=options.bm25 and options.bm25_prebuilt is None,
                            bm25_threads=min(options.bm25_threads, hardware.cores),
                            multistream=multistream) / share
    plan.stages.append(Stage(stage1_name(options), read_s, 2**30, est["store_disk"] + est["bm25_disk"],
                             f"{workers} parser(s)"))
    if options.dense:
        if hardware.gpus:
            from veracity.indexes.embedding import MAX_WORKERS_PER_DEVICE, workers_per_device

            k = min(MAX_WORKERS_PER_DEVICE,
                    options.workers_per_device or workers_per_device(len(hardware.gpus), hardware.cores))
            embed_s = passages / (RATES["embed_per_gpu_by_workers"][k] * len(hardware.gpus))
            note = f"{len(hardware.gpus)} GPU(s) x {k} worker(s), fp16: rate measured on an H200"
        else:
            seeded = min(passages, seeded_passages(sources, options))
            embed_s = (passages - seeded) / (RATES["embed_cpu_per_core"] * hardware.cores * share)
            note = f"{hardware.cores} core(s)" + (f", {seeded:,} vectors ship (seed vectors)" if seeded
                                                  else "")
        embed_s += RATES["embed_fixed_cpu_s"] / share
        plan.stages.append(Stage("embedding", embed_s, 2 * 2**30, est["shards_disk_during_build"], note))
        train, rest = faiss_flops(passages, dim or 384, factory)
        cpu = RATES["faiss_flops_per_core"] * hardware.cores * share
        if hardware.gpus:
            train /= RATES["gpu_speedup_training"] * len(hardware.gpus) / hardware.cores
        plan.stages.append(Stage("FAISS", (train + rest) / cpu, est["build_ram_peak"], est["dense_disk"],
                                 factory + (" (k-means on GPU: projected)" if hardware.gpus and train
                                            else "")))
    plan.disk_final = est["disk_total"]
    plan.disk_peak = est["disk_peak_during_build"]
    plan.ram_peak = max(s.ram for s in plan.stages)
    plan.search_ram = est["dense_ram"]
    return plan


def check_fits(plan: Plan) -> None:
    """Refuse, in one line, a build this machine cannot hold: disk short for its peak, or a FAISS index that
    must sit in RAM (not memory-mapped: Flat is, but searching it reads every vector per query) larger than
    the RAM available."""
    from veracity.indexes.dense import human_bytes

    hw = plan.hardware
    if plan.disk_peak > hw.disk_free:
        raise ConfigError(f"the build needs about {human_bytes(plan.disk_peak)} of disk at its peak "
                          f"({plan.passages:,} passages), {human_bytes(hw.disk_free)} are free",
                          hint="free disk, pick an --out on a larger disk, or --limit the passages")
    if plan.factory == "Flat" and plan.search_ram > hw.ram_available:
        raise ConfigError(f"a Flat FAISS index of {plan.passages:,} passages takes "
                          f"{human_bytes(plan.search_ram)} "
                          f"of RAM, {human_bytes(hw.ram_available)} are available",
                          hint="use --faiss-factory auto (IVF with SQ8 at this size), or --no-dense")
    faiss_stage = next((s for s in plan.stages if s.name == "FAISS"), None)
    if faiss_stage is not None and faiss_stage.ram > hw.ram_available:
        raise ConfigError(f"assembling the FAISS index ({plan.factory}) needs about "
                          f"{human_bytes(faiss_stage.ram)} "
                          f"of RAM, {human_bytes(hw.ram_available)} are available",
                          hint="use --faiss-factory auto, or a more compact factory (e.g. IVF...,PQ32)")


def _duration(s: float) -> str:
    if s < 90:
        return f"{s:.0f} s"
    if s < 5400:
        return f"{s / 60:.0f} min"
    if s < 86400 * 2:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} days"


def format_plan(plan: Plan) -> list[str]:
    from veracity.indexes.dense import human_bytes

    lines = [f"plan: {plan.passages:,} passages ({'; '.join(plan.how)}) on {plan.hardware.describe()}"]
    for s in plan.stages:
        lines.append(f"  {s.name:<20} ~{_duration(s.seconds):>9}  RAM ~{human_bytes(s.ram):>9}  disk "
                     f"~{human_bytes(s.disk):>9}  {s.note}")
    lines.append(f"  {'total':<20} ~{_duration(sum(s.seconds for s in plan.stages)):>9}  disk at the peak "
                 f"{human_bytes(plan.disk_peak)}, after {human_bytes(plan.disk_final)}")
    return lines


def plan_json(plan: Plan) -> str:
    return json.dumps(plan.to_dict())
