"""What keel's own tools show the model, shipped as data: ``schemas.json``.

For each tool: the module and factory that build it, its description, the JSON Schema of its
input (generated from its model), its flags and its ``Effects``. With that, a session offers the
tools to the model, and the permission gate and ``tools.effects_of`` learn what a call does,
without importing a tool module: each built-in is a stand-in (``lazy_tool``, the one way one is
made) that loads the real tool at its first call. Building the real tools instead costs about
150 ms before the first request (measured: 50 ms for the stand-ins against 200 ms).

The file is derived data: ``tests/test_tools.py`` fails when it disagrees with the tools, and

    .venv/bin/python scripts/schemagen.py

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
import msgspec.json
from msgspec.structs import replace

from agentkeel.core.tools import Effects, Tool, ToolContext, ToolOutput

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
        "effects": msgspec.json.decode(msgspec.json.encode(tool.effects)),
    }


def _effects(entry: dict[str, Any]) -> Effects | None:
    try:
        return msgspec.convert(entry["effects"], Effects)
    except (KeyError, msgspec.ValidationError):
        return None


def shipped_effects() -> dict[str, Effects] | None:
    """Every shipped tool's effects, by name; None when the file does not hold them all."""
    out: dict[str, Effects] = {}
    for name, entry in _shipped().items():
        effects = _effects(entry)
        if effects is None:
            return None
        out[name] = effects
    return out or None


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

    def respond(tool_input: dict[str, Any], output: ToolOutput) -> Any:
        return load().response(tool_input, output)  # after the call: the real tool is loaded

    effects = _effects(entry)
    if effects is None:
        return None
    flags = dict(entry.get("flags") or {})
    return Tool(
        name,
        str(entry["description"]),
        None,
        run,
        raw_schema=entry["input_schema"],
        load=load,
        effects=effects,
        respond=respond,
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
        if tool is None:
            return None  # an entry from another version: build the real tools
        out.append(tool)
    return out
