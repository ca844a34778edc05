"""What every method is: an async function ``(claim, ctx) -> Verdict`` plus its named parameters.

A method composes roles (prompt + pydantic output model, called through ``ctx.llm.generate``) and tools
(``ctx.tools.search`` / ``ctx.tools.open_page``). Parameters from the papers are fields of the method's
params dataclass with the paper's value as default; ablations are boolean fields.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Protocol, TypeVar

from pydantic import BaseModel

from veracity.errors import ConfigError, LLMOutputError
from veracity.pipeline.tools import Tools
from veracity.pipeline.types import Claim, Trace, Verdict

T = TypeVar("T", bound=BaseModel)


class LLMLike(Protocol):
    async def generate(self, messages: list[dict[str, str]], output_model: type[T], *, role: str,
                       temperature: float | None = None, max_tokens: int | None = None) -> T: ...


@dataclass
class MethodContext:
    llm: LLMLike
    tools: Tools
    trace: Trace
    params: Any  # the method's params dataclass instance
    shared: dict[str, Any] = field(default_factory=dict)  # run-wide state (e.g. MERMAID's evidence memory)


MethodFn = Callable[[Claim, MethodContext], Awaitable[Verdict]]


@dataclass(frozen=True)
class MethodSpec:
    name: str
    fn: MethodFn
    params_cls: type
    summary: str
    needs_index: bool = True

    def make_params(self, overrides: dict[str, Any] | None = None) -> Any:
        """Params with overrides applied; unknown names are a ConfigError naming the valid ones."""
        overrides = dict(overrides or {})
        names = {f.name for f in dataclasses.fields(self.params_cls)}
        unknown = sorted(set(overrides) - names)
        if unknown:
            raise ConfigError(
                f"method {self.name} has no parameter {', '.join(unknown)}",
                hint=f"valid: {', '.join(sorted(names))}",
            )
        return self.params_cls(**overrides)


async def unless_invalid(coro: Awaitable[Any], trace: Trace, kind: str, **info: Any) -> Any:
    """Await one role's call; when its reply never validates (``LLMOutputError``), record ``kind`` in the
    trace with the error and ``info`` (which agent, what the method does instead) and return None, so the
    method can go on with its fallback instead of failing the claim."""
    try:
        return await coro
    except LLMOutputError as exc:
        trace.event(kind, error=str(exc), **info)
        return None
