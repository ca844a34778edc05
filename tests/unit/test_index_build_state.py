"""build_index's resumable state is a typed BuildState whose file keeps the keys it always had, so a partial
build written before resumes (issue 41 point 6)."""

from __future__ import annotations

import json

from veracity.indexes.build import STATE_FILE, BuildState


def test_a_state_file_of_before_loads_and_saves_the_same_keys(tmp_path):
    old = {"key": "abc", "started": "2026-11-27T10:00:00+00:00", "timings": {"read_bm25_s": 1.5,
                                                                             "embed_s": 3.0},
           "sources": [{"path": "x.jsonl", "articles": 2}], "passages_done": True, "n_passages": 7,
           "estimate": {"disk_bytes": 10}}
    path = tmp_path / STATE_FILE
    path.write_text(json.dumps(old))
    state = BuildState.load(path)
    assert state is not None and state.key == "abc" and state.passages_done and state.n_passages == 7
    assert state.sources == old["sources"] and state.timings["embed_s"] == 3.0 and state.bm25_docids is None
    state.timings["faiss_s"] = 0.5
    state.save(path)
    assert json.loads(path.read_text()) == {**old, "timings": {**old["timings"], "faiss_s": 0.5}}


def test_a_fresh_state_records_only_what_is_known(tmp_path):
    path = tmp_path / STATE_FILE
    BuildState("k").save(path)
    saved = json.loads(path.read_text())
    assert set(saved) == {"key", "started", "timings", "passages_done"} and saved["passages_done"] is False


def test_an_unreadable_or_foreign_state_file_is_none(tmp_path):
    path = tmp_path / STATE_FILE
    path.write_text("{not json")
    assert BuildState.load(path) is None
    path.write_text(json.dumps({"no": "key"}))
    assert BuildState.load(path) is None
    assert BuildState.load(tmp_path / "missing.json") is None
