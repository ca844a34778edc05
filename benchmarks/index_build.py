"""Measurements of the index build's reading stage (issue 28).

Subcommands:

- ``cleaner DUMP``: wikitext -> plain text with the fast scanner (the default) and with mwparserfromhell (the
  old cleaner, ``--cleaner mwparser``) on the same article pages of a dump: MB/s of wikitext per core for
  each, agreement per article (Jaccard of the word sets), tokens only one of them keeps, and examples.
- ``stage1 DUMP``: the whole first stage (read + clean + chunk + store + BM25) of ``veracity index build
  --no-dense`` with ``--workers`` 1 and 2 (and more with ``--workers-list``): passages/s, wall and CPU
  seconds (this process and its children), CPU efficiency = CPU seconds / (workers x wall), peak RSS; and,
  because a shared machine's wall times measure the other jobs, the least wall time the work can take on
  idle cores from its CPU accounting (``idle_wall_bound_s``: the writer's main thread, each parser, all CPU
  over the cores) and the speed-up of N workers over one that this bound allows.
- ``multiply DUMP OUT --copies N``: a bigger single-stream dump made of the sample's pages N times over
  (titles suffixed `` (copy k)`` so they are not duplicates, page ids renumbered), for stage-1 runs on
  >= 1M passages of realistic text.

Every result is printed as JSON lines (``--out FILE`` appends them there too, as they come).
"""

from __future__ import annotations

import argparse
import bz2
import collections
import json
import os
import re
import resource
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

_WORD = re.compile(r"\w+")


def _emit(record: dict, out: Path | None) -> None:
    line = json.dumps(record)
    print(line, flush=True)
    if out is not None:
        with open(out, "a") as f:
            f.write(line + "\n")


def article_wikitexts(dump: Path) -> list[tuple[str, str]]:
    """(title, wikitext) of the pages both cleaners see: namespace 0, not redirects, lists or titled
    disambiguation pages (the reader's filters before cleaning)."""
    from veracity.indexes.readers import _child, _local, open_maybe_compressed

    out = []
    with open_maybe_compressed(dump) as f:
        for _, elem in ET.iterparse(f):
            if _local(elem.tag) != "page":
                continue
            title = (_child(elem, "title").text or "").strip()
            ns = (_child(elem, "ns").text or "0").strip()
            rev = _child(elem, "revision")
            text = (_child(rev, "text").text or "") if rev is not None else ""
            if ns == "0" and _child(elem, "redirect") is None and not re.match(r"\s*#redirect", text, re.I) \
                    and not title.startswith(("List of ",
                                              "Lists of ")) and not title.endswith("(disambiguation)"):
                out.append((title, text))
            elem.clear()
    return out


def _time_cleaner(fn, texts: list[str], repeat: int) -> tuple[float, list]:
    best = None
    results = None
    for _ in range(repeat):
        t0 = time.process_time()
        results = [fn(t) for t in texts]
        dt = time.process_time() - t0
        best = dt if best is None else min(best, dt)
    return best, results


