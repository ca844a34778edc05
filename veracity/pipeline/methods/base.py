"""What every method is: an async function ``(claim, ctx) -> Verdict``, its declared roles, its typed
parameters and, where it keeps any, its typed run state.

A method composes roles (:class:`veracity.pipeline.roles.Role`, called as ``await ROLE(ctx, **inputs)``)
and tools (``ctx.tools.search`` / ``ctx.tools.open_page``). Parameters from the papers are fields of
the method's params dataclass (a :class:`~veracity.pipeline.params.MethodParams`) declared with
:func:`~veracity.pipeline.params.param`, the paper's value as default; ablations are boolean fields.

State a method keeps across claims (MERMAID's evidence memory) is a class implementing
:class:`RunState`: the engine opens it once per run from a state directory (``spec.open_state``),
passes it to every claim as ``ctx.state`` and closes it at the end. The engine knows nothing else about
it.

The run's label space (``ctx.label_space``, :mod:`veracity.pipeline.labels`; 3way unless the run says
binary) is which verdicts a claim may get: in binary a method narrows its final-verdict role's output model
per call (``await ROLE(ctx, output=ctx.label_space.narrow(Model))``), renders its prompt from the space, and
ends every undecided path with ``ctx.label_space.undecided(ctx.trace, reason)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel

from veracity.errors import ConfigError
from veracity.pipeline.labels import THREE_WAY, LabelSpace
from veracity.pipeline.confidence import ConfidenceRule
from veracity.pipeline.params import build_params
from veracity.pipeline.roles import Role
from veracity.pipeline.tools import Tools
from veracity.pipeline.types import Claim, Trace, Verdict

T = TypeVar("T", bound=BaseModel)


class LLMLike(Protocol):
    """The one LLM contract (``veracity.serving.client.LLMClient`` and the tests' scripted stand-in)."""

    async def generate(self, messages: list[dict[str, str]], output_model: type[T], *, role: str,
                       temperature: float | None = None, max_tokens: int | None = None,
                       seed: int | None = None, usage_sink: list[Any] | None = None,
                       confidence_field: str | None = None,
                       cut_when: Callable[[str], str | None] | None = None) -> T: ...


@runtime_checkable
class RunState(Protocol):
    """State a method keeps across the claims of a run, opened from a state directory.

    ``open(state_dir, params, index_namespace)`` is a classmethod; ``index_namespace`` names the index
    the run searches (so state gathered on one index is not recalled on another)."""

    @classmethod
    def open(cls, state_dir: Path, params: Any, index_namespace: str) -> "RunState": ...

    def close(self) -> None: ...


@dataclass
class MethodContext:
    llm: LLMLike
    tools: Tools
    trace: Trace
    params: Any  # the method's params dataclass instance
    state: Any = None  # the method's RunState instance (None when the method keeps none)
    label_space: LabelSpace = THREE_WAY  # the verdicts the run may give (veracity.pipeline.labels)
    # the run's seed (the client's): each request's seed derives from it (roles.SEED_RULE)
    seed: int | None = None
    claim_id: str = ""
    calls: dict[str, int] = field(default_factory=dict)  # calls made so far per role (the seed rule's index)

    def next_call_index(self, role: str) -> int:
        """The 0-based index of the next call of ``role`` for this claim (taken before the call is awaited,
        so parallel calls are numbered in the order the method starts them)."""
        n = self.calls.get(role, 0)
        self.calls[role] = n + 1
        return n


MethodFn = Callable[[Claim, MethodContext], Awaitable[Verdict]]


@dataclass(frozen=True)
class MethodSpec:
    name: str
    fn: MethodFn
    params_cls: type
    summary: str
    roles: tuple[Role, ...] = ()
    state_cls: type | None = None  # a RunState class, when the method keeps state across claims
    needs_index: bool = True
    paper: str | None = None  # the paper's file under shared/papers, for `methods show`
    extra: dict[str, Any] = field(default_factory=dict)
    # bench run's per-method statistics: results (dicts with their traces) -> a summary of the method's own
    # trace events, or None when no claim has them (Trification's Table 2, MERMAID's steps)
    run_statistics: Callable[[list[dict[str, Any]]], dict[str, Any] | None] | None = None
    # how the verdict's confidence is read from the deciding calls' label distributions
    # (pipeline/confidence.py;
    # benchmarks/PAPERS.md per method); None: the method sets Verdict.label_probs itself, or has none
    confidence: ConfidenceRule | None = None

    def make_params(self, overrides: dict[str, Any] | None = None) -> Any:
        """Validated params with ``overrides`` applied (names, ``ROLE.max_tokens`` / ``ROLE.temperature``);
        an unknown name, a wrong type or an out-of-range value is a one-line ConfigError."""
        return build_params(self.name, self.params_cls, overrides, [r.short for r in self.roles])

    def check_label_space(self, params: Any, space: LabelSpace) -> None:
        """Refuse (ConfigError) parameters that cannot hold in ``space`` (e.g. Trification's
        ``uncertain_label=NOT_ENOUGH_INFO`` in the binary space); params classes declare the rule as
        ``check_labels(space)``. The engine calls this before any server is contacted."""
        check = getattr(params, "check_labels", None)
        if callable(check):
            check(space)

    def role(self, short: str) -> Role:
        for r in self.roles:
            if r.short == short or r.name == short:
                return r
        raise ConfigError(f"method {self.name} has no role {short!r}",
                          hint=f"its roles: {', '.join(r.short for r in self.roles)}")

    def open_state(self, state_dir: Path | str | None, params: Any, index_namespace: str = "default") -> Any:
        """The method's run state opened from ``state_dir`` (None when the method keeps none). A state that
        persists files refuses ``state_dir=None`` itself (ConfigError); one that only caches loaded
        models (ZoFia's encoder) ignores it."""
        if self.state_cls is None:
            return None
        return self.state_cls.open(Path(state_dir).expanduser() if state_dir is not None else None, params,
                                   index_namespace)
