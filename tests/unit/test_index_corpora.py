"""The research corpora (DPR psgs_w100.tsv, KILT, FEVER wiki-pages, HotpotQA abstracts): each read from a
small
file written in its real format, detected by name / content, dated for the leakage guard."""

import bz2
import json
import sqlite3

import pytest

from veracity.errors import CorpusError
from veracity.indexes.build import BuildOptions, _read_into, resolve_sources
from veracity.indexes.passages import chunk_article
from veracity.indexes.readers import SourceInfo
from veracity.indexes.sources import detect_format, read_articles
from veracity.indexes.store import STORE_FILE


def read(path, fmt, **kw):
    info = SourceInfo(str(path), fmt)
    return list(read_articles(path, fmt, info, **kw)), info


# DPR's psgs_w100.tsv: header, then id<TAB>text<TAB>title, text quoted as CSV ("" inside quotes)
DPR_TSV = ('id\ttext\ttitle\n'
           '1\t"Aaron Aaron ( or ; ""Ahärôn"") is a prophet, high priest, and the brother of Moses."\tAaron\n'
           '2\t"his rod turned into a snake. Then he stretched out his rod"\tAaron\n'
           '3\t"God at Sinai granted Aaron the priesthood for himself"\tAaron\n'
           '4\t"The Lost Sheep is a parable of Jesus."\tThe Lost Sheep\n')


def test_dpr_tsv_keeps_dpr_passages_and_maps_ids(tmp_path):
    path = tmp_path / "psgs_w100.tsv"
    path.write_text(DPR_TSV, encoding="utf-8")
    assert detect_format(path) == "dpr-tsv"
    arts, info = read(path, "dpr-tsv")
    assert [a.title for a in arts] == ["Aaron", "The Lost Sheep"]
    assert info.dump_date == "2018-12-20" and "DPR" in info.dump_date_from
    passages = [p for a in arts for p in chunk_article(a)]
    # DPR's own passage ids survive (results compare with DPR / pyserini gold ids); n is the chunk number
    assert [p.id for p in passages] == ["1", "2", "3", "4"]
    assert [(p.title, p.n) for p in passages] == [("Aaron", 0), ("Aaron", 1), ("Aaron", 2),
                                                  ("The Lost Sheep", 0)]
    assert passages[0].text == ('Aaron Aaron ( or ; "Ahärôn") is a prophet, high priest, and the brother '
                                'of Moses.')
    # a short one is not merged
    assert passages[2].text == "God at Sinai granted Aaron the priesthood for himself"
    work = tmp_path / "w"
    work.mkdir()
    [src] = resolve_sources([path])
    _read_into(work, [src], [SourceInfo(str(path), src.format).to_dict()], BuildOptions(bm25=False,
                                                                                        dense=False),
               lambda *a: None, lambda m: None)
    with sqlite3.connect(work / STORE_FILE) as conn:
        rows = conn.execute("SELECT idx, id FROM passages ORDER BY idx").fetchall()
    assert rows == [(0, "1"), (1, "2"), (2, "3"), (3, "4")]  # DPR's ids, and idx = DPR id - 1


def test_dpr_tsv_gzip_and_bad_rows(tmp_path):
    import gzip

    path = tmp_path / "psgs_w100.tsv.gz"
    path.write_bytes(gzip.compress((DPR_TSV + "5\tonly two columns\n").encode()))
    assert detect_format(path) == "dpr-tsv"
    with pytest.raises(CorpusError, match=r"psgs_w100.tsv.gz:6: a DPR row has 3 columns"):
        read(path, "dpr-tsv")
    arts, info = read(path, "dpr-tsv", on_error="skip")
    assert len(arts) == 2 and info.skipped == {"bad line": 1}


