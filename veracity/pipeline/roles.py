"""The Role: one declared agent role, and the role helpers every method shares.

A role owns everything about one kind of LLM call: its qualified name (``emulate.classifier``), its
instructions, how its inputs render into the user turn, its pydantic output model, its token budget, its
sampling temperature, and what the method does when the reply never validates. A role has one prompt:
its declared ``instructions`` ARE the system message it sends (a string, or a function of the inputs its
parameters name, e.g. the run's label space), and ``render`` builds the turns after it only, so
``veracity methods show`` prints exactly what the model is told.
Calling it does the structured call through the run's LLM client (the server constrains decoding to
the output model's schema), lets the client record usage in the claim's trace, and applies the
fallback, traced::

    CLASSIFIER = Role("emulate.classifier", output=Classification, render=classifier_turn,
                      instructions=EMULATE_SYSTEM, max_tokens=256,
                      fallback=Fallback(None, "no verdict: NOT_ENOUGH_INFO"))
    out = await CLASSIFIER(ctx, claim=claim, bank=bank)   # Classification, or None after a fallback

Budgets and temperatures can be overridden per run with ``--param ROLE.max_tokens=N`` /
``ROLE.temperature=T`` (see :mod:`veracity.pipeline.params`); ``Role.settings(ctx)`` resolves them.
Every request carries its own sampling seed, derived from the run's seed (the client's ``seed``), the
claim id, the role and the call's index among that role's calls for the claim (:data:`SEED_RULE`,
:func:`request_seed`): a sampled run (temperature > 0) repeats exactly on a server that honours per-request
seeds (vLLM does), and two calls never share one random stream. Run manifests record the rule and each
role's effective temperature (:func:`role_settings_record`).
The shared helpers below (label types, cited evidence, passage formatting) live here so methods do not
import each other.
"""

from __future__ import annotations

import hashlib
import inspect
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Iterable, Literal, Protocol, TypeVar

from pydantic import BaseModel, Field, create_model

from veracity.errors import LLMOutputError
from veracity.pipeline.types import Claim, Evidence
from veracity.serving.client import UsageRecord



class RoleContext(Protocol):
    """What a role call uses of its method's context (:class:`~veracity.pipeline.methods.base.MethodContext`
    provides it; declared here so roles.py does not import the methods package that imports it)."""

    llm: Any
    trace: Any
    params: Any

    @property
    def seed(self) -> int | None: ...

    @property
    def claim_id(self) -> str: ...

    def next_call_index(self, role: str) -> int: ...

T = TypeVar("T", bound=BaseModel)
Message = dict[str, str]

# -- shared role helpers -----------------------------------------------------------------------------
LabelName = Literal["SUPPORTED", "REFUTED", "NOT_ENOUGH_INFO"]


def format_passages(evidence: Iterable[Evidence], *, max_words: int | None = None) -> str:
    """Passages as the models see them: one block per passage, ``[passage_id] title`` then its text.

    ``max_words`` caps the words of each passage's text (the block header is always kept).
    """
    blocks = []
    for ev in evidence:
        words = ev.text.split()
        text = " ".join(words[:max_words]) + (" ..." if max_words is not None and len(words) > max_words
                                              else "") \
            if max_words is not None else ev.text
        blocks.append(f"[{ev.passage_id}] {ev.title}\n{text}")
    return "\n\n".join(blocks) if blocks else "(no passages)"


def dated_claim(claim: Claim, word: str = "Claim", verb: str = "made") -> str:
    """``Claim (made on 2020-01-01): text`` (the date only when the claim has one)."""
    dated = f" ({verb} on {claim.date})" if claim.date else ""
    return f"{word}{dated}: {claim.text}"


