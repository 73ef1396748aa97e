"""What keel's own tools show the model, shipped as data: ``schemas.json``.

For each tool: the module and factory that build it, its description, the JSON Schema of its
input (generated from its pydantic model) and its flags. With that, a session offers the tools
to the model without importing their modules, or pydantic: each built-in is a stand-in that
loads the real tool at its first call (``lazy_tool``). Generating the schemas at run time cost
about 10 ms, importing the tool modules with pydantic ~100 ms, before the first request.

The file is derived data: ``tests/test_tools.py`` fails when it disagrees with the tools, and

    python -m agentkeel.schemagen

rewrites it (the generator lives above ``tools`` and ``memory``, whose tools it covers).
A tool missing from the file, or an unreadable file, is built the ordinary way.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import msgspec
from msgspec.structs import replace

from agentkeel.core.tools import NO_EFFECTS, Effects, Tool, ToolContext, ToolOutput

SCHEMA_FILE = Path(__file__).with_name("schemas.json")
FLAGS = (
    "group",
    "read_only",
    "concurrency_safe",
    "destructive",
    "requires_approval",
    "is_transactional",
    "accesses_sensitive_data",
    "is_external",
    "timeout_s",
    "source",
)


@lru_cache(maxsize=1)
def _shipped() -> dict[str, dict[str, Any]]:
    try:
        data = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or not all(isinstance(v, dict) and "input_schema" in v for v in data.values()):
        return {}
    return data


def entry_of(tool: Tool, factory: str) -> dict[str, Any]:
    """What the file holds for one tool (used by the generator)."""
    from agentkeel.core.tools import generated_schema

    return {
        "factory": factory,
        "description": tool.description,
        "input_schema": generated_schema(tool.model()),
        "flags": {name: getattr(tool, name) for name in FLAGS},
        "effects": json.loads(msgspec.json.encode(tool.effects)),
    }


def with_shipped_schemas(tools: list[Tool]) -> list[Tool]:
    """keel's own tools, each given its shipped schema (only ever tools built by keel, by name)."""
    shipped = _shipped()
    return [
        replace(tool, raw_schema=shipped[tool.name]["input_schema"])
        if tool.raw_schema is None and tool.name in shipped
        else tool
        for tool in tools
    ]


def lazy_tool(name: str, load: Callable[[], Tool]) -> Tool | None:
    """A stand-in for a shipped tool that builds the real one (``load``) at its first use."""
    entry = _shipped().get(name)
    if entry is None:
        return None

    async def run(args: Any, ctx: ToolContext) -> ToolOutput:
        return await load().run(args, ctx)

    flags = dict(entry.get("flags") or {})
    try:
        effects = msgspec.convert(entry.get("effects") or {}, Effects)
    except msgspec.ValidationError:
        effects = NO_EFFECTS
    return Tool(
        name,
        str(entry["description"]),
        None,
        run,
        raw_schema=entry["input_schema"],
        load=load,
        effects=effects,
        **{k: v for k, v in flags.items() if k in FLAGS},
    )


@cache
def _factory_tools(factory: str) -> dict[str, Tool]:
    module, _, func = factory.partition(":")
    tools: list[Tool] = getattr(importlib.import_module(module), func)()
    return {t.name: t for t in tools}


def shipped_builtins(factories: tuple[str, ...]) -> list[Tool] | None:
    """Stand-ins for every shipped tool of these factories, in the file's order; None when the
    file does not cover them (it is missing, unreadable, or from another version)."""
    entries = [(n, e) for n, e in _shipped().items() if e.get("factory") in factories]
    if {e.get("factory") for _, e in entries} != set(factories):
        return None
    out: list[Tool] = []
    for name, entry in entries:
        factory = str(entry["factory"])

        def load(factory: str = factory, name: str = name) -> Tool:
            return _factory_tools(factory)[name]

        tool = lazy_tool(name, load)
        if tool is not None:
            out.append(tool)
    return out
