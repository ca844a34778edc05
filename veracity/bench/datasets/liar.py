"""LIAR (Wang 2017): PolitiFact statements with six-way ratings, in the original TSV files."""

from __future__ import annotations

import csv
import sys
from pathlib import Path
from typing import Sequence

from veracity.bench.datasets.records import Reader, Record, location, nonempty_text, open_text
from veracity.errors import DataError
from veracity.pipeline.types import Claim


def read_liar(split: str) -> Reader:
    """LIAR TSV (``{train,valid,test}.tsv``, no header, 14 tab-separated columns).

    The six PolitiFact ratings are kept in ``meta["orig_label"]``; the gold Label is the common
    binarisation (e.g. used for LIAR in fake-news baselines; the shared data README gives test 727/556):
    true, mostly-true, half-true -> SUPPORTED; barely-true, false, pants-fire -> REFUTED.
    Ids: column 1 without ``.json``; meta: subject, speaker, job_title, state, party, context,
    credit_history (the five counts) and ``split``.
    """

    def read(paths: Sequence[Path]) -> list[Record]:
        fmt = "LIAR TSV (14 tab-separated columns, no header)"
        (path,) = paths
        out: list[Record] = []
        csv.field_size_limit(sys.maxsize)
        with open_text(path, fmt) as fh:
            for lineno, row in enumerate(csv.reader(iter(fh), delimiter="\t", quoting=csv.QUOTE_NONE), 1):
                if not row or row == [""]:
                    continue
                where = location(path, lineno)
                if len(row) != 14:
                    raise DataError(f"{where}: expected {fmt}, found {len(row)} column(s)",
                                    hint="use the original liar_dataset.zip files (copies with a header row "
                                         "or edited lines are not the official release)")
                meta = {
                    "split": split,
                    "subject": row[3], "speaker": row[4], "job_title": row[5], "state": row[6],
                    "party": row[7], "context": row[13],
                    "credit_history": dict(zip(
                        ("barely-true", "false", "half-true", "mostly-true", "pants-fire"), row[8:13],
                                               strict=True)),
                }
                cid = row[0][:-5] if row[0].endswith(".json") else row[0]
                out.append((Claim(id=cid, text=nonempty_text(row[2], where, fmt, "statement"), meta=meta),
                            row[1], where))
        return out

    read.__doc__ = read_liar.__doc__
    return read
