"""Write a {title, text} JSONL corpus of FEVEROUS-S's gold sentences, one article per page, for the
open-book FEVEROUS-S cells of the quality table (BENCHMARKS.md "Verification quality").

No FEVEROUS Wikipedia dump is available offline here, so the open setting on FEVEROUS-S searches the
pooled gold sentences of every dev claim (grouped by page, wiki link markup ``[[target|text]]`` reduced
to its text) mixed with the demo corpus as distractors — the same construction as the HoVer ``hover-mix``
index. This is far easier than ProgramFC's open book (the full Wikipedia): every page in it is some
claim's evidence. BENCHMARKS.md says so beside the numbers.

    python benchmarks/feverous_corpus.py ../shared/data/feverous_s/feverous_s_dev_gold_sentences.jsonl \
        /tmp/feverous_gold_pages.jsonl
    veracity index build /tmp/feverous_gold_pages.jsonl demo --out ~/.veracity/indexes/feverous-mix \
        --dump-date 2020-12-01
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

_LINK = re.compile(r"\[\[(?:[^\]|]*\|)?([^\]]*)\]\]")


def plain(sentence: str) -> str:
    """``[[Russell_County,_Alabama|Russell County, Alabama]]`` -> ``Russell County, Alabama``."""
    return _LINK.sub(lambda m: m.group(1), sentence)


def pages(lines: list[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        rec = json.loads(line)
        try:
            title, sentence = rec["title"], rec["sentence"]
        except KeyError as e:
            raise SystemExit(f"error: line {n} has no {e.args[0]!r} field; expected the gold-sentence JSONL")
        sents = out.setdefault(title, [])
        text = plain(sentence).strip()
        if text and text not in sents:
            sents.append(text)
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python benchmarks/feverous_corpus.py GOLD_SENTENCES_JSONL OUT_JSONL", file=sys.stderr)
        return 2
    src, dst = Path(argv[0]), Path(argv[1])
    if not src.is_file():
        print(f"error: {src} not found; hint: it is feverous_s/feverous_s_dev_gold_sentences.jsonl of the "
              "data",
              file=sys.stderr)
        return 2
    grouped = pages(src.read_text(encoding="utf-8").splitlines())
    with dst.open("w", encoding="utf-8") as f:
        for title, sents in grouped.items():
            f.write(json.dumps({"title": title, "text": " ".join(sents)}, ensure_ascii=False) + "\n")
    print(f"{len(grouped)} pages, {sum(map(len, grouped.values()))} sentences -> {dst}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