def citing(model: type[BaseModel], ids: list[str], enabled: bool = True, *, field: str = "cited_passages",
           at_most: int = 5, at_least: int = 0) -> type[BaseModel]:
    """``model`` with its list ``field`` (default ``cited_passages``) restricted to ``ids`` (an enum in
    the JSON schema), holding ``at_least`` to ``at_most`` items (none when there are no ids).

    With no ids the list must be empty. The subclass keeps the model's name, so the server sees the
    same schema name; ``enabled=False`` returns ``model`` unchanged."""
    if not enabled:
        return model
    unique = tuple(dict.fromkeys(ids))
    item = Literal[unique] if unique else str  # type: ignore[valid-type]
    fld = model.model_fields[field]
    most = at_most if unique else 0
    # no minItems unless asked: the schema stays as it was
    least = {"min_length": min(at_least, most)} if at_least else {}
    bounds = Field(max_length=most, description=fld.description, **least)
    return create_model(model.__name__, __base__=model, __module__=model.__module__, **{field: (list[item],
                                                                                                bounds)})


def cited_evidence(ids: list[str], shown: list[Evidence]) -> list[Evidence]:
    """The passages among ``shown`` whose ids the model cited, in citation order, without repeats."""
    by_id = {e.passage_id: e for e in shown}
    out: list[Evidence] = []
    for pid in ids:
        ev = by_id.get(pid.strip())
        if ev is not None and ev not in out:
            out.append(ev)
    return out


# -- sampling seeds ----------------------------------------------------------------------------------------
SEED_RULE = ("per request: the first 4 bytes (big-endian, top bit cleared) of sha256 of "
             "'<run seed>|<claim id>|<role>|<n>', n the 0-based index of the call among the claim's calls of "
             "that "
             "role; no run seed: no seed is sent (the server samples freely)")


def request_seed(run_seed: int | None, claim_id: str, role: str, index: int) -> int | None:
    """The sampling seed of one request (:data:`SEED_RULE`); None when the run has no seed."""
    if run_seed is None:
        return None
    digest = hashlib.sha256(f"{run_seed}|{claim_id}|{role}|{index}".encode("utf-8")).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def role_settings_record(roles: Iterable["Role"], params: Any, llm: Any) -> dict[str, dict[str, Any]]:
    """What a run manifest records per role: its token budget and its effective temperature (the role's
    setting, else the client's default), plus the seed rule's inputs."""
    default_t = getattr(llm, "temperature", None)
    out: dict[str, dict[str, Any]] = {}
    for role in roles:
        s = role.settings(params)
        out[role.name] = {"max_tokens": s.max_tokens,
                          "temperature": s.temperature if s.temperature is not None else default_t,
                          "temperature_from": "role" if s.temperature is not None else "client default"}
    return out


# -- the Role -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Fallback:
    """What a role's call returns when the reply never validates, and what the trace says about it.

    ``value`` is returned as is, or called with the role's inputs when callable. ``event`` is the trace
    event's kind (default ``<method>.agent_failed``); ``agent`` the name the event gives the role
    (default its qualified name)."""

    value: Any
    note: str
    event: str | None = None
    agent: str | None = None


@dataclass(frozen=True)
class Turn:
    """A turn a role's conversation continues with after its opening messages (a ReAct observation, a debate
    round's reply to the other side, the request for a corrected plan, the quote check's retry): declared
    with the role (``Role(turns=...)``), so ``veracity methods show NAME --prompts`` prints every text a
    method sends. ``render(**inputs)`` gives the text (a string or a user message); ``example`` the inputs
    it is shown with (``{name}`` placeholders where the text is the input itself)."""

    name: str
    render: Callable[..., Any]
    example: dict[str, Any] = field(default_factory=dict)
    when: str = ""  # when the method sends it, in words

    def __call__(self, *args: Any, **inputs: Any) -> Any:
        return self.render(*args, **inputs)

    def shown(self) -> str:
        """The text on the example inputs, as ``methods show --prompts`` prints it."""
        out = self.render(**self.example)
        return out["content"] if isinstance(out, dict) else str(out)


@dataclass(frozen=True)
class RoleSettings:
    max_tokens: int
    temperature: float | None


