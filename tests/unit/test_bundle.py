"""Transfer bundles (veracity/bundle/): the manifest, verify, install and every bad input, on tiny fake
bundles.

A fake prepared model (config.json + a few bytes of "weights" + a GGUF) and a fake index live in a
temporary home; ``create_bundle(..., wheels=False)`` bundles them (no pip, no network). The wheels step
and the real round trip are measured by benchmarks/bundle_roundtrip.py; the commands with the network cut
are tests/integration/test_network_cut.py.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from veracity.bundle import install as bundle_install
from veracity.bundle.create import BundleOptions, create_bundle, plan_bundle
from veracity.bundle.manifest import (MANIFEST, BundleError, missing_cpu_features, read_manifest,
                                      this_machine,
                                      verify_bundle)
from veracity.cli import _register, cli
from veracity.config import Settings
from veracity.models.prepared import PreparedModel, _save_prepared, load_prepared

MODEL = "smollm2-135m-instruct"


def make_home(home: Path) -> Settings:
    settings = Settings(home=home)
    weights = settings.models_dir / MODEL
    weights.mkdir(parents=True)
    (weights / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}')
    (weights / "model.safetensors").write_bytes(os.urandom(4096))
    (weights / "tokenizer.json").write_text("{}")
    gguf = home / "downloads" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    gguf.parent.mkdir(parents=True)
    gguf.write_bytes(b"GGUF" + os.urandom(2048))
    _save_prepared(settings, {MODEL: PreparedModel(MODEL, weights, "test source", 1.0, "Paris.", {},
                                                   str(gguf))})
    return settings


def make_index(folder: Path) -> Path:
    (folder / "bm25").mkdir(parents=True)
    (folder / "manifest.json").write_text('{"passages": 3}')
    (folder / "passages.sqlite").write_bytes(os.urandom(1024))
    (folder / "bm25" / "segment").write_bytes(os.urandom(512))
    return folder


@pytest.fixture
def made(tmp_path):
    """(settings of the connected machine, the bundle folder), the bundle made."""
    settings = make_home(tmp_path / "src-home")
    index = make_index(tmp_path / "demo")
    out = tmp_path / "bundle"
    create_bundle(settings, BundleOptions(out=out, indexes=[index], llama_cpp="none", wheels=False),
                  progress=lambda s: None)
    return settings, out


def run(args: list[str], home: Path) -> tuple[int, str, str]:
    _register()
    env = {k: None for k in os.environ if k.startswith("VERACITY_")}
    env.update({"VERACITY_HOME": str(home), "NO_COLOR": "1", "COLUMNS": "200"})
    res = CliRunner().invoke(cli, args, env=env, catch_exceptions=True)
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return res.exit_code, res.stdout, res.stderr


def one_error(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("error:")]
    hints = [ln for ln in lines if ln.startswith("hint:")]
    assert len(errors) == 1 and len(hints) == 1 and "Traceback" not in err, err
    return errors[0]


def test_the_manifest_lists_every_file_with_its_sha256_and_size_and_the_machine(made):
    _, out = made
    manifest = read_manifest(out)
    on_disk = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()} - {MANIFEST}
    assert set(manifest["files"]) == on_disk
    assert "install.py" in on_disk and f"models/{MODEL}/weights/config.json" in on_disk
    assert (f"models/{MODEL}/SmolLM2-135M-Instruct.Q4_1.gguf" in on_disk
            and "indexes/demo/bm25/segment" in on_disk)
    for rel, meta in manifest["files"].items():
        assert meta["size"] == (out / rel).stat().st_size and len(meta["sha256"]) == 64
    assert manifest["target"]["python"] == this_machine()["python"]
    assert manifest["models"][0]["entry"]["verified"] == "Paris."
    assert verify_bundle(out)["total_bytes"] == sum(m["size"] for m in manifest["files"].values())


def test_install_registers_the_model_and_the_index_and_the_files_are_the_bundles(made, tmp_path):
    _, out = made
    home = tmp_path / "offline-home"
    said = []
    done = bundle_install.install_bundle(Settings(home=home), out, engine=False, progress=said.append)
    assert done["models"] == [MODEL] and done["indexes"] == [str(home / "indexes" / "demo")]
    prepared = load_prepared(Settings(home=home))
    assert (prepared[MODEL].path / "config.json").is_file() and Path(prepared[MODEL].gguf).is_file()
    assert (home / "models" / MODEL / "model.safetensors").read_bytes() == \
        (out / "models" / MODEL / "weights" / "model.safetensors").read_bytes()
    assert (home / "indexes" / "demo" / "bm25" / "segment").is_file()
    assert json.loads((home / "defaults.json").read_text())["model"] == MODEL
    assert not list(home.rglob("*.bundle-staging"))


@pytest.mark.parametrize("damage, words", [
    ("truncate", "truncated models/"),
    ("flip", "changed models/"),
    ("delete", "missing models/"),
])
def test_a_damaged_file_is_one_line_naming_it_and_nothing_is_installed(made, tmp_path, damage, words):
    _, out = made
    victim = out / "models" / MODEL / "weights" / "model.safetensors"
    if damage == "truncate":
        victim.write_bytes(victim.read_bytes()[:100])
    elif damage == "flip":
        data = bytearray(victim.read_bytes())
        data[10] ^= 0xFF
        victim.write_bytes(bytes(data))
    else:
        victim.unlink()
    home = tmp_path / "offline-home"
    for cmd in (["bundle", "verify", str(out)], ["bundle", "install", str(out)]):
        code, _, err = run(cmd, home)
        line = one_error(err)
        assert code != 0 and words in line and "model.safetensors" in line, line
    assert not (home / "models").exists()


def test_a_hand_edited_manifest_is_refused(made, tmp_path):
    _, out = made
    data = json.loads((out / MANIFEST).read_text())
    rel = next(iter(data["files"]))
    data["files"][rel]["size"] += 1  # someone "fixed" a size by hand
    (out / MANIFEST).write_text(json.dumps(data))
    code, _, err = run(["bundle", "verify", str(out)], tmp_path / "h")
    assert code != 0 and "was edited" in one_error(err)


def test_a_folder_without_a_manifest_is_an_unfinished_bundle(tmp_path):
    (tmp_path / "b").mkdir()
    code, _, err = run(["bundle", "verify", str(tmp_path / "b")], tmp_path / "h")
    assert code != 0 and "no manifest.json" in one_error(err)


def test_a_bundle_for_another_python_or_platform_is_refused_before_anything(tmp_path):
    settings = make_home(tmp_path / "src-home")
    for kw, words in (({"python": "3.99"}, "Python 3.99"), ({"platform": "manylinux_2_28_aarch64"},
                                                            "aarch64")):
        out = tmp_path / f"bundle-{next(iter(kw))}"
        create_bundle(settings, BundleOptions(out=out, llama_cpp="none", wheels=False, **kw),
                      progress=lambda s: None)
        home = tmp_path / "offline-home"
        code, _, err = run(["bundle", "install", str(out)], home)
        line = one_error(err)
        assert code != 0 and "this bundle is for" in line and words in line, line
        assert not home.exists() or not (home / "models").exists()
        assert run(["bundle", "verify", "--files-only", str(out)], home)[0] == 0


def test_a_full_disk_while_installing_registers_nothing_and_leaves_nothing_staged(made, tmp_path,
                                                                                  monkeypatch):
    _, out = made
    home = tmp_path / "offline-home"
    settings = Settings(home=home)
    real = bundle_install._link_or_copy
    calls = []

    def filling(src, dest):
        calls.append(dest)
        if len(calls) == 4:  # the disk fills part way through
            raise OSError(errno.ENOSPC, "No space left on device", str(dest))
        real(src, dest)

    monkeypatch.setattr(bundle_install, "_link_or_copy", filling)
    with pytest.raises(BundleError, match="disk filled.*nothing was registered"):
        bundle_install.install_bundle(settings, out, engine=False, progress=lambda s: None)
    assert load_prepared(settings) == {}
    assert not (home / "models" / MODEL).exists() and not (home / "indexes" / "demo").exists()
    assert not [p for p in home.rglob("*") if "bundle-staging" in p.name]
    monkeypatch.setattr(bundle_install, "_link_or_copy", real)  # room again: the same command succeeds
    bundle_install.install_bundle(settings, out, engine=False, progress=lambda s: None)
    assert MODEL in load_prepared(settings)


def test_create_is_resumable_it_keeps_right_files_and_redoes_wrong_ones(made, tmp_path):
    settings, out = made
    index = tmp_path / "demo"
    said = []
    victim = out / "indexes" / "demo" / "passages.sqlite"
    victim.write_bytes(b"half")
    kept = out / "models" / MODEL / "weights" / "config.json"
    before = kept.stat().st_mtime_ns
    create_bundle(settings, BundleOptions(out=out, indexes=[index], llama_cpp="none", wheels=False),
                  progress=said.append)
    assert victim.read_bytes() == (index / "passages.sqlite").read_bytes()
    assert kept.stat().st_mtime_ns == before
    assert any("kept" in s for s in said) and any(s.startswith("bundle size:") for s in said)
    verify_bundle(out)


def test_bad_create_options_are_one_line_before_anything_is_written(tmp_path):
    home = tmp_path / "src-home"
    make_home(home)
    for args, words in ((["--model", "nope"], "not prepared"), (["--index", str(tmp_path)],
                                                                "not a veracity index"),
                        (["--python", "three"], "--python"), (["--llama-cpp", "binary"], "not built")):
        code, _, err = run(["bundle", "create", str(tmp_path / "out"), "--no-wheels", *args], home)
        assert code != 0 and words in one_error(err), err
        assert not (tmp_path / "out").exists()


def test_the_bundles_install_py_checks_with_the_standard_library_alone(made):
    _, out = made
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    ok = subprocess.run([sys.executable, "-S", str(out / "install.py"), "--verify-only"], env=clean,
                        capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stderr
    (out / "indexes" / "demo" / "manifest.json").write_text("{}")
    bad = subprocess.run([sys.executable, "-S", str(out / "install.py"), "--verify-only"], env=clean,
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and "error:" in bad.stderr and "indexes/demo/manifest.json" in bad.stderr


def test_a_carried_binary_is_used_only_where_the_cpu_has_its_features():
    flags = {"avx2", "fma", "f16c", "bmi2", "sse4_2"}
    assert missing_cpu_features(["avx2"], flags) == []
    assert missing_cpu_features(["avx2", "avx512", "avx512_vnni"], flags) == ["avx512", "avx512_vnni"]


def test_the_plan_counts_what_is_copied_before_copying(tmp_path):
    settings = make_home(tmp_path / "src-home")
    plan = plan_bundle(settings, BundleOptions(out=tmp_path / "b", indexes=[make_index(tmp_path / "i")],
                                               llama_cpp="none", wheels=False))
    assert plan.copy_bytes == sum(i.source.stat().st_size for i in plan.items) > 4096
    assert not (tmp_path / "b").exists()
    shutil.rmtree(tmp_path / "i")


def _fake_llama_server(home: Path, features: list[str]) -> None:
    folder = home / "engines" / "llama.cpp"
    (folder / "bin").mkdir(parents=True)
    binary = folder / "bin" / "llama-server"
    binary.write_text("#!/bin/sh\necho 'version: 1 (test)'\n")
    binary.chmod(0o755)
    (folder / "install.json").write_text(json.dumps({"source": "llama-cpp-python 0.3.36",
                                                     "features": features,
                                                     "binary": str(binary)}))


@pytest.mark.parametrize("features, carried", [([], True), (["avx512_bf16_never_here"], False)])
def test_the_carried_llama_server_is_installed_where_this_cpu_runs_it(tmp_path, features, carried):
    settings = make_home(tmp_path / "src-home")
    _fake_llama_server(settings.home, features)
    out = tmp_path / "bundle"
    create_bundle(settings, BundleOptions(out=out, llama_cpp="binary", wheels=False), progress=lambda s: None)
    manifest = read_manifest(out)
    assert manifest["llama_cpp"]["binary"] == "engines/llama.cpp/llama-server"
    assert manifest["llama_cpp"]["features"] == features
    home = tmp_path / "offline-home"
    said = []
    done = bundle_install.install_bundle(Settings(home=home), out, progress=said.append)
    installed = home / "engines" / "llama.cpp" / "bin" / "llama-server"
    if carried:
        assert installed.is_file() and "bundle's binary" in done["engine"]
        info = json.loads((home / "engines" / "llama.cpp" / "install.json").read_text())
        assert info["source"] == "llama-cpp-python 0.3.36" and info["from_bundle"] == str(out.resolve())
    else:
        assert not installed.exists() and "lacks" in " ".join(said) and "not in the bundle" in done["engine"]


def test_a_model_here_as_its_gguf_alone_travels_as_that_and_llama_cpp_finds_it(tmp_path):
    from veracity.models.prepare import resolve_gguf
    from veracity.models.registry import MODELS

    name = "qwen2.5-coder-0.5b-instruct"
    settings = make_home(tmp_path / "src-home")
    kept = settings.home / "downloads" / name / MODELS[name].gguf.filename
    kept.parent.mkdir(parents=True)
    kept.write_bytes(b"GGUF" + os.urandom(1000))
    out = tmp_path / "bundle"
    create_bundle(settings, BundleOptions(out=out, models=[MODEL, name], llama_cpp="none", wheels=False),
                  progress=lambda s: None)
    records = {m["name"]: m for m in read_manifest(out)["models"]}
    assert records[name]["weights"] is None and records[name]["gguf"].endswith(".gguf")
    home = Settings(home=tmp_path / "offline-home")
    bundle_install.install_bundle(home, out, engine=False, progress=lambda s: None)
    assert resolve_gguf(home, name).read_bytes() == kept.read_bytes()
    assert set(load_prepared(home)) == {MODEL}  # registered: the model whose weights came along


def test_pip_downloads_the_extra_asked_for_and_for_another_machine_wheels_only(tmp_path):
    from veracity.bundle.create import pip_download_command

    settings = make_home(tmp_path / "src-home")
    wheel = tmp_path / "veracity-0.1.0-py3-none-any.whl"
    here = BundleOptions(out=tmp_path / "b", llama_cpp="none", extras=["ray"])
    cmd = pip_download_command(plan_bundle(settings, here), here, wheel, tmp_path / "w")
    assert f"veracity[cpu,ray] @ {wheel.as_uri()}" in cmd and "--only-binary=:all:" not in cmd
    other = BundleOptions(out=tmp_path / "b", llama_cpp="none", gpu=True, python="3.12",
                          platform="manylinux_2_28_aarch64")
    plan = plan_bundle(settings, other)
    cmd = pip_download_command(plan, other, wheel, tmp_path / "w")
    assert f"veracity[gpu] @ {wheel.as_uri()}" in cmd and "--only-binary=:all:" in cmd
    assert cmd[cmd.index("--python-version") + 1] == "3.12" and cmd[cmd.index("--abi") + 1] == "cp312"
    assert cmd[cmd.index("--platform") + 1] == "manylinux_2_28_aarch64"
    assert plan.target["machine"] == "aarch64" and plan.requirement == "veracity[gpu]==0.1.0"


# -- Ctrl-C, a kill, a full disk: the real command in a child process, stopped at a chosen point
# ---------------
# The child runs `veracity bundle ...` (run_main, the CLI's own error policy) with one function wrapped so
# that
# at its Nth call the process sends itself SIGINT (what Ctrl-C does) or SIGKILL: the interrupt lands at the
# same
# place every run, in seconds, with no network.
DRIVER = r"""
import os, signal, sys
from veracity.bundle import create, install

