"""Parallel dump reading: the same articles in the same order for any number of workers, on a real
multistream dump (with its offset index) and on a single-stream one; bad dumps refused before reading."""

import bz2
import sqlite3

import pytest

from tests.fixtures.dumps import sample_dump, write_multistream
from veracity.errors import ConfigError, CorpusError
from veracity.indexes.build import BuildOptions, Source, _read_into, check_dumps
from veracity.indexes.parallel import (bz2_ends_complete, check_dump, multistream_index_for,
                                       read_multistream_index,
                                       read_wiki_dump)
from veracity.indexes.readers import SourceInfo
from veracity.indexes.store import STORE_FILE


@pytest.fixture(scope="module")
def multistream(tmp_path_factory):
    return write_multistream(sample_dump(), tmp_path_factory.mktemp("ms"))


def _read(path, workers, plan=None, cleaner="fast"):
    info = SourceInfo(str(path), "wiki-xml")
    arts = [(a.title, a.text) for a in read_wiki_dump(path, info, workers=workers, plan=plan,
                                                      cleaner=cleaner)]
    return arts, info


def test_multistream_fixture_is_laid_out_like_the_official_dumps(multistream):
    dump, index = multistream
    assert multistream_index_for(dump) == index
    idx = read_multistream_index(index)
    assert idx.offsets[0] > 0 and len(idx.offsets) == 11  # 206 pages, 20 a stream, behind the header stream
    plan = check_dump(dump)
    assert plan.index is not None and plan.index.offsets == idx.offsets
    assert bz2.decompress(dump.read_bytes()[:idx.offsets[0]]).lstrip().startswith(b"<mediawiki")


def test_same_articles_for_any_workers_multistream_and_single_stream(multistream):
    dump, _ = multistream
    single, info1 = _read(sample_dump(), 1)
    assert len(single) == 96 and info1.skipped["redirect"] > 0
    for workers in (1, 2):
        arts, info = _read(dump, workers, plan=check_dump(dump))
        assert arts == single, workers
        assert info.skipped == info1.skipped and info.newest_revision == info1.newest_revision
    arts, info = _read(sample_dump(), 2)
    assert arts == single and info.skipped == info1.skipped
    assert info.dump_date == info1.dump_date and info1.dump_date_from == "newest revision"


def _store_rows(folder):
    with sqlite3.connect(folder / STORE_FILE) as conn:
        return conn.execute("SELECT idx, id, text FROM passages ORDER BY idx").fetchall()


@pytest.mark.parametrize("which", ["multistream", "single"])
def test_store_ids_identical_for_one_and_two_workers(multistream, tmp_path, which):
    dump = multistream[0] if which == "multistream" else sample_dump()
    rows = {}
    for workers in (1, 2):
        work = tmp_path / f"w{workers}"
        work.mkdir()
        opts = BuildOptions(bm25=False, dense=False, workers=workers)
        infos = _read_into(work, [Source(dump, "wiki-xml")], [SourceInfo(str(dump), "wiki-xml").to_dict()],
                           opts,
                           lambda *a: None, lambda m: None)
        rows[workers] = _store_rows(work)
        assert infos[0]["articles"] == 96
    assert len(rows[1]) > 4000 and rows[1] == rows[2]


def test_limit_stops_the_parsers_early(multistream, tmp_path):
    dump = multistream[0]
    opts = BuildOptions(bm25=False, dense=False, workers=2, limit=150)
    _read_into(tmp_path, [Source(dump, "wiki-xml")], [SourceInfo(str(dump), "wiki-xml").to_dict()], opts,
               lambda *a: None, lambda m: None)
    assert len(_store_rows(tmp_path)) == 150


def test_truncated_bz2_is_refused_before_reading(tmp_path):
    data = sample_dump().read_bytes()
    assert bz2_ends_complete(sample_dump())
    for cut in (len(data) // 2, len(data) - 1, len(data) - 5, 200):
        path = tmp_path / f"enwiki-20190301-pages-articles-{cut}.xml.bz2"
        path.write_bytes(data[:cut])
        assert not bz2_ends_complete(path)
        with pytest.raises(CorpusError, match="truncated") as err:
            check_dump(path)
        assert "bzip2 -t" in err.value.hint


def test_multistream_index_of_another_dump_is_refused(multistream, tmp_path):
    dump, index = multistream
    other_dump, other_index = write_multistream(sample_dump(), tmp_path / "other", pages_per_stream=15)
    with pytest.raises(CorpusError, match="does not match") as err:
        check_dump(dump, other_index)
    assert "downloaded with this dump" in err.value.hint
    shifted = tmp_path / "shifted-index.txt.bz2"
    lines = bz2.decompress(index.read_bytes()).decode().splitlines()
    last = min(i for i, line in enumerate(lines) if line.split(":")[0] == lines[-1].split(":")[0])
    off, pid, title = lines[last].split(":", 2)  # the first page of the last stream
    lines[last] = f"{off}:{int(pid) + 1}:{title}"
    shifted.write_bytes(bz2.compress(("\n".join(lines) + "\n").encode()))
    with pytest.raises(CorpusError, match=f"names page {int(pid) + 1}, the dump has page {pid}"):
        check_dump(dump, shifted)
    past = tmp_path / "past-index.txt"
    past.write_text(f"{dump.stat().st_size + 10}:10:AccessibleComputing\n")
    with pytest.raises(CorpusError, match="past the end"):
        check_dump(dump, past)
    garbage = tmp_path / "garbage-index.txt"
    garbage.write_text("not an index\n")
    with pytest.raises(CorpusError, match="offset:page_id:title"):
        check_dump(dump, garbage)
    with pytest.raises(CorpusError, match="does not exist"):
        check_dump(dump, tmp_path / "missing-index.txt.bz2")
    with pytest.raises(ConfigError, match="exactly one Wikipedia dump"):
        check_dumps([Source(dump, "wiki-xml"), Source(other_dump, "wiki-xml")], other_index)


@pytest.mark.parametrize("workers", [0, -1, True, "2"])
def test_bad_workers_refused(workers):
    with pytest.raises(ConfigError, match="--workers must be an integer of at least 1") as err:
        BuildOptions(workers=workers).check()
    assert "cores" in err.value.hint
    with pytest.raises(ConfigError, match="--bm25-threads"):
        BuildOptions(bm25_threads=0).check()
