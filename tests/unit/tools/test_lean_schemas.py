"""The built-in tools' schemas, as the model sees them, carry no ``anyOf [T, null]`` + ``default:
null`` noise; a call that leaves an optional parameter out, or sends it as null, validates as it
did (the tool's input model judges the call, not the schema)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentkeel.core.tools import ToolInputError, generated_schema, lean_schema
from agentkeel.tools import real_builtin_tools
from agentkeel.tools.schemas import _shipped


def _walk(node: Any) -> list[dict[str, Any]]:
    if isinstance(node, list):
        return [d for v in node for d in _walk(v)]
    if isinstance(node, dict):
        return [node, *(d for v in node.values() for d in _walk(v))]
    return []


def test_shipped_schemas_have_no_null_noise() -> None:
    shipped = _shipped()
    assert {"Read", "Grep", "Bash"} <= set(shipped)
    for name, entry in shipped.items():
        for node in _walk(entry["input_schema"]):
            assert {"type": "null"} not in (node.get("anyOf") or []), name
            assert not ("default" in node and node["default"] is None), name
    grep = shipped["Grep"]["input_schema"]["properties"]
    assert grep["-A"] == {"minimum": 0, "type": "integer", "description": "Lines of context after each match"}
    assert grep["output_mode"]["default"] == "files_with_matches"  # a real default stays
    assert "-A" not in shipped["Grep"]["input_schema"]["required"]


def test_lean_schema_keeps_what_is_not_noise() -> None:
    noisy = {
        "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}, {"type": "null"}],
        "default": None,
        "description": "one or many",
    }
    assert lean_schema(noisy) == {
        "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
        "description": "one or many",
    }
    # a nullable parameter whose default is not null is a real choice: kept as it is
    kept = {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": 5}
    assert lean_schema(kept) == kept


def _noisy(model: Any) -> Any:
    """The schema as pydantic writes it (titles aside): what the file held before."""
    import msgspec

    from agentkeel.core.inputs import struct_schema
    from agentkeel.core.tools import _clean_schema

    if issubclass(model, msgspec.Struct):
        return struct_schema(model)
    return _clean_schema(model.model_json_schema())


def test_every_builtin_is_its_lean_generated_schema() -> None:
    shipped = _shipped()
    for tool in real_builtin_tools():
        if tool.name in shipped and tool.raw_schema is None:
            assert shipped[tool.name]["input_schema"] == generated_schema(tool.model()), tool.name
    saved = sum(
        len(json.dumps(_noisy(t.model()))) - len(json.dumps(shipped[t.name]["input_schema"]))
        for t in real_builtin_tools()
        if t.name in shipped and t.raw_schema is None
    )
    assert saved > 600  # characters a request no longer carries (about 200 tokens)


@pytest.mark.parametrize(
    ("name", "base", "optional", "bad"),
    [
        ("Read", {"file_path": "/tmp/x.txt"}, "offset", "ten"),
        ("Grep", {"pattern": "x"}, "-A", "two"),
        ("Bash", {"command": "true"}, "timeout", "soon"),
    ],
)
def test_absent_or_null_optional_validates_as_before(name: str, base: dict[str, Any], optional: str, bad: str) -> None:
    [tool] = [t for t in real_builtin_tools() if t.name == name]
    absent = tool.parse(dict(base))
    null = tool.parse({**base, optional: None})
    assert absent == null
    with pytest.raises(ToolInputError):
        tool.parse({**base, optional: bad})
