"""Verdicts that quote their evidence (``--param quotes=off|show|check``): the quote schema a judging role
answers in, and the call that checks the quotes and retries once.

- ``off``: the role answers as before (its paper / baseline schema; nothing here runs).
- ``show``: the role also returns, for each passage it relies on, short quotes copied from it; each is
  located in its passage (:mod:`veracity.pipeline.quotes`, no model involved) and recorded with its
  offsets; the verdict is marked ``grounded`` or ``ungrounded`` but its label stands.
- ``check``: as ``show``, and a reply whose quotes are not all in their passages (or that settles the
  claim without quoting anything) is retried once in the same conversation with the mismatch named. If
  the retry still fails, the verdict becomes the label space's "not supported" label (NOT_ENOUGH_INFO in
  3-way; REFUTED in binary, the binary rule) and is marked ``ungrounded`` in the result and the trace.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Callable, Literal

from pydantic import BaseModel, Field, create_model

from veracity.errors import LLMOutputError
from veracity.pipeline.labels import THREE_WAY, LabelSpace
from veracity.pipeline.quotes import QUOTE_MAX_CHARS, Quote, check_quotes, problems, unsupported_attributions
from veracity.pipeline.roles import Message, Role, Turn
from veracity.pipeline.types import Evidence, Label

if TYPE_CHECKING:  # pragma: no cover
    from veracity.pipeline.methods.base import MethodContext

QUOTE_MODES = ("off", "show", "check")
MISMATCH_EVENT = "quotes.mismatch"  # a reply whose quotes were not all found (before a retry)
DECISIVE = (Label.SUPPORTED.value, Label.REFUTED.value)  # labels that say the passages settle the claim
UNGROUNDED_EVENT = "quotes.ungrounded"  # the verdict's label was replaced (check) or only marked (show)


class PassageQuote(BaseModel):
    passage_id: Annotated[str,
                          Field(max_length=160)] = Field(description="the id of the passage quoted, e.g. "
                                                                     "'Title#0'")
    quote: str = Field(max_length=QUOTE_MAX_CHARS, description="a few words copied exactly from that passage")


def quoted(base: type[BaseModel], name: str, description: str, *,
           drop: str = "cited_passages") -> type[BaseModel]:
    """``base``'s reply model with quotes: its fields in order, less ``drop`` (the ids a quote now carries),
    then ``quotes``, each a passage id and the words copied from that passage (``description`` says which
    passages). The one way a judging role's quoted reply model is declared; subclass it to add behaviour
    (e.g. a ``label`` property)."""
    fields: dict[str, Any] = {n: (f.annotation, f) for n, f in base.model_fields.items() if n != drop}
    fields["quotes"] = (list[PassageQuote], Field(max_length=5, description=description))
    return create_model(name, __module__=base.__module__, **fields)


def quoting(model: type[BaseModel], ids: list[str], enabled: bool = True, *, field: str = "quotes",
            at_most: int = 5) -> type[BaseModel]:
    """``model`` with each quote's ``passage_id`` restricted to ``ids`` (an enum in the JSON schema; no
    quotes at all when there are no ids), like :func:`~veracity.pipeline.roles.citing` for citations.
    ``enabled=False`` returns ``model`` unchanged."""
    if not enabled:
        return model
    unique = tuple(dict.fromkeys(ids))
    fld = model.model_fields[field]
    if unique:
        item: Any = create_model(PassageQuote.__name__, __base__=PassageQuote,
                                 __module__=PassageQuote.__module__,
                                 passage_id=(Literal[unique],  # type: ignore[valid-type]
                                             Field(description=PassageQuote.model_fields["passage_id"].description)))
    else:
        item = PassageQuote
    bounds = Field(max_length=at_most if unique else 0, description=fld.description)
    return create_model(model.__name__, __base__=model, __module__=model.__module__, **{field: (list[item],
                                                                                                bounds)})


def not_supported(space: LabelSpace) -> Label:
    """The label an ungrounded verdict gets: NOT_ENOUGH_INFO, or REFUTED in binary (the binary rule)."""
    return Label.NOT_ENOUGH_INFO if space.allows_nei else Label.REFUTED


def retry_prompt(found: list[str], space: LabelSpace, fallback: str | None = None) -> str:
    """The user turn of the one retry: the mismatches, then what to do (``fallback``: the answer in the
    role's own labels that says the passages do not support the claim; default the label space's)."""
    fallback = fallback or not_supported(space).value
    return ("Your quotes must be copied word for word from the passages they cite, and a verdict that the "
            "passages settle must quote them. These do not hold:\n- " + "\n- ".join(found)
            + f"\nAnswer again: quote the exact words of the passages your label rests on, or, if the "
              f"passages do not say it, answer {fallback}.")


QUOTE_RETRY = Turn("quote_retry", retry_prompt, {"found": ["{problem}"], "space": THREE_WAY},
                   when="quotes=check: once, after a reply whose quotes are not all in their passages")


@dataclass
class Grounded:
    """A quoting role's reply after the check: the reply (the retry's when there was one), its quotes
    located, whether they ground it, and ``replaced``: the label the verdict takes instead of the reply's
    (the label space's "not supported" one) when the reply is ungrounded in ``check`` mode, else None."""

    reply: Any
    quotes: list[Quote]
    grounding: str  # "grounded" | "ungrounded"
    retried: bool = False
    problems: list[str] | None = None
    replaced: Label | None = None


def _own_label(reply: Any) -> str:
    return reply.label


def _located(reply: Any, shown: list[Evidence],
             label_of: Callable[[Any], str]) -> tuple[list[Quote], list[str]]:
    """The reply's quotes located in ``shown``, and why they do not ground it (a label other than the
    space's "not supported" one settles the claim, so it must quote)."""
    quotes = check_quotes(((q.passage_id, q.quote) for q in reply.quotes), shown)
    # a verdict that settles the claim (SUPPORTED or REFUTED, in the binary space too) must quote; and its
    # explanation may not attribute to the passages words they lack (the same model-free reading)
    found = problems(quotes, label_of(reply) in DECISIVE)
    return quotes, found + unsupported_attributions(getattr(reply, "explanation", "") or "", shown)


async def ask_quoting(ctx: "MethodContext", role: Role, mode: str, shown: list[Evidence], /, *,
                      output: type[BaseModel], messages: list[Message] | None = None,
                      label_of: Callable[[Any], str] = _own_label, fallback: str | None = None,
                      **inputs: Any) -> Grounded | None:
    """Call a quoting ``role`` (its output has ``label`` and ``quotes``) and check its quotes against
    ``shown``; in ``check`` mode retry once with the mismatches named (module docstring). None when the
    first reply never validated (the role's fallback was traced)."""
    sent = messages if messages is not None else role.messages(**inputs)
    reply = await role(ctx, output=output, messages=sent)
    if reply is None:
        return None
    return await check_reply(ctx, reply, role, mode, shown, sent=sent, retry_role=role, output=output,
                             label_of=label_of, fallback=fallback)


async def check_reply(ctx: "MethodContext", reply: Any, role: Role, mode: str, shown: list[Evidence], *,
                      sent: list[Message], retry_role: Role, output: type[BaseModel],
                      label_of: Callable[[Any], str] = _own_label, fallback: str | None = None) -> Grounded:
    """Check the quotes of ``reply`` (``role``'s answer to ``sent``) against ``shown``; in ``check`` mode a
    mismatch is retried once as ``retry_role`` (the same role, or the one that gives a verdict in that
    conversation, e.g. MERMAID's final verdict after an executor's finish step) with the mismatch named.
    ``label_of`` maps a reply to a label value (EMULATE's True / False), ``fallback`` is the answer the
    retry prompt offers when the passages do not say it (default: the label space's)."""
    quotes, found = _located(reply, shown, label_of)
    retried = False
    if found and mode == "check":
        ctx.trace.event(MISMATCH_EVENT, role=role.name, attempt=1, label=reply.label, problems=found)
        again = [*sent, {"role": "assistant", "content": reply.model_dump_json()},
                 {"role": "user", "content": QUOTE_RETRY(found, ctx.label_space, fallback)}]
        try:
            second = await retry_role(ctx, output=output, messages=again, trace_info={"retry": "quotes"})
        except LLMOutputError as exc:  # a role without a fallback: the first reply's mismatch stands
            ctx.trace.event(MISMATCH_EVENT, role=retry_role.name, attempt=2, label=None, problems=[str(exc)])
            second = None
        retried = True
        if second is not None:
            reply = second
            quotes, found = _located(reply, shown, label_of)
            if found:
                ctx.trace.event(MISMATCH_EVENT, role=retry_role.name, attempt=2, label=reply.label,
                                problems=found)
    grounding = "ungrounded" if found else "grounded"
    # the one rule: ungrounded in check mode -> the label space's "not supported" label
    replaced = not_supported(ctx.label_space) if found and mode == "check" else None
    if found:
        ctx.trace.event(UNGROUNDED_EVENT, role=role.name, mode=mode, label_given=reply.label,
                        label=replaced.value if replaced is not None else reply.label, problems=found)
    return Grounded(reply, quotes, grounding, retried, found, replaced)


def ungrounded_explanation(g: Grounded, said: str | None = None) -> str:
    """The explanation of a verdict whose label was replaced: why, then what the model said (``said``: the
    verdict's reason where the reply carries none of its own, e.g. ZoFia's one-character judge)."""
    said = said or getattr(g.reply, "explanation", None) or getattr(g.reply, "thought", "")
    return f"Ungrounded: {'; '.join(g.problems or [])}. The judge had answered {g.reply.label}: {said}"
