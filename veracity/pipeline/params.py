"""Method parameters: typed, ranged, documented, validated before any server is contacted.

A method's parameters are a dataclass whose fields are declared with :func:`param`::

    @dataclass
    class MermaidParams(MethodParams):
        t_max: int = param(5, min=1, max=50, help="most ReAct steps", paper="§3.3: T_max = 5")

Every method's parameters also carry the per-role settings (token budget and temperature of each of
its roles), addressed the same way in every method: ``ROLE.max_tokens`` and ``ROLE.temperature`` with
ROLE the role's short name (``planner.max_tokens=2048``, ``classifier.temperature=1.0``); the defaults
are the roles' declared values. :func:`build_params` turns ``{"name": value}`` overrides (values from the
command line arrive as strings or JSON scalars) into a validated instance; every problem is one
:class:`~veracity.errors.ConfigError` naming the parameter and its valid range.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from dataclasses import dataclass, field
from typing import Any, ClassVar, Iterable

from veracity.errors import ConfigError

ROLE_SETTINGS = ("max_tokens", "temperature")
# parameters of earlier versions, and what replaced them (named in the error's hint)
RENAMED = {
    "max_tokens": "every role's budget is ROLE.max_tokens (e.g. judge.max_tokens)",
    "plan_max_tokens": "planner.max_tokens and modify.max_tokens",
    "node_max_tokens": "search.max_tokens, refine.max_tokens, think.max_tokens, judge.max_tokens",
    "agent_max_tokens": "ROLE.max_tokens of each agent (e.g. linguist.max_tokens)",
    "debate_max_tokens": "pro.max_tokens and con.max_tokens",
    "memory_path": "the run state lives under --state-dir (Verifier(state_dir=...))",
    "prompt_passages": "evidence_tokens (trification: a token budget per node, split fairly among its "
                       "parents)",
    "page_max_words": "page_tokens (EMULATE's page budget is in tokens: 400 words is page_tokens=533)",
}
MAX_TOKENS_RANGE = (1, 32768)
TEMPERATURE_RANGE = (0.0, 2.0)


def param(default: Any, *, help: str, min: float | None = None, max: float | None = None,
          choices: Iterable[Any] | None = None, paper: str | None = None) -> Any:
    """A declared parameter: default, one-line help, valid range or choices, and where the paper sets it."""
    meta = {"help": help, "min": min, "max": max, "choices": tuple(choices) if choices is not None else None,
            "paper": paper}
    if isinstance(default, (list, dict, set)):
        raise TypeError("use a tuple for a sequence default")
    return field(default=default, metadata=meta)


@dataclass
class MethodParams:
    """Base of every method's parameters: the per-role overrides (``ROLE.max_tokens`` /
    ``ROLE.temperature``)."""

    roles: dict[str, dict[str, Any]] = field(default_factory=dict, metadata={"help": "per-role overrides",
                                                                             "internal": True})
    # parameters other methods have that make no sense for this one, with the reason (a one-line error names
    # it)
    not_applicable: ClassVar[dict[str, str]] = {}


@dataclass(frozen=True)
class ParamInfo:
    """What ``veracity methods show`` prints of one parameter."""

    name: str
    type: str
    default: Any
    help: str
    range: str
    paper: str | None


def _base_type(tp: Any) -> tuple[Any, bool]:
    """(the non-None type of an annotation, whether None is allowed)."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return (args[0] if len(args) == 1 else tp), len(args) != len(typing.get_args(tp))
    return tp, False


def _type_name(tp: Any) -> str:
    base, optional = _base_type(tp)
    if typing.get_origin(base) is tuple:
        name = "a list of strings"
    elif typing.get_origin(base) is typing.Literal:
        name = "one of " + ", ".join(map(str, typing.get_args(base)))
    else:
        name = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}.get(base, str(base))
    return name + (" or null" if optional else "")


def _range_text(meta: dict[str, Any], tp: Any) -> str:
    base, _ = _base_type(tp)
    if meta.get("choices"):
        return "one of " + ", ".join(map(str, meta["choices"]))
    if typing.get_origin(base) is typing.Literal:
        return "one of " + ", ".join(map(str, typing.get_args(base)))
    lo, hi = meta.get("min"), meta.get("max")
    if lo is not None and hi is not None:
        return f"{lo:g} to {hi:g}"
    if lo is not None:
        return f"at least {lo:g}"
    if hi is not None:
        return f"at most {hi:g}"
    return {bool: "true or false"}.get(base, "")


