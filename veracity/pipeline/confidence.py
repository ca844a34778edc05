"""A verdict's confidence: how each method reads its deciding calls' label distributions, and abstention.

The deciding role of a method declares its label field (``Role(confidence="label")``); each of its calls
records the reply's distribution over the values its schema allows (``UsageRecord.label_probs``, read from
the engine's logprobs by :mod:`veracity.serving.confidence`). A method's :class:`ConfidenceRule` turns those
into a distribution over the verdict labels of the run's label space (:attr:`Verdict.label_probs`); the
verdict's ``confidence`` is its own label's probability there. The rules (benchmarks/PAPERS.md lists them per
method, as additions, not paper changes):

- one deciding call (direct, rag, EMULATE's Classifier, MERMAID's finishing step or forced final answer,
  ZoFia's last judge ruling): that call's distribution, its values mapped to verdict labels;
- Trification's several JUDGE nodes: the probability that the method's own aggregation rule gives each label
  when every standing JUDGE answers independently from its own distribution (all combinations enumerated),
  set by the method itself (:func:`aggregate`).

A value that maps to NOT_ENOUGH_INFO counts for the label space's "undecided" label (binary: REFUTED, the
binary rule). No distribution (the engine returned no logprobs, the deciding reply never validated, or the
verdict came from no deciding call) gives ``None``: never a made-up number.

Abstention (``min_confidence``): a verdict whose confidence is below the threshold becomes NOT_ENOUGH_INFO,
marked ``abstained``, keeping the label it would have given (:func:`abstain`). A verdict without a confidence
is left as it is (there is nothing to compare).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from veracity.pipeline.labels import LabelSpace
from veracity.pipeline.types import Label, Verdict

ABSTAIN_EVENT = "confidence.abstained"


@dataclass(frozen=True)
class ConfidenceRule:
    """How a method's verdict gets its label distribution: the last call among ``roles`` (none when that call
    carries none), its values mapped to labels by ``mapping`` (a value missing there is the label of that
    name)."""

    roles: tuple[str, ...]
    mapping: Mapping[str, str] = field(default_factory=dict)
    summary: str = ""

    def distribution(self, records: Iterable[Any], space: LabelSpace) -> dict[str, float] | None:
        last = None
        for rec in records:  # the last call of a deciding role decided (a reply that never validated: none)
            if getattr(rec, "role", None) in self.roles:
                last = getattr(rec, "label_probs", None)
        if not last:
            return None
        return to_labels(last["probs"], space, self.mapping)


def to_labels(probs: Mapping[str, float], space: LabelSpace, mapping: Mapping[str,
                                                                              str] | None = None) -> dict[str,
                                                                                                          float]:
    """A distribution over a role's values as one over the space's labels (summed where values share one)."""
    out = {lab.value: 0.0 for lab in space.labels}
    for value, p in probs.items():
        name = (mapping or {}).get(value, value)
        try:
            label = Label(name)
        except ValueError:
            continue
        if label not in space:
            label = Label.REFUTED  # the binary rule: not confirmed -> REFUTED
        out[label.value] += float(p)
    total = sum(out.values())
    return {k: v / total for k, v in out.items()} if total > 0 else out


def aggregate(distributions: list[Mapping[str, float]], rule: Callable[[list[str]], Label],
              space: LabelSpace) -> dict[str, float] | None:
    """P(rule(answers) = label) for every label, each distribution one independent answerer's over its values
    (every combination enumerated: a handful of answerers with three values each)."""
    if not distributions:
        return None
    out = {lab.value: 0.0 for lab in space.labels}
    items = [list(d.items()) for d in distributions]
    for combo in itertools.product(*items):
        p = 1.0
        for _, q in combo:
            p *= q
        if p == 0.0:
            continue
        label = rule([v for v, _ in combo])
        if label not in space:
            label = Label.REFUTED
        out[label.value] += p
    total = sum(out.values())
    return {k: v / total for k, v in out.items()} if total > 0 else None


def settle(verdict: Verdict, records: Iterable[Any], space: LabelSpace, rule: ConfidenceRule | None) -> None:
    """Give ``verdict`` its label distribution (the method's rule, unless the method set one) and its
    confidence: the probability of its own label there, rounded to 4 places; None without a distribution."""
    if verdict.label_probs is None and rule is not None:
        verdict.label_probs = rule.distribution(records, space)
    if verdict.label_probs is not None:
        verdict.label_probs = {k: round(v, 6) for k, v in verdict.label_probs.items()}
        p = verdict.label_probs.get(verdict.label.value)
        verdict.confidence = round(p, 4) if p is not None else None


def abstain(verdict: Verdict, min_confidence: float | None) -> None:
    """Below ``min_confidence``: NOT_ENOUGH_INFO, marked abstained, the label it would have given kept (and a
    trace event). Nothing happens without a threshold, without a confidence, or to a NOT_ENOUGH_INFO."""
    if min_confidence is None or verdict.confidence is None or verdict.label is Label.NOT_ENOUGH_INFO:
        return
    if verdict.confidence >= min_confidence:
        return
    verdict.abstained_label = verdict.label
    verdict.label = Label.NOT_ENOUGH_INFO
    verdict.abstained = True
    verdict.trace.event(ABSTAIN_EVENT, label=verdict.abstained_label.value, confidence=verdict.confidence,
                        min_confidence=min_confidence)