@pytest.mark.parametrize("header", ["id\ttitle\ttext", "text\ttitle", "doc_id\tcontents\ttitle"])
def test_tsv_with_wrong_columns_is_one_line_with_a_hint(tmp_path, header):
    path = tmp_path / "passages.tsv"
    path.write_text(f"{header}\n1\tsome text\tTitle\n")
    with pytest.raises(CorpusError, match="not a DPR passages TSV: its columns are") as err:
        detect_format(path)
    assert "id<TAB>text<TAB>title" in err.value.hint
    with pytest.raises(CorpusError, match="not a DPR passages TSV"):
        read(path, "dpr-tsv")


def test_kilt_knowledge_source(tmp_path):
    rec = {"_id": "290", "wikipedia_id": "290", "wikipedia_title": "A",
           "text": ["A\n", "A, or a, is the first letter of the English alphabet.\n", "Section::::History.\n",
                    "The earliest certain ancestor of \"A\" is aleph.\n",
                    "BULLET::::- In algebra, a variable.\n",
                    "Section::::See also.\n", "BULLET::::- Alpha\n"],
           "anchors": [], "categories": "Letters", "history": {"revid": 907008348,
                                                               "timestamp": "2019-07-19T20:25:53Z"}}
    empty = {"_id": "1", "wikipedia_id": "1", "wikipedia_title": "Empty", "text": ["Empty\n"]}
    path = tmp_path / "kilt_knowledgesource.json"
    path.write_text(json.dumps(rec) + "\n" + json.dumps(empty) + "\n")
    assert detect_format(path) == "kilt"
    arts, info = read(path, "kilt")
    assert [(a.title, a.text) for a in arts] == [
        ("A", "A, or a, is the first letter of the English alphabet.\nHistory\n"
              "The earliest certain ancestor of \"A\" is aleph.\nIn algebra, a variable.")]
    assert info.dump_date == "2019-08-01" and info.skipped == {"empty": 1}
    path.write_text(json.dumps({"wikipedia_title": "B"}) + "\n")
    with pytest.raises(CorpusError, match="kilt_knowledgesource.json:1: bad kilt record"):
        read(path, "kilt")


def test_fever_wiki_pages_are_dated_june_2017(tmp_path):
    path = tmp_path / "wiki-001.jsonl"
    path.write_text(json.dumps({"id": "Nikolaj_Coster-Waldau",
                                "text": "Nikolaj William Coster-Waldau is a Danish actor .",
                                "lines": "0\tNikolaj William Coster-Waldau is a Danish actor .\tDanish"})
                    + "\n")
    arts, info = read(path, detect_format(path))
    assert arts[0].title == "Nikolaj Coster-Waldau" and info.dump_date == "2017-06-01"
    assert "FEVER" in info.dump_date_from


def _hotpot_folder(tmp_path):
    folder = tmp_path / "enwiki-20171001-pages-meta-current-withlinks-abstracts"
    recs = {"AA/wiki_00.bz2": [{"id": "12", "url": "https://en.wikipedia.org/wiki?curid=12",
                                "title": "Anarchism",
                                "text": ["Anarchism is a <a href=\"political%20philosophy\">political "
                                         "philosophy</a>.",
                                         " It advocates self-governed societies."],
                                "charoffset": [[[0, 9]]], "text_with_links": [],
                                "charoffset_with_links": []}],
            "AA/wiki_01.bz2": [{"id": "25", "url": "u", "title": "Autism", "text": ["Autism is a condition."],
                                "charoffset": []}],
            "AB/wiki_00.bz2": [{"id": "39", "url": "u", "title": "Albedo", "text": [], "charoffset": []},
                               {"id": "40", "url": "u", "title": "Abu Dhabi",
                                "text": ["Abu Dhabi is a city."],
                                "charoffset": []}]}
    for rel, lines in recs.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(bz2.compress("".join(json.dumps(r) + "\n" for r in lines).encode()))
    return folder


