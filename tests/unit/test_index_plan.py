"""The plan printed before a build: passages read from the start of each source with the build's own reader,
times scaled to the machine (cores, GPUs, load), and the one-line refusal of a build that cannot fit."""

from __future__ import annotations

import bz2
import json

import pytest

from tests.fixtures.index import write_wiki_dump
from veracity.errors import ConfigError
from veracity.indexes import plan as P
from veracity.indexes.build import BuildOptions, Source, build_dir_for, build_index, resolve_sources
from veracity.indexes.passages import Chunking

GiB = 2**30
ROOMY = P.Hardware(cores=2, gpus=[], ram_available=20 * GiB, disk_free=500 * GiB)


def jsonl(path, n, words=250):
    path.write_text("".join(json.dumps({"title": f"T{i}",
                                        "text": " ".join(f"w{i}x{j}" for j in range(words))}) + "\n"
                            for i in range(n)), encoding="utf-8")
    return path


def test_small_jsonl_is_counted_exactly_and_a_large_one_scaled(tmp_path, monkeypatch):
    src = jsonl(tmp_path / "c.jsonl", 400)  # 250 words -> 3 passages of ~100 words each (min tail 25)
    n, how = P.estimate_passages(src, "jsonl", Chunking())
    assert (n, how) == (1200, "counted (whole file read)")
    monkeypatch.setattr(P, "SAMPLE_BYTES", 40_000)
    n, how = P.estimate_passages(src, "jsonl", Chunking())
    assert "scaled" in how and 1200 / 1.2 <= n <= 1200 * 1.2


