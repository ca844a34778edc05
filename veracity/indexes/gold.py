"""Per-claim retrievers of the evidence settings: a claim's gold evidence only, or no evidence at all.

Both implement the :class:`~veracity.indexes.retriever.Retriever` protocol, so the pipeline's tools use
them exactly as they use an index; neither needs an index directory. The runner builds one per claim
(``--evidence gold`` / ``--evidence none``, :func:`veracity.pipeline.evidence.claim_retrievers`).

:class:`GoldRetriever` serves the passages given to it (a claim's gold evidence: HoVer's supporting-fact
paragraphs, FEVEROUS-S's gold sentences, the ``evidence`` list of a claims file):

- ``search(query, k)`` returns the claim's passages, at most ``k``, **all of them ranked**: by Okapi BM25
  of the query's words over these passages only (``k1 = 0.9``, ``b = 0.4``, Lucene's idf
  ``ln(1 + (N - df + 0.5) / (df + 0.5))``, with ``N`` and the document frequencies counted among the
  claim's passages), ties and passages sharing no word with the query in the order given. Words are
  lower-cased runs of letters and digits with accents removed; a short list of English function words is
  ignored. No stemming. So the result is deterministic, and in the gold setting every search shows the
  gold evidence: the query decides only its order. Titles in ``exclude_titles`` / ``exclude_patterns``
  are left out, as by every retriever.
- ``open_page(title)`` returns the claim's passages with that title (underscores count as spaces), in
  the order given; ``[]`` for any other title.

Passage ids are the ones given, else ``title#n`` with ``n`` the passage's position among the given
passages of its title (from 0). Scores: the BM25 score for ``search``, 1.0 for ``open_page``.

:class:`NoEvidenceRetriever` is the closed book: ``search`` and ``open_page`` return nothing. It carries
``trace_event = "evidence.none"``: the pipeline's tools record that event (with the tool, the query and
a note) beside each call's tool-call record, so a trace shows that the method asked for evidence and why
it got none.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from typing import Any, Iterable, Mapping

from veracity.errors import DataError
from veracity.indexes.retriever import Hit, TitleFilter, _norm_title

GOLD_KEY = "evidence"  # where a claim carries its gold passages: Claim.meta / a claims-file line field
K1 = 0.9  # Lucene / Anserini BM25 defaults
B = 0.4
STOPWORDS = frozenset(
    "a an and are as at be but by for from has have he her his in is it its of on or she that the their "
    "there they this to was were which who with".split()
)
_WORD = re.compile(r"[^\W_]+")


def words(text: str) -> list[str]:
    """The words BM25 matches: lower-cased letter/digit runs, accents removed, function words dropped."""
    folded = unicodedata.normalize("NFKD", text.casefold())
    folded = "".join(ch for ch in folded if not unicodedata.combining(ch))
    return [w for w in _WORD.findall(folded) if w not in STOPWORDS]


def gold_passages(items: Iterable[Hit | Mapping[str, Any]], where: str = "gold evidence") -> list[Hit]:
    """Passages as :class:`Hit` records from Hits or mappings ``{title, text}`` (optional ``id`` or
    ``passage_id``). A passage without a non-empty string title and text is a DataError naming ``where``
    and its position; a repeated id keeps the first passage."""
    out: list[Hit] = []
    seen: set[str] = set()
    per_title: Counter[str] = Counter()
    if isinstance(items, (str, bytes, Mapping)):
        raise DataError(f"{where}: expected a list of {{title, text}} passages, found a "
                        f"{type(items).__name__}",
                        hint='e.g. "evidence": [{"title": "Paris", "text": "Paris is the capital of '
                             'France."}]')
    for i, item in enumerate(items):
        if isinstance(item, Hit):
            title, text, pid = item.title, item.text, item.passage_id
        elif isinstance(item, Mapping):
            title, text = item.get("title"), item.get("text")
            pid = item.get("id", item.get("passage_id"))
        else:
            title = text = pid = None
        if not (isinstance(title, str) and title.strip() and isinstance(text, str) and text.strip()):
            raise DataError(f"{where}: passage {i} is not a {{title, text}} object with non-empty strings",
                            hint='e.g. "evidence": [{"title": "Paris", "text": "Paris is the capital of '
                                 'France."}]')
        title = title.strip()
        n = per_title[title]
        per_title[title] += 1
        pid = str(pid) if pid is not None and str(pid).strip() else f"{title}#{n}"
        if pid in seen:
            continue
        seen.add(pid)
        out.append(Hit(pid, title, text.strip(), 1.0))
    return out


class GoldRetriever:
    """A claim's gold evidence as a retriever (see the module docstring for the ranking)."""

    name = "gold"

    def __init__(self, passages: Iterable[Hit | Mapping[str, Any]], *, where: str = "gold evidence"):
        self.passages = gold_passages(passages, where)
        self._words = [Counter(words(p.title + " " + p.text)) for p in self.passages]
        self._lengths = [sum(c.values()) for c in self._words]
        self._avg = (sum(self._lengths) / len(self._lengths)) if self._lengths else 0.0

    def __len__(self) -> int:
        return len(self.passages)

    def scores(self, query: str) -> list[float]:
        """The BM25 score of every passage for ``query`` (in passage order)."""
        n = len(self.passages)
        terms = set(words(query))
        idf = {t: math.log(1 + (n - df + 0.5) / (df + 0.5))
               for t in terms for df in [sum(1 for c in self._words if t in c)]}
        out = []
        for counts, length in zip(self._words, self._lengths, strict=True):
            norm = K1 * (1 - B + B * length / self._avg) if self._avg else K1
            out.append(sum(idf[t] * counts[t] * (K1 + 1) / (counts[t] + norm) for t in terms
                           if counts.get(t)))
        return out

    def search(self, query: str, k: int, *, exclude_titles: Iterable[str] = (),
               exclude_patterns: Iterable[str] = ()) -> list[Hit]:
        if k <= 0:
            return []
        keep = TitleFilter(exclude_titles, exclude_patterns)
        scores = self.scores(query)
        order = sorted(range(len(self.passages)), key=lambda i: (-scores[i], i))
        hits = [Hit(self.passages[i].passage_id, self.passages[i].title, self.passages[i].text, scores[i])
                for i in order if keep.keep(self.passages[i].title)]
        return hits[:k]

    def open_page(self, title: str) -> list[Hit]:
        want = _norm_title(title)
        return [p for p in self.passages if _norm_title(p.title) == want]


class NoEvidenceRetriever:
    """The closed book: no passage for any query or title; the tools trace each call as ``evidence.none``."""

    name = "none"
    trace_event = "evidence.none"
    note = "closed book (--evidence none): no evidence is served"

    def search(self, query: str, k: int, *, exclude_titles: Iterable[str] = (),
               exclude_patterns: Iterable[str] = ()) -> list[Hit]:
        return []

    def open_page(self, title: str) -> list[Hit]:
        return []