@dataclass(frozen=True, eq=False)
class Role(Generic[T]):
    """One agent role (see the module docstring): ``messages(**inputs)`` is the system message
    (``instructions``) followed by ``render(**inputs)``, the turns after it."""

    name: str
    output: type[T]
    render: Callable[..., list[Message]]  # the turns after the system message (no system message)
    instructions: str | Callable[..., str] = ""  # THE system message; a callable gets the inputs it names
    max_tokens: int = 256
    temperature: float | None = None  # None: the client's temperature (0 unless configured)
    # None: an invalid reply raises LLMOutputError (the claim fails or the method catches it)
    fallback: Fallback | None = None
    # without a Fallback: what the method itself does when the reply never validates
    on_invalid: str | None = None
    summary: str = ""
    extra: dict[str, Any] = field(default_factory=dict)  # e.g. the paper section the role comes from
    # what the method sends later in this role's conversation (shown with --prompts)
    turns: tuple[Turn, ...] = ()
    # a deciding role: the name of its label field (an enum); its calls ask the engine for token logprobs and
    # record the reply's distribution over that field's values (veracity.serving.confidence)
    confidence: str | None = None

    @property
    def method(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def short(self) -> str:
        """The name used in ``--param ROLE.max_tokens`` (without the method prefix)."""
        return self.name.split(".", 1)[1] if "." in self.name else self.name

    def settings(self, params: Any) -> RoleSettings:
        """This role's budget and temperature for a run: the declared values, overridden by
        ``params.roles``."""
        over = (getattr(params, "roles", None) or {}).get(self.short, {})
        return RoleSettings(int(over.get("max_tokens", self.max_tokens)),
                            over.get("temperature", self.temperature))

    def system(self, **inputs: Any) -> str:
        """The system message for these inputs: the instructions, called with the inputs their parameters
        name when they depend on the call (the label space, the allowed node types, ...)."""
        if isinstance(self.instructions, str):
            return self.instructions
        return _call_with(self.instructions, inputs)

    def messages(self, **inputs: Any) -> list[Message]:
        """Everything the role sends for these inputs: its system message, then the rendered turns. The
        instructions and ``render`` each get the inputs their parameters name; an input neither names is
        a programming error (TypeError), as a misspelt keyword would be."""
        unknown = set(inputs) - set(_parameters(self.render))
        if not isinstance(self.instructions, str):
            unknown -= set(_parameters(self.instructions))
        if unknown and not _takes_any(self.render):
            raise TypeError(f"{self.name}: unexpected inputs {sorted(unknown)}")
        turns = _call_with(self.render, inputs)
        if any(m.get("role") == "system" for m in turns):  # one prompt per role: the instructions
            raise ValueError(f"{self.name}: render() returned a system message; it belongs in the "
                             "instructions")
        text = self.system(**inputs)
        return [{"role": "system", "content": text}, *turns] if text else list(turns)

    async def __call__(self, ctx: RoleContext, *, output: type[BaseModel] | None = None,
                       messages: list[Message] | None = None, trace_info: dict[str, Any] | None = None,
                       usage_sink: list[UsageRecord] | None = None,
                       cut_when: Callable[[str], str | None] | None = None, **inputs: Any) -> Any:
        """Call the model as this role. ``output`` narrows the output model for this call (e.g. citations
        restricted to the passages shown); ``messages`` replaces the rendered messages (a conversation the
        method keeps, e.g. a ReAct history); ``usage_sink`` receives this call's usage records (e.g. a
        deciding
        call's label distribution); ``cut_when`` is handed the reply as it streams and may end it early
        (:meth:`~veracity.serving.client.LLMClient.generate`; llama-server only). Returns the validated
        reply, or the fallback's value."""
        s = self.settings(ctx.params)
        msgs = messages if messages is not None else self.messages(**inputs)
        seed = request_seed(ctx.seed, ctx.claim_id, self.name, ctx.next_call_index(self.name))
        trace = ctx.trace
        # a deciding role reads its label's probability (an added request field; the messages, the schema and
        # the sampling are unchanged)
        more: dict[str, Any] = {"confidence_field": self.confidence} if self.confidence else {}
        if usage_sink is not None:
            more["usage_sink"] = usage_sink
        if cut_when is not None:
            more["cut_when"] = cut_when
        if trace.listener is None:
            try:
                return await ctx.llm.generate(msgs, output or self.output, role=self.name,
                                              max_tokens=s.max_tokens, temperature=s.temperature, seed=seed,
                                              **more)
            except LLMOutputError as exc:
                return self._fall_back(ctx, exc, trace_info, inputs)
        # live progress: started, then finished (reply, tokens, latency) or failed, paired by step
        step = trace.next_step()
        trace.notify("role.started", step=step, role=self.name, messages=msgs, max_tokens=s.max_tokens)
        t0 = time.perf_counter()
        # this call's usage records only (parallel agents run side by side); the client also adds them to
        # the claim's usage_scope(), which the trace reads
        mine: list[UsageRecord] = []
        try:
            more.pop("usage_sink", None)
            value = await ctx.llm.generate(msgs, output or self.output, role=self.name,
                                           max_tokens=s.max_tokens,
                                           temperature=s.temperature, seed=seed, usage_sink=mine, **more)
            if usage_sink is not None:
                usage_sink.extend(mine)
        except LLMOutputError as exc:
            trace.notify("role.failed", step=step, role=self.name, error=str(exc), **_usage(mine, t0))
            return self._fall_back(ctx, exc, trace_info, inputs)
        except BaseException as exc:
            trace.notify("role.failed", step=step, role=self.name, error=f"{type(exc).__name__}: {exc}",
                         **_usage(mine, t0))
            raise
        trace.notify("role.finished", step=step, role=self.name, output=value.model_dump(mode="json"),
                     **_usage(mine, t0))
        return value

    def _fall_back(self, ctx: RoleContext, exc: LLMOutputError, trace_info: dict[str, Any] | None,
                   inputs: dict[str, Any]) -> Any:
        """The fallback's value after a reply that never validated (traced), or the error again."""
        if self.fallback is None:
            raise exc
        fb = self.fallback
        ctx.trace.event(fb.event or f"{self.method}.agent_failed", agent=fb.agent or self.name,
                        role=self.name, error=str(exc), fallback=fb.note, **(trace_info or {}))
        return fb.value(**inputs) if callable(fb.value) else fb.value

    def describe(self, params: Any = None) -> dict[str, Any]:
        """What ``veracity methods show`` prints: name, output schema, budget, temperature, fallback, and the
        system message exactly as sent (instructions that depend on the call are shown with their inputs'
        defaults, e.g. the 3-way label space, and ``{name}`` for an input without one;
        ``instructions_vary_with`` names those inputs)."""
        from veracity.serving.structured import response_format_for

        s = self.settings(params) if params is not None else RoleSettings(self.max_tokens, self.temperature)
        vary: list[str] = []
        if isinstance(self.instructions, str):
            instructions = self.instructions
        else:
            sig = _parameters(self.instructions)
            vary = list(sig)
            instructions = self.instructions(**{n: f"{{{n}}}" for n, p in sig.items()
                                                if p.default is inspect.Parameter.empty})
        return {
            "name": self.name,
            "short": self.short,
            "summary": self.summary,
            "output": self.output.__name__,
            "schema": response_format_for(self.output)["json_schema"]["schema"],
            "max_tokens": s.max_tokens,
            "temperature": s.temperature,
            "fallback": self.fallback.note if self.fallback else self.on_invalid,
            "instructions": instructions,
            "instructions_vary_with": vary,
            "turns": [{"name": t.name, "when": t.when, "text": t.shown()} for t in self.turns],
            **self.extra,
        }


def _parameters(fn: Callable[..., Any]) -> dict[str, inspect.Parameter]:
    """The named parameters of an instructions or render function (the inputs :meth:`Role.messages`
    passes it)."""
    return {n: p for n, p in inspect.signature(fn).parameters.items()
            if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)}


def _takes_any(fn: Callable[..., Any]) -> bool:
    return any(p.kind is inspect.Parameter.VAR_KEYWORD for p in inspect.signature(fn).parameters.values())


def _call_with(fn: Callable[..., Any], inputs: dict[str, Any]) -> Any:
    """``fn`` called with the inputs its parameters name (all of them when it takes ``**kwargs``)."""
    if _takes_any(fn):
        return fn(**inputs)
    names = _parameters(fn)
    return fn(**{k: v for k, v in inputs.items() if k in names})


def _usage(records: list[Any], t0: float) -> dict[str, Any]:
    """Tokens and latency of one role call, from the usage records it left."""
    return {"prompt_tokens": sum(r.prompt_tokens for r in records),
            "completion_tokens": sum(r.completion_tokens for r in records),
            "latency_s": round(time.perf_counter() - t0, 4), "attempts": len(records)}

