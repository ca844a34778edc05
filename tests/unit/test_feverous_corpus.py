"""benchmarks/feverous_corpus.py: FEVEROUS-S gold sentences grouped into one plain-text article per page."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "feverous_corpus.py"
spec = importlib.util.spec_from_file_location("feverous_corpus", SCRIPT)
fc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fc)


def test_link_markup_becomes_its_text():
    assert fc.plain("near [[Pittsview,_Alabama|Pittsview]] in [[Alabama]].") == "near Pittsview in Alabama."


def test_pages_group_sentences_once_in_order_and_a_bad_line_is_one_error(tmp_path, capsys):
    lines = [json.dumps({"title": "A", "sentence": "One [[x|ex]].", "claim_ids": [1]}),
             json.dumps({"title": "B", "sentence": "Two.", "claim_ids": [2]}),
             json.dumps({"title": "A", "sentence": "Three.", "claim_ids": [3]}),
             json.dumps({"title": "A", "sentence": "One [[x|ex]].", "claim_ids": [4]})]
    src, dst = tmp_path / "gold.jsonl", tmp_path / "out.jsonl"
    src.write_text("\n".join(lines) + "\n")
    assert fc.main([str(src), str(dst)]) == 0
    out = [json.loads(x) for x in dst.read_text().splitlines()]
    assert out == [{"title": "A", "text": "One ex. Three."}, {"title": "B", "text": "Two."}]
    src.write_text(json.dumps({"title": "A", "text": "no sentence field"}) + "\n")
    try:
        fc.main([str(src), str(dst)])
    except SystemExit as e:
        assert "no 'sentence' field" in str(e)
    else:
        raise AssertionError("a record without 'sentence' was accepted")
    assert fc.main([str(tmp_path / "missing.jsonl"), str(dst)]) == 2
    assert "not found" in capsys.readouterr().err
