"""Pydantic output model -> ``response_format`` json_schema request body.

vLLM constrains decoding to the schema (xgrammar / outlines / guidance backends). References
(``$defs``) are inlined so every backend sees one self-contained, non-recursive schema.
"""

from __future__ import annotations

import copy
import hashlib
import json
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