def test_hotpot_abstracts_folder(tmp_path):
    folder = _hotpot_folder(tmp_path)
    assert detect_format(folder) == "hotpot-abstracts"
    assert detect_format(folder / "AA" / "wiki_00.bz2") == "hotpot-abstracts"
    arts, info = read(folder, "hotpot-abstracts")
    assert [(a.title, a.text) for a in arts] == [
        ("Anarchism", "Anarchism is a political philosophy. It advocates self-governed societies."),
        ("Autism", "Autism is a condition."), ("Abu Dhabi", "Abu Dhabi is a city.")]
    assert info.dump_date == "2017-10-01" and info.skipped == {"empty": 1}
    [src] = resolve_sources([folder])
    assert src.format == "hotpot-abstracts"


def test_a_folder_that_is_not_a_corpus_is_refused(tmp_path):
    with pytest.raises(CorpusError, match="neither HotpotQA's abstracts"):
        resolve_sources([tmp_path])


def _fever_folder(tmp_path):
    """FEVER's wiki-pages/ as released: wiki-001.jsonl ... (an empty first record), PTB-tokenised lines."""
    folder = tmp_path / "wiki-pages"
    folder.mkdir()
    first = [{"id": "", "text": "", "lines": ""},
             {"id": "Nikolaj_Coster-Waldau", "text": "x",
              "lines": "0\tNikolaj William Coster-Waldau -LRB- born 27 July 1970 -RRB- is a Danish actor , "
                       "producer "
                       "and screenwriter .\tDanish\n1\tHe has n't said `` never '' .\t"}]
    second = [{"id": "Soul_Food_-LRB-film-RRB-", "text": "x", "lines": "0\tSoul Food is a 1997 film .\tfilm"}]
    (folder / "wiki-001.jsonl").write_text("\n".join(json.dumps(r) for r in first) + "\n")
    (folder / "wiki-002.jsonl").write_text("\n".join(json.dumps(r) for r in second) + "\n")
    return folder


def test_fevers_wiki_pages_folder_is_read_and_detokenised(tmp_path):
    folder = _fever_folder(tmp_path)
    assert detect_format(folder) == "fever"
    arts, info = read(folder, "fever")
    assert [(a.title, a.text) for a in arts] == [
        ("Nikolaj Coster-Waldau",
         "Nikolaj William Coster-Waldau (born 27 July 1970) is a Danish actor, producer and "
                                  "screenwriter. He hasn't said \"never\"."),
        ("Soul Food (film)", "Soul Food is a 1997 film.")]
    assert info.dump_date == "2017-06-01" and info.skipped == {"empty": 1}
    [src] = resolve_sources([folder])
    assert src.format == "fever"


def test_a_folder_source_is_planned_not_zero(tmp_path):
    from veracity.indexes.passages import Chunking
    from veracity.indexes.plan import estimate_passages

    assert estimate_passages(_fever_folder(tmp_path), "fever", Chunking()) == (2, "counted (2 files read)")
    assert estimate_passages(_hotpot_folder(tmp_path), "hotpot-abstracts", Chunking()) == (3,
                                                                                           "counted (3 files "
                                                                                           "read)")


def test_dpr_ids_are_the_stores_ids_and_titles_are_read_back_for_the_title_filter(tmp_path):
    from veracity.indexes.bm25 import BM25Retriever
    from veracity.indexes.store import PassageStore, PassageWriter

    path = tmp_path / "psgs_w100.tsv"
    path.write_text(DPR_TSV, encoding="utf-8")
    arts, _ = read(path, "dpr-tsv")
    writer = PassageWriter(tmp_path / STORE_FILE)
    writer.add(p for a in arts for p in chunk_article(a))
    writer.close()
    store = PassageStore(tmp_path / STORE_FILE)
    assert store.by_ids(["4"]) == {"4": ("The Lost Sheep", "The Lost Sheep is a parable of Jesus.")}
    rows = sqlite3.connect(tmp_path
                           / STORE_FILE).execute("select id, title, n from passages order by idx").fetchall()
    assert rows == [("1", "Aaron", 0), ("2", "Aaron", 1), ("3", "Aaron", 2), ("4", "The Lost Sheep", 0)]
    retriever = BM25Retriever(store, None)
    assert retriever._title_of(("3", 1.0)) == "Aaron" and retriever._title_of(("Kyoto#2", 1.0)) == "Kyoto"
