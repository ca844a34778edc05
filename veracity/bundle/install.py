"""``veracity bundle install DIR``: a checked bundle onto this machine, nothing fetched.

Order, so that a failure at any point leaves nothing half-installed registered:

1. every check first (:func:`veracity.bundle.manifest.verify_bundle`: the manifest not edited, the same
   platform and Python, every file there with its size and sha256), and the free space needed;
2. the packages, from the bundle's ``wheels/`` only (skipped when the bundle's ``install.py`` did it);
3. models and indexes staged (hard-linked where the bundle is on the same file system, else copied) in
   hidden folders beside their places, then moved into place, and only then registered (one atomic
   write of ``prepared.json``); a full disk while staging removes what was staged and registers nothing;
4. the llama.cpp engine: the carried binary when this CPU has the features it was built with, else a
   build from the carried source (cmake and a compiler needed; it is optional, so a machine without them
   is told and the rest stays installed);
5. ``veracity doctor``, whose verdict is the command's.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Callable

from veracity.bundle.manifest import (BundleError, human, install_packages, missing_cpu_features,
                                      verify_bundle)
from veracity.config import Settings
from veracity.models.chunked import Bar, no_bar

Progress = Callable[[str], None]
# a full disk: no space, a quota, or a file-size limit (ulimit -f) reached while copying
FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def _link_or_copy(src: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dest)
    except OSError:
        shutil.copyfile(src, dest)


def _same_device(a: Path, b: Path) -> bool:
    try:
        return a.stat().st_dev == b.stat().st_dev
    except OSError:
        return False


def _needed_bytes(root: Path, manifest: dict, home: Path) -> int:
    """Bytes the models and indexes take where they go (nothing where they can be hard-linked)."""
    home.mkdir(parents=True, exist_ok=True)
    if _same_device(root, home):
        return 0
    prefixes = tuple(f"{m['weights']}/" for m in manifest.get("models", []) if m.get("weights")) + tuple(
        f"{i['path']}/" for i in manifest.get("indexes", []))
    ggufs = {m["gguf"] for m in manifest.get("models", []) if m.get("gguf")}
    return sum(meta["size"] for rel,
               meta in manifest["files"].items() if rel.startswith(prefixes) or rel in ggufs)


def _gguf_place(settings: Settings, model: dict) -> Path:
    """Where a model's GGUF goes: where ``models prepare`` keeps it (llama.cpp finds it there without a
    registry entry), else beside the other downloads under the model's name."""
    from veracity.models.prepare import kept_gguf
    from veracity.models.registry import MODELS

    name = Path(model["gguf"]).name
    info = MODELS.get(model["name"])
    kept = kept_gguf(settings, info) if info is not None else None
    return (kept if kept is not None and kept.name == name
            else settings.home / "downloads" / model["name"] / name)


