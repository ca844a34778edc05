"""Pydantic output model -> ``response_format`` json_schema request body.

vLLM constrains decoding to the schema (xgrammar / outlines / guidance backends). References
(``$defs``) are inlined so every backend sees one self-contained, non-recursive schema.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from veracity.errors import ConfigError

STRUCTURED_BACKENDS = ("xgrammar", "outlines", "guidance")


def _inline_refs(node: Any, defs: dict[str, Any], stack: tuple[str, ...] = ()) -> Any:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            name = ref.split("/")[-1]
            if name in stack:
                raise ConfigError(
                    f"output model is recursive through {name!r}",
                    hint="keep role output models flat: enums, short strings, small lists, no recursion",
                )
            target = copy.deepcopy(defs[name])
            merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
            return _inline_refs(merged, defs, stack + (name,))
        return {k: _inline_refs(v, defs, stack) for k, v in node.items() if k != "$defs"}
    if isinstance(node, list):
        return [_inline_refs(v, defs, stack) for v in node]
    return node


def schema_for(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema with every ``$ref`` inlined."""
    raw = model.model_json_schema()
    return _inline_refs(raw, raw.get("$defs", {}))


def response_format_for(model: type[BaseModel]) -> dict[str, Any]:
    """The OpenAI ``response_format`` object that asks the server for schema-constrained JSON."""
    return {
        "type": "json_schema",
        "json_schema": {"name": model.__name__, "schema": schema_for(model), "strict": True},
    }


def schema_fingerprint(model: type[BaseModel]) -> str:
    return hashlib.sha256(json.dumps(schema_for(model), sort_keys=True).encode()).hexdigest()[:16]


# -- a reply whose fixed opening the client writes (llama.cpp) -------------------------------------------
# An output model may declare ``reply_prefill: ClassVar[bool] = True`` when it is one field, an enum of
# strings or a non-empty list of strings. On an engine that continues a final assistant message
# (llama-server), the client then sends the reply's fixed opening (``{"kind": "``, ``{"claims": ["``) as that
# message and a grammar for the rest, instead of the JSON schema: the model generates only the value(s) and
# the closing characters, never the frame and its whitespace (issue 44: on a 2-core CPU a generated token
# costs ~6x a prompt token, and the frame was most of check.worthiness's and a third of check.extractor's
# generated tokens). The reply is the same JSON object, validated against the same model.
@dataclass(frozen=True)
class PrefilledForm:
    opening: str  # the reply's first characters, sent as the assistant message the engine continues
    grammar: str  # GBNF for the rest of the reply, up to its closing brace

    def reply(self, content: str) -> str:
        """The whole reply: the engine returns the continued message with or without its opening."""
        return content if content.startswith(self.opening) else self.opening + content


def _gbnf_literal(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _bounds(lo: int, hi: int | None) -> str:
    return f"{{{lo},{hi}}}" if hi is not None else f"{{{lo},}}"


# a JSON string's characters (RFC 8259 §7): anything but a quote, a backslash and control characters, or an
# escape
_JSON_CHAR = 'char ::= [^"\\\\\\x7F\\x00-\\x1F] | "\\\\" (["\\\\/bfnrt] | "u" [0-9a-fA-F]{4})'


def prefilled_form(model: type[BaseModel]) -> PrefilledForm | None:
    """The opening and grammar of ``model``'s reply when it declares ``reply_prefill`` and has one of the two
    shapes above; None otherwise (the reply is asked for with the JSON schema)."""
    if not getattr(model, "reply_prefill", False):
        return None
    schema = schema_for(model)
    props = schema.get("properties") or {}
    if len(props) != 1 or list(props) != list(schema.get("required") or []):
        return None
    name, prop = next(iter(props.items()))
    head = "{" + json.dumps(name) + ": "
    values = prop.get("enum")
    if prop.get("type") == "string" and isinstance(values, list) and values \
            and all(isinstance(v, str) and json.dumps(v) == f'"{v}"' for v in values):
        alternatives = " | ".join(_gbnf_literal(v) for v in values)
        return PrefilledForm(head + '"', "root ::= (" + alternatives + ') "\\"}"')
    items = prop.get("items") or {}
    if prop.get("type") == "array" and items.get("type") == "string" and set(items) <= {
            "type", "minLength", "maxLength", "description", "title"} and int(prop.get("minItems", 0)) >= 1:
        more = prop.get("maxItems")
        rest = "*" if more is None else _bounds(0, int(more) - 1)
        grammar = "\n".join([
            f'root ::= item ("\\", \\"" item){rest} "\\"]}}"',
            f"item ::= char{_bounds(max(1, int(items.get('minLength', 1))), items.get('maxLength'))}",
            _JSON_CHAR])
        return PrefilledForm(head + '["', grammar)
    return None