def cmd_cleaner(args) -> None:
    from veracity.indexes.readers import mwparser_to_plain
    from veracity.indexes.wikitext import wikitext_to_plain

    pages = article_wikitexts(args.dump)
    texts = [t for _, t in pages]
    mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    old_s, old = _time_cleaner(mwparser_to_plain, texts, 1)
    new_s, new = _time_cleaner(wikitext_to_plain, texts, args.repeat)
    _emit({"what": "cleaner speed", "dump": str(args.dump), "pages": len(texts), "wikitext_MB": round(mb, 3),
           "mwparser_cpu_s": round(old_s, 3), "mwparser_MB_per_cpu_s": round(mb / old_s, 3),
           "fast_cpu_s": round(new_s, 4), "fast_MB_per_cpu_s": round(mb / new_s, 3),
           "speedup": round(old_s / new_s, 2)}, args.out)
    jaccards = []
    only_old: collections.Counter = collections.Counter()
    only_new: collections.Counter = collections.Counter()
    total_old = total_new = 0
    disagree_dab = []
    examples = []
    for (title, _), (o, od), (n, nd) in zip(pages, old, new, strict=True):
        if od != nd:
            disagree_dab.append(title)
            continue
        if od:
            continue
        ot = collections.Counter(w.lower() for w in _WORD.findall(o))
        nt = collections.Counter(w.lower() for w in _WORD.findall(n))
        total_old += sum(ot.values())
        total_new += sum(nt.values())
        only_old.update(ot - nt)
        only_new.update(nt - ot)
        so, sn = set(ot), set(nt)
        j = len(so & sn) / len(so | sn) if so | sn else 1.0
        jaccards.append((j, title, ot - nt, nt - ot))
    jaccards.sort(key=lambda x: x[0])
    js = [j for j, *_ in jaccards]
    _emit({"what": "cleaner agreement", "articles": len(js), "disambiguation_disagreements": disagree_dab,
           "jaccard_mean": round(sum(js) / len(js), 4) if js else None,
           "jaccard_min": round(js[0], 4) if js else None,
           "jaccard_median": round(js[len(js) // 2], 4) if js else None,
           "articles_jaccard_ge_0.95": sum(j >= 0.95 for j in js),
           "tokens_mwparser": total_old, "tokens_fast": total_new,
           "tokens_only_mwparser": sum(only_old.values()), "tokens_only_fast": sum(only_new.values()),
           "top_only_mwparser": only_old.most_common(25), "top_only_fast": only_new.most_common(25)},
          args.out)
    for j, title, lost, gained in jaccards[:args.examples]:
        examples.append({"title": title, "jaccard": round(j, 4), "only_mwparser": lost.most_common(12),
                         "only_fast": gained.most_common(12)})
    _emit({"what": "cleaner lowest-agreement articles", "examples": examples}, args.out)
    if args.show:
        by_title = {t: (o, n) for (t, _), (o, _), (n, _) in zip(pages, old, new, strict=True)}
        for title in args.show:
            o, n = by_title[title]
            print(f"===== {title}: mwparser\n{o[:args.chars]}\n----- fast\n{n[:args.chars]}\n")


def _usage() -> dict:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"cpu": me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime,
            "cpu_self": me.ru_utime + me.ru_stime, "cpu_children": kids.ru_utime + kids.ru_stime,
            "rss_self_mb": me.ru_maxrss / 1024, "rss_children_mb": kids.ru_maxrss / 1024}


def _run_stage1(dump: Path, workers: int, cleaner: str, bm25: bool, limit: int | None, bm25_threads: int,
                progress_file: Path | None) -> dict:
    from veracity.indexes.build import BuildOptions, Source, _read_into
    from veracity.indexes.readers import SourceInfo
    from veracity.indexes.sources import detect_format
    from veracity.indexes.store import PassageStore, STORE_FILE

    fmt = detect_format(dump)
    options = BuildOptions(bm25=bm25, dense=False, workers=workers, cleaner=cleaner, limit=limit,
                           bm25_threads=bm25_threads)
    last = [0.0]

    def progress(stage, done, total):
        now = time.perf_counter()
        if progress_file is not None and now - last[0] > 10:
            last[0] = now
            with open(progress_file, "a") as f:
                f.write(json.dumps({"t": time.strftime("%H:%M:%S"), "workers": workers,
                                    "passages": done}) + "\n")

    from veracity.indexes import parallel

    reader_cpu = [0.0]  # the dump reader thread (decompressing, cutting chunks): it runs the task generator

    def timed(real):
        def tasks(*a, **kw):
            t0 = time.thread_time()
            try:
                yield from real(*a, **kw)
            finally:
                reader_cpu[0] += time.thread_time() - t0
        return tasks

    real_tasks = parallel._byte_tasks, parallel._stream_tasks
    parallel._byte_tasks, parallel._stream_tasks = (timed(f) for f in real_tasks)
    with tempfile.TemporaryDirectory(dir=os.environ.get("VERACITY_BENCH_TMP")) as tmp:
        work = Path(tmp)
        u0 = _usage()
        m0 = time.thread_time()
        t0 = time.perf_counter()
        infos = _read_into(work, [Source(dump, fmt)], [SourceInfo(str(dump), fmt).to_dict()], options,
                           progress,
                           lambda m: None)
        wall = time.perf_counter() - t0
        main_cpu = time.thread_time() - m0
        u1 = _usage()
        parallel._byte_tasks, parallel._stream_tasks = real_tasks
        n = PassageStore(work / STORE_FILE).count
        disk = sum(p.stat().st_size for p in work.rglob("*") if p.is_file())
    cpu = u1["cpu"] - u0["cpu"]
    parsers = u1["cpu_children"] - u0["cpu_children"]
    cores = len(os.sched_getaffinity(0))
    # the least wall time this work can take on idle cores: no thread runs faster than its own CPU time (the
    # writer's main thread, the reader thread, each parser process, the parsers sharing their CPU evenly), and
    # all of it together needs cpu / cores
    bound = max(main_cpu, reader_cpu[0], parsers / workers if workers > 1 else 0.0, cpu / cores)
    return {"what": "stage1", "dump": str(dump), "workers": workers, "cleaner": cleaner, "bm25": bm25,
            "bm25_threads": bm25_threads, "passages": n, "articles": infos[0]["articles"],
            "wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "passages_per_s": round(n / wall, 1),
            "cpu_writer_s": round(u1["cpu_self"] - u0["cpu_self"], 2),
            "cpu_parsers_s": round(parsers, 2), "cpu_writer_main_thread_s": round(main_cpu, 2),
            "cpu_reader_thread_s": round(reader_cpu[0], 2),
            "idle_wall_bound_s": round(bound, 2), "cores": cores,
            "passages_per_cpu_s": round(n / cpu, 1) if cpu else None,
            "cpu_per_wall": round(cpu / wall, 2), "peak_rss_self_mb": round(u1["rss_self_mb"]),
            "peak_rss_largest_child_mb": round(u1["rss_children_mb"]), "disk_bytes": disk,
            "load_avg": os.getloadavg()}


def cmd_stage1(args) -> None:
    from veracity.indexes.java import ensure_jvm

    if not args.no_bm25:
        ensure_jvm()
    bounds: dict[int, list[float]] = {}
    for workers in args.workers_list:
        for _ in range(args.repeat):
            rec = _run_stage1(args.dump, workers, args.cleaner, not args.no_bm25, args.limit,
                              args.bm25_threads,
                              args.progress)
            rec["cpu_efficiency"] = round(rec["cpu_s"] / (max(1, workers) * rec["wall_s"]), 2)
            _emit(rec, args.out)
            bounds.setdefault(workers, []).append(rec["idle_wall_bound_s"])
    if 1 in bounds and len(bounds) > 1:
        one = min(bounds[1])
        for workers, b in sorted(bounds.items()):
            if workers > 1:  # the speed-up the CPU accounting allows on idle cores, and its efficiency
                _emit({"what": "stage1 speed-up bound", "workers": workers, "idle_wall_bound_1_s": one,
                       "idle_wall_bound_s": min(b), "speedup_bound": round(one / min(b), 2),
                       "efficiency_bound": round(one / min(b) / workers, 2)}, args.out)


def cmd_multiply(args) -> None:
    """Write the dump's <page> elements ``--copies`` times into one single-stream bz2 dump."""
    from veracity.indexes.readers import open_maybe_compressed

    with open_maybe_compressed(args.dump) as f:
        xml = f.read().decode("utf-8")
    head_end = xml.index("<page>")
    tail_start = xml.rindex("</page>") + len("</page>")
    head, pages, tail = xml[:head_end], xml[head_end:tail_start], xml[tail_start:]
    page_list = re.findall(r"<page>.*?</page>", pages, re.S)
    comp = bz2.BZ2Compressor(6)
    next_id = 1
    with open(args.out_dump, "wb") as out:
        out.write(comp.compress(head.encode()))
        for k in range(args.copies):
            for page in page_list:
                if k:
                    page = page.replace("</title>", f" (copy {k})</title>", 1)
                page = re.sub(r"<id>\d+</id>", f"<id>{next_id}</id>", page, count=1)
                next_id += 1
                out.write(comp.compress(("  " + page + "\n").encode()))
        out.write(comp.compress(tail.encode()))
        out.write(comp.flush())
    print(json.dumps({"what": "multiply", "out": str(args.out_dump), "pages": next_id - 1,
                      "bytes": args.out_dump.stat().st_size}))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("cleaner", help="fast cleaner vs mwparserfromhell: speed and agreement")
    c.add_argument("dump", type=Path)
    c.add_argument("--repeat", type=int, default=3, help="best of N timings of the fast cleaner")
    c.add_argument("--examples", type=int, default=8, help="lowest-agreement articles to list")
    c.add_argument("--show", nargs="*", default=[], help="titles whose two texts to print")
    c.add_argument("--chars", type=int, default=1500)
    c.add_argument("--out", type=Path)
    c.set_defaults(fn=cmd_cleaner)
    s = sub.add_parser("stage1", help="read + chunk + store + BM25, with 1 and 2 workers")
    s.add_argument("dump", type=Path)
    s.add_argument("--workers-list", type=int, nargs="+", default=[1, 2])
    s.add_argument("--cleaner", default="fast", choices=["fast", "mwparser"])
    s.add_argument("--no-bm25", action="store_true")
    s.add_argument("--bm25-threads", type=int, default=1)
    s.add_argument("--limit", type=int)
    s.add_argument("--repeat", type=int, default=1)
    s.add_argument("--progress", type=Path, help="append progress lines here every 10 s")
    s.add_argument("--out", type=Path)
    s.set_defaults(fn=cmd_stage1)
    m = sub.add_parser("multiply", help="a bigger dump made of the sample's pages N times over")
    m.add_argument("dump", type=Path)
    m.add_argument("out_dump", type=Path)
    m.add_argument("--copies", type=int, required=True)
    m.set_defaults(fn=cmd_multiply)
    args = p.parse_args(argv)
    args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
