"""What ``veracity check`` reads: one text (a file or stdin) or a JSONL file of ``{id, text}`` lines.

Every problem a user can cause is one :class:`~veracity.errors.DataError` with a hint, raised before any
model is contacted: an empty text, a binary file (a NUL byte, or bytes that are not UTF-8), a text over
``max_chars`` (default :data:`DEFAULT_MAX_CHARS`). In a JSONL file a bad line is skipped and reported as
``file:line: reason`` (like ``verify -i``); duplicate ids refuse the whole file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from veracity.check.extract import text_id
from veracity.errors import DataError
from veracity.pipeline.claims import RejectedLine

DEFAULT_MAX_CHARS = 20_000  # a news article or a long LLM answer (the longest single claim verify accepts)
MAX_HINT = "split the text, or pass --max-chars N"


@dataclass
class Doc:
    id: str
    text: str


def text_problem(text: Any, max_chars: int) -> str | None:
    """Why ``text`` cannot be checked, or None."""
    if not isinstance(text, str):
        return f"`text` must be a string, not {type(text).__name__}"
    if not text.strip():
        return "empty text"
    if "\x00" in text:
        return "binary data (a NUL character), not text"
    if len(text) > max_chars:
        return f"text has {len(text):,} characters, over --max-chars {max_chars:,}"
    return None


def decode_text(data: bytes, where: str, max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """The text of ``data`` (from ``where``: a path or "stdin"), checked; DataError otherwise."""
    if b"\x00" in data:
        raise DataError(f"{where} is a binary file, not text", hint="pass a UTF-8 text file")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DataError(f"{where} is not UTF-8 text (byte {exc.start})",
                        hint="pass a UTF-8 text file (e.g. convert it with iconv -t UTF-8)") from None
    return valid_text(text, where, max_chars)


def valid_text(text: str, where: str = "the text", max_chars: int = DEFAULT_MAX_CHARS) -> str:
    problem = text_problem(text, max_chars)
    if problem is not None:
        hint = MAX_HINT if "max-chars" in problem else "pass a text with at least one sentence"
        raise DataError(f"cannot check {where}: {problem}", hint=hint)
    return text


def read_text(source: str, max_chars: int = DEFAULT_MAX_CHARS, stdin: Any = None) -> str:
    """The text of a file path, or of stdin for ``-``."""
    if source == "-":
        import sys

        stream = stdin if stdin is not None else sys.stdin.buffer
        return decode_text(stream.read(), "stdin", max_chars)
    path = Path(source).expanduser()
    if path.is_dir():
        raise DataError(f"{path} is a directory", hint="pass a text file, - for stdin, or -i DOCS.jsonl")
    if not path.exists():
        raise DataError(f"{path} does not exist", hint="pass a text file, - for stdin, or -i DOCS.jsonl")
    return decode_text(path.read_bytes(), str(path), max_chars)


def read_docs_jsonl(path: Path, max_chars: int = DEFAULT_MAX_CHARS) -> tuple[list[Doc], list[RejectedLine]]:
    """``{"id": ..., "text": ...}`` lines (id optional: sha1 of the text); bad lines are returned as
    rejected, duplicate ids raise DataError naming their lines."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path} does not exist or is not a file", hint="pass a JSONL file of {\"id\", \"text\"} lines")
    data = path.read_bytes()
    if b"\x00" in data:
        raise DataError(f"{path} is a binary file, not JSONL", hint="pass a JSONL file of {\"id\", \"text\"} lines")
    docs: list[Doc] = []
    rejected: list[RejectedLine] = []
    seen: dict[str, int] = {}
    for n, raw in enumerate(data.split(b"\n"), 1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError:
            rejected.append(RejectedLine(str(path), n, "not UTF-8"))
            continue
        except json.JSONDecodeError as exc:
            rejected.append(RejectedLine(str(path), n, f"not JSON ({exc.msg})"))
            continue
        if not isinstance(obj, dict):
            rejected.append(RejectedLine(str(path), n, "not a JSON object"))
            continue
        if "text" not in obj:
            rejected.append(RejectedLine(str(path), n, "no `text`"))
            continue
        problem = text_problem(obj["text"], max_chars)
        if problem:
            rejected.append(RejectedLine(str(path), n, problem))
            continue
        did = str(obj["id"]) if obj.get("id") is not None else text_id(obj["text"])
        if did in seen:
            raise DataError(f"{path}: duplicate text id {did!r} (lines {seen[did]} and {n})",
                            hint="give every text a unique id")
        seen[did] = n
        docs.append(Doc(did, obj["text"]))
    if not docs:
        why = f" ({rejected[0]}" + (f", and {len(rejected) - 1} more bad lines)" if len(rejected) > 1 else ")") \
            if rejected else " (the file is empty)"
        raise DataError(f"no texts to check in {path}{why}", hint="one {\"id\": ..., \"text\": ...} object per line")
    return docs, rejected
