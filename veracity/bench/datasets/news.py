"""News articles labelled fake / real: PolitiFact and GossipCop in their several releases.

PolitiFact++ (Su et al. 2023), SheepDog, ChandlerU11's cleaned FakeNewsNet, the official FakeNewsNet
CSV files and a GossipCop titles conversion. The label convention of each release is in its reader's
docstring; Claim.text is the article (cut to MAX_CLAIM_CHARS, see :func:`~.records.fit_article`) or,
where a release has no bodies, the title.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path
from typing import Sequence

from veracity.bench.datasets.records import (
    Reader,
    Record,
    fit_article,
    location,
    nonempty_text,
    read_csv,
    read_json,
    read_jsonl,
    require_fields,
)
from veracity.errors import DataError
from veracity.pipeline.types import Claim


def read_su2023(paths: Sequence[Path]) -> list[Record]:
    """PolitiFact++ (Su et al. 2023): ``HF.json``, ``HR.json`` [, ``MF.json``, ``MR.json``].

    Each file is a JSON object {"0": {id, text, title, description}, ...}; the label is the file:
    HF (human-written fake) and MF (machine-generated fake) -> REFUTED, HR (human-written real) and
    MR (machine-paraphrased real) -> SUPPORTED; ``meta["orig_label"]`` is HF/HR/MF/MR. Note: one HR id
    (politifact14940) is also in FakeNewsNet's fake list; the release's label (real) is kept.
    Claim.text = article text; ids ``<HF|HR|MF|MR>-<politifact id>`` (MF reuses the HF ids; MR holds
    two paraphrases of three articles: the second one gets the suffix ``-2``);
    meta: ``title``, ``description``, ``news_id``, ``release``.
    """
    fmt = "PolitiFact++ JSON (object of {id, text, title, description})"
    out: list[Record] = []
    seen: Counter[str] = Counter()
    for path in paths:
        kind = path.stem.upper()
        doc = read_json(path, fmt, dict)
        for key in sorted(doc, key=lambda k: (not str(k).isdigit(), int(k) if str(k).isdigit() else 0,
                                              str(k))):
            obj = doc[key]
            where = f"{path} key {key}"
            if not isinstance(obj, dict):
                raise DataError(f"{where}: expected {fmt}, found a {type(obj).__name__}",
                                hint="use the released files")
            require_fields(obj, ("id", "text", "title"), where, fmt)
            meta = {"news_id": obj["id"], "title": obj.get("title"), "description": obj.get("description"),
                    "release": "PolitiFact++"}
            text = fit_article(nonempty_text(obj["text"], where, fmt, "text"), meta)
            cid = f"{kind}-{obj['id']}"
            seen[cid] += 1
            if seen[cid] > 1:
                cid = f"{cid}-{seen[cid]}"
            out.append((Claim(id=cid, text=text, meta=meta), kind, where))
    return out


def read_sheepdog(split: str) -> Reader:
    """SheepDog PolitiFact articles (``politifact_{train,test}.jsonl``: {text, label, label_name}).

    Labels: 1 / "fake" -> REFUTED, 0 / "real" -> SUPPORTED (SheepDog README: 1 = fake). The mapping is
    on ``label``; ``label_name`` is kept in meta and must agree. Claim.text = article text;
    ids ``sheepdog-<split>-<line>``.
    """

    def read(paths: Sequence[Path]) -> list[Record]:
        fmt = "SheepDog JSONL ({text, label, label_name})"
        (path,) = paths
        out: list[Record] = []
        for lineno, obj in read_jsonl(path, fmt):
            where = location(path, lineno)
            require_fields(obj, ("text", "label"), where, fmt)
            name = obj.get("label_name")
            if name is not None and {"0": "real", "1": "fake"}.get(str(obj["label"])) != name:
                raise DataError(f"{where}: label {obj['label']!r} disagrees with label_name {name!r}",
                                hint="SheepDog uses 1 = fake, 0 = real; fix or remove that record")
            meta = {"label_name": name, "split": split, "release": "SheepDog"}
            text = fit_article(nonempty_text(obj["text"], where, fmt, "text"), meta)
            out.append((Claim(id=f"sheepdog-{split}-{lineno}", text=text, meta=meta), obj["label"], where))
        return out

    read.__doc__ = read_sheepdog.__doc__
    return read


def _py_list(value: str, where: str, fmt: str, what: str) -> list[str]:
    """chandleru11 stores sentence lists as Python list literals; parsed as literals, never executed."""
    try:
        items = ast.literal_eval(value)
    except (ValueError, SyntaxError):
        raise DataError(f"{where}: expected {fmt} with {what} as a list literal, found {value[:40]!r}",
                        hint="use the files of github.com/ChandlerU11/fake_news_data") from None
    if not isinstance(items, list):
        raise DataError(f"{where}: expected {fmt} with {what} as a list, found {type(items).__name__}",
                        hint="use the files of github.com/ChandlerU11/fake_news_data")
    return [str(x) for x in items]


def read_chandleru11(site: str, split: str) -> Reader:
    """ChandlerU11 cleaned FakeNewsNet CSV (``<site>_<split>.csv``: "", id, content, comments, label, title).

    Labels: 1 -> REFUTED (fake), 0 -> SUPPORTED (real) (checked against the official FakeNewsNet id
    lists). Claim.text = the content sentences joined (lower-cased in this release); meta: ``title``,
    ``news_id``, ``n_comments`` (the tweet replies are not kept).
    """

    def read(paths: Sequence[Path]) -> list[Record]:
        fmt = "chandleru11 CSV (columns id, content, comments, label, title)"
        (path,) = paths
        out: list[Record] = []
        for lineno, row in read_csv(path, fmt, ("id", "content", "label", "title")):
            where = location(path, lineno)
            title = " ".join(_py_list(row["title"], where, fmt, "title"))
            meta = {"news_id": row["id"], "title": title, "split": split, "release": "chandleru11",
                    "n_comments": len(_py_list(row["comments"], where, fmt,
                                               "comments")) if row.get("comments") else 0}
            body = " ".join(_py_list(row["content"], where, fmt, "content")).strip() or title
            text = fit_article(nonempty_text(body, where, fmt, "content"), meta)
            out.append((Claim(id=row["id"], text=text, meta=meta), row["label"], where))
        return out

    read.__doc__ = read_chandleru11.__doc__
    return read


def read_fakenewsnet_csv(paths: Sequence[Path]) -> list[Record]:
    """Official FakeNewsNet minimal release (``<site>_fake.csv`` / ``<site>_real.csv``: id, news_url, title,
    tweet_ids).

    The label is the file: ``*_fake.csv`` -> REFUTED, ``*_real.csv`` -> SUPPORTED (orig_label
    "fake"/"real"). Claim.text = the title (the release has no article bodies); meta: ``news_url``,
    ``n_tweets``.
    """
    fmt = "FakeNewsNet CSV (columns id, news_url, title, tweet_ids)"
    out: list[Record] = []
    for path in paths:
        kind = "fake" if path.stem.endswith("_fake") else "real"
        for lineno, row in read_csv(path, fmt, ("id", "news_url", "title")):
            where = location(path, lineno)
            tweets = [t for t in (row.get("tweet_ids") or "").split("\t") if t.strip()]
            meta = {"news_url": row["news_url"], "n_tweets": len(tweets), "release": "FakeNewsNet"}
            out.append((Claim(id=row["id"], text=nonempty_text(row["title"], where, fmt, "title"), meta=meta),
                        kind, where))
    return out


def read_kkush_gossipcop(paths: Sequence[Path]) -> list[Record]:
    """GossipCop titles (``gossipcop_all_data.json``: a JSON list of {id, text, image_path, label, url}).

    A conversion of the official gossipcop_fake.csv + gossipcop_real.csv. Labels: 1 -> REFUTED (fake),
    0 -> SUPPORTED (real). Claim.text = the title (field ``text``); meta: ``url``, ``image_path``.
    """
    fmt = "GossipCop all_data JSON (list of {id, text, label})"
    (path,) = paths
    out: list[Record] = []
    for i, obj in enumerate(read_json(path, fmt, list)):
        where = f"{path} record {i}"
        if not isinstance(obj, dict):
            raise DataError(f"{where}: expected {fmt}, found a {type(obj).__name__}",
                            hint="use all_data.json")
        require_fields(obj, ("id", "text", "label"), where, fmt)
        meta = {"url": obj.get("url") or None, "image_path": obj.get("image_path") or None,
                "release": "FakeNewsNet"}
        out.append((Claim(id=str(obj["id"]), text=nonempty_text(obj["text"], where, fmt, "text"), meta=meta),
                    obj["label"], where))
    return out
