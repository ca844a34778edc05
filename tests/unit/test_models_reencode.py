"""SmolLM2's Q4_1 GGUF re-encoded as Q8_0 for llama.cpp (veracity/models/reencode.py): the same weights to
within Q8_0's rounding, every other tensor and all metadata as they were, written once and again only when
its source changed, and what llama.cpp serves for the kept SmolLM2 (nothing else)."""

from __future__ import annotations

import os

import gguf
import numpy as np
from gguf import GGMLQuantizationType as T

from veracity.config import Settings
from veracity.models.prepare import SMOLLM2_GGUF_NAME
from veracity.models.reencode import fast_gguf, fast_name, reencode, stamp_path


def write_gguf(path, seed: int = 0):
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(path, "llama")
    w.add_uint32("llama.block_count", 2)
    w.add_string("general.name", "tiny")
    w.add_array("tokenizer.ggml.tokens", ["<s>", "a", "b[for]"])
    weights = rng.normal(size=(4, 64)).astype(np.float32)
    w.add_tensor("blk.0.attn_q.weight", gguf.quants.quantize(weights, T.Q4_1), raw_dtype=T.Q4_1)
    w.add_tensor("output_norm.weight", rng.normal(size=64).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def fields(reader):
    return {f.name: f.contents() for f in reader.fields.values() if not f.name.startswith("GGUF.")}


def test_q4_1_tensors_become_q8_0_within_its_rounding_and_the_rest_is_unchanged(tmp_path):
    src = write_gguf(tmp_path / "m.Q4_1.gguf")
    out = reencode(src, fast_name(src))
    assert out.name == "m.Q8_0.gguf" and not list(tmp_path.glob("*.part"))
    a, b = gguf.GGUFReader(src), gguf.GGUFReader(out)
    assert fields(a) == fields(b) and fields(b)["tokenizer.ggml.tokens"] == ["<s>", "a", "b[for]"]
    before, after = ({t.name: t for t in r.tensors} for r in (a, b))
    q = after["blk.0.attn_q.weight"]
    assert q.tensor_type == T.Q8_0 and list(q.shape) == list(before["blk.0.attn_q.weight"].shape)
    x = gguf.quants.dequantize(before["blk.0.attn_q.weight"].data, T.Q4_1).reshape(-1, 32)
    y = gguf.quants.dequantize(q.data, T.Q8_0).reshape(-1, 32)
    assert np.all(np.abs(x - y).max(axis=1) <= 0.0045 * np.abs(x).max(axis=1))
    norm = after["output_norm.weight"]
    assert norm.tensor_type == T.F32 and norm.data.tobytes() == before["output_norm.weight"].data.tobytes()


def test_written_once_and_again_only_when_its_source_changes(tmp_path):
    src = write_gguf(tmp_path / "m.Q4_1.gguf")
    said: list[str] = []
    first = fast_gguf(src, said.append)
    assert first == fast_name(src) and len(said) == 1 and "re-encoding" in said[0]
    made = first.stat().st_mtime_ns
    assert fast_gguf(src, said.append) == first and len(said) == 1 and first.stat().st_mtime_ns == made
    write_gguf(src, seed=1)  # a new source (another size or time): made again from it
    os.utime(src, ns=(made + 10**9, made + 10**9))
    assert fast_gguf(src, said.append) == first and len(said) == 2
    assert stamp_path(first).is_file()


def test_a_failed_write_serves_the_source_and_leaves_no_part_file(tmp_path, monkeypatch):
    src = write_gguf(tmp_path / "m.Q4_1.gguf")

    def full(self, *args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(gguf.GGUFWriter, "write_tensors_to_file", full)
    said: list[str] = []
    assert fast_gguf(src, said.append) == src
    assert "No space left on device" in said[-1] and not list(tmp_path.glob("*.part"))
    assert not fast_name(src).exists()


def test_llama_cpp_serves_the_kept_smollm2_re_encoded_and_any_other_gguf_as_given(tmp_path):
    from veracity.serving.engines.llamacpp import LLAMA_CPP

    settings = Settings(home=tmp_path / "home")
    (settings.home / "downloads").mkdir(parents=True)
    kept = write_gguf(settings.home / "downloads" / SMOLLM2_GGUF_NAME)
    served = LLAMA_CPP.model_path(settings, "smollm2-135m-instruct")
    assert served == kept.with_name("SmolLM2-135M-Instruct.Q8_0.gguf") and served.is_file()
    own = write_gguf(tmp_path / "mine.Q4_1.gguf")
    assert LLAMA_CPP.model_path(settings, str(own)) == own and not fast_name(own).exists()