class _Staged:
    """Folders and files written under hidden names, moved into place together, removed on failure."""

    def __init__(self) -> None:
        self.moves: list[tuple[Path, Path]] = []

    def folder(self, root: Path, rel_prefix: str, manifest: dict, final: Path) -> None:
        stage = final.parent / f".{final.name}.bundle-staging"
        shutil.rmtree(stage, ignore_errors=True)
        self.moves.append((stage, final))
        stage.mkdir(parents=True)
        for rel in manifest["files"]:
            if rel.startswith(rel_prefix + "/"):
                _link_or_copy(root / rel, stage / rel[len(rel_prefix) + 1:])

    def file(self, src: Path, final: Path) -> None:
        stage = final.parent / f".{final.name}.bundle-staging"
        stage.unlink(missing_ok=True)
        self.moves.append((stage, final))
        _link_or_copy(src, stage)

    def discard(self) -> None:
        for stage, _ in self.moves:
            if stage.is_dir():
                shutil.rmtree(stage, ignore_errors=True)
            else:
                stage.unlink(missing_ok=True)

    def commit(self) -> None:
        """Each staged folder or file into its place. What was there is renamed aside first and removed only
        after the new one is in place, so an interrupt leaves each place whole (the old or the new); Ctrl-C
        waits until every move is done (the renames take moments)."""
        pending: list[int] = []
        try:  # a Python handler runs in the main thread whichever thread the signal reaches (a mask does not)
            previous = signal.signal(signal.SIGINT, lambda signum, frame: pending.append(signum))
        except ValueError:  # not the main thread: nothing to defer
            previous = None
        try:
            self._moves()
        finally:
            if previous is not None:
                signal.signal(signal.SIGINT, previous)
        if pending:
            raise KeyboardInterrupt

    def _moves(self) -> None:
        for stage, final in self.moves:
            aside = final.parent / f".{final.name}.bundle-replaced"
            if aside.is_dir():
                shutil.rmtree(aside)
            aside.unlink(missing_ok=True)
            if final.exists() or final.is_symlink():
                final.replace(aside)
            stage.replace(final)
            if aside.is_dir() and not aside.is_symlink():
                shutil.rmtree(aside, ignore_errors=True)
            else:
                aside.unlink(missing_ok=True)


def install_files(settings: Settings, root: Path, manifest: dict, *, index_dir: Path | None = None,
                  progress: Progress = print) -> tuple[list[str], list[Path]]:
    """Models and indexes: staged, moved into place, then registered. Returns (models, index folders)."""
    models = manifest.get("models", [])
    indexes = manifest.get("indexes", [])
    index_dir = index_dir or settings.indexes_dir
    staged = _Staged()
    try:
        for m in models:
            progress(f"model {m['name']}: {'linking' if _same_device(root, settings.home) else 'copying'} "
                     "its files"
                     + ("" if m.get("weights") else " (its GGUF only: llama.cpp serves it)"))
            if m.get("weights"):
                staged.folder(root, m["weights"], manifest, settings.models_dir / m["name"])
            if m.get("gguf"):
                staged.file(root / m["gguf"], _gguf_place(settings, m))
        for i in indexes:
            progress(f"index {i['name']}: into {index_dir / i['name']}")
            staged.folder(root, i["path"], manifest, index_dir / i["name"])
    except BaseException as exc:  # a full disk, Ctrl-C, ...: nothing staged stays behind, nothing registered
        staged.discard()
        if isinstance(exc, OSError) and exc.errno in FULL:
            raise BundleError("the disk filled while installing the bundle's models and indexes "
                              f"({exc.filename or ''}); "
                              "nothing was registered and what was written is removed",
                              hint="free disk space and run the same command again")
        raise
    staged.commit()
    try:
        return _register_models(settings, models, indexes, index_dir, progress)
    except OSError as exc:  # prepared.json is written whole (a temporary file, then renamed) or not at all
        if exc.errno in FULL:
            raise BundleError("the disk filled while registering the bundle's models "
                              f"({exc.filename or ''}); "
                              "their files are in place but nothing was registered",
                              hint="free disk space and run the same command again")
        raise


def _register_models(settings: Settings, models: list[dict], indexes: list[dict], index_dir: Path,
                     progress: Progress) -> tuple[list[str], list[Path]]:
    from veracity.models.defaults import remember_first_model
    from veracity.models.prepared import PreparedModel, _save_prepared, load_prepared

    # registered last: a model is in prepared.json only once its files are in place
    prepared = load_prepared(settings)
    # a GGUF alone is found where models prepare keeps it
    registered = [m for m in models if m.get("weights")]
    for m in registered:
        entry = m["entry"]
        gguf = _gguf_place(settings, m) if m.get("gguf") else None
        prepared[m["name"]] = PreparedModel(m["name"], settings.models_dir / m["name"],
                                            f"bundle: {entry.get('source', '')}", time.time(),
                                            entry.get("verified"),
                                            entry.get("timings") or {}, str(gguf) if gguf else None)
    if registered:
        _save_prepared(settings, prepared)
        if remember_first_model(settings, registered[0]["name"]):
            progress(f"{registered[0]['name']} is the default model now")
    return [m["name"] for m in models], [index_dir / i["name"] for i in indexes]