where, nth, sig = sys.argv[1], int(sys.argv[2]), getattr(signal, sys.argv[3])
module, name = where.split(".")
mod = {"create": create, "install": install, "staged": install._Staged}[module]
real = getattr(mod, name)
calls = [0]

def stopping(*a, **kw):
    calls[0] += 1
    if calls[0] == nth:
        if name == "_copy":  # killed part way through a copy: its partial file is left behind
            a[1].parent.mkdir(parents=True, exist_ok=True)
            a[1].with_name("." + a[1].name + ".part").write_bytes(b"half")
        os.kill(os.getpid(), sig)
    return real(*a, **kw)

setattr(mod, name, stopping)
from veracity.cli import main
sys.argv = ["veracity", *sys.argv[4:]]
main()
"""


def _sigint_as_at_a_terminal() -> None:
    """In the child before exec: Ctrl-C's default disposition. A test run started in the background by a
    shell without job control (``cmd &`` in a script) inherits SIGINT ignored, and Python then never raises
    KeyboardInterrupt: the interrupt under test would not arrive."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def stopped(tmp_path: Path, home: Path, where: str, nth: int, sig: str,
            *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VERACITY_")}
    env.update(VERACITY_HOME=str(home), NO_COLOR="1", COLUMNS="200",
               PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH",
                                                                                             "")]))
    return subprocess.run([sys.executable, "-c", DRIVER, where, str(nth), sig, *args], env=env,
                          capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          preexec_fn=_sigint_as_at_a_terminal)


