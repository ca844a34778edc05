"""Label spaces: which verdicts a run may give, and the one rule for a claim no verdict was reached for.

Two spaces:

- ``3way`` (the default): SUPPORTED / REFUTED / NOT_ENOUGH_INFO, as FEVER and Climate-FEVER label claims.
- ``binary``: SUPPORTED / REFUTED, as HoVer, FEVEROUS-S, FacTool-KBQA, BingCheck, Factcheck-Bench and the
  news datasets label them. On such a benchmark the papers' verdicts have two labels, and a
  NOT_ENOUGH_INFO answer could only be scored as wrong.

The space is carried by the run to every claim (``MethodContext.label_space``). In ``binary`` each method's
final-verdict role narrows its output model per call (:meth:`LabelSpace.narrow`, so constrained decoding can
only produce SUPPORTED or REFUTED) and its prompt offers only those two labels
(:meth:`LabelSpace.options`). In ``3way`` nothing changes: same prompts, same schemas, same calls.

**The binary rule** (:data:`BINARY_RULE`): a claim the evidence does not confirm is REFUTED. It is the
papers' default on two-label benchmarks — Trification §3.2: the JUDGE node renders "SUPPORTS if the
evidence confirms the declaration otherwise REFUTES"; HoVer's second label is NOT_SUPPORTED. It is what
a prompt tells the model in ``binary`` (:meth:`LabelSpace.options`: "REFUTED if ... or <does not settle
it>") and what :meth:`LabelSpace.undecided` gives on every path that would otherwise return
NOT_ENOUGH_INFO (no valid plan, the classifier's reply invalid, no judge finished, an undecided debate,
nothing to check), traced as ``label_space.forced`` with the original reason. The runner applies it too,
to any verdict a method returns outside the run's space (``path="runner"``), so a binary run never
reports NOT_ENOUGH_INFO.
"""

from __future__ import annotations

import types
from dataclasses import dataclass
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, Field, create_model

from veracity.errors import ConfigError
from veracity.pipeline.types import Label

BINARY_RULE = ("not confirmed -> REFUTED (the papers' two-label default; Trification §3.2: "
               "\"SUPPORTS if the evidence confirms the declaration otherwise REFUTES\")")
FORCED_EVENT = "label_space.forced"


@dataclass(frozen=True)
class LabelSpace:
    """The verdicts a run may give (see the module docstring)."""

    name: str  # "3way" | "binary"
    labels: tuple[Label, ...]

    @property
    def allows_nei(self) -> bool:
        return Label.NOT_ENOUGH_INFO in self.labels

    @property
    def is_binary(self) -> bool:
        return not self.allows_nei

    def __contains__(self, label: object) -> bool:
        try:
            return Label(label) in self.labels
        except ValueError:
            return False

    def values(self) -> tuple[str, ...]:
        return tuple(lab.value for lab in self.labels)

    def options(self, supported: str, refuted: str, nei: str) -> str:
        """The labels as a prompt offers them. 3way: ``SUPPORTED if <supported>, REFUTED if <refuted>,
        NOT_ENOUGH_INFO if <nei>``; binary (the binary rule): ``SUPPORTED if <supported>, REFUTED if
        <refuted> or <nei>``."""
        if self.allows_nei:
            return f"SUPPORTED if {supported}, REFUTED if {refuted}, NOT_ENOUGH_INFO if {nei}"
        return f"SUPPORTED if {supported}, REFUTED if {refuted} or {nei}"

    def narrow(self, model: type[BaseModel], field: str = "label") -> type[BaseModel]:
        """``model`` with its label ``field`` restricted to this space's labels (an enum in the JSON schema).

        3way returns ``model`` itself (nothing changes). Binary returns a subclass with the same name (the
        server sees the same schema name), the field's description and default kept; a nullable field
        (``label: LabelName | None``) stays nullable."""
        if self.allows_nei:
            return model
        fld = model.model_fields[field]
        nullable = get_origin(fld.annotation) in (Union,
                                                  types.UnionType) and type(None) in get_args(fld.annotation)
        allowed: Any = Literal[self.values()]  # type: ignore[valid-type]
        new = Field(fld.default, description=fld.description)
        return create_model(model.__name__, __base__=model, __module__=model.__module__,
                            **{field: (allowed | None if nullable else allowed, new)})

    def undecided(self, trace: Any, reason: str, **info: Any) -> Label:
        """The label of a claim no verdict was reached for: NOT_ENOUGH_INFO in 3way (nothing traced); in
        binary the binary rule's REFUTED, traced as ``label_space.forced`` with ``reason`` (why no verdict
        was reached) and ``info`` (e.g. the path: ``path="no_plan"``)."""
        if self.allows_nei:
            return Label.NOT_ENOUGH_INFO
        trace.event(FORCED_EVENT, label=Label.REFUTED.value, label_space=self.name, rule=BINARY_RULE,
                    reason=reason, **info)
        return Label.REFUTED


THREE_WAY = LabelSpace("3way", (Label.SUPPORTED, Label.REFUTED, Label.NOT_ENOUGH_INFO))
BINARY = LabelSpace("binary", (Label.SUPPORTED, Label.REFUTED))
LABEL_SPACES: dict[str, LabelSpace] = {THREE_WAY.name: THREE_WAY, BINARY.name: BINARY}


def label_space(value: "str | LabelSpace | None") -> LabelSpace:
    """``"3way"`` / ``"binary"`` (or a LabelSpace; None: 3way) -> the LabelSpace; anything else is a one-line
    ConfigError."""
    if value is None:
        return THREE_WAY
    if isinstance(value, LabelSpace):
        return value
    key = str(value).strip().lower()
    key = {"three-way": "3way", "3-way": "3way", "two-way": "binary", "2way": "binary"}.get(key, key)
    if key not in LABEL_SPACES:
        raise ConfigError(f"unknown label space {value!r}",
                          hint="use --labels binary (SUPPORTED / REFUTED) or --labels 3way "
                               "(SUPPORTED / REFUTED / NOT_ENOUGH_INFO)")
    return LABEL_SPACES[key]


def space_of(labels: "tuple[Label, ...] | list[Label]") -> LabelSpace:
    """The smallest space holding ``labels`` (binary unless NOT_ENOUGH_INFO is among them)."""
    return THREE_WAY if Label.NOT_ENOUGH_INFO in set(labels) else BINARY
