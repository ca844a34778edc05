"""Which sentence-transformers folders the torch-only encoder computes (veracity/models/bert_encoder.py): only
those whose every module it reproduces; any other is left to sentence-transformers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from veracity.models.bert_encoder import plain_bert_layout

T, P, N = ("sentence_transformers.models.Transformer", "sentence_transformers.models.Pooling",
           "sentence_transformers.models.Normalize")


FILES = ("model.safetensors", "tokenizer.json")


def folder(tmp_path: Path, *, modules=None, pooling=None, config=None, st=None, files=FILES) -> Path:
    path = tmp_path / "enc"
    (path / "1_Pooling").mkdir(parents=True)
    mods = modules or [{"idx": 0, "name": "0", "path": "", "type": T},
                       {"idx": 1, "name": "1", "path": "1_Pooling", "type": P},
                       {"idx": 2, "name": "2", "path": "2_Normalize", "type": N}]
    (path / "modules.json").write_text(json.dumps(mods))
    (path / "1_Pooling" / "config.json").write_text(json.dumps(pooling or {
        "word_embedding_dimension": 384, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True,
        "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False}))
    (path / "config.json").write_text(json.dumps(config or {
        "model_type": "bert", "hidden_act": "gelu", "position_embedding_type": "absolute",
        "max_position_embeddings": 512}))
    (path / "sentence_bert_config.json").write_text(json.dumps(st or {"max_seq_length": 256,
                                                                        "do_lower_case": False}))
    for name in files:
        (path / name).write_bytes(b"")
    return path


def test_the_default_encoders_layout_is_taken(tmp_path):
    layout = plain_bert_layout(folder(tmp_path))
    assert layout is not None and layout["pooling"] == "mean" and layout["max_seq_length"] == 256


def test_cls_pooling_and_no_normalize_module_are_taken(tmp_path):
    path = folder(tmp_path, modules=[{"idx": 0, "name": "0", "path": "", "type": T},
                                     {"idx": 1, "name": "1", "path": "1_Pooling", "type": P}],
                  pooling={"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False})
    assert plain_bert_layout(path)["pooling"] == "cls"


@pytest.mark.parametrize("change", [
    {"pooling": {"pooling_mode_max_tokens": True, "pooling_mode_mean_tokens": False}},
    {"pooling": {"pooling_mode_mean_tokens": True, "pooling_mode_mean_sqrt_len_tokens": True}},
    {"modules": [{"idx": 0, "name": "0", "path": "", "type": T},
                 {"idx": 1, "name": "1", "path": "1_Pooling", "type": P},
                 {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"}]},
    {"modules": [{"idx": 0, "name": "0", "path": "0_Transformer", "type": T},
                 {"idx": 1, "name": "1", "path": "1_Pooling", "type": P}]},
    {"config": {"model_type": "xlm-roberta", "hidden_act": "gelu", "max_position_embeddings": 514}},
    {"config": {"model_type": "bert", "hidden_act": "relu", "max_position_embeddings": 512}},
    {"config": {"model_type": "bert", "hidden_act": "gelu", "position_embedding_type": "relative_key",
                "max_position_embeddings": 512}},
    {"st": {"max_seq_length": 256, "do_lower_case": True}},
    {"files": ("tokenizer.json",)},  # weights as pytorch_model.bin only
    {"files": ("model.safetensors",)},  # a slow tokenizer only
], ids=["max-pooling", "two-poolings", "dense-module", "transformer-in-subfolder", "roberta", "relu",
        "relative-positions", "lower-case-in-st", "no-safetensors", "no-tokenizer-json"])
def test_any_other_layout_is_left_to_sentence_transformers(tmp_path, change):
    assert plain_bert_layout(folder(tmp_path, **change)) is None


def test_a_broken_folder_is_left_to_sentence_transformers(tmp_path):
    path = folder(tmp_path)
    (path / "modules.json").write_text("{not json")
    assert plain_bert_layout(path) is None
    assert plain_bert_layout(tmp_path / "missing") is None