def one_interrupted_line(proc: subprocess.CompletedProcess) -> str:
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 130 and len(lines) == 1 and lines[0].startswith("interrupted: "), proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    return lines[0]


def make_src(tmp_path: Path) -> tuple[Path, Path]:
    home = tmp_path / "src-home"
    make_home(home)
    return home, make_index(tmp_path / "demo")


# each one starts a veracity process (about a second on an idle machine)
@pytest.mark.parametrize("where, nth, sig", [
    ("create._copy", 3, "SIGINT"), ("create.sha256_of", 4, "SIGINT"), ("create._copy", 3, "SIGKILL"),
    ("create.write_manifest", 1, "SIGKILL")])
def test_create_stopped_part_way_leaves_an_unfinished_bundle_and_the_same_command_completes_it(tmp_path,
                                                                                               where,
                                                                                                 nth, sig):
    home, index = make_src(tmp_path)
    out = tmp_path / "bundle"
    args = ["bundle", "create", str(out), "--no-wheels", "--llama-cpp", "none", "--index", str(index)]
    proc = stopped(tmp_path, home, where, nth, sig, *args)
    if sig == "SIGINT":
        line = one_interrupted_line(proc)
        assert "unfinished" in line and "run the same command again" in line
    else:
        assert proc.returncode == -9
    assert not (out / MANIFEST).exists()  # an unfinished bundle cannot be taken for a finished one
    code, _, err = run(["bundle", "verify", str(out)], tmp_path / "h")
    assert code != 0 and "no manifest.json" in one_error(err)
    code, _, err = run(args, home)  # the same command again
    assert code == 0, err
    manifest = verify_bundle(out)
    on_disk = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()} - {MANIFEST}
    assert set(manifest["files"]) == on_disk  # no partial copy or stale manifest left, none listed
    assert not [p for p in on_disk if p.endswith((".part", ".tmp"))]


