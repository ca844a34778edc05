"""Chunking: ~N-word passages, title kept, stable ids title#n, overlap, short tails merged."""

import pytest

from veracity.errors import ConfigError
from veracity.indexes.passages import Article, Chunking, chunk_article, split_passage_id


def words(n, prefix="w"):
    return " ".join(f"{prefix}{i}" for i in range(n))


def test_ids_are_title_hash_n_and_text_is_covered_in_order():
    art = Article("Paris (city)", words(250))
    ps = chunk_article(art, Chunking(words=100, overlap=0, min_tail=25))
    assert [p.id for p in ps] == ["Paris (city)#0", "Paris (city)#1", "Paris (city)#2"]
    assert all(p.title == "Paris (city)" for p in ps)
    assert [len(p.text.split()) for p in ps] == [100, 100, 50]
    assert " ".join(p.text for p in ps) == art.text
    assert ps[1].indexed_text().startswith("Paris (city)\n")
    assert split_passage_id("A#B#3") == ("A#B", 3)


def test_stable_across_runs_and_short_tail_joins_previous():
    art = Article("T", words(210))
    a = chunk_article(art, Chunking(100, 0, 25))
    b = chunk_article(art, Chunking(100, 0, 25))
    assert a == b
    assert [len(p.text.split()) for p in a] == [100, 110]  # 10-word tail merged


def test_overlap_shares_words():
    ps = chunk_article(Article("T", words(180)), Chunking(words=100, overlap=20, min_tail=10))
    first, second = ps[0].text.split(), ps[1].text.split()
    assert first[-20:] == second[:20]
    assert second[-1] == "w179"
    assert len(ps) == 2


def test_tail_merge_with_overlap_keeps_each_word_once():
    ps = chunk_article(Article("T", words(185)), Chunking(words=100, overlap=20, min_tail=30))
    # pieces start at 0, 80, 160 -> last piece adds 5 new words (< 30) and is merged without duplicates
    assert len(ps) == 2
    assert ps[1].text.split() == [f"w{i}" for i in range(80, 185)]


def test_empty_text_gives_no_passage_and_bad_settings_are_refused():
    assert chunk_article(Article("T", "   ")) == []
    with pytest.raises(ConfigError):
        Chunking(words=0)
    with pytest.raises(ConfigError):
        Chunking(words=50, overlap=50)
