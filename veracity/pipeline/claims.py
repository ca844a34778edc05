"""Claims in: one claim from text, or a JSONL claims file (bad lines reported as ``file:line: reason`` and
skipped; duplicate ids an error for the whole file), or any iterable of texts / Claims / dicts.

Input: JSONL, one object per line with ``claim`` (required), ``id`` (optional: default ``sha1(claim)[:12]``),
``date`` (optional); other keys are kept in ``Claim.meta``. A bad line (not UTF-8, not JSON, not an
object, no ``claim``, empty claim, claim over ``MAX_CLAIM_CHARS``) is reported as one ``file:line:
reason`` and skipped; the rest of the batch runs. Duplicate ids are an error for the whole file
(naming the lines), since it is ambiguous which claim a result would belong to.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from veracity.errors import ConfigError, DataError
from veracity.reading import MAX_LINE_BYTES, LineBudget, jsonl_lines
from veracity.pipeline.types import MAX_CLAIM_CHARS, Claim


@dataclass
class RejectedLine:
    path: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.reason}"


def claim_problem(text: Any) -> str | None:
    """Why ``text`` cannot be verified, or None."""
    if not isinstance(text, str):
        return f"`claim` must be a string, not {type(text).__name__}"
    if not text.strip():
        return "empty claim"
    if len(text) > MAX_CLAIM_CHARS:
        return f"claim has {len(text):,} characters, over the limit of {MAX_CLAIM_CHARS:,}"
    return surrogate_problem(text)


_SURROGATE = re.compile("[\ud800-\udfff]")


def surrogate_problem(text: str) -> str | None:
    """A lone surrogate (a ``\\udcff`` escape in JSON, or bytes decoded with surrogateescape) is no character:
    it cannot be written as UTF-8, so a text holding one is refused instead of failing when its result is
    saved."""
    m = _SURROGATE.search(text)
    return None if m is None else (f"a lone surrogate (\\u{ord(m.group()):04x}) "
                                   f"at character {m.start() + 1}: not text")


def default_claim_id(text: str) -> str:
    return hashlib.sha1(text.strip().encode("utf-8")).hexdigest()[:12]


def make_claim(text: str | Claim, id: str | None = None, date: str | None = None,
               meta: dict[str, Any] | None = None) -> Claim:
    """A validated Claim; DataError (one line) for an empty or over-long claim."""
    if isinstance(text, Claim):
        claim = text
    else:
        claim = Claim(id=id or "", text=text, date=date, meta=dict(meta or {}))
    problem = claim_problem(claim.text)
    if problem:
        raise DataError(f"cannot verify this claim: {problem}",
                        hint=f"pass a non-empty claim of at most {MAX_CLAIM_CHARS:,} characters")
    if not claim.id:
        claim.id = default_claim_id(claim.text)
    return claim


@dataclass
class ClaimsFile:
    claims: list[Claim]
    rejected: list[RejectedLine]


def read_claims_jsonl(path: Path | str) -> ClaimsFile:
    """Parse a claims file; bad lines are collected (file:line: reason), duplicate ids raise DataError."""
    path = Path(path)
    hint = "pass a JSONL file: one {\"claim\": ...} per line"
    try:
        stream = open(path, "rb")
    except FileNotFoundError:
        raise DataError(f"claims file {path} does not exist", hint=hint) from None
    except OSError as exc:
        raise DataError(f"cannot read claims file {path} ({exc.strerror})") from None
    with stream:
        return _read_claims(stream, path, hint)


def _read_claims(stream: Any, path: Path, hint: str) -> ClaimsFile:
    """The lines of an open claims file, read with a bound (:mod:`veracity.reading`)."""
    claims: list[Claim] = []
    rejected: list[RejectedLine] = []
    first_line: dict[str, int] = {}
    dups: dict[str, list[int]] = {}
    budget = LineBudget(f"claims file {path}", hint)

    def reject(n: int, reason: str) -> None:
        budget.bad_line(n, reason)
        rejected.append(RejectedLine(str(path), n, reason))

    for n, raw in jsonl_lines(stream, f"claims file {path}", hint):
        if not isinstance(raw, bytes):  # TOO_LONG
            reject(n, f"line over {MAX_LINE_BYTES >> 20} MiB")
            continue
        if not raw.strip():
            continue
        try:
            line = raw.decode("utf-8")
            if n == 1:
                line = line.lstrip("\ufeff")  # a byte-order mark written by some editors
        except UnicodeDecodeError as exc:
            reject(n, f"not UTF-8 (byte 0x{raw[exc.start]:02x} at column {exc.start + 1})")
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            reject(n, f"not JSON ({exc.msg} at column {exc.colno})")
            continue
        if not isinstance(obj, dict):
            reject(n, f"not a JSON object (got {type(obj).__name__})")
            continue
        if "claim" not in obj:
            reject(n, "no `claim` field")
            continue
        problem = claim_problem(obj["claim"])
        if problem:
            reject(n, problem)
            continue
        raw_id = obj.get("id")
        if raw_id is not None and not isinstance(raw_id, (str, int)):
            reject(n, f"`id` must be a string or an integer, not {type(raw_id).__name__}")
            continue
        cid = str(raw_id) if raw_id is not None and str(raw_id).strip() else default_claim_id(obj["claim"])
        if cid in first_line:
            dups.setdefault(cid, [first_line[cid]]).append(n)
            continue
        first_line[cid] = n
        date = obj.get("date")
        meta = {k: v for k, v in obj.items() if k not in ("id", "claim", "date")}
        claims.append(Claim(id=cid, text=obj["claim"], date=str(date) if date is not None else None,
                            meta=meta))
    if dups:
        cid, lines = next(iter(dups.items()))
        more = f" (and {len(dups) - 1} more duplicated ids)" if len(dups) > 1 else ""
        raise DataError(
            f"{path}: duplicate id {cid!r} on lines {', '.join(map(str, lines))}{more}",
            hint="give every claim a unique `id` (claims without one get an id from their text)",
        )
    if not claims:  # nothing to run: say why before any index or server is touched
        if rejected:
            first = rejected[0]
            more = f" ({len(rejected)} bad lines)" if len(rejected) > 1 else ""
            raise DataError(f"no claims in {path}: line {first.line}: {first.reason}{more}",
                            hint="one JSON object per line, e.g. {\"id\": \"c1\", \"claim\": \"Paris is in "
                                 "France.\"}")
        raise DataError(f"no claims in {path}: the file is empty",
                        hint="one JSON object per line, e.g. {\"id\": \"c1\", \"claim\": \"Paris is in "
                             "France.\"}")
    return ClaimsFile(claims, rejected)



def load_claims(claims: Any) -> ClaimsFile:
    """A JSONL path, a ClaimsFile, or an iterable of str / Claim / {"claim": ..., "id": ...} dicts."""
    if isinstance(claims, ClaimsFile):
        return claims
    if isinstance(claims, Path) or (isinstance(claims, str) and claims.endswith((".jsonl", ".json"))):
        return read_claims_jsonl(claims)
    out: list[Claim] = []
    for item in claims:
        if isinstance(item, dict):
            out.append(make_claim(item.get("claim", ""),
                                  id=str(item["id"]) if item.get("id") is not None else None,
                                  date=item.get("date"),
                                  meta={k: v for k, v in item.items() if k not in ("id", "claim", "date")}))
        else:
            out.append(make_claim(item))
    ids = [c.id for c in out]
    if len(ids) != len(set(ids)):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise ConfigError(f"duplicate claim id {dup!r}", hint="give every claim a unique id")
    return ClaimsFile(out, [])