def _state(home: Path) -> dict:
    """What a home has registered and placed: prepared.json, defaults.json, the engine folder, staged
    leftovers."""
    read = lambda p: p.read_text() if p.is_file() else None  # noqa: E731
    return {"prepared": read(home / "models" / "prepared.json"), "defaults": read(home / "defaults.json"),
            "engine": sorted(p.name for p in (home / "engines").rglob("*")) if (home / "engines").exists()
            else [],
            "staged": sorted(p.name for p in home.rglob("*") if "bundle-" in p.name) if home.exists() else []}


@pytest.mark.parametrize("where, nth, sig", [("install._link_or_copy", 3, "SIGINT"), ("staged._moves", 1,
                                                                                      "SIGINT"),
                                             ("install._link_or_copy", 3, "SIGKILL")])
def test_install_stopped_part_way_registers_nothing_and_the_same_command_completes_it(made, tmp_path, where,
                                                                                      nth,
                                                                                       sig):
    _, out = made
    home = tmp_path / "offline-home"
    (home / "models").mkdir(parents=True)
    before = _state(home)
    proc = stopped(tmp_path, home, where, nth, sig, "bundle", "install", str(out), "--no-engine",
                   "--no-packages")
    after = _state(home)
    if sig == "SIGINT":
        line = one_interrupted_line(proc)
        assert "nothing from" in line and "run the same command again" in line
        assert after == before  # nothing registered, nothing staged left behind, no engine
    else:
        assert proc.returncode == -9
        assert {k: after[k] for k in ("prepared", "defaults", "engine")} == \
            {k: before[k] for k in ("prepared", "defaults", "engine")}
    assert load_prepared(Settings(home=home)) == {}
    # the same install again (in this process: the command's doctor step is not what is tested here)
    bundle_install.install_bundle(Settings(home=home), out, engine=False, progress=lambda s: None)
    prepared = load_prepared(Settings(home=home))
    assert (prepared[MODEL].path / "model.safetensors").read_bytes() == \
        (out / "models" / MODEL / "weights" / "model.safetensors").read_bytes()
    assert (home / "indexes" / "demo" / "bm25" / "segment").is_file() and not _state(home)["staged"]