def install_engine(settings: Settings, root: Path, manifest: dict, *, progress: Progress = print,
                   bar: Bar = no_bar) -> str:
    """llama-server from the bundle: its binary where this CPU runs it, else built from its source.
    Returns what was done, in words (the engine is optional: a machine that cannot build it is told)."""
    from veracity.errors import VeracityError
    from veracity.serving.engines import llamacpp_install as li
    from veracity.serving.engines.llamacpp import engine_dir

    llama = manifest.get("llama_cpp") or {}
    folder = engine_dir(settings)
    if llama.get("binary"):
        lacking = missing_cpu_features(llama.get("features") or [])
        if lacking:
            progress(f"the bundle's llama-server needs {', '.join(lacking)}, which this CPU lacks; building "
                     "it "
                     "from the bundle's source")
        else:
            try:
                info = li.install_from_local(settings, root / llama["binary"], force=True, progress=progress)
            except VeracityError as exc:
                progress(f"the bundle's llama-server: {exc}; building it from the bundle's source")
            else:  # what the connected machine's build recorded (version, features), and where it came from
                info = {**info, **(llama.get("install") or {}), "binary": info["binary"],
                        "sha256_binary": info.get("sha256"), "from_bundle": str(root)}
                (folder / "install.json").write_text(json.dumps(info, indent=2))
                return ("llama-server installed from the bundle's binary (CPU features "
                        f"{', '.join(llama.get('features') or []) or 'baseline'})")
    if not llama.get("source"):
        return "llama.cpp: not in the bundle (optional engine)"
    try:
        info = li.install_from_local(settings, root / llama["source"], bar=bar, progress=progress)
    except VeracityError as exc:
        return f"llama.cpp: not built ({exc}; {exc.hint})"
    return ("llama-server built from the bundle's source "
            f"({', '.join(info.get('features') or []) or 'baseline'})")


def install_bundle(settings: Settings, root: Path, *, packages: bool = True, checked: bool = False,
                   engine: bool = True, index_dir: Path | None = None, progress: Progress = print,
                   bar: Bar = no_bar) -> dict:
    """Steps 1-4 of the module's docstring; returns what was done (the CLI runs doctor after)."""
    root = Path(root).expanduser().resolve()
    t0 = time.monotonic()
    manifest = verify_bundle(root, hashes=not checked, bar=bar)
    timings = {"verify": round(time.monotonic() - t0, 1)}
    need = _needed_bytes(root, manifest, settings.home)
    free = shutil.disk_usage(settings.home).free
    if need > free:
        raise BundleError(f"the bundle's models and indexes take {human(need)}, {settings.home} has "
                          f"{human(free)} free",
                          hint="free disk space, or set VERACITY_HOME to a larger disk")
    if packages and manifest.get("requirement"):
        t0 = time.monotonic()
        install_packages(root, manifest, sys.executable, say=progress)
        timings["packages"] = round(time.monotonic() - t0, 1)
    t0 = time.monotonic()
    models, indexes = install_files(settings, root, manifest, index_dir=index_dir, progress=progress)
    timings["files"] = round(time.monotonic() - t0, 1)
    engine_done = None
    if engine and manifest.get("llama_cpp"):
        t0 = time.monotonic()
        engine_done = install_engine(settings, root, manifest, progress=progress, bar=bar)
        timings["engine"] = round(time.monotonic() - t0, 1)
    return {"bundle": str(root), "models": models, "indexes": [str(p) for p in indexes],
            "engine": engine_done,
            "files": len(manifest["files"]), "bytes": manifest["total_bytes"], "timings": timings}


__all__ = ["install_bundle", "install_engine", "install_files"]
