"""Corpus readers: Wikipedia XML dumps (bz2, multistream, broken), JSONL / HoVer / FEVER, format detection."""

import bz2
import json

import pytest

from tests.fixtures.index import write_wiki_dump
from veracity.errors import CorpusError
from veracity.indexes.readers import SourceInfo, dump_date_from_name, wikitext_to_plain
from veracity.indexes.sources import detect_format, read_articles


def read(path, fmt, **kw):
    info = SourceInfo(str(path), fmt)
    return list(read_articles(path, fmt, info, **kw)), info


@pytest.mark.parametrize("multistream", [False, True])
def test_wiki_dump_keeps_articles_and_skips_the_rest(tmp_path, multistream):
    path = write_wiki_dump(tmp_path / "enwiki-20190301-pages-articles-multistream.xml.bz2",
                           multistream=multistream)
    if multistream:
        assert path.read_bytes().count(b"BZh") >= 3
    arts, info = read(path, "wiki-xml")
    assert [a.title for a in arts] == ["Zorbland", "Ottilie Marsh", "Glass Compass"]
    assert info.skipped == {"redirect": 1, "disambiguation": 2, "list page": 1, "non-article namespace": 1}
    assert info.dump_date == "2019-03-01" and info.dump_date_from == "file name"
    z = arts[0].text
    assert "Zorbland is a fictional island nation in the Quillian Sea" in z
    assert "violet basalt cliffs" in z and "founded in 1642" in z
    for junk in ("cite web", "Infobox", "[[", "{{", "thumb", "Category", "A book about nothing", "<ref"):
        assert junk not in z


def test_dump_date_falls_back_to_newest_revision(tmp_path):
    path = write_wiki_dump(tmp_path / "pages.xml.bz2", timestamp="2021-07-09T00:00:00Z")
    _, info = read(path, "wiki-xml")
    assert info.dump_date == "2021-07-09" and info.dump_date_from == "newest revision"
    assert dump_date_from_name("enwiki-20240601-pages-articles.xml.bz2") == "2024-06-01"
    assert dump_date_from_name("enwiki-latest-pages-articles.xml.bz2") is None


def test_truncated_and_non_bz2_dumps_are_one_clear_error(tmp_path):
    good = write_wiki_dump(tmp_path / "a.xml.bz2").read_bytes()
    cut = tmp_path / "enwiki-20190301-pages-articles.xml.bz2"
    cut.write_bytes(good[: len(good) // 2])
    with pytest.raises(CorpusError, match="truncated|broken XML"):
        read(cut, "wiki-xml")
    fake = tmp_path / "b.xml.bz2"
    fake.write_text("this is not bzip2")
    with pytest.raises(CorpusError, match="not bzip2"):
        read(fake, "wiki-xml")


def test_wikitext_disambiguation_template_detected():
    assert wikitext_to_plain("x\n{{Disambiguation}}")[1] is True
    text, dab = wikitext_to_plain("'''A''' is [[B|bee]].<ref>r</ref>")
    assert (text, dab) == ("A is bee.", False)


def test_jsonl_bad_line_reports_file_and_line_and_skip_counts(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text('{"title": "A", "text": "alpha"}\n{"title": "B", "text": \n{"title": "C", "text": '
                    '"gamma"}\n')
    with pytest.raises(CorpusError) as err:
        read(path, "jsonl")
    assert f"{path}:2" in str(err.value) and "not JSON" in str(err.value)
    assert "--on-error skip" in err.value.hint
    arts, info = read(path, "jsonl", on_error="skip")
    assert [a.title for a in arts] == ["A", "C"] and info.skipped == {"bad line": 1}


def test_pyserini_hover_and_fever_records(tmp_path):
    p = tmp_path / "p.jsonl"
    p.write_text(json.dumps({"id": "Kyoto#0", "contents": "Kyoto\nKyoto was the capital of Japan."}) + "\n")
    assert detect_format(p) == "jsonl"
    assert [(a.title, a.text) for a in read(p, "jsonl")[0]] == [("Kyoto", "Kyoto was the capital of Japan.")]
    h = tmp_path / "h.jsonl"
    h.write_text(json.dumps({"title": "Nara", "text": ["Nara is a city.", " It has deer."]}) + "\n")
    assert detect_format(h) == "hover"
    assert read(h, "hover")[0][0].text == "Nara is a city.  It has deer."
    f = tmp_path / "wiki-001.jsonl.bz2"
    recs = [{"id": "", "text": "", "lines": ""},
            {"id": "Soul_Food_-LRB-film-RRB-", "text": "x",
             "lines": "0\tSoul Food is a 1997 film .\tfilm\n1\t\n2\tIt stars Vanessa Williams .\tVanessa "
                      "Williams"}]
    f.write_bytes(bz2.compress("\n".join(json.dumps(r) for r in recs).encode()))
    assert detect_format(f) == "fever"
    arts, info = read(f, "fever")
    assert [(a.title, a.text) for a in arts] == [("Soul Food (film)",
                                                  "Soul Food is a 1997 film. It stars Vanessa Williams.")]
    assert info.skipped == {"empty": 1}


def test_unknown_format_is_refused(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_text('{"foo": 1}\n')
    with pytest.raises(CorpusError, match="cannot tell the format"):
        detect_format(p)
