"""Gold evidence of the benchmarks: which passages a claim's ``--evidence gold`` run may see.

``load_dataset(..., evidence="gold")`` attaches each claim's gold passages to ``Claim.meta["evidence"]``
(a list of ``{id, title, text}``; the runner serves them through a per-claim
:class:`~veracity.indexes.gold.GoldRetriever`) and keeps only the claims whose gold evidence is
complete. What "gold" means differs per dataset, and is what the shared data actually holds:

- **HoVer** (dev): the Wikipedia intro paragraph of every distinct ``supporting_facts`` title of the
  claim, whole (the facts' sentence ids point into these paragraphs; as in ProgramFC's gold setting,
  the model gets the paragraphs, not the single sentences), in supporting-fact order, passage id
  ``title#0``. HoVer ships titles and sentence ids only; the paragraphs come from the derived corpus
  ``wiki_corpus_hover_gold/hover_dev_gold_paragraphs.jsonl`` (HotpotQA's 2017 intro paragraphs, titles
  aligned to the paragraphs of ProgramFC's gold evidence; see its README). That corpus holds every
  gold paragraph of the SUPPORTED claims but not all of the NOT_SUPPORTED ones, so a claim with a gold
  title the corpus lacks is **dropped** (in the shared dev file: 427 of 1,500 NOT_SUPPORTED claims):
  serving part of the gold evidence would hint at the label (missing evidence would mean
  NOT_SUPPORTED). The run manifest records how many were dropped. HoVer's train split has no gold here.
- **FEVEROUS-S**: the claim's gold sentences, exactly as the file gives them (ProgramFC's ``evidence``
  field: one ``Title<TAB>sentence`` per line, wiki link markup ``[[target|text]]`` left in as ProgramFC
  left it), one passage per sentence, titled with its page, id ``title#n`` (``n``: the sentence's
  position among the claim's sentences of that page; the file gives no sentence ids). Every claim has
  them.
- **A claims file** (``jsonl:PATH``): the ``evidence`` list of ``{title, text}`` (optional ``id``) on
  each line; every line must carry one.
- **FEVER** and every other registered dataset: none. FEVER's evidence is Wikipedia page names and
  sentence ids (and NOT ENOUGH INFO claims have none); the text of those sentences is in FEVER's
  wiki-pages dump, which is not part of the data read here. Climate-FEVER is not registered. These
  refuse ``--evidence gold`` in one line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from veracity.bench.datasets.records import location, read_jsonl
from veracity.errors import DataError
from veracity.indexes.gold import GOLD_KEY, gold_passages
from veracity.pipeline.types import Claim

HOVER_GOLD_FOLDER = "wiki_corpus_hover_gold"
HOVER_GOLD_FILE = "hover_dev_gold_paragraphs.jsonl"


@dataclass
class GoldResult:
    """What attaching gold evidence did: the claims that got their complete gold evidence (``kept``), the
    ones left out and why, and the files read (for the run manifest)."""

    kept: set[str]  # claim ids
    dropped: dict[str, str]  # claim id -> why (e.g. a gold title the corpus lacks)
    source_files: list[Path]


# (data dir, claims) -> GoldResult; sets claim.meta["evidence"] on the claims it keeps
Attach = Callable[[Path, Sequence[Claim]], GoldResult]


@dataclass(frozen=True)
class GoldEvidence:
    """A dataset variant's gold evidence: what it is (``meaning``, shown in reports) and how to attach it."""

    meaning: str
    attach: Attach


def _find(root: Path, candidates: Sequence[str], what: str, hint: str) -> Path:
    for rel in candidates:
        if (root / rel).is_file():
            return root / rel
    raise DataError(f"{what} not found: {root / candidates[0]}", hint=hint)


