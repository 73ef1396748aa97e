"""Tool inputs as msgspec Structs: validation and JSON Schema without pydantic.

keel's own tools declare their input as a ``msgspec.Struct`` (``forbid_unknown_fields=True``,
constraints and descriptions in ``Annotated[..., msgspec.Meta(...)]``). msgspec is loaded before
the first request anyway (types, events, the session codec), a Struct class is built in C at
import, and validating a call is one ``msgspec.convert`` (microseconds). pydantic, which tools of
other origins (the SDK, plugins, MCP pass-through) may still use, costs 50-100 ms to import and a
model build at the first call: it stays off the path of keel's own tools.

Two things keep the switch invisible to the model:

- ``struct_schema`` writes the JSON Schema pydantic wrote for the same declaration (key order,
  ``anyOf`` with null for optional fields, ``$defs`` for nested models, no titles), so
  ``tools/schemas.json`` did not change;
- ``parse_struct`` validates laxly as pydantic did (``"5"`` for an integer, ``"true"`` for a
  boolean) and words its errors as pydantic did: every missing and unknown field at once
  (``old_string: Field required``), else msgspec's first error with its location
  (``timeout: Expected `int` >= 1``).
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

_PATH_STEP = r"\.([^.\[]+)|\[(\d+)\]"  # compiled at the first error (re caches it)


def parse_struct(tool: str, model: type[msgspec.Struct], raw: Any) -> msgspec.Struct:
    """``raw`` converted to ``model``; a ValueError naming every problem found, in pydantic's words."""
    try:
        return msgspec.convert(raw, model, strict=False)
    except msgspec.ValidationError as err:
        problems = _field_problems(model, raw) or [_located(str(err))]
        raise ValueError(f"Invalid input for {tool}: " + "; ".join(problems[:6])) from None


def _field_problems(model: type[msgspec.Struct], raw: Any) -> list[str]:
    if not isinstance(raw, dict):
        return []
    fields = msgspec.structs.fields(model)
    names = {f.encode_name for f in fields}
    out = [f"{f.encode_name}: Field required" for f in fields if f.required and f.encode_name not in raw]
    if model.__struct_config__.forbid_unknown_fields:
        out += [f"{k}: Extra inputs are not permitted" for k in raw if k not in names]
    return out


def _located(message: str) -> str:
    """``Expected `int` >= 1 - at `$.timeout``` -> ``timeout: Expected `int` >= 1``."""
    text, sep, where = message.rpartition(" - at `")
    if not sep:
        return f"input: {message}"
    steps = [a or b for a, b in re.findall(_PATH_STEP, where.rstrip("`").removeprefix("$"))]
    text = re.sub(r"^Object missing required field `([^`]+)`$", r"\1: Field required", text)
    text = re.sub(r"^Object contains unknown field `([^`]+)`$", r"\1: Extra inputs are not permitted", text)
    if ": " in text and text.split(": ", 1)[0].isidentifier():  # a field of a nested object
        field, rest = text.split(": ", 1)
        steps, text = [*steps, field], rest
    return f"{'.'.join(steps) or 'input'}: {text}"


# --- JSON Schema ---------------------------------------------------------------------------


def struct_schema(model: type[msgspec.Struct]) -> dict[str, Any]:
    """The JSON Schema of a Struct input, written as pydantic writes it for the same model."""
    from msgspec import inspect

    defs: dict[str, Any] = {}
    root = _object(inspect.type_info(model), defs)
    if defs:
        root = {"$defs": dict(sorted(defs.items())), **root}
    out: dict[str, Any] = _sorted(root)
    return out


def _object(info: Any, defs: dict[str, Any]) -> dict[str, Any]:
    import typing

    from msgspec import NODEFAULT

    hints = typing.get_type_hints(info.cls, include_extras=True)
    props: dict[str, Any] = {}
    required: list[str] = []
    for f in info.fields:
        schema = _node(f.type, defs, _literals(hints.get(f.name)))
        if f.required:
            required.append(f.encode_name)
        elif f.default is not NODEFAULT:
            schema["default"] = f.default
        props[f.encode_name] = schema
    out: dict[str, Any] = {}
    if info.forbid_unknown_fields:
        out["additionalProperties"] = False
    out["properties"] = props
    if required:
        out["required"] = required
    out["type"] = "object"
    return out


def _literals(hint: Any) -> list[tuple[Any, ...]]:
    """The Literal[...] value lists in a field's annotation, in declaration order (msgspec sorts them)."""
    import typing

    if typing.get_origin(hint) is typing.Literal:
        return [typing.get_args(hint)]
    return [found for arg in typing.get_args(hint) for found in _literals(arg)]


def _node(t: Any, defs: dict[str, Any], literals: list[tuple[Any, ...]] = []) -> dict[str, Any]:  # noqa: B006
    from msgspec import inspect as mi

    if isinstance(t, mi.Metadata):
        return {**_node(t.type, defs, literals), **(t.extra_json_schema or {})}
    if isinstance(t, mi.StrType):
        return _bounds({"type": "string"}, minLength=t.min_length, maxLength=t.max_length, pattern=t.pattern)
    if isinstance(t, mi.BoolType):
        return {"type": "boolean"}
    if isinstance(t, (mi.IntType, mi.FloatType)):
        kind = "integer" if isinstance(t, mi.IntType) else "number"
        return _bounds(
            {"type": kind},
            minimum=t.ge,
            maximum=t.le,
            exclusiveMinimum=t.gt,
            exclusiveMaximum=t.lt,
            multipleOf=t.multiple_of,
        )
    if isinstance(t, mi.ListType):
        items = _node(t.item_type, defs, literals)
        return _bounds({"items": items, "type": "array"}, minItems=t.min_length, maxItems=t.max_length)
    if isinstance(t, mi.LiteralType):
        kinds = {type(v) for v in t.values}
        declared = next((v for v in literals if sorted(map(repr, v)) == sorted(map(repr, t.values))), t.values)
        enum: dict[str, Any] = {"enum": list(declared)}
        if kinds == {str}:
            enum["type"] = "string"
        return enum
    if isinstance(t, mi.UnionType):
        return {"anyOf": [_node(member, defs, literals) for member in t.types]}
    if isinstance(t, mi.NoneType):
        return {"type": "null"}
    if isinstance(t, mi.StructType):
        name = t.cls.__name__
        if name not in defs:
            defs[name] = _object(t, defs)
        return {"$ref": f"#/$defs/{name}"}
    if isinstance(t, mi.AnyType):
        return {}
    raise TypeError(f"no JSON Schema for a tool input of type {t!r}")


def _bounds(schema: dict[str, Any], **limits: object) -> dict[str, Any]:
    schema.update({k: v for k, v in limits.items() if v is not None})
    return schema


def _sorted(node: Any, *, keep_order: bool = False) -> Any:
    """Keys sorted as pydantic sorts them, except a ``properties`` map (field order)."""
    if isinstance(node, dict):
        items = node.items() if keep_order else sorted(node.items())
        return {k: _sorted(v, keep_order=(k == "properties" and not keep_order)) for k, v in items}
    if isinstance(node, list):
        return [_sorted(v) for v in node]
    return node