def test_ctrl_c_while_a_reinstall_moves_files_into_place_leaves_the_registered_model_whole(made, tmp_path):
    _, out = made
    home = tmp_path / "offline-home"
    bundle_install.install_bundle(Settings(home=home), out, engine=False, progress=lambda s: None)
    proc = stopped(tmp_path, home, "staged._moves", 1, "SIGINT", "bundle", "install", str(out), "--no-engine",
                   "--no-packages")
    assert proc.returncode == 130, proc.stderr
    prepared = load_prepared(Settings(home=home))  # the moves finished before the interrupt was taken
    assert (prepared[MODEL].path / "model.safetensors").is_file() and not _state(home)["staged"]


def test_the_bundles_install_py_stopped_by_ctrl_c_is_one_line_and_130(made, tmp_path):
    _, out = made
    driver = ("import os, runpy, signal, sys, hashlib\n"
              "real = hashlib.sha256\n"
              "n = [0]\n"
              "def stopping(*a):\n"
              "    n[0] += 1\n"
              "    if n[0] == 3: os.kill(os.getpid(), signal.SIGINT)\n"
              "    return real(*a)\n"
              "hashlib.sha256 = stopping\n"
              f"sys.argv = [{str(out / 'install.py')!r}]\n"
              f"runpy.run_path({str(out / 'install.py')!r}, run_name='__main__')\n")
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-S", "-c", driver], env=clean, capture_output=True, text=True,
                          preexec_fn=_sigint_as_at_a_terminal,
                          timeout=60)
    line = one_interrupted_line(proc)
    assert "nothing from the bundle is registered" in line and "install.py" in line


