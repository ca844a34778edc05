"""The llama.cpp engine without starting llama-server: argv from the hardware, the GGUF it serves, its
install route's CPU-feature probe, and the defaults that follow the user."""

from __future__ import annotations

import json
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from veracity.config import Settings
from veracity.errors import ConfigError, ModelError, ServerError
from veracity.models import defaults, prepare
from veracity.models.registry import CPU_DEFAULT, MODELS
from veracity.serving import engine_choice, hardware
from veracity.serving.engines import ENGINES, check_spec, get_engine
from veracity.serving.engines import llamacpp_install as inst
from veracity.serving.engines.llamacpp import BIND_VAR, LLAMA_CPP, slots_and_threads
from veracity.serving.replicas import device_groups
from veracity.serving.spec import ServerSpec


def _flag(cmd: list[str], name: str) -> str:
    return cmd[cmd.index(name) + 1]


def test_both_engines_are_one_interface():
    assert set(ENGINES) == {"vllm", "llama.cpp"}
    for engine in ENGINES.values():
        for method in ("installed", "on_gpu", "model_path", "command", "env", "bind_cpus"):
            assert callable(getattr(engine, method))
    with pytest.raises(ConfigError, match="unknown engine"):
        get_engine("ollama")
    with pytest.raises(ConfigError, match="unknown engine"):
        check_spec(ServerSpec(model="m", engine="tgi"))  # the engine registry checks the name


def test_slots_and_threads_follow_the_cores():
    assert slots_and_threads(ServerSpec(model="m"), 2) == (4, 2)
    assert slots_and_threads(ServerSpec(model="m"), 16) == (32, 16)
    assert slots_and_threads(ServerSpec(model="m", max_num_seqs=3), 16) == (3, 16)


def test_the_argv_serves_the_gguf_under_the_model_name(tmp_path, monkeypatch):
    monkeypatch.setattr(hardware, "usable_cpus", lambda: [0, 1])
    settings = Settings(home=tmp_path)
    spec = ServerSpec(model="qwen2.5-coder-1.5b-instruct", engine="llama.cpp", port=8123)
    cmd = LLAMA_CPP.command(settings, spec, tmp_path / "m.gguf", on_gpu=False)
    assert _flag(cmd, "--model") == str(tmp_path / "m.gguf")
    assert _flag(cmd, "--alias") == spec.model  # /v1/models answers the registry name, as vLLM does
    assert _flag(cmd, "--port") == "8123" and _flag(cmd, "--host") == "127.0.0.1"
    assert _flag(cmd, "--threads") == "2" and _flag(cmd, "--parallel") == "4"
    # an HTTP thread per slot's keep-alive connection and spare ones for probes and other clients
    assert int(_flag(cmd, "--threads-http")) >= 4 + 2
    # every slot gets the registry's CPU context cap
    assert int(_flag(cmd, "--ctx-size")) == 4 * MODELS[spec.model].cpu_max_model_len
    one = device_groups(2, spec, on_gpu=False, cpus=[0, 1, 2, 3], engine=LLAMA_CPP)
    assert one == [{BIND_VAR: "0,1"}, {BIND_VAR: "2,3"}]
    bound = LLAMA_CPP.command(settings, spec, tmp_path / "m.gguf", on_gpu=False, bind=one[1])
    assert _flag(bound, "--threads") == "2"


def test_a_repeatable_server_has_one_slot_and_no_prompt_cache(tmp_path, monkeypatch):
    monkeypatch.setattr(hardware, "usable_cpus", lambda: [0, 1])
    settings = Settings(home=tmp_path)
    plain = LLAMA_CPP.command(settings, ServerSpec(model="smollm2-135m-instruct", engine="llama.cpp"),
                              tmp_path / "m.gguf", on_gpu=False)
    assert "--no-cache-prompt" not in plain and "--cache-ram" not in plain
    assert _flag(plain, "--parallel") == "4"
    spec = ServerSpec(model="smollm2-135m-instruct", engine="llama.cpp", repeatable=True)
    cmd = LLAMA_CPP.command(settings, spec, tmp_path / "m.gguf", on_gpu=False)
    assert _flag(cmd, "--parallel") == "1" and "--no-cache-prompt" in cmd and _flag(cmd, "--cache-ram") == "0"
    assert int(_flag(cmd, "--ctx-size")) == MODELS[spec.model].cpu_max_model_len  # the one slot's context
    assert _flag(cmd, "--threads") == "2"  # the cores still serve the one sequence


def test_openmp_threads_sleep_instead_of_spinning_unless_the_user_says_otherwise(monkeypatch):
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    assert LLAMA_CPP.env(ServerSpec(model="m"), on_gpu=False)["OMP_WAIT_POLICY"] == "PASSIVE"
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    assert LLAMA_CPP.env(ServerSpec(model="m"), on_gpu=False)["OMP_WAIT_POLICY"] == "ACTIVE"


def test_a_missing_binary_is_one_line_naming_the_install_command(tmp_path, monkeypatch):
    monkeypatch.delenv("VERACITY_LLAMA_SERVER", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ServerError, match="not installed") as err:
        LLAMA_CPP.installed(Settings(home=tmp_path))
    assert "veracity engines install llama.cpp" in err.value.hint


