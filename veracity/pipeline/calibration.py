"""Calibration maps of verdict confidence: one temperature per model × method × label space.

A verdict's label distribution (:attr:`Verdict.label_probs`) is what the model's own token probabilities say;
a small model is often over- or under-confident. Temperature scaling (one number ``T``) reshapes it:
``p_T(y) ∝ p(y) ** (1 / T)``, which keeps every verdict's label (the order of the probabilities) and moves its
confidence. ``T`` is fitted on a dev split (``veracity bench calibrate RUN_DIR ...``: the runs' predictions
and
gold labels) by minimising the negative log-likelihood of the gold labels, and stored beside the model's
files: ``$VERACITY_HOME/models/<model>/calibration/<method>-<labels>.json`` (``<model>`` the served model's
name, lower case, one ``-`` for each run of other characters), with the split it was fitted on. A run applies
the map of its model, method and label space by default when one is stored (``--calibration off`` does not);
the verdict then keeps ``raw_confidence`` beside the calibrated ``confidence``, and ``bench run`` records
the map in run.json.
"""

from __future__ import annotations

import json
import math
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from veracity.errors import ConfigError

CALIBRATION_CHOICES = ("auto", "off")
_FLOOR = 1e-6  # a probability of 0 (a label no alternative spelt) is read as this, so log() stays finite


@dataclass(frozen=True)
class TemperatureMap:
    """One fitted temperature and what it was fitted on."""

    model: str
    method: str
    labels: str
    temperature: float
    # the runs, their datasets, seeds, sizes, ids hash
    fitted_on: dict[str, Any] = field(default_factory=dict)
    nll_before: float | None = None
    nll_after: float | None = None
    created_at: float = field(default_factory=time.time)
    kind: str = "temperature"

    def apply(self, probs: dict[str, float]) -> dict[str, float]:
        return scale(probs, self.temperature)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "TemperatureMap":
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in d.items() if k in known})


def model_slug(model: str) -> str:
    slug = re.sub(r"[^a-z0-9.]+", "-", model.lower()).strip("-.")
    return slug or "model"


def map_path(home: Path, model: str, method: str, labels: str) -> Path:
    return Path(home) / "models" / model_slug(model) / "calibration" / f"{method}-{labels}.json"


def scale(probs: dict[str, float], temperature: float) -> dict[str, float]:
    """``p ** (1/T)`` renormalised (labels with probability 0 stay 0)."""
    logs = {k: math.log(max(v, _FLOOR)) / temperature for k, v in probs.items() if v > 0}
    if not logs:
        return dict(probs)
    top = max(logs.values())
    exp = {k: math.exp(v - top) for k, v in logs.items()}
    total = sum(exp.values())
    return {k: (exp[k] / total if k in exp else 0.0) for k in probs}


def nll(rows: Sequence[tuple[dict[str, float], str]], temperature: float) -> float:
    """Mean negative log-likelihood of the gold labels under the scaled distributions."""
    total = 0.0
    for probs, gold in rows:
        total -= math.log(max(scale(probs, temperature).get(gold, 0.0), _FLOOR))
    return total / len(rows)


def fit_temperature(rows: Sequence[tuple[dict[str, float], str]]) -> float:
    """The temperature (0.05 to 20) with the least NLL: a log-spaced grid, then a golden-section refinement
    around its best point. ``rows``: (label distribution, gold label), the gold label among its keys."""
    if not rows:
        raise ConfigError("no prediction with a confidence and a gold label in the label space to fit on",
                          hint="run the dev split with a model endpoint that returns logprobs (vLLM, "
                               "llama-server)")
    grid = [0.05 * (400 ** (i / 60)) for i in range(61)]
    best = min(grid, key=lambda t: nll(rows, t))
    i = grid.index(best)
    lo, hi = math.log(grid[max(i - 1, 0)]), math.log(grid[min(i + 1, len(grid) - 1)])
    g = (math.sqrt(5) - 1) / 2
    a, b = hi - g * (hi - lo), lo + g * (hi - lo)
    for _ in range(40):
        if nll(rows, math.exp(a)) < nll(rows, math.exp(b)):
            hi, b = b, a
            a = hi - g * (hi - lo)
        else:
            lo, a = a, b
            b = lo + g * (hi - lo)
    return round(math.exp((lo + hi) / 2), 4)


def fit_rows(predictions: Iterable[dict[str, Any]], gold: dict[str, str]) -> list[tuple[dict[str, float],
                                                                                        str]]:
    """(raw label distribution, gold label) of every prediction with one and a gold label among its labels."""
    rows = []
    for r in predictions:
        probs = r.get("label_probs")
        want = gold.get(str(r.get("id")))
        if not probs or want is None or want not in probs:
            continue
        if r.get("raw_label_probs"):
            probs = r["raw_label_probs"]
        rows.append(({k: float(v) for k, v in probs.items()}, want))
    return rows


def save(m: TemperatureMap, home: Path) -> Path:
    path = map_path(home, m.model, m.method, m.labels)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(m.to_dict(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def load(home: Path, model: str, method: str, labels: str) -> tuple[TemperatureMap, Path] | None:
    """The stored map for this model, method and label space, or None (none stored, or unreadable)."""
    path = map_path(home, model, method, labels)
    try:
        return TemperatureMap.from_dict(json.loads(path.read_text(encoding="utf-8"))), path
    except (OSError, ValueError, TypeError):
        return None


def check_calibration(value: Any) -> str:
    name = str(value or "auto").strip().lower()
    if name not in CALIBRATION_CHOICES:
        raise ConfigError(f"unknown --calibration {value!r}",
                          hint="use --calibration auto (apply the stored map of the model, method and label "
                               "space, "
                               "when there is one) or off")
    return name