def attach_hover_gold(root: Path, claims: Sequence[Claim]) -> GoldResult:
    """HoVer: the intro paragraph of each supporting-fact title, from the gold paragraph corpus."""
    path = _find(root, (f"{HOVER_GOLD_FOLDER}/{HOVER_GOLD_FILE}", HOVER_GOLD_FILE,
                        f"hover/{HOVER_GOLD_FILE}"),
                 "HoVer gold paragraph corpus",
                 f"put {HOVER_GOLD_FILE} (the shared data's {HOVER_GOLD_FOLDER}/) under the data dir, "
                 "or run with --evidence open (an index)")
    fmt = "HoVer gold paragraphs JSONL ({title, text} per line)"
    paragraphs: dict[str, str] = {}
    for lineno, obj in read_jsonl(path, fmt):
        if "title" not in obj or "text" not in obj:
            raise DataError(f"{location(path, lineno)}: expected {fmt}", hint="use the shared data's file")
        paragraphs.setdefault(str(obj["title"]), str(obj["text"]))
    kept: set[str] = set()
    dropped: dict[str, str] = {}
    for claim in claims:
        titles = claim.meta.get("gold_titles") or []
        missing = [t for t in titles if t not in paragraphs]
        if not titles or missing:
            dropped[claim.id] = (f"gold title(s) not in the corpus: {', '.join(missing)}" if missing
                                 else "no supporting facts")
            continue
        claim.meta[GOLD_KEY] = [{"id": f"{t}#0", "title": t, "text": paragraphs[t]} for t in titles]
        kept.add(claim.id)
    return GoldResult(kept, dropped, [path])


def attach_feverous_gold(root: Path, claims: Sequence[Claim]) -> GoldResult:
    """FEVEROUS-S: the claim's gold sentences from its own record (``meta["gold_sentences"]``)."""
    kept: set[str] = set()
    dropped: dict[str, str] = {}
    for claim in claims:
        sentences = [s for s in claim.meta.get("gold_sentences") or [] if s.get("title")
                     and s.get("sentence")]
        if not sentences:
            dropped[claim.id] = "no gold sentences"
            continue
        claim.meta[GOLD_KEY] = [{"id": p.passage_id, "title": p.title, "text": p.text} for p in gold_passages(
            ({"title": s["title"], "text": s["sentence"]} for s in sentences), where=f"claim {claim.id}")]
        kept.add(claim.id)
    return GoldResult(kept, dropped, [])


def check_claims_file_gold(claims: Sequence[tuple[Claim, str]], path: Path) -> None:
    """``jsonl:PATH`` with ``--evidence gold``: every line's ``evidence`` is a list of {title, text};
    normalised in place. One DataError naming the first bad line (and how many more) otherwise."""
    bad: list[str] = []
    for claim, where in claims:
        items = claim.meta.get(GOLD_KEY)
        try:
            if not items:
                raise DataError("no `evidence` list")
            passages = gold_passages(items, where="`evidence`")
        except DataError as exc:
            bad.append(f"{where}: {exc}")
            continue
        claim.meta[GOLD_KEY] = [{"id": p.passage_id, "title": p.title, "text": p.text} for p in passages]
    if bad:
        more = f" (and {len(bad) - 1} more lines)" if len(bad) > 1 else ""
        raise DataError(f"{path}: --evidence gold needs gold passages on every line; {bad[0]}{more}",
                        hint='give each line an "evidence" list of {"title": ..., "text": ...}, or use '
                             "--evidence open (an index) or --evidence none (closed book)")


HOVER_GOLD = GoldEvidence(
    meaning="the Wikipedia intro paragraph of each supporting-fact title (whole paragraphs, HotpotQA 2017 "
            "dump, from wiki_corpus_hover_gold); claims with a gold title the corpus lacks are dropped",
    attach=attach_hover_gold,
)
FEVEROUS_GOLD = GoldEvidence(
    meaning="the claim's gold sentences as ProgramFC's file gives them (one passage per sentence, titled "
            "with its page)",
    attach=attach_feverous_gold,
)
CLAIMS_FILE_GOLD_MEANING = "the `evidence` list of {title, text} passages on each line of the claims file"


def gold_summary(result: GoldResult, meaning: str, total: int) -> dict[str, Any]:
    """The run manifest's record of the gold evidence (before hops / limit)."""
    reasons: dict[str, int] = {}
    for why in result.dropped.values():
        key = "gold title not in the corpus" if why.startswith("gold title") else why
        reasons[key] = reasons.get(key, 0) + 1
    return {"meaning": meaning, "source_files": [str(p) for p in result.source_files],
            "claims_with_gold": len(result.kept), "claims_read": total,
            "dropped_without_complete_gold": len(result.dropped), "dropped_reasons": reasons}
