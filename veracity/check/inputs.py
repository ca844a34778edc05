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
from veracity.pipeline.claims import RejectedLine, surrogate_problem

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
    return surrogate_problem(text)


def decode_text(data: bytes, where: str, max_chars: int = DEFAULT_MAX_CHARS, more: bool = False) -> str:
    """The text of ``data`` (from ``where``: a path or "stdin"), checked; DataError otherwise. ``more``: the
    read stopped at its bound (:func:`read_text`) with bytes still to come, so the text is over the limit."""
    if b"\x00" in data:
        raise DataError(f"{where} is a binary file, not text", hint="pass a UTF-8 text file")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        if more and exc.start >= len(data) - 3:  # a character cut by the bound, not a bad byte
            return decode_text(data[:exc.start], where, max_chars, more)
        raise DataError(f"{where} is not UTF-8 text (byte {exc.start})",
                        hint="pass a UTF-8 text file (e.g. convert it with iconv -t UTF-8)") from None
    if more:
        raise DataError(f"cannot check {where}: text has more than {max_chars:,} characters, over "
                        "--max-chars "
                        f"{max_chars:,} (reading stopped there)", hint=MAX_HINT)
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
        data, more = _bounded(stream, max_chars)
        return decode_text(data, "stdin", max_chars, more)
    path = Path(source).expanduser()
    if path.is_dir():
        raise DataError(f"{path} is a directory", hint="pass a text file, - for stdin, or -i DOCS.jsonl")
    if not path.exists():
        raise DataError(f"{path} does not exist", hint="pass a text file, - for stdin, or -i DOCS.jsonl")
    # a file, a device (/dev/zero) or a named pipe: read no further than the limit
    with open(path, "rb") as f:
        data, more = _bounded(f, max_chars)
    return decode_text(data, str(path), max_chars, more)


def _bounded(stream: Any, max_chars: int) -> tuple[bytes, bool]:
    """At most the bytes ``max_chars`` characters can take, and whether more followed: a text over the limit
    is refused after reading that much, whatever the source (``yes | veracity check -`` included)."""
    from veracity.reading import read_limited, utf8_bytes_for

    return read_limited(stream, utf8_bytes_for(max_chars))


def read_docs_jsonl(path: Path, max_chars: int = DEFAULT_MAX_CHARS) -> tuple[list[Doc], list[RejectedLine]]:
    """``{"id": ..., "text": ...}`` lines (id optional: sha1 of the text); bad lines are returned as
    rejected, duplicate ids raise DataError naming their lines."""
    from veracity.reading import MAX_LINE_BYTES, LineBudget, jsonl_lines

    path = Path(path)
    hint = "pass a JSONL file of {\"id\", \"text\"} lines"
    if not path.is_file():
        raise DataError(f"{path} does not exist or is not a file", hint=hint)
    docs: list[Doc] = []
    rejected: list[RejectedLine] = []
    seen: dict[str, int] = {}
    budget = LineBudget(str(path), hint)
    # a text of max_chars characters, every one escaped
    max_line = max(MAX_LINE_BYTES, 6 * max_chars + 65_536)
    with open(path, "rb") as stream:
        for n, raw in jsonl_lines(stream, str(path), hint, max_line=max_line):
            if not isinstance(raw, bytes):  # over the line limit
                budget.bad_line(n, "line too long")
                rejected.append(RejectedLine(str(path), n, f"text over --max-chars {max_chars:,}"))
                continue
            if b"\x00" in raw:
                raise DataError(f"{path} is a binary file, not JSONL", hint=hint)
            problem = _line_problem(raw, n, max_chars, seen, path, docs)
            if problem is not None:
                budget.bad_line(n, problem)
                rejected.append(RejectedLine(str(path), n, problem))
    if not docs:
        why = f" ({rejected[0]}" + (f", and {len(rejected) - 1} more bad lines)" if len(rejected) > 1
                                    else ")") \
            if rejected else " (the file is empty)"
        raise DataError(f"no texts to check in {path}{why}",
                        hint="one {\"id\": ..., \"text\": ...} object per line")
    return docs, rejected


def _line_problem(raw: bytes, n: int, max_chars: int, seen: dict[str, int], path: Path,
                  docs: list[Doc]) -> str | None:
    """Why line ``n`` of a texts file is skipped, or None (a blank line, or its Doc appended to ``docs``)."""
    if not raw.strip():
        return None
    try:
        obj = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return "not UTF-8"
    except json.JSONDecodeError as exc:
        return f"not JSON ({exc.msg})"
    if not isinstance(obj, dict):
        return "not a JSON object"
    if "text" not in obj:
        return "no `text`"
    problem = text_problem(obj["text"], max_chars)
    if problem:
        return problem
    did = str(obj["id"]) if obj.get("id") is not None else text_id(obj["text"])
    if did in seen:
        raise DataError(f"{path}: duplicate text id {did!r} (lines {seen[did]} and {n})",
                        hint="give every text a unique id")
    seen[did] = n
    docs.append(Doc(did, obj["text"]))
    return None
