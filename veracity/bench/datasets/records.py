"""What every dataset reader shares: the :data:`Record` it yields and the low-level file readers.

A reader turns the files of one release into records ``(claim, raw label, "file:line")``; label mapping,
filters and sampling happen later, in :mod:`veracity.bench.datasets.load`. Every format error is a
:class:`~veracity.errors.DataError` naming the expected format and the file:line where it was found.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from veracity.errors import DataError
from veracity.pipeline.types import MAX_CLAIM_CHARS, Claim

# A record as a reader yields it: the claim (without its label) and the label exactly as in the file.
Record = tuple[Claim, Any, str]  # (claim, raw label, "file:line" for error messages)
Reader = Callable[[Sequence[Path]], list[Record]]


def location(path: Path, line: int | None = None) -> str:
    return f"{path}:{line}" if line is not None else str(path)


def read_jsonl(path: Path, fmt: str) -> list[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line; a bad line is a DataError with file:line."""
    out: list[tuple[int, dict[str, Any]]] = []
    with open_text(path, fmt) as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                found = ("a JSON list (one document, not JSON Lines)"
                         if lineno == 1 and line.lstrip().startswith("[")
                         else f"text that is not JSON ({exc.msg})")
                raise DataError(
                    f"{location(path, lineno)}: expected {fmt} (one JSON object per line), found {found}",
                    hint="check that the file is the one the dataset's authors publish, not a converted copy",
                ) from None
            if not isinstance(obj, dict):
                raise DataError(
                    f"{location(path, lineno)}: expected {fmt} (one JSON object per line), "
                    f"found a JSON {type(obj).__name__}",
                    hint="each line must be an object such as {\"claim\": ..., \"label\": ...}",
                )
            out.append((lineno, obj))
    return out


def read_json(path: Path, fmt: str, top: type) -> Any:
    """A whole-file JSON document whose top level must be ``top`` (list or dict)."""
    with open_text(path, fmt) as fh:
        text = fh.read()
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        found = "JSON Lines (one object per line)" if exc.msg == "Extra data" else f"invalid JSON ({exc.msg})"
        raise DataError(
            f"{location(path, exc.lineno)}: expected {fmt} (one JSON document), found {found}",
            hint="check that the file is the one the dataset's authors publish, not a converted copy",
        ) from None
    if not isinstance(doc, top):
        want = "list" if top is list else "object"
        raise DataError(
            f"{path}: expected {fmt} (a JSON {want} at the top level), found a JSON {type(doc).__name__}",
            hint="check that the file is the one the dataset's authors publish",
        )
    return doc


# the largest benchmark file (FEVER's wiki pages are read elsewhere) is far smaller
MAX_DATASET_BYTES = 4 << 30


class open_text:
    """open(path) for text, turning undecodable bytes into a DataError that names the format."""

    def __init__(self, path: Path, fmt: str):
        self.path, self.fmt = path, fmt

    def __enter__(self):
        size = self.path.stat().st_size
        if size > MAX_DATASET_BYTES:  # read whole (or line by line without a bound): refused before reading
            raise DataError(f"{self.path}: {size / 2**30:.1f} GiB, larger than any {self.fmt} file of the "
                            "benchmarks "
                            f"(the limit is {MAX_DATASET_BYTES >> 30} GiB)",
                            hint="check that the file is the one the dataset's authors publish")
        self.fh = open(self.path, encoding="utf-8", newline="")
        return self

    def __iter__(self):
        try:
            yield from self.fh
        except UnicodeDecodeError:
            raise DataError(f"{self.path}: expected {self.fmt} (UTF-8 text), found binary data",
                            hint="check that the file is not compressed or truncated") from None

    def read(self) -> str:
        try:
            return self.fh.read()
        except UnicodeDecodeError:
            raise DataError(f"{self.path}: expected {self.fmt} (UTF-8 text), found binary data",
                            hint="check that the file is not compressed or truncated") from None

    def __exit__(self, *exc):
        self.fh.close()
        return False


def require_fields(obj: Mapping[str, Any], fields: Iterable[str], where: str, fmt: str) -> None:
    missing = [f for f in fields if f not in obj]
    if missing:
        raise DataError(
            f"{where}: expected {fmt} with fields {', '.join(fields)}; missing {', '.join(missing)} "
            f"(found fields: {', '.join(map(str, obj)) or 'none'})",
            hint="check that the file is the one the dataset's authors publish, not another version",
        )


def read_csv(path: Path, fmt: str, fields: Sequence[str]) -> list[tuple[int, dict[str, str]]]:
    csv.field_size_limit(sys.maxsize)
    with open_text(path, fmt) as fh:
        reader = csv.DictReader(iter(fh))
        header = reader.fieldnames or []
        missing = [f for f in fields if f not in header]
        if missing:
            raise DataError(
                f"{location(path, 1)}: expected {fmt} with columns {', '.join(fields)}; missing "
                f"{', '.join(missing)} (found header: {', '.join(header) or 'empty file'})",
                hint="check that the file is the one the dataset's authors publish",
            )
        rows = []
        for row in reader:
            rows.append((reader.line_num, row))
    return rows


def nonempty_text(value: Any, where: str, fmt: str, what: str = "claim") -> str:
    if not isinstance(value, str) or not value.strip():
        raise DataError(f"{where}: expected {fmt} with a non-empty string {what!r}, found "
                        f"{type(value).__name__} "
                        f"{str(value)[:40]!r}", hint="fix or remove that record")
    return value.strip()


def fit_article(text: str, meta: dict[str, Any]) -> str:
    """News articles longer than MAX_CLAIM_CHARS are cut at the last whitespace before the limit.

    The runner refuses longer inputs, and many PolitiFact/GossipCop bodies (scraped pages) run past
    20,000 characters; the cut keeps the article's beginning (headline, lead) and is recorded in
    ``meta["truncated_from_chars"]``.
    """
    if len(text) <= MAX_CLAIM_CHARS:
        return text
    cut = text.rfind(" ", 0, MAX_CLAIM_CHARS)
    meta["truncated_from_chars"] = len(text)
    return text[: cut if cut > MAX_CLAIM_CHARS // 2 else MAX_CLAIM_CHARS].rstrip()


def norm_label_key(value: Any) -> str:
    """How original labels are compared with mapping keys: JSON booleans as true/false, text lower-cased."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return " ".join(str(value).strip().lower().split())
