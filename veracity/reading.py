"""Reading user input with a bound: a text, stdin or a JSONL file is read no further than the limit that
applies to it, so ``/dev/zero``, ``yes | veracity check -``, a named pipe that never ends or a file of one
endless line is refused after a bounded read instead of filling memory.

- :func:`read_limited`: at most ``limit`` bytes of a file, a device or a stream, and whether more followed;
- :func:`jsonl_lines`: the lines of a JSONL file (or pipe, or device), each no longer than ``max_line``
  bytes (a longer line is handed out as :data:`TOO_LONG` and skipped to its end, reading at most
  :data:`MAX_SKIP_BYTES` while skipping), the whole read no longer than :data:`MAX_JSONL_BYTES`, and
  reading stops once more than :data:`MAX_BAD_LINES` lines were bad (a file of ``y`` lines is no claims
  file). Each over-limit case is one :class:`~veracity.errors.DataError` with a hint.
"""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO, Iterator

from veracity.errors import DataError

CHUNK = 1 << 16
MAX_LINE_BYTES = 8 << 20  # one JSONL line: a long text with its gold evidence fits many times over
MAX_SKIP_BYTES = 64 << 20  # reading on past an over-long line: a line without a break this long is no JSONL
MAX_JSONL_BYTES = 2 << 30  # a whole claims / texts file
MAX_BAD_LINES = 1000  # a file with more bad lines than this is the wrong file: stop reading it
TOO_LONG = object()  # what jsonl_lines hands out for a line over the limit


def utf8_bytes_for(chars: int) -> int:
    """The most bytes a text of ``chars`` characters takes in UTF-8 (4 per character, and a byte-order
    mark)."""
    return 4 * chars + 3


def read_limited(stream: BinaryIO, limit: int) -> tuple[bytes, bool]:
    """At most ``limit`` bytes of ``stream`` and whether more followed (one byte more is read to know)."""
    parts: list[bytes] = []
    left = limit + 1
    while left > 0:
        chunk = stream.read(min(left, CHUNK))
        if not chunk:
            break
        parts.append(chunk)
        left -= len(chunk)
    data = b"".join(parts)
    return data[:limit], len(data) > limit


def read_file_limited(path: Path, limit: int) -> tuple[bytes, bool]:
    """:func:`read_limited` of a path (a file, a device, a named pipe)."""
    with open(path, "rb") as f:
        return read_limited(f, limit)


class LineBudget:
    """Counts what a JSONL reader has read and how many lines were bad; raises DataError past a bound."""

    def __init__(self, where: str, hint: str, max_bad: int = MAX_BAD_LINES):
        self.where, self.hint, self.max_bad = where, hint, max_bad
        self.bad = 0
        self.first_bad: str | None = None

    def bad_line(self, line: int, reason: str) -> None:
        self.bad += 1
        if self.first_bad is None:
            self.first_bad = f"line {line}: {reason}"
        if self.bad > self.max_bad:
            raise DataError(f"{self.where}: stopped reading at line {line:,}: over {self.max_bad:,} bad "
                            "lines "
                            f"(first: {self.first_bad}); this is not a JSONL file of the kind expected",
                            hint=self.hint)


def jsonl_lines(stream: BinaryIO, where: str, hint: str, max_line: int = MAX_LINE_BYTES,
                max_total: int = MAX_JSONL_BYTES, max_skip: int = MAX_SKIP_BYTES) -> Iterator[tuple[int,
                                                                                                    object]]:
    """``(line number, bytes without the newline)`` for each line of ``stream``; a line over ``max_line``
    bytes is ``(n, TOO_LONG)``. DataError (naming ``where``, with ``hint``) when the read passes
    ``max_total`` bytes or a line runs on past ``max_skip`` bytes without a break."""
    total = 0
    n = 0
    while True:
        raw = stream.readline(max_line + 1)
        if not raw:
            return
        n += 1
        total += len(raw)
        if len(raw) > max_line and not raw.endswith(b"\n"):  # over the limit: skip to the line's end, bounded
            skipped = len(raw)
            while True:
                rest = stream.readline(CHUNK)
                skipped += len(rest)
                total += len(rest)
                if not rest or rest.endswith(b"\n"):
                    break
                if skipped > max_skip:
                    raise DataError(f"{where}: line {n:,} runs on past {max_skip >> 20} MiB without a line "
                                    "break: "
                                    "not a JSONL file", hint=hint)
            yield n, TOO_LONG
        else:
            yield n, raw[:-1] if raw.endswith(b"\n") else raw
        if total > max_total:
            raise DataError(f"{where}: over {max_total >> 20:,} MiB read: too large for one run", hint=hint)
