"""The fast wikitext cleaner: what it keeps and drops, and its agreement with mwparserfromhell on real
pages."""

import collections
import re
import xml.etree.ElementTree as ET

import pytest

from tests.fixtures.index import missing, shared_data_dir
from veracity.errors import ConfigError
from veracity.indexes.readers import mwparser_to_plain, wikitext_to_plain as by_name
from veracity.indexes.wikitext import wikitext_to_plain


@pytest.mark.parametrize("markup, plain", [
    ("'''A''' is [[B|bee]].<ref>r</ref>", "A is bee."),
    ("{{Infobox|a={{b|{{c}}}}|c=[[d]]}}Kept.", "Kept."),
    ("Before {{unclosed [[a]] b", "Before {{unclosed a b"),
    ("A [[File:x.jpg|thumb|a caption with [[a link]] in it]] B", "A B"),
    ("A [[Image:y.png]] [[Category:Things]] [[fr:Paris]] [[Media:z.ogg]] B", "A B"),
    ("[[bus]]es and [[Paris (France)|]]", "buses and Paris (France)"),
    ("x <math>\\frac{a}{b}}}</math> y {{t}} z", "x y z"),
    ("a <ref name=\"n\"/> b <ref name=\"m\">{{cite web|url=u}}</ref> c", "a b c"),
    ("a <!-- hidden {{x}} --> b", "a b"),
    ("a\n{| class=\"wikitable\"\n|-\n| cell {{t}}\n|}\nb", "a\nb"),
    ("a {{tpl|\n{|\n| nested table\n|}\n}} b", "a b"),
    ("[http://example.org label text] and [http://example.org] and http://bare.org",
     "label text and and http://bare.org"),
    ("== History ==\n* '''one'''\n# two\n: three", "History\none\ntwo\nthree"),
    ("caf&eacute; &amp; <small>small</small> __NOTOC__ tea", "café & small tea"),
    ("Lead.\n== See also ==\n* [[Other]]\n== Notes ==\nx", "Lead."),
    ("Lead.\n=== References ===\nx", "Lead."),
    ("Lead. <gallery>\nFile:a.jpg|cap\n</gallery> end", "Lead. end"),
])
def test_fast_cleaner_keeps_text_and_drops_markup(markup, plain):
    assert wikitext_to_plain(markup) == (plain, False)


@pytest.mark.parametrize("markup", ["x\n{{Disambiguation}}", "{{ disambig }}", "{{Hndis|name=Smith}}",
                                    "{{set index|ship}}", "text {{Surname}}"])
def test_disambiguation_pages_are_flagged(markup):
    assert wikitext_to_plain(markup) == ("", True)
    assert mwparser_to_plain(markup)[1] is True


def test_disambiguation_template_inside_another_template_does_not_count():
    assert wikitext_to_plain("{{Infobox|x={{dab}}}}Text") == ("Text", False)


def test_cleaner_by_name_and_unknown_name():
    assert by_name("'''A'''", "fast") == by_name("'''A'''", "mwparser") == ("A", False)
    with pytest.raises(ConfigError, match="unknown --cleaner"):
        by_name("x", "wikiextractor")


def _sample_pages(n: int) -> list[tuple[str, str]]:
    data = shared_data_dir()
    dump = (data / "wiki_dump_sample"
            / "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2" if data else None)
    if dump is None or not dump.exists():
        missing("the wiki dump sample (../shared/data/wiki_dump_sample) is missing")
    import bz2

    pages = []
    with bz2.open(dump) as f:
        for _, elem in ET.iterparse(f):
            if elem.tag.endswith("}page"):
                ns = elem.find("{*}ns").text
                text = elem.find("{*}revision/{*}text").text or ""
                if (ns == "0" and not text.lstrip().lower().startswith("#redirect")
                        and 2000 < len(text) < 30000):
                    pages.append((elem.find("{*}title").text, text))
                elem.clear()
            if len(pages) >= n:
                break
    return pages


def test_fast_cleaner_agrees_with_mwparser_on_real_pages():
    """On real articles the two cleaners keep nearly the same words (the benchmark measures the whole
    sample)."""
    pages = _sample_pages(12)
    assert len(pages) == 12
    jaccards = []
    for _, text in pages:
        new, new_dab = wikitext_to_plain(text)
        old, old_dab = mwparser_to_plain(text)
        assert new_dab == old_dab
        if new_dab:
            continue
        a = set(re.findall(r"\w+", new.lower()))
        b = set(re.findall(r"\w+", old.lower()))
        jaccards.append(len(a & b) / len(a | b))
        for junk in ("{{", "}}", "[[", "]]", "<ref", "'''", "thumb|"):
            assert junk not in new
    assert len(jaccards) >= 8
    assert min(jaccards) >= 0.8 and sum(jaccards) / len(jaccards) >= 0.95, jaccards
    counts = collections.Counter(round(j, 1) for j in jaccards)
    assert counts[1.0] >= 6, counts
