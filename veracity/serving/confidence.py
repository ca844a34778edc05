"""A reply's own probability for the label it gave, read from the engine's token log-probabilities.

A deciding role (``Role(confidence="label")``) asks the engine for ``logprobs`` and ``top_logprobs`` on its
chat completion. The schema allows only a few values for the label field (an enum), so at the token where
those values part ways the alternatives the engine lists say how likely each value was:

1. find where the label's string value starts in the reply (a scan of the reply's top-level JSON object,
   :func:`value_offset`; the reply already validated, nothing is parsed from model text),
2. move past the characters every allowed value shares (their common prefix) to the divergence point,
3. take the reply token that covers that point; each alternative the engine lists for that position whose
   text agrees with the reply up to the divergence point and then continues one allowed value (its prefix,
   or the whole value and the closing quote) counts for that value (several tokenisations of one value add
   up),
4. normalise over the allowed values: the label's probability.

Sampling is untouched (``logprobs`` only reports): the same request with and without them decodes the same
tokens. vLLM computes the reported log-probabilities after the schema's token mask (its
``--logprobs-mode raw_logprobs`` reads the logits the grammar bitmask was already applied to), so the
allowed values hold all the mass there; llama.cpp's ``llama-server`` reports the model's distribution before
its samplers and grammar, so part of the mass may sit on tokens the schema forbids — both are normalised
over the allowed values, and :attr:`LabelProbs.mass` keeps what the allowed values held before.
An endpoint that returns no logprobs gives ``None`` (never a made-up number).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

TOP_LOGPROBS = 10  # alternatives asked per token: enough for every allowed label value and a few more
# an engine that reports its logprobs after the schema's mask (vLLM) lists only allowed tokens at the label's
# divergence point: one alternative per allowed value and two spare for a value's other tokenisations are
# enough there, and every alternative asked is Python work per generated token in vLLM's output path
MASKED_SPARE = 2


def top_logprobs_for(values: tuple[str, ...], masks_first: bool) -> int:
    """How many alternatives per token to ask for a label with ``values``: fewer on an engine whose
    logprobs come after the schema's mask (``masks_first``), :data:`TOP_LOGPROBS` otherwise."""
    return min(TOP_LOGPROBS, len(values) + MASKED_SPARE) if masks_first else TOP_LOGPROBS


_WS = " \t\n\r"


@dataclass(frozen=True)
class LabelProbs:
    """The reply's distribution over the label field's allowed values (sums to 1), the value it gave, and the
    probability mass the allowed values held before normalising (1.0 when the engine masks first)."""

    field: str
    probs: dict[str, float]
    chosen: str
    mass: float

    def to_dict(self) -> dict[str, Any]:
        return {"field": self.field, "probs": self.probs, "chosen": self.chosen, "mass": round(self.mass, 6)}


def allowed_values(output_model: type[BaseModel], field: str) -> tuple[str, ...] | None:
    """The string values ``output_model``'s JSON schema allows for ``field`` (its enum; a nullable enum's
    non-null values), or None when the field is not an enum of strings."""
    from veracity.serving.structured import schema_for

    prop = schema_for(output_model).get("properties", {}).get(field)
    if not isinstance(prop, dict):
        return None
    options = [prop] + [p for p in prop.get("anyOf", []) if isinstance(p, dict)]
    values: list[str] = []
    for opt in options:
        if "const" in opt and isinstance(opt["const"], str):
            values.append(opt["const"])
        for v in opt.get("enum", []) or []:
            if isinstance(v, str):
                values.append(v)
    values = list(dict.fromkeys(values))
    return tuple(values) if len(values) >= 2 else None


def value_offset(raw: str, field: str) -> int | None:
    """The offset in ``raw`` (a JSON object) of the first character inside the string value of its top-level
    key ``field``; None when the key is absent or its value is not a string."""
    decoder = json.JSONDecoder()
    i = _skip(raw, 0)
    if i >= len(raw) or raw[i] != "{":
        return None
    i = _skip(raw, i + 1)
    while i < len(raw) and raw[i] == '"':
        key, i = json.decoder.scanstring(raw, i + 1)
        i = _skip(raw, i)
        if i >= len(raw) or raw[i] != ":":
            return None
        i = _skip(raw, i + 1)
        if key == field:
            return i + 1 if i < len(raw) and raw[i] == '"' else None
        try:
            _, i = decoder.raw_decode(raw, i)
        except ValueError:
            return None
        i = _skip(raw, i)
        if i < len(raw) and raw[i] == ",":
            i = _skip(raw, i + 1)
    return None


