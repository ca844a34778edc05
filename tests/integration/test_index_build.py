"""Real builds from a tiny Wikipedia dump and a few dozen HoVer paragraphs: known answers, resume of an
interrupted dense build, bad input (existing out dir, empty corpus, bad JSONL line, bad dump)."""

import json

import faiss
import numpy as np
import pytest
from click.testing import CliRunner

from tests.fixtures.index import write_wiki_dump
from veracity.errors import CorpusError, IndexDirError
from veracity.indexes.build import BuildOptions, build_dir_for, build_index, resolve_sources
from veracity.indexes.searcher import Searcher

pytestmark = pytest.mark.integration


class Interrupted(Exception):
    pass


@pytest.fixture(scope="module")
def xml_index(tmp_path_factory):
    from tests.fixtures.index import missing
    from veracity.errors import JavaError

    tmp = tmp_path_factory.mktemp("xml")
    dump = write_wiki_dump(tmp / "enwiki-20190301-pages-articles-multistream.xml.bz2", multistream=True)
    try:
        build_index(resolve_sources([dump]), tmp / "idx", BuildOptions())
    except JavaError as exc:
        missing(str(exc))
    return tmp / "idx"


def test_xml_dump_index_answers_and_manifest(xml_index):
    m = json.loads((xml_index / "manifest.json").read_text())
    assert m["dump_date"] == "2019-03-01" and m["sources"][0]["format"] == "wiki-xml"
    assert m["articles"] == 3 and m["passages"] == 3
    assert m["sources"][0]["skipped"]["redirect"] == 1
    with Searcher(xml_index) as s:
        for mode in ("bm25", "dense", "hybrid"):
            assert s.search("navigation treatise published in 1650 describing tides", 1,
                            mode)[0].title == "Glass Compass", mode
        assert s.search("capital Vexton founded 1642", 1, "bm25")[0].passage_id == "Zorbland#0"
        assert s.open_page("Zorb land") == []  # redirects are not articles
        assert all(not h.title.startswith("Talk:") for h in s.search("Is this real?", 3, "bm25"))


def test_existing_out_dir_refused_unless_overwrite(xml_index, tmp_path):
    dump = write_wiki_dump(tmp_path / "enwiki-20200101-pages-articles.xml.bz2")
    with pytest.raises(IndexDirError, match="already exists"):
        build_index(resolve_sources([dump]), xml_index, BuildOptions(dense=False))
    stranger = tmp_path / "notes"
    stranger.mkdir()
    (stranger / "keep.txt").write_text("mine")
    with pytest.raises(IndexDirError, match="not an index"):
        build_index(resolve_sources([dump]), stranger, BuildOptions(dense=False, overwrite=True))
    assert (stranger / "keep.txt").read_text() == "mine"
    # issue 29 point 2: a manifest.json that is not ours (any JSON, another kind, a newer format) is no
    # licence
    for name, manifest in (("foreign", {"foo": 1}), ("other-kind", {"kind": "something-else",
                                                                    "format_version": 1}),
                           ("newer", {"kind": "veracity-index", "format_version": 99}),
                           ("no-version", {"kind": "veracity-index"})):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "manifest.json").write_text(json.dumps(manifest))
        (folder / "keep.txt").write_text("precious")
        with pytest.raises(IndexDirError, match=f"{name} is not an index veracity built"):
            build_index(resolve_sources([dump]), folder, BuildOptions(dense=False, overwrite=True, limit=2))
        assert sorted(p.name for p in folder.iterdir()) == ["keep.txt", "manifest.json"], name
        assert (folder / "keep.txt").read_text() == "precious"
        assert json.loads((folder / "manifest.json").read_text()) == manifest
        assert not build_dir_for(folder).exists()
    copy = tmp_path / "idx"
    build_index(resolve_sources([dump]), copy, BuildOptions(dense=False))
    m = build_index(resolve_sources([dump]), copy, BuildOptions(dense=False, overwrite=True, limit=2))
    assert m["passages"] == 2 and json.loads((copy / "manifest.json").read_text())["passages"] == 2
    assert m["dense"] is None and not (copy / "dense").exists()
    with Searcher(copy) as s:
        assert s.modes == ("bm25",)
        with pytest.raises(IndexDirError, match="needs dense vectors"):
            s.search("x", 3, "hybrid")