def test_a_binary_that_does_not_run_is_one_line(tmp_path, monkeypatch):
    fake = tmp_path / "llama-server"
    fake.write_text("#!/bin/sh\necho 'Illegal instruction' >&2\nexit 132\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("VERACITY_LLAMA_SERVER", str(fake))
    with pytest.raises(ServerError, match="--version failed: Illegal instruction") as err:
        LLAMA_CPP.installed(Settings(home=tmp_path))
    assert "--force" in err.value.hint
    fake.write_text("#!/bin/sh\necho 'version: 7777 (build 1, commit abc)' >&2\n")
    assert LLAMA_CPP.installed(Settings(home=tmp_path)) == "llama-server 7777 (build 1, commit abc)"


def test_the_gguf_of_a_prepared_or_kept_model(tmp_path):
    settings = Settings(home=tmp_path)
    with pytest.raises(ModelError, match="not prepared") as err:
        prepare.resolve_gguf(settings, CPU_DEFAULT)
    assert f"models prepare {CPU_DEFAULT}" in err.value.hint
    kept = prepare.kept_gguf(settings, MODELS[CPU_DEFAULT])
    kept.parent.mkdir(parents=True)
    kept.write_bytes(b"GGUF")
    assert prepare.resolve_gguf(settings, CPU_DEFAULT) == kept
    given = tmp_path / "own.gguf"
    given.write_bytes(b"GGUF")
    assert prepare.resolve_gguf(settings, str(given)) == given
    with pytest.raises(ModelError, match="unknown model"):
        prepare.resolve_gguf(settings, "no-such-model")
    no_gguf = next(n for n, i in MODELS.items() if not i.cpu_default and i.gguf is None)
    with pytest.raises(ModelError, match="not published as a GGUF") as err:
        prepare.resolve_gguf(settings, no_gguf)
    assert "--engine vllm" in err.value.hint


def test_a_removed_split_gguf_is_joined_again_from_the_cached_wheels(tmp_path, monkeypatch):
    from tests.unit.test_models_chunked import register, write_wheels  # the chunked tests' stand-in wheels

    settings = Settings(home=tmp_path / "home")
    blob = bytes(range(256)) * 400
    info = register(monkeypatch, write_wheels(tmp_path / "index", blob, 3))
    kept = prepare.kept_gguf(settings, info)
    with pytest.raises(ModelError, match="not prepared"):
        prepare.resolve_gguf(settings, info.name)  # no wheels cached either
    kept.parent.mkdir(parents=True)
    for part in info.gguf.parts:
        (kept.parent / part.filename).write_bytes((tmp_path / "index" / part.filename).read_bytes())
    said = []
    path = prepare.resolve_gguf(settings, info.name, progress=said.append)
    assert path == kept and path.read_bytes() == blob and "joining the 3 cached wheels" in said[0]


def test_the_install_probe_leaves_off_what_does_not_run(tmp_path, monkeypatch):
    monkeypatch.setitem(inst.FEATURES, "dies", ("", "r = 0; __builtin_trap();", ("GGML_DIES",)))
    monkeypatch.setitem(inst.FEATURES, "unknown", ("-mno-such-flag", "r = 0;", ("GGML_UNKNOWN",)))
    found = inst.runnable_features("gcc", tmp_path)
    assert "dies" not in found and "unknown" not in found
    opts = inst.cmake_options(found)
    assert "-DGGML_DIES=OFF" in opts and "-DGGML_UNKNOWN=OFF" in opts
    assert "-DGGML_NATIVE=OFF" in opts and "-DGGML_AMX_INT8=OFF" in opts and "-DLLAMA_CURL=OFF" in opts
    assert all(f"-D{o}=ON" in opts for f in found for o in inst.FEATURES[f][2])


def test_the_install_checks_its_tools_before_any_download(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.delenv("CC", raising=False)
    with pytest.raises(ServerError, match="needs cmake") as err:
        inst.install_llamacpp(Settings(home=tmp_path))
    assert "apt-get install cmake g++" in err.value.hint
    assert not (tmp_path / "engines").exists()


def test_defaults_follow_the_user(tmp_path, monkeypatch):
    monkeypatch.delenv("VERACITY_MODEL", raising=False)
    monkeypatch.delenv("VERACITY_ENGINE", raising=False)
    monkeypatch.setattr(hardware, "gpu_seen", lambda: True)  # the hardware's default: vLLM on a GPU
    settings = Settings(home=tmp_path)
    assert defaults.default_model(settings) == hardware.default_model_for_hardware()
    assert engine_choice.default_engine(settings) == "vllm"
    assert defaults.remember_first_model(settings, "qwen2.5-coder-1.5b-instruct")
    assert not defaults.remember_first_model(settings, CPU_DEFAULT)  # only the first one prepared
    assert defaults.default_model(settings) == "qwen2.5-coder-1.5b-instruct"
    with pytest.raises(ModelError, match="not prepared") as err:
        defaults.set_default_model(settings, CPU_DEFAULT)
    assert "models prepare" in err.value.hint
    with pytest.raises(ModelError, match="unknown model"):
        defaults.set_default_model(settings, "no-such-model")
    defaults.set_default_engine(settings, "llama.cpp")
    assert engine_choice.default_engine(settings) == "llama.cpp"
    assert json.loads((tmp_path / "defaults.json").read_text()) == {
        "model": "qwen2.5-coder-1.5b-instruct", "engine": "llama.cpp"}
    monkeypatch.setenv("VERACITY_ENGINE", "vllm")
    assert engine_choice.default_engine(settings) == "vllm"
    monkeypatch.setenv("VERACITY_ENGINE", "tgi")
    with pytest.raises(ConfigError, match="names no engine"):
        engine_choice.default_engine(settings)
    assert defaults.default_model(Settings(home=tmp_path, model="x")) == "x"


def test_models_prepared_before_defaults_were_kept_use_the_first_prepared(tmp_path, monkeypatch):
    monkeypatch.delenv("VERACITY_MODEL", raising=False)
    settings = Settings(home=tmp_path)
    settings.models_dir.mkdir(parents=True)
    (settings.models_dir / "prepared.json").write_text(json.dumps({
        "b": {"name": "b", "path": str(tmp_path), "prepared_at": 2.0},
        "a": {"name": "a", "path": str(tmp_path), "prepared_at": 1.0}}))
    assert defaults.default_model(settings) == "a"
    assert Path(settings.home / "defaults.json").exists() is False


def _fake_sdist(dest: Path) -> tuple[str, str]:
    """A tiny stand-in for the llama-cpp-python sdist: only vendor/llama.cpp/CMakeLists.txt. (file, sha256)"""
    import hashlib
    import io
    import tarfile

    dest.mkdir(parents=True, exist_ok=True)
    name = "llama_cpp_python-0.0.1.tar.gz"
    with tarfile.open(dest / name, "w:gz") as tar:
        data = b"project(stand_in)\n"
        info = tarfile.TarInfo("llama_cpp_python-0.0.1/vendor/llama.cpp/CMakeLists.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return name, hashlib.sha256((dest / name).read_bytes()).hexdigest()


FAKE_CMAKE = """#!/bin/sh
# configure: remember the options; build: fail while {fail} exists, else write the binary
if [ "$1" = "--build" ]; then
  echo "[1/2] Building CXX object stand-in.o"
  if [ -e "{fail}" ]; then echo "stand-in.cpp:1: error: interrupted"; exit 1; fi
  echo "[2/2] Linking CXX executable bin/llama-server"
  mkdir -p "$2/bin"; \
printf '#!/bin/sh\\necho "version: 1 (build 1, commit stand-in)" >&2\\n' > "$2/bin/llama-server"
  chmod +x "$2/bin/llama-server"; echo built >> "{count}"
else
  echo "$@" > "{opts}"
fi
"""


def test_the_install_builds_resumes_after_a_failure_and_then_does_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv("VERACITY_LLAMA_SERVER", raising=False)  # CI points it at its own build
    home = tmp_path / "home"
    downloads = home / "engines" / "llama.cpp" / "downloads"
    name, digest = _fake_sdist(downloads)  # already downloaded: pip is never run
    monkeypatch.setattr(inst, "SDIST_FILE", name)
    monkeypatch.setattr(inst, "SDIST_VERSION", "0.0.1")
    monkeypatch.setattr(inst, "SDIST_SHA256", digest)
    monkeypatch.setattr(inst, "runnable_features", lambda cc, work: ["avx2"])
    tools = tmp_path / "bin"
    tools.mkdir()
    fail, count, opts = tmp_path / "fail", tmp_path / "count", tmp_path / "opts"
    (tools / "cmake").write_text(FAKE_CMAKE.format(fail=fail, count=count, opts=opts))
    (tools / "cmake").chmod(0o755)
    (tools / "c++").symlink_to(shutil.which("g++") or "/usr/bin/g++")  # the compiler check builds for real
    (tools / "cc").symlink_to("/bin/true")  # the feature probe is replaced below
    monkeypatch.setenv("PATH", f"{tools}:/usr/bin:/bin")
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setattr(inst.shutil, "which", lambda n: str(tools / n) if (tools / n).exists() else None)
    monkeypatch.setattr(inst, "find_ninja", lambda: None)  # the stand-in cmake builds
    settings = Settings(home=home)

    fail.write_text("")
    steps = []
    with pytest.raises(ServerError,
                       match="building llama-server failed: stand-in.cpp:1: error: interrupted") as err:
        inst.install_llamacpp(settings, bar=lambda step, done, total: steps.append((step, done, total)))
    assert "run the same command again" in err.value.hint and "build.log" in err.value.hint
    assert ("building llama-server", 1, 2) in steps
    assert inst.installed_info(settings) is None and not (home / "engines" / "llama.cpp" / "bin").exists()
    assert "-DGGML_AVX2=ON" in opts.read_text() and "-DGGML_AVX512=OFF" in opts.read_text()

    fail.unlink()  # run again: the sources are not unpacked again, the build goes on
    opened = []
    real_open = inst.tarfile.open
    monkeypatch.setattr(inst.tarfile, "open", lambda *a, **k: opened.append(a) or real_open(*a, **k))
    info = inst.install_llamacpp(settings)
    assert opened == []
    assert not (home / "engines" / "llama.cpp" / "src").exists()  # sources and objects go once installed
    assert info["features"] == ["avx2"] and set(info["timings"]) == {"checks", "download", "unpack", "build",
                                                                     "total"}
    assert LLAMA_CPP.installed(settings) == "llama-server 1 (build 1, commit stand-in)"
    assert inst.installed_info(settings)["source"] == "llama-cpp-python 0.0.1"

    said = []
    inst.install_llamacpp(settings, progress=said.append)  # installed: nothing is built
    assert count.read_text().count("built") == 1 and "already installed" in said[0]


def test_the_managed_llamacpp_server_fetches_only_the_gguf_and_says_so(tmp_path, monkeypatch):
    from veracity.serving import launch, managed

    monkeypatch.delenv("VERACITY_MODEL", raising=False)
    monkeypatch.setenv("VERACITY_ENGINE", "llama.cpp")
    binary = tmp_path / "llama-server"  # installed (the user chose the engine: a missing one is an error)
    binary.write_text("#!/bin/sh\n")
    monkeypatch.setenv("VERACITY_LLAMA_SERVER", str(binary))
    settings = Settings(home=tmp_path)
    fetched, started, said = [], [], []

    def fake_fetch(settings, progress):
        fetched.append(True)
        path = prepare.kept_gguf(settings, MODELS[CPU_DEFAULT])
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"GGUF")
        return path

    def fake_start(settings, spec, **kw):
        started.append((spec.model, spec.engine))
        from veracity.serving.state import ServerState

        return ServerState("default", 1, spec.endpoint, spec.model, "/x", spec.port, "l", 0, [], "v",
                           engine=spec.engine)

    monkeypatch.setattr(prepare, "fetch_smollm2_gguf", fake_fetch)
    monkeypatch.setattr(prepare, "prepare_model", lambda *a, **k: pytest.fail("no conversion for llama.cpp"))
    monkeypatch.setattr(launch, "start_server", fake_start)
    url, model = managed.ensure_endpoint(settings, notify=said.append)
    assert fetched == [True] and started == [(CPU_DEFAULT, "llama.cpp")] and model == CPU_DEFAULT
    assert said[0] == (f"starting a managed llama.cpp server for {CPU_DEFAULT} (VERACITY_ENGINE=llama.cpp); "
                       "`veracity serve --stop` stops it")  # the engine and why: the first line
    assert "fetching the GGUF" in said[1]
    fetched.clear()
    managed.ensure_endpoint(settings, notify=said.append)  # the GGUF is there now: not fetched again
    assert fetched == []


HOLD_LOCK = """
import sys
from pathlib import Path
from veracity.serving.engines import llamacpp_install as inst
with inst._install_lock(Path(sys.argv[1])):
    print("holding", flush=True)
    sys.stdin.read()
"""


def test_one_install_at_a_time_and_a_background_build_is_waited_for(tmp_path, monkeypatch):
    """An install holds the engine folder's lock: a second install stops with one line naming the first one's
    pid, wait_for_install waits while it runs (the llama.cpp tests wait so for the README's background
    build), and the lock goes with the process however it ends (here SIGKILL)."""
    import os
    import signal
    import subprocess
    import sys

    monkeypatch.delenv("VERACITY_LLAMA_SERVER", raising=False)
    monkeypatch.setattr(inst, "_tools", lambda: ("cmake", "cc"))
    settings = Settings(home=tmp_path / "home")
    root = inst.engine_dir(settings)
    root.mkdir(parents=True)
    assert not inst.install_running(settings) and inst.wait_for_install(settings, timeout_s=5) < 5
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(root)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        assert inst.install_running(settings)
        with pytest.raises(ServerError) as err:
            inst.install_llamacpp(settings)
        assert str(err.value) == f"llama-server is being installed already (pid {holder.pid})"
        assert "build.log" in err.value.hint and "\n" not in str(err.value)
        with pytest.raises(TimeoutError, match="still runs after 0 s"):
            inst.wait_for_install(settings, timeout_s=0.2, poll_s=0.05)
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=30)
        assert inst.wait_for_install(settings, timeout_s=30, poll_s=0.05) >= 0
        assert not inst.install_running(settings)
    finally:
        if holder.poll() is None:
            holder.kill()
        holder.wait()


SIGILL_CMAKE = """#!/bin/sh
# configure: remember the options; build: a llama-server that dies of SIGILL when built with AVX-512
if [ "$1" = "--build" ]; then
  echo "[1/1] Linking CXX executable bin/llama-server"
  mkdir -p "$2/bin"
  if grep -q -- "-DGGML_AVX512=ON" "{opts}"; then
    printf '#!/bin/sh\\nkill -ILL $$\\n' > "$2/bin/llama-server"
  else
    printf '#!/bin/sh\\necho "version: 2 (build 2, commit stand-in)" >&2\\n' > "$2/bin/llama-server"
  fi
  chmod +x "$2/bin/llama-server"; echo built >> "{count}"
else
  echo "$@" > "{opts}"
fi
"""


def _stand_in_build(tmp_path, monkeypatch, script: str, features: list[str]) -> tuple[Settings, Path, Path]:
    """A home whose pinned sdist is a stand-in, a fake cmake from ``script`` and the real C++ compiler."""
    monkeypatch.delenv("VERACITY_LLAMA_SERVER", raising=False)
    home = tmp_path / "home"
    name, digest = _fake_sdist(home / "engines" / "llama.cpp" / "downloads")
    monkeypatch.setattr(inst, "SDIST_FILE", name)
    monkeypatch.setattr(inst, "SDIST_VERSION", "0.0.1")
    monkeypatch.setattr(inst, "SDIST_SHA256", digest)
    monkeypatch.setattr(inst, "runnable_features", lambda cc, work: list(features))
    tools = tmp_path / "bin"
    tools.mkdir()
    count, opts = tmp_path / "count", tmp_path / "opts"
    (tools / "cmake").write_text(script.format(fail=tmp_path / "fail", count=count, opts=opts))
    (tools / "cmake").chmod(0o755)
    (tools / "c++").symlink_to(shutil.which("g++") or "/usr/bin/g++")
    (tools / "cc").symlink_to("/bin/true")
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setattr(inst.shutil, "which", lambda n: str(tools / n) if (tools / n).exists() else None)
    monkeypatch.setattr(inst, "find_ninja", lambda: None)  # the stand-in cmake builds
    return Settings(home=home), count, opts


def test_a_binary_dying_of_sigill_is_built_again_without_the_feature_saying_so(tmp_path, monkeypatch):
    settings, count, opts = _stand_in_build(tmp_path, monkeypatch, SIGILL_CMAKE, ["avx2", "avx512"])
    said = []
    info = inst.install_llamacpp(settings, progress=said.append)
    assert info["features"] == ["avx2"] and info["features_dropped_after_self_test"] == ["avx512"]
    assert count.read_text().count("built") == 2 and "-DGGML_AVX512=OFF" in opts.read_text()
    lines = [s for s in said if "illegal instruction" in s]
    assert len(lines) == 1 and "building again without avx512" in lines[0] and "\n" not in lines[0]
    assert LLAMA_CPP.installed(settings) == "llama-server 2 (build 2, commit stand-in)"


def test_a_broken_compiler_is_one_line_before_the_download(tmp_path, monkeypatch):
    settings, count, _ = _stand_in_build(tmp_path, monkeypatch, SIGILL_CMAKE, ["avx2"])
    broken = tmp_path / "bin" / "c++"
    broken.unlink()
    broken.write_text("#!/bin/sh\necho 'fatal error: vector: No such file or directory' >&2\nexit 1\n")
    broken.chmod(0o755)
    (inst.engine_dir(settings) / "downloads" / inst.SDIST_FILE).unlink()  # a download would be needed
    monkeypatch.setattr(inst, "fetch_sdist", lambda *a, **k: pytest.fail("downloaded before the checks"))
    with pytest.raises(ServerError, match="cannot build a one-line program: fatal error: vector") as err:
        inst.install_llamacpp(settings)
    assert "apt-get install cmake g++" in err.value.hint and "\n" not in str(err.value)
    assert not count.exists()


def test_no_tools_means_vllm_is_offered_and_can_build_says_why(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.delenv("CC", raising=False)
    assert inst.can_build() == "cmake and a C++ compiler and a C compiler not found on PATH"
    with pytest.raises(ServerError, match="needs cmake") as err:
        inst.install_llamacpp(Settings(home=tmp_path))
    assert "veracity engines default vllm" in err.value.hint


def test_air_gapped_install_from_the_sdist_or_a_binary_without_network(tmp_path, monkeypatch):
    settings, count, _ = _stand_in_build(tmp_path, monkeypatch, SIGILL_CMAKE, ["avx2"])
    carried = tmp_path / "carried"
    carried.mkdir()
    kept = inst.engine_dir(settings) / "downloads" / inst.SDIST_FILE
    monkeypatch.setattr(inst.subprocess, "run", _no_pip(inst.subprocess.run))
    assert inst.fetch_sdist(kept.parent) == kept  # already there with the pinned hash: pip is not run
    shutil.move(kept, carried / inst.SDIST_FILE)
    wrong = carried / "llama_cpp_python-9.9.9.tar.gz"
    wrong.write_bytes(b"not the sdist")
    with pytest.raises(ServerError, match="not the pinned"):
        inst.install_from_local(settings, wrong)
    info = inst.install_from_local(settings, carried / inst.SDIST_FILE)
    assert info["source"] == "llama-cpp-python 0.0.1" and count.read_text().count("built") == 1
    assert LLAMA_CPP.installed(settings).startswith("llama-server 2")

    other = Settings(home=tmp_path / "other")
    binary = tmp_path / "llama-server"
    binary.write_text("#!/bin/sh\nkill -ILL $$\n")
    binary.chmod(0o755)
    with pytest.raises(ServerError, match="does not run here: illegal instruction"):
        inst.install_from_local(other, binary)
    binary.write_text('#!/bin/sh\necho "version: 3 (build 3, commit elsewhere)" >&2\n')
    info = inst.install_from_local(other, binary)
    assert info["source"].startswith("local binary") and inst.installed_info(other) is not None
    assert LLAMA_CPP.installed(other) == "llama-server 3 (build 3, commit elsewhere)"


def _no_pip(run):
    def guarded(cmd, *a, **k):
        assert "pip" not in cmd, f"the network was used: {cmd}"
        return run(cmd, *a, **k)
    return guarded


# -- the engine rule: vLLM where a GPU is seen, llama.cpp without one for a model with a GGUF ---------------
@pytest.fixture()
def no_user_choice(tmp_path, monkeypatch):
    monkeypatch.delenv("VERACITY_ENGINE", raising=False)
    monkeypatch.delenv("VERACITY_MODEL", raising=False)
    monkeypatch.delenv("VERACITY_LLAMA_SERVER", raising=False)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    return Settings(home=tmp_path / "home")


def _prepare_from_dir(settings: Settings, name: str, tmp_path: Path) -> None:
    weights = tmp_path / "weights"
    weights.mkdir()
    (weights / "config.json").write_text("{}")
    (weights / "model.safetensors").write_bytes(b"x")
    prepare.prepare_model(settings, name, weights, progress=lambda s: None)


def test_no_gpu_and_a_gguf_means_llama_cpp_and_the_line_says_why(no_user_choice, monkeypatch):
    settings = no_user_choice
    monkeypatch.setattr(hardware, "gpu_seen", lambda: False)
    monkeypatch.setattr(inst, "can_build", lambda: None)
    for model in (CPU_DEFAULT, "qwen2.5-coder-1.5b-instruct", "qwen2.5-coder-0.5b-instruct", "/x/own.gguf"):
        choice = engine_choice.choose_engine(settings, model)
        assert (choice.name, choice.by) == ("llama.cpp", "hardware"), model
    line = engine_choice.choose_engine(settings, CPU_DEFAULT, change="`--engine vllm`").line()
    assert line == "engine llama.cpp (no GPU seen; `--engine vllm` to change)"
    assert "veracity engines default vllm" in engine_choice.choose_engine(settings, CPU_DEFAULT).why


def test_a_gpu_means_vllm_for_every_model(no_user_choice, monkeypatch):
    monkeypatch.setattr(hardware, "gpu_seen", lambda: True)
    for model in (CPU_DEFAULT, "qwen2.5-coder-1.5b-instruct", "qwen2.5-7b-instruct"):
        choice = engine_choice.choose_engine(no_user_choice, model)
        assert choice.name == "vllm" and choice.why.startswith("a GPU is seen"), model


def test_no_gpu_but_no_gguf_means_vllm(no_user_choice, monkeypatch, tmp_path):
    settings = no_user_choice
    monkeypatch.setattr(hardware, "gpu_seen", lambda: False)
    monkeypatch.setattr(inst, "can_build", lambda: None)
    no_gguf = next(n for n, i in MODELS.items() if not i.cpu_default and i.gguf is None)
    choice = engine_choice.choose_engine(settings, no_gguf)
    assert choice.name == "vllm" and f"{no_gguf} has no GGUF" in choice.why
    _prepare_from_dir(settings, "qwen2.5-coder-1.5b-instruct", tmp_path)  # safetensors of its own: no GGUF
    assert engine_choice.choose_engine(settings, "qwen2.5-coder-1.5b-instruct").name == "vllm"


def test_no_gpu_no_llama_server_and_no_way_to_build_it_means_vllm_saying_so(no_user_choice, monkeypatch,
                                                                            tmp_path):
    monkeypatch.setattr(hardware, "gpu_seen", lambda: False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no cmake, no compiler, no llama-server
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.delenv("CXX", raising=False)
    choice = engine_choice.choose_engine(no_user_choice, CPU_DEFAULT)
    assert (choice.name == "vllm" and "cannot be built here: cmake" in choice.why
            and "apt-get install" in choice.why)
    binary = tmp_path / "llama-server"  # installed after all (on PATH): llama.cpp again
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    assert engine_choice.choose_engine(no_user_choice, CPU_DEFAULT).name == "llama.cpp"


def test_the_users_choice_wins_over_the_hardware(no_user_choice, monkeypatch):
    settings = no_user_choice
    monkeypatch.setattr(hardware, "gpu_seen", lambda: False)
    monkeypatch.setattr(inst, "can_build", lambda: None)
    assert (engine_choice.choose_engine(settings, CPU_DEFAULT, "vllm")
            == engine_choice.EngineChoice("vllm", "--engine vllm", "flag"))
    defaults.set_default_engine(settings, "vllm")
    choice = engine_choice.choose_engine(settings, CPU_DEFAULT)
    assert (choice.name, choice.by) == ("vllm", "defaults") and "veracity engines default vllm" in choice.why
    monkeypatch.setenv("VERACITY_ENGINE", "llama.cpp")
    assert engine_choice.choose_engine(settings, CPU_DEFAULT).by == "env"
    # the flag over everything
    assert engine_choice.choose_engine(settings, CPU_DEFAULT, "vllm").name == "vllm"
    monkeypatch.setattr(hardware, "gpu_seen", lambda: True)
    monkeypatch.delenv("VERACITY_ENGINE")
    defaults.set_default_engine(settings, "llama.cpp")
    # a GPU, but the user's choice
    assert engine_choice.choose_engine(settings, CPU_DEFAULT).name == "llama.cpp"


def test_gpu_seen_asks_torch_only_where_a_driver_is(monkeypatch):
    monkeypatch.setattr(hardware, "cuda_available", lambda: pytest.fail("torch asked without a driver"))
    monkeypatch.setattr(hardware, "GPU_DEVICE_FILES", ("/no/such/device",))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert hardware.gpu_seen() is False
    monkeypatch.setattr(hardware, "GPU_DEVICE_FILES", ("/dev/null",))
    monkeypatch.setattr(hardware, "cuda_available", lambda: True)
    assert hardware.gpu_seen() is True
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert hardware.gpu_seen() is False


def _fake_start(started):
    def fake_start(settings, spec, **kw):
        from veracity.serving.state import ServerState

        started.append((spec.model, spec.engine, spec.engine_why))
        return ServerState("default", 1, spec.endpoint, spec.model, "/x", spec.port, "l", 0, [], "v",
                           engine=spec.engine)
    return fake_start


def test_the_hardware_rule_builds_a_missing_llama_server_first_saying_so(no_user_choice, monkeypatch):
    from veracity.serving import launch, managed

    settings = no_user_choice
    monkeypatch.setattr(hardware, "gpu_seen", lambda: False)
    monkeypatch.setattr(inst, "can_build", lambda: None)
    kept = prepare.kept_gguf(settings, MODELS[CPU_DEFAULT])
    kept.parent.mkdir(parents=True)
    kept.write_bytes(b"GGUF")
    built, started, said = [], [], []
    monkeypatch.setattr(inst, "install_llamacpp", lambda settings, **kw: built.append(kw) or {})
    monkeypatch.setattr(launch, "start_server", _fake_start(started))
    managed.ensure_endpoint(settings, notify=said.append)
    assert said[0].startswith(f"starting a managed llama.cpp server for {CPU_DEFAULT} (no GPU seen;")
    assert "llama-server is not installed: building it now" in said[1] and len(built) == 1
    assert started == [(CPU_DEFAULT, "llama.cpp", engine_choice.choose_engine(settings, CPU_DEFAULT).why)]
    monkeypatch.setenv("VERACITY_ENGINE", "llama.cpp")  # the user's own choice of a missing engine: not built
    built.clear()
    with pytest.raises(ServerError, match="not installed"):
        managed.make_ready(settings, engine_choice.choose_engine(settings, CPU_DEFAULT), CPU_DEFAULT,
                           say=said.append)
    assert built == []


@pytest.mark.usefixtures("vllm_installed")
def test_a_model_prepared_for_llama_cpp_only_is_converted_on_first_vllm_use(no_user_choice, monkeypatch,
                                                                            tmp_path):
    from tests.unit.test_models_chunked import register, write_wheels
    from veracity.serving import launch, managed

    settings = no_user_choice
    monkeypatch.setattr(hardware, "gpu_seen", lambda: False)
    monkeypatch.setattr(inst, "can_build", lambda: None)
    info = register(monkeypatch, write_wheels(tmp_path / "index", bytes(range(256)) * 400, 3))
    converted = []
    monkeypatch.setattr(prepare, "convert_gguf", lambda gguf, out, *a, **k: converted.append(gguf)
                        or (out.mkdir(parents=True), (out / "config.json").write_text("{}")))

    def download(parts, dest, bar):
        for part in parts:
            (dest / part.filename).write_bytes((tmp_path / "index" / part.filename).read_bytes())

    said = []
    entry = prepare.prepare_model(settings, info.name, progress=said.append, download=download,
                                  engine="llama.cpp")
    assert converted == [] and entry.gguf and Path(entry.gguf).read_bytes() == bytes(range(256)) * 400
    assert not (entry.path / "config.json").exists() and any("nothing converted" in s for s in said)
    assert list(Path(entry.gguf).parent.glob("*.whl")) == []  # the checked GGUF replaces its parts on disk
    with pytest.raises(ModelError, match="prepared for llama.cpp only") as err:
        prepare.resolve_model_path(settings, info.name)
    assert f"models prepare {info.name} --engine vllm" in err.value.hint

    started, said = [], []
    monkeypatch.setattr(launch, "start_server", _fake_start(started))
    monkeypatch.setattr(prepare, "verify_generation", lambda path: "ok")
    monkeypatch.setenv("VERACITY_ENGINE", "vllm")
    managed.ensure_endpoint(settings, info.name, notify=said.append)
    assert said[0].startswith(f"starting a managed vLLM server for {info.name} (VERACITY_ENGINE=vllm)")
    assert "prepared for llama.cpp only (its GGUF): converting it for vLLM now" in said[1]
    assert len(converted) == 1 and prepare.resolve_model_path(settings, info.name) == entry.path
    assert started[0][:2] == (info.name, "vllm")


def test_a_chosen_llama_cpp_that_is_missing_is_one_line_before_any_download(no_user_choice, monkeypatch,
                                                                            tmp_path):
    from veracity.serving import managed

    monkeypatch.setenv("VERACITY_ENGINE", "llama.cpp")
    monkeypatch.setenv("VERACITY_LLAMA_SERVER", str(tmp_path / "no-llama-server"))
    monkeypatch.setattr(prepare, "fetch_smollm2_gguf", lambda *a,
                        **k: pytest.fail("downloaded before the check"))
    with pytest.raises(ServerError, match="not installed") as err:
        managed.make_ready(no_user_choice, engine_choice.choose_engine(no_user_choice, CPU_DEFAULT),
                           CPU_DEFAULT,
                           say=lambda s: None)
    assert "veracity engines install llama.cpp" in err.value.hint


KILLED_INSTALL = """
import sys
from pathlib import Path
from veracity.config import Settings
from veracity.serving.engines import llamacpp_install as inst
inst._run([sys.argv[2]], open(sys.argv[1], "w"), Path(sys.argv[1]))
"""


def test_a_killed_install_leaves_no_build_running(tmp_path):
    """The build tool is the install's direct child and gets SIGTERM when the install dies, even of
    SIGKILL."""
    import os
    import signal
    import subprocess
    import sys
    import time

    tool = tmp_path / "ninja"
    pidfile = tmp_path / "pid"
    tool.write_text(f"#!/bin/sh\necho $$ > {pidfile}\necho '[1/9] Building'\nexec sleep 300\n")
    tool.chmod(0o755)
    install = subprocess.Popen([sys.executable, "-c", KILLED_INSTALL, str(tmp_path / "build.log"), str(tool)],
                               env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    try:
        deadline = time.monotonic() + 60
        while not pidfile.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        build = int(pidfile.read_text())
        os.kill(install.pid, signal.SIGKILL)
        install.wait(timeout=30)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and Path(f"/proc/{build}").exists() and \
                Path(f"/proc/{build}/stat").read_text().split()[2] != "Z":
            time.sleep(0.05)
        assert (not Path(f"/proc/{build}").exists()
                or Path(f"/proc/{build}/stat").read_text().split()[2] == "Z")
    finally:
        if install.poll() is None:
            install.kill()


def test_the_build_plan_optimises_the_token_path_and_not_the_rest(tmp_path):
    """The plan's cmake include on a stand-in of llama.cpp's tree (real cmake, configure only): the CPU
    kernels end at -O3, the grammar at -O2, the rest of llama and everything else at -O0; the server's
    sources go in unity batches; ``--full-opt`` (no plan) leaves Release's -O3 everywhere."""
    cmake = shutil.which("cmake")
    if cmake is None:
        pytest.fail("cmake is needed to build llama-server (apt-get install cmake)")
    src = tmp_path / "llama.cpp"
    for rel in ("ggml/ops.cpp", "src/llama-grammar.cpp", "src/llama-batch.cpp", "tools/server/server.cpp",
                "tools/server/server-http.cpp"):
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text("int f_%s() { return 0; }\n" % rel.replace("/", "_").replace("-",
                                                                                            "_").replace(".",
                                                                                                         "_"))
    (src / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.19)\nproject(stand_in "
        "CXX)\nadd_subdirectory(ggml)\nadd_subdirectory(src)\n"
        "add_subdirectory(tools/server)\n")
    (src / "ggml" / "CMakeLists.txt").write_text("add_library(ggml-cpu STATIC ops.cpp)\n")
    (src / "src"
     / "CMakeLists.txt").write_text("add_library(llama STATIC llama-grammar.cpp llama-batch.cpp)\n")
    (src / "tools" / "server" / "CMakeLists.txt").write_text(
        "add_library(server-context STATIC server.cpp server-http.cpp)\n")

    def flags(build: Path, extra: list[str]) -> dict[str, list[str]]:
        subprocess.run([cmake, "-S", str(src), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                        "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON", *extra], check=True, capture_output=True)
        out = {}
        for entry in json.loads((build / "compile_commands.json").read_text()):
            levels = [w for w in entry["command"].split() if w.startswith("-O")]
            out[Path(entry["file"]).name] = levels
        return out

    plan = inst.opt_plan_options(tmp_path / "b1" / "build", cmake)
    assert plan and (tmp_path / "b1" / "opt-plan.cmake").is_file()
    got = flags(tmp_path / "b1" / "build", plan)
    last = {name: levels[-1] for name, levels in got.items() if levels}
    assert (last["ops.cpp"] == "-O3" and last["llama-grammar.cpp"] == "-O2"
            and last["llama-batch.cpp"] == "-O0")
    assert "server.cpp" not in last  # compiled inside a unity batch at the base level
    assert any(name.startswith("unity_") and levels[-1] == "-O0" for name, levels in got.items())
    full = flags(tmp_path / "b2" / "build", [])
    assert {levels[-1] for levels in full.values()} == {"-O3"}


def test_an_old_cmake_builds_everything_optimised(tmp_path):
    old = tmp_path / "cmake"
    old.write_text("#!/bin/sh\necho 'cmake version 3.16.3'\n")
    old.chmod(0o755)
    assert inst.opt_plan_options(tmp_path / "build", str(old)) == []