def test_bz2_dump_is_scaled_by_compressed_share(tmp_path, monkeypatch):
    pages = [(f"Article {i}", 0, " ".join(f"word{i}_{j}" for j in range(230)), None) for i in range(300)]
    dump = write_wiki_dump(tmp_path / "enwiki-20190301-pages-articles.xml.bz2", pages)
    exact, how = P.estimate_passages(dump, "wiki-xml", Chunking())
    assert how.startswith("counted") and exact == 900  # 230 words: 100 + 100 + 30
    monkeypatch.setattr(P, "SAMPLE_BYTES", len(bz2.decompress(dump.read_bytes())) // 5)
    scaled, how = P.estimate_passages(dump, "wiki-xml", Chunking())
    assert "scaled" in how and exact / 2 <= scaled <= exact * 2


def test_flat_larger_than_ram_is_refused_in_one_line(tmp_path):
    src = jsonl(tmp_path / "c.jsonl", 10)
    opts = BuildOptions(faiss_factory="Flat")
    plan = P.make_plan([Source(src, "jsonl")], opts, 384, ROOMY, passages=21_015_324)
    with pytest.raises(ConfigError,
                       match=r"a Flat FAISS index of 21,015,324 passages takes 30\.1 GiB") as err:
        P.check_fits(plan)
    assert "auto" in err.value.hint and "\n" not in str(err.value)
    auto = P.make_plan([Source(src, "jsonl")], BuildOptions(), 384, ROOMY, passages=21_015_324)
    assert auto.factory == "IVF32768_HNSW32,SQ8"
    P.check_fits(auto)  # fits: SQ8 is 1 byte a dimension


def test_disk_short_is_refused(tmp_path):
    src = jsonl(tmp_path / "c.jsonl", 10)
    small = P.Hardware(cores=2, gpus=[], ram_available=20 * GiB, disk_free=10 * GiB)
    plan = P.make_plan([Source(src, "jsonl")], BuildOptions(), 384, small, passages=21_015_324)
    with pytest.raises(ConfigError, match="of disk at its peak"):
        P.check_fits(plan)


def test_times_follow_cores_gpus_and_load(tmp_path):
    src = [Source(jsonl(tmp_path / "c.jsonl", 10), "jsonl")]
    n = 21_015_324
    two = P.make_plan(src, BuildOptions(workers=2), 384, ROOMY, passages=n)
    sixteen = P.make_plan(src, BuildOptions(workers=16), 384, P.Hardware(16, [], 100 * GiB, 10**13),
                          passages=n)
    busy = P.make_plan(src, BuildOptions(workers=2), 384, P.Hardware(2, [], 20 * GiB, 500 * GiB, load=8.0),
                       passages=n)
    gpu = P.make_plan(src, BuildOptions(workers=16), 384,
                      P.Hardware(16, [(0, 80 * GiB)] * 8, 100 * GiB, 10**13), passages=n)
    t = {name: {s.name: s.seconds for s in p.stages} for name, p in
         (("two", two), ("sixteen", sixteen), ("busy", busy), ("gpu", gpu))}
    assert t["two"]["embedding"] == pytest.approx(n / (2 * P.RATES["embed_cpu_per_core"]) + 6.0, rel=1e-6)
    assert t["sixteen"]["embedding"] < t["two"]["embedding"] / 7
    assert t["busy"]["embedding"] == pytest.approx(t["two"]["embedding"] * 4, rel=1e-6)  # load 8 on 2 cores
    # 8 GPUs on 16 cores: 2 workers each, 4,881 passages/s per device measured on an H200
    assert t["gpu"]["embedding"] == pytest.approx(n / (8 * 4881.0) + 6.0, rel=1e-6)
    assert "8 GPU(s) x 2 worker(s)" in gpu.stages[1].note and "measured" in gpu.stages[1].note
    lines = P.format_plan(busy)
    assert "busy: load 8" in lines[0] and any("embedding" in line for line in lines)


def test_build_refuses_before_writing_anything(tmp_path, monkeypatch):
    import veracity.indexes.build as build_mod

    src = jsonl(tmp_path / "c.jsonl", 10)
    monkeypatch.setattr(build_mod, "detect_hardware",
                        lambda out: P.Hardware(cores=2, gpus=[], ram_available=20 * GiB, disk_free=1000))
    out = tmp_path / "idx"
    with pytest.raises(ConfigError, match="of disk at its peak"):
        build_index(resolve_sources([src]), out, BuildOptions(dense=False))
    assert not out.exists() and not build_dir_for(out.resolve()).exists()


def test_plan_only_writes_nothing(tmp_path):
    src = jsonl(tmp_path / "c.jsonl", 10)
    out = tmp_path / "idx"
    logs = []
    got = build_index(resolve_sources([src]), out, BuildOptions(dense=False), plan_only=True, log=logs.append)
    assert got["plan"]["passages"] == 30 and logs[0].startswith("plan: 30 passages")
    assert not out.exists() and not build_dir_for(out.resolve()).exists()


def test_stage_one_is_named_by_what_runs(tmp_path):
    """`--plan --no-bm25` must not promise a BM25 index: stage 1 is named by what it runs."""
    src = [Source(jsonl(tmp_path / "c.jsonl", 10), "jsonl")]
    prebuilt = tmp_path / "lucene"
    prebuilt.mkdir()
    names = {}
    for key, opts in (("default", BuildOptions()), ("no_bm25", BuildOptions(bm25=False)),
                      ("prebuilt", BuildOptions(bm25_prebuilt=prebuilt))):
        plan = P.make_plan(src, opts, 384, ROOMY, passages=1000)
        names[key] = plan.stages[0].name
        assert any(line.strip().startswith(names[key]) for line in P.format_plan(plan))
    assert names == {"default": "read + store + BM25", "no_bm25": "read + store",
                     "prebuilt": "read + store (BM25 prebuilt)"}


def test_stage_one_time_follows_the_busiest_thread():
    """Stage 1's model: parsers split over workers, but a one-stream dump is decompressed by one reader
    thread and
    Lucene's work by --bm25-threads, and nothing beats all the CPU over the cores."""
    n, us = 1_000_000, P.STAGE1_US

    def t(**kw):
        args = {"fmt": "wiki-xml", "workers": 1, "cores": 2, "bm25": False, "bm25_threads": 2,
                "multistream": True}
        fixed = P.RATES["read_fixed_cpu_s" if kw.get("bm25") else "read_fixed_cpu_s_no_bm25"]
        return P.stage1_seconds(n, **(args | kw)) - fixed

    assert t() == pytest.approx(n * (us["store"] + us["parse"]["wiki-xml"] + us["decompress"]) / 1e6)
    # multistream: the parsers decompress their streams
    assert t(workers=2) == pytest.approx(t() / 2, rel=0.1)
    assert t(workers=2, multistream=False) >= n * us["decompress"] / 1e6  # one reader thread decompresses
    assert t(workers=16, cores=16, bm25=True, bm25_threads=16) < t(workers=2, bm25=True) / 4
    plan = P.make_plan([Source(P.Path("enwiki-x-pages-articles-multistream.xml.bz2"), "wiki-xml")],
                       BuildOptions(workers=2, dense=False), 0, ROOMY, passages=n)
    assert plan.stages[0].seconds == pytest.approx(P.stage1_seconds(n, fmt="wiki-xml", workers=2, cores=2,
                                                                    bm25=True,
                                                                    bm25_threads=2, multistream=False))