def test_empty_corpus_leaves_nothing(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text('{"title": "A", "text": ""}\n')
    out = tmp_path / "out"
    with pytest.raises(CorpusError, match="empty"):
        build_index(resolve_sources([empty]), out, BuildOptions(dense=False))
    assert not out.exists() and not build_dir_for(out).exists()


def test_resumed_dense_build_equals_uninterrupted(hover_subset, tmp_path):
    records = hover_subset[0][:40]
    src = tmp_path / "c.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in records))
    opts = dict(bm25=False, shard_size=16)
    full = build_index(resolve_sources([src]), tmp_path / "full", BuildOptions(**opts))
    assert full["passages"] > 32  # three shards at least

    calls = []

    def stop_after_two(i):
        calls.append(i)
        if len(calls) == 2:
            raise Interrupted

    out = tmp_path / "resumed"
    with pytest.raises(Interrupted):
        build_index(resolve_sources([src]), out, BuildOptions(**opts), on_shard=stop_after_two)
    partial = build_dir_for(out.resolve())
    assert not out.exists() and not (partial / "manifest.json").exists()
    assert sorted(p.name for p in (partial / "dense-shards").glob("shard-*.npy")) == ["shard-00000.npy",
                                                                                     "shard-00001.npy"]
    resumed_shards = []
    logs = []
    m = build_index(resolve_sources([src]), out, BuildOptions(**opts), on_shard=resumed_shards.append,
                    log=logs.append)
    assert resumed_shards[0] == 2  # continued where it stopped
    assert any("resuming" in line for line in logs)
    a = faiss.read_index(str(tmp_path / "full" / "dense" / "index.faiss"))
    b = faiss.read_index(str(out / "dense" / "index.faiss"))
    assert a.ntotal == b.ntotal == m["passages"]
    np.testing.assert_allclose(a.reconstruct_n(0, a.ntotal), b.reconstruct_n(0, b.ntotal), atol=1e-5)
    assert (tmp_path / "full" / "dense" / "ids.txt").read_text() == (out / "dense" / "ids.txt").read_text()
    assert not partial.exists()


def test_cli_bad_inputs_are_one_line(tmp_path):
    from veracity.cli.index import index

    runner = CliRunner()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"title": "A", "text": "alpha beta"}\nnot json\n{"title": "C", "text": "gamma"}\n')
    res = runner.invoke(index, ["build", str(bad), "--out", str(tmp_path / "o"), "--no-dense"])
    assert res.exit_code == 1 and f"{bad}:2" in res.output and "Traceback" not in res.output
    assert not (tmp_path / "o").exists()
    res = runner.invoke(index, ["build", str(bad), "--out", str(tmp_path / "o"), "--no-dense", "--on-error",
                                "skip"])
    assert res.exit_code == 0, res.output
    assert "bad line 1" in res.output and json.loads((tmp_path / "o"
                                                      / "manifest.json").read_text())["passages"] == 2
    trunc = tmp_path / "enwiki-20190301-pages-articles.xml.bz2"
    trunc.write_bytes(write_wiki_dump(tmp_path / "x.xml.bz2").read_bytes()[:150])
    res = runner.invoke(index, ["build", str(trunc), "--out", str(tmp_path / "t"), "--no-dense"])
    assert res.exit_code == 1 and ("truncated" in res.output or "broken XML" in res.output)
    assert not (tmp_path / "t").exists()


QUERIES = ["Aristotle student of Plato philosophy", "Alaska purchase from Russia",
           "anarchism political philosophy",
           "Academy Awards ceremony film", "Apollo moon landing astronauts",
           "Algeria independence from France"]


@pytest.mark.parametrize("which", ["multistream", "single"])
def test_one_and_two_workers_build_the_same_index(tmp_path, which):
    """Real pyserini on the real dump sample: passage ids, store rows and BM25 hits do not depend on
    --workers,
    through the multistream index's offsets and through one stream cut by the reader."""
    from tests.fixtures.dumps import sample_dump, write_multistream
    from tests.fixtures.index import missing
    from veracity.errors import JavaError
    from veracity.indexes.bm25 import BM25Index
    from veracity.indexes.store import PassageStore

    dump = write_multistream(sample_dump(), tmp_path / "src")[0] if which == "multistream" else sample_dump()
    built = {}
    for workers in (1, 2):
        out = tmp_path / f"w{workers}"
        try:
            m = build_index(resolve_sources([dump]), out, BuildOptions(dense=False, workers=workers,
                                                                       bm25_threads=2))
        except JavaError as exc:
            missing(str(exc))
        store = PassageStore(out / "passages.sqlite")
        rows = store.iter_rows(0, store.count)
        ids = list(store.iter_ids())
        store.close()
        bm25 = BM25Index(out / "bm25")
        hits = {q: sorted(bm25.search(q, 20), key=lambda h: (-round(h[1], 4), h[0])) for q in QUERIES}
        assert bm25.num_docs == m["passages"]
        bm25.close()
        built[workers] = (m["passages"], m["articles"], m["sources"][0]["skipped"], ids, rows, hits)
    assert built[1][0] > 4000 and built[1][1] == 96
    assert built[1] == built[2]
    assert all(len(h) == 20 for h in built[1][5].values())
    assert any(pid.startswith("Alaska#") for pid, _ in built[1][5]["Alaska purchase from Russia"][:5])


def _lucene(folder, docs):
    """A Lucene index written by pyserini itself, as pyserini's prebuilt wikipedia-dpr-100w is: DPR passage
    numbers as ids, contents '"title"\\ntext'."""
    from veracity.indexes.java import ensure_jvm

    ensure_jvm()
    from pyserini.index.lucene import LuceneIndexer

    indexer = LuceneIndexer(args=["-index", str(folder), "-storeRaw"], threads=1)
    for docid, title, text in docs:
        indexer.add_doc_dict({"id": docid, "contents": f'"{title}"\n{text}'})
    indexer.close()
    return folder