def _coerce(method: str, name: str, value: Any, tp: Any, meta: dict[str, Any]) -> Any:
    base, optional = _base_type(tp)
    expected = _type_name(tp)
    rng = _range_text(meta, tp)

    def bad(why: str = "") -> ConfigError:
        return ConfigError(f"parameter {name} of {method} must be {expected}"
                           + (f" ({rng})" if rng and rng != "true or false" else "")
                           + f", got {value!r}{why}",
                           hint=f"e.g. --param {name}={_example(base, meta)}; `veracity methods show "
                                f"{method}` lists them")

    if value is None or (isinstance(value, str) and value.strip().lower() in ("null", "none") and optional):
        if optional:
            return None
        raise bad()
    if base is bool:
        if isinstance(value, bool):
            out: Any = value
        elif isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0", "yes", "no"):
            out = value.strip().lower() in ("true", "1", "yes")
        elif isinstance(value, int) and value in (0, 1):
            out = bool(value)
        else:
            raise bad()
    elif base is int:
        if isinstance(value, bool):
            raise bad()
        if isinstance(value, int):
            out = value
        elif isinstance(value, float) and value.is_integer():
            out = int(value)
        elif isinstance(value, str):
            try:
                out = int(value.strip())
            except ValueError:
                raise bad() from None
        else:
            raise bad()
    elif base is float:
        if isinstance(value, bool):
            raise bad()
        try:
            out = float(value)
        except (TypeError, ValueError):
            raise bad() from None
        if not math.isfinite(out):
            raise bad()
    elif base is str:
        if isinstance(value, bool) and {"true", "false"} <= set(meta.get("choices") or ()):
            # a tri-state switch (true / false / auto) given a Python or JSON boolean
            value = str(value).lower()
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            raise bad()
        out = str(value)
    elif typing.get_origin(base) is typing.Literal:
        allowed = typing.get_args(base)
        if value not in allowed:
            raise bad()
        out = value
    elif typing.get_origin(base) is tuple:
        if isinstance(value, str):
            out = (value,)
        elif isinstance(value, (list, tuple)) and all(isinstance(x, str) for x in value):
            out = tuple(value)
        else:
            raise bad()
    else:  # pragma: no cover - a parameter type this module does not know is a programming error
        raise TypeError(f"parameter {name}: unsupported type {tp!r}")
    choices = meta.get("choices")
    if choices and out not in choices:
        raise bad()
    lo, hi = meta.get("min"), meta.get("max")
    if isinstance(out, (int, float)) and not isinstance(out, bool):
        if (lo is not None and out < lo) or (hi is not None and out > hi):
            raise bad(" (out of range)")
    return out


def _example(base: Any, meta: dict[str, Any]) -> str:
    if meta.get("choices"):
        return str(meta["choices"][0])
    if base is bool:
        return "true"
    if base in (int, float):
        lo = meta.get("min")
        return f"{lo:g}" if lo is not None else "1"
    return "VALUE"


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def param_infos(params_cls: type) -> list[ParamInfo]:
    """The declared parameters of a method (not the per-role settings), in declaration order."""
    hints = _hints(params_cls)
    out = []
    for f in dataclasses.fields(params_cls):
        if f.metadata.get("internal"):
            continue
        meta = dict(f.metadata)
        out.append(ParamInfo(f.name, _type_name(hints[f.name]), f.default, meta.get("help", ""),
                             _range_text(meta, hints[f.name]), meta.get("paper")))
    return out


def build_params(method: str, params_cls: type, overrides: dict[str, Any] | None,
                 role_names: Iterable[str]) -> Any:
    """A validated ``params_cls`` instance from ``overrides``.

    Keys are parameter names or ``ROLE.max_tokens`` / ``ROLE.temperature`` (ROLE: a short role name of
    ``role_names``). Unknown names, wrong types and out-of-range values raise ConfigError (one line)."""
    overrides = dict(overrides or {})
    hints = _hints(params_cls)
    fields = {f.name: f for f in dataclasses.fields(params_cls) if not f.metadata.get("internal")}
    roles = list(role_names)
    values: dict[str, Any] = {}
    role_settings: dict[str, dict[str, Any]] = {}
    for key, value in overrides.items():
        if "." in key:
            role, _, setting = key.rpartition(".")
            if role not in roles:
                raise ConfigError(f"method {method} has no role {role!r} (in --param {key})",
                                  hint=f"its roles: {', '.join(roles) or 'none'}")
            if setting not in ROLE_SETTINGS:
                raise ConfigError(f"--param {key}: a role has no setting {setting!r}",
                                  hint="per-role settings: "
                                       f"{', '.join(f'{role}.{s}' for s in ROLE_SETTINGS)}")
            if setting == "max_tokens":
                lo, hi = MAX_TOKENS_RANGE
                v = _coerce(method, key, value, int, {"min": lo, "max": hi})
            else:
                lo, hi = TEMPERATURE_RANGE
                v = _coerce(method, key, value, float, {"min": lo, "max": hi})
            role_settings.setdefault(role, {})[setting] = v
            continue
        if key not in fields:
            valid = sorted(fields) + [f"ROLE.{s}" for s in ROLE_SETTINGS]
            hint = (f"replaced by {RENAMED[key]}; " if key in RENAMED else "") + f"valid: {', '.join(valid)}"
            why = params_cls.not_applicable.get(key)
            raise ConfigError(f"method {method} has no parameter {key}" + (f": {why}" if why else ""),
                              hint=hint)
        values[key] = _coerce(method, key, value, hints[key], dict(fields[key].metadata))
    inst = params_cls(**values)
    inst.roles = role_settings
    check = getattr(inst, "check", None)
    if callable(check):
        check()
    return inst


def params_dict(params: Any) -> dict[str, Any]:
    """JSON-ready parameters (for run manifests); tuples become lists."""
    return dataclasses.asdict(params) if dataclasses.is_dataclass(params) else dict(vars(params))