def _skip(raw: str, i: int) -> int:
    while i < len(raw) and raw[i] in _WS:
        i += 1
    return i


def _common_prefix(values: tuple[str, ...]) -> int:
    n = 0
    while all(len(v) > n for v in values) and len({v[n] for v in values}) == 1:
        n += 1
    return n


def _value_of(rest: bytes, tails: dict[str, bytes]) -> str | None:
    """The one allowed value whose continuation ``tails[value]`` (the value after the divergence point, then
    the closing quote) agrees with ``rest``; None when none or several do."""
    if not rest:
        return None
    hits = [v for v, tail in tails.items() if tail.startswith(rest) or rest.startswith(tail)]
    return hits[0] if len(hits) == 1 else None


def label_probs(raw: str, logprobs: Any, field: str, values: tuple[str, ...]) -> LabelProbs | None:
    """The reply's distribution over ``values`` for its label ``field`` (module docstring), from the
    ``choices[0].logprobs`` object an OpenAI-compatible engine returned; None when the engine returned none,
    the tokens do not spell the reply, or the divergence token lists no alternative for an allowed value."""
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    if not isinstance(content, list) or not content or not all(isinstance(t, dict) for t in content):
        return None
    pieces = [_bytes_of(t) for t in content]
    # the tokens spell the reply from its start (llama-server ends the reply's text where the JSON ends,
    # without
    # trailing whitespace, while its token list may go on: "\n```"); anything else is a server quirk: no
    # number
    # rather than a wrong one
    # llama-server also drops a "```json" fence before the JSON: the reply is found in the tokens' bytes
    joined = b"".join(p for p in pieces if p is not None)
    base = joined.find(raw.encode("utf-8").rstrip()) if all(p is not None for p in pieces) else -1
    if base < 0:
        return None
    start = value_offset(raw, field)
    if start is None:
        return None
    chosen = next((v for v in values if raw.startswith(v + '"', start)), None)
    if chosen is None:
        return None
    shared = _common_prefix(values)
    point = base + len(raw[:start].encode("utf-8")) + shared  # label values are ASCII: one byte a character
    pos, at = 0, None
    for i, piece in enumerate(pieces):
        if pos <= point < pos + len(piece):
            at = i
            break
        pos += len(piece)
    if at is None:
        return None
    entry = content[at]
    before = joined[pos:point]  # the part of the divergence token before the divergence point
    tails = {v: (v[shared:] + '"').encode() for v in values}
    mass: dict[str, float] = {}
    seen: set[bytes] = set()
    for alt in [*(entry.get("top_logprobs") or []), entry]:
        text, lp = (_bytes_of(alt) if isinstance(alt, dict) else None,
                    alt.get("logprob") if isinstance(alt, dict) else None)
        if text is None or not isinstance(lp, (int, float)) or text in seen:
            continue
        seen.add(text)  # the reply's own token is usually among the alternatives too: count it once
        if not text.startswith(before):
            continue
        value = _value_of(text[len(before):], tails)
        if value is not None and math.isfinite(lp):
            mass[value] = mass.get(value, 0.0) + math.exp(lp)
    total = sum(mass.values())
    if total <= 0 or chosen not in mass:
        return None
    return LabelProbs(field=field, probs={v: mass.get(v, 0.0) / total for v in values}, chosen=chosen,
                      mass=total)


def _bytes_of(entry: dict[str, Any]) -> bytes | None:
    """A token's bytes: the ``bytes`` list the OpenAI format carries, else its text in UTF-8."""
    raw = entry.get("bytes")
    if isinstance(raw, list) and all(isinstance(b, int) and 0 <= b < 256 for b in raw):
        return bytes(raw)
    tok = entry.get("token")
    return tok.encode("utf-8") if isinstance(tok, str) else None