def test_prebuilt_lucene_index_serves_as_the_bm25_half(tmp_path):
    from tests.fixtures.index import missing
    from veracity.errors import JavaError

    rows = [("1", "Aaron", "Aaron is a prophet, high priest, and the brother of Moses in the Hebrew Bible."),
            ("2", "Aaron", "His rod turned into a snake before the Pharaoh of Egypt."),
            ("3", "The Lost Sheep",
             "The Lost Sheep is a parable of Jesus about a shepherd who leaves ninety-nine."),
            ("4", "Zanzibar", "Zanzibar is an archipelago off the coast of East Africa known for spices.")]
    tsv = tmp_path / "psgs_w100.tsv"
    tsv.write_text("id\ttext\ttitle\n" + "".join(f"{i}\t{text}\t{title}\n" for i, title, text in rows))
    try:
        prebuilt = _lucene(tmp_path / "wikipedia-dpr-100w", rows)
    except JavaError as exc:
        missing(str(exc))
    m = build_index(resolve_sources([tsv]), tmp_path / "idx", BuildOptions(dense=False,
                                                                           bm25_prebuilt=prebuilt))
    assert m["bm25"]["prebuilt"] is True and m["bm25"]["docids"] == "dpr-row"
    assert m["bm25"]["dir"] == str(prebuilt.resolve()) and not (tmp_path / "idx" / "bm25").exists()
    assert m["dump_date"] == "2018-12-20"
    with Searcher(tmp_path / "idx") as s:
        hits = s.search("shepherd parable ninety-nine", 2, "bm25")
        assert hits[0].passage_id == "3" and "ninety-nine" in hits[0].text  # DPR ids kept (issue 44)
        assert s.search("rod snake Pharaoh", 1, "bm25")[0].passage_id == "2"
        assert [h.passage_id for h in s.search("Aaron prophet parable", 3, "bm25",
                                               exclude_titles=["Aaron"])] \
            == ["3"]
    fewer = _lucene(tmp_path / "fewer", rows[:3])
    with pytest.raises(IndexDirError, match="holds 3 documents, the corpus 4 passages"):
        build_index(resolve_sources([tsv]), tmp_path / "idx2", BuildOptions(dense=False, bm25_prebuilt=fewer))
    swapped = _lucene(tmp_path / "swapped", [("1", "Aaron", rows[1][2]), ("2", "Aaron", rows[0][2]),
                                             *rows[2:]])
    with pytest.raises(IndexDirError, match="does not match the corpus: document 1 is not passage '1'"):
        build_index(resolve_sources([tsv]), tmp_path / "idx3", BuildOptions(dense=False,
                                                                            bm25_prebuilt=swapped))
    assert not (tmp_path / "idx2").exists() and not (tmp_path / "idx3").exists()


def test_seed_vectors_made_from_a_built_index_are_checked_then_used_and_a_wrong_seed_is_refused(
        demo_style_index_dir, tmp_path, monkeypatch):
    # issue 39: a build takes the shipped vectors of passages it has (after encoding a sample itself), and the
    # index is the one encoding gives; seed vectors that do not match the encoder are refused, not used
    from tests.fixtures.index import write_demo_style_archive
    from veracity.indexes import seed as seed_mod
    from veracity.indexes.build import Source

    seeds = tmp_path / "seeds"
    n = seed_mod.make_seed(demo_style_index_dir, seeds / "demo-style.npz")
    monkeypatch.setattr(seed_mod, "SEEDS_DIR", seeds)
    archive = write_demo_style_archive(tmp_path / "downloads")
    exact = faiss.read_index(str(demo_style_index_dir / "dense" / "index.faiss")).reconstruct_n(0, n)

    def build(name, **kw):
        build_index([Source(archive, "demo")], tmp_path / name, BuildOptions(dump_date="2024-01-01", **kw))
        manifest = json.loads((tmp_path / name / "manifest.json").read_text())
        vecs = faiss.read_index(str(tmp_path / name / "dense" / "index.faiss")).reconstruct_n(0, n)
        return manifest["dense"].get("seed_vectors"), vecs

    facts, vecs = build("seeded")
    assert facts["used"] == n and facts["checked"] == n and not facts["refused"]
    assert facts["min_cosine"] >= 0.995
    assert np.abs(vecs - exact).max() < 2e-3  # float16 storage
    assert build("unseeded", seed_vectors=False)[0] is None

    with np.load(seeds / "demo-style.npz") as z:  # the same keys, other vectors: as from another encoder
        parts = dict(z)
    np.savez(seeds / "demo-style.npz", **{**parts, "vectors": -parts["vectors"]})
    facts, vecs = build("refused")
    assert facts["refused"] and facts["used"] == 0 and np.abs(vecs - exact).max() < 1e-4
