"""Check a whole text: sentences -> atomic claims -> check-worthiness -> verify -> score.

- :mod:`.extract`: deterministic sentences, then the declared roles of :mod:`.roles` (atomic,
  decontextualised claims per sentence; Factcheck-Bench's check-worthiness per claim);
- :mod:`.engine`: the one adapter to the verification engine (each factual claim verified exactly as
  ``veracity verify`` verifies it, with any method);
- :mod:`.score`: per sentence its worst verdict, per text counts, factual precision, FActScore;
- :mod:`.run`: one text (streamed events) or a resumable file of texts;
- :mod:`.render`: the terminal view and the self-contained HTML report.

``STAGE`` describes the check stage the way a method's spec does (roles, parameters), so
``veracity methods show check`` lists its roles.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from veracity.check.roles import ROLES, CheckParams
from veracity.pipeline.params import build_params
from veracity.pipeline.roles import Role


@dataclass(frozen=True)
class StageSpec:
    name: str
    summary: str
    roles: tuple[Role, ...]
    params_cls: type
    needs_index: bool = False
    state_cls: type | None = None

    def make_params(self, overrides: dict[str, Any] | None = None) -> Any:
        """Validated parameters (``--param`` of `veracity check`): names, ``extractor.max_tokens``, ...
        (one-line ConfigError)."""
        return build_params(self.name, self.params_cls, overrides, [r.short for r in self.roles])


STAGE = StageSpec(
    name="check",
    summary="`veracity check`: a text's sentences -> atomic claims -> check-worthiness, before any method "
            "verifies the factual claims.",
    roles=ROLES,
    params_cls=CheckParams,
)

__all__ = ["STAGE", "StageSpec", "CheckParams"]
