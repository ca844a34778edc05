"""The evidence base at scale, on the real thing (issue 28 points 4, 5, 7): real `veracity index build`
processes killed with SIGKILL while embedding and run again; two processes embedding one build; Ray Data
actors
on a real local Ray instance writing the same shards; an IVF index with its measured recall, searched with
--nprobe; the plan's passage estimate against the built count on the dump sample and on JSONL.

Needs Java (pyserini) where BM25 is built, the default encoder and the HoVer data; under CI=true a missing one
fails (tests/fixtures/index.py ``missing``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import faiss
import numpy as np
import pytest

from tests.fixtures.index import missing, shared_data_dir
from veracity.errors import ConfigError, IndexDirError
from veracity.indexes.build import SHARDS_DIR, BuildOptions, build_dir_for, build_index, resolve_sources
from veracity.indexes.searcher import Searcher

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def corpus(hover_subset, tmp_path_factory) -> Path:
    """60 real HoVer paragraphs (~70 passages) as JSONL."""
    path = tmp_path_factory.mktemp("scale") / "c.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in hover_subset[0][:60]), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def reference(corpus, tmp_path_factory) -> Path:
    """The same corpus built in one go, in this process (no BM25: the dense part is under test)."""
    out = tmp_path_factory.mktemp("scale-ref") / "full"
    try:
        build_index(resolve_sources([corpus]), out, BuildOptions(bm25=False, shard_size=8))
    except ConfigError as exc:
        if "encoder" in str(exc):
            missing(f"no encoder: {exc}")
        raise
    return out


def _build_cmd(corpus: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "veracity", "index", "build", str(corpus), "--out", str(out), "--no-bm25",
            "--shard-size", "8", *extra]


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def _vectors(index_dir: Path) -> np.ndarray:
    index = faiss.read_index(str(index_dir / "dense" / "index.faiss"))
    return index.reconstruct_n(0, index.ntotal)


def _wait_for(predicate, proc, timeout=600.0):
    deadline = time.time() + timeout
    while not predicate():
        if proc.poll() is not None:
            pytest.fail(f"the build ended (rc {proc.returncode}) before the point to interrupt it: "
                        f"{proc.stderr.read()[-2000:] if proc.stderr else ''}")
        if time.time() > deadline:
            proc.kill()
            pytest.fail("timed out waiting for the build")
        time.sleep(0.05)


def test_sigkill_while_embedding_loses_at_most_one_shard(corpus, reference, tmp_path):
    out = tmp_path / "idx"
    work = build_dir_for(out.resolve())
    shards = work / SHARDS_DIR
    proc = subprocess.Popen(_build_cmd(corpus, out), env=_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    _wait_for(lambda: len(list(shards.glob("shard-*[0-9].npy"))) >= 2, proc)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    kept = {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in shards.glob("shard-*[0-9].npy")}
    assert len(kept) >= 2
    # a half-built folder is never an index: neither the --out path nor the work folder opens
    assert not out.exists()
    for folder in (out, work):
        with pytest.raises(IndexDirError):
            Searcher(folder)
    rerun = subprocess.run(_build_cmd(corpus, out), env=_env(), capture_output=True, text=True, timeout=900)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    manifest = json.loads((out / "manifest.json").read_text())
    ref = json.loads((reference / "manifest.json").read_text())
    assert manifest["passages"] == ref["passages"]
    assert (out / "dense" / "ids.txt").read_text() == (reference / "dense" / "ids.txt").read_text()
    np.testing.assert_allclose(_vectors(out), _vectors(reference), atol=1e-5)
    # the shards written before the kill were kept as they were (only the one in progress was redone)
    assert "resuming" in rerun.stdout + rerun.stderr
    assert (manifest["dense"]["faiss_factory"] == "Flat"
            and manifest["dense"]["faiss_factory_requested"] == "auto")
    assert not work.exists()
    del kept


def test_two_processes_embed_one_build(corpus, reference, tmp_path):
    """A second `index build` of the same command (BM25 on, as a user runs it) joins the first once it
    embeds: every shard is embedded exactly once between them, the second embeds at least one (the first
    waits after its first shard until the second holds a claim: tests/fixtures/interrupt_at.py embed-join),
    one of them builds the FAISS index, both exit 0, and the index equals the one built in one go."""
    out = tmp_path / "idx"
    shards = build_dir_for(out.resolve()) / SHARDS_DIR
    cmd = ["index", "build", str(corpus), "--out", str(out), "--shard-size", "8", "--batch-size", "4"]
    fixture = [sys.executable, "-m", "tests.fixtures.interrupt_at"]
    first = subprocess.Popen([*fixture, "embed-join", *cmd], env=_env(), cwd=REPO, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    _wait_for(lambda: shards.is_dir() and (list(shards.glob("*.claim")) or list(shards.glob("shard-*.npy"))),
              first)
    second = subprocess.Popen([*fixture, "embed-count", *cmd], env=_env(), cwd=REPO, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    outs = [p.communicate(timeout=900) for p in (first, second)]
    assert first.returncode == 0, outs[0][1][-2000:]
    assert second.returncode == 0, outs[1][1][-2000:]
    by = [[int(line.split()[1]) for line in err.splitlines() if line.startswith("EMBEDDED-SHARD ")]
          for _, err in outs]
    n = json.loads((reference / "manifest.json").read_text())["passages"]
    assert sorted(by[0] + by[1]) == list(range(-(-n // 8)))  # every shard once: none twice, none missing
    assert by[0] and by[1], by  # both embedded: the second joined
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["bm25"] is not None and (out / "bm25").is_dir()
    np.testing.assert_allclose(_vectors(out), _vectors(reference), atol=1e-5)
    assert (out / "dense" / "ids.txt").read_text() == (reference / "dense" / "ids.txt").read_text()


def test_a_second_process_during_reading_is_one_line(corpus, tmp_path):
    from veracity.indexes.embedding import acquire

    out = tmp_path / "idx"
    work = build_dir_for(out.resolve())
    work.mkdir(parents=True)
    # this (live) process holds the reading claim of a build of the same sources and options
    opts = BuildOptions(bm25=False, shard_size=8)
    from veracity.indexes.build import READING_CLAIM, STATE_FILE, _source_fingerprint

    import hashlib

    key = hashlib.sha256(json.dumps({"sources": _source_fingerprint(resolve_sources([corpus])),
                                     "options": opts.key()}, sort_keys=True).encode()).hexdigest()
    (work / STATE_FILE).write_text(json.dumps({"key": key}))
    assert acquire(work / READING_CLAIM) is not None
    with pytest.raises(IndexDirError, match="another process .* is reading the sources"):
        build_index(resolve_sources([corpus]), out, opts)


def test_ray_backend_writes_the_same_shards(corpus, reference, tmp_path):
    ray = pytest.importorskip("ray") if not os.environ.get("CI") else __import__("ray")
    started = not ray.is_initialized()  # build_index starts a local instance the way a user's command does
    try:
        logs = []
        m = build_index(resolve_sources([corpus]), tmp_path / "idx",
                        BuildOptions(bm25=False, shard_size=8, backend="ray"), log=logs.append)
    finally:
        if started and ray.is_initialized():
            from veracity.indexes.java import jvm_signals_kept

            with jvm_signals_kept():
                ray.shutdown()
    assert any("embedding with Ray Data" in line for line in logs)
    assert m["passages"] == json.loads((reference / "manifest.json").read_text())["passages"]
    np.testing.assert_allclose(_vectors(tmp_path / "idx"), _vectors(reference), atol=1e-5)


def test_ivf_index_records_recall_and_takes_nprobe(corpus, reference, tmp_path):
    n = json.loads((reference / "manifest.json").read_text())["passages"]
    m = build_index(resolve_sources([corpus]), tmp_path / "ivf",
                    BuildOptions(bm25=False, shard_size=8, faiss_factory="IVF2,SQ8"))
    s = m["dense"]["search"]
    assert m["dense"]["faiss_factory"] == "IVF2,SQ8" and s["kind"] == "ivf" and s["measured"]
    assert 0 < s["queries"] <= n and 0.0 <= s["recall_at_10"] <= 1.0 and s["nprobe"] == 2
    with Searcher(tmp_path / "ivf") as searcher:
        assert faiss.extract_index_ivf(searcher._faiss).nprobe == s["nprobe"]
        hits = searcher.search("a film directed by", 5, mode="dense")
        assert len(hits) == 5
    with Searcher(tmp_path / "ivf", nprobe=2) as searcher:  # nprobe = nlist: exact
        exact = Searcher(reference)
        q = "a film directed by"
        got = {h.passage_id for h in searcher.search(q, 5, mode="dense")}
        # every list probed: only SQ8's rounding can reorder against exact search
        assert len(got & {h.passage_id for h in exact.search(q, 5, mode="dense")}) >= 4
        exact.close()
    with pytest.raises(ConfigError, match="--nprobe applies to IVF indexes"):
        Searcher(reference, nprobe=8)
    with pytest.raises(ConfigError, match="--ef-search applies to HNSW indexes"):
        Searcher(tmp_path / "ivf", ef_search=8)


def test_plan_estimate_within_2x_of_built_count(tmp_path, monkeypatch):
    """The plan's passages against the count a real build gives: the dump sample and a JSONL file, each once
    counted whole and once scaled from a sample of its start (SAMPLE_BYTES made small)."""
    from veracity.errors import JavaError
    from veracity.indexes import plan as plan_mod
    from veracity.indexes.passages import Chunking

    data = shared_data_dir()
    if data is None:
        missing("benchmark data (../shared/data) not found")
    dump = data / "wiki_dump_sample" / "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
    jsonl = data / "wiki_corpus_hover_gold" / "hover_dev_gold_paragraphs.jsonl"
    for source in (dump, jsonl):
        try:
            m = build_index(resolve_sources([source]), tmp_path / source.stem,
                            BuildOptions(dense=False, workers=1, bm25_threads=1, dump_date="2017-10-01"))
        except JavaError as exc:
            missing(str(exc))
        built = m["passages"]
        assert m["plan"]["passages"] == built  # small files are counted whole, with the build's reader
        fmt = resolve_sources([source])[0].format
        monkeypatch.setattr(plan_mod, "SAMPLE_BYTES", 2**19)
        scaled, how = plan_mod.estimate_passages(source, fmt, Chunking())
        monkeypatch.undo()
        assert "scaled" in how
        assert built / 2 <= scaled <= built * 2, (source.name, scaled, built)


def test_an_index_from_before_this_change_opens_and_searches_the_same(reference, tmp_path):
    """A manifest without the new fields (no measured search settings, no requested factory) is an index built
    before auto / nprobe: it opens, and dense search gives the same hits."""
    import shutil

    old = tmp_path / "old"
    shutil.copytree(reference, old)
    manifest = json.loads((old / "manifest.json").read_text())
    for key in ("search", "faiss_factory_requested", "trained_on_gpu"):
        manifest["dense"].pop(key, None)
    manifest.pop("plan", None)
    (old / "manifest.json").write_text(json.dumps(manifest))
    q = "an American film director"
    with Searcher(reference) as new, Searcher(old) as before:
        assert [(h.passage_id, round(h.score, 5)) for h in new.search(q, 8, mode="dense")] == \
               [(h.passage_id, round(h.score, 5)) for h in before.search(q, 8, mode="dense")]