def test_create_drops_wheels_an_interrupted_download_left_torn(tmp_path):
    import zipfile

    from veracity.bundle.create import drop_broken_wheels

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    with zipfile.ZipFile(wheels / "whole-1.0-py3-none-any.whl", "w") as zf:
        zf.writestr("whole/__init__.py", "x = 1\n" * 200)
    data = (wheels / "whole-1.0-py3-none-any.whl").read_bytes()
    (wheels / "torn-1.0-py3-none-any.whl").write_bytes(data[: len(data) // 2])
    (wheels / "sdist-1.0.tar.gz").write_bytes(b"kept as it is")
    (wheels / ".x.whl.part").write_bytes(b"half")
    dropped = drop_broken_wheels(wheels)
    assert sorted(p.name for p in dropped) == [".x.whl.part", "torn-1.0-py3-none-any.whl"]
    assert sorted(p.name for p in wheels.iterdir()) == ["sdist-1.0.tar.gz", "whole-1.0-py3-none-any.whl"]


FULL_DISK = r"""
import os, resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG, as a full disk fails
resource.setrlimit(resource.RLIMIT_FSIZE, (3000, 3000))  # the fake weights are 4096 bytes
def no_link(*a, **kw):  # a bundle on another disk (a USB stick): copied, so the limit is met
    raise OSError(18, "Invalid cross-device link")
os.link = no_link
from veracity.cli import main
sys.argv = ["veracity", *sys.argv[1:]]
main()
"""


def test_a_really_full_disk_during_install_is_one_line_and_registers_nothing(made, tmp_path):
    _, out = made
    home = tmp_path / "offline-home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("VERACITY_")}
    env.update(VERACITY_HOME=str(home), NO_COLOR="1", COLUMNS="200",
               PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    proc = subprocess.run([sys.executable, "-c", FULL_DISK, "bundle", "install", str(out), "--no-engine",
                           "--no-packages"], env=env, capture_output=True, text=True, timeout=120)
    line = one_error(proc.stderr)
    assert proc.returncode == 1 and "disk filled" in line and "nothing was registered" in line, proc.stderr
    assert load_prepared(Settings(home=home)) == {} and not (home / "defaults.json").exists()
    assert not (home / "models" / MODEL).exists() and not (home / "indexes" / "demo").exists()
    assert not _state(home)["staged"]
