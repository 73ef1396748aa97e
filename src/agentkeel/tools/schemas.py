"""The JSON Schemas keel's own tools show the model, generated once from their pydantic input models.

Generating them at run time costs about 10 ms before the first request: pydantic builds each
model's core schema, then its JSON Schema. Reading ``schemas.json`` costs 0.1 ms. The file is
derived data: ``tests/test_tools.py`` fails when it disagrees with the models, and

    python -m agentkeel.tools.schemas

rewrites it. A tool missing from the file, or an unreadable file, falls back to generating.
"""

from __future__ import annotations

import json
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from agentkeel.core.tools import Tool, generated_schema

SCHEMA_FILE = Path(__file__).with_name("schemas.json")


@lru_cache(maxsize=1)
def _shipped() -> dict[str, dict[str, Any]]:
    try:
        data = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def with_shipped_schemas(tools: list[Tool]) -> list[Tool]:
    """keel's own tools, each given its shipped schema (only ever tools built by keel, by name)."""
    shipped = _shipped()
    return [
        replace(tool, raw_schema=shipped[tool.name]) if tool.raw_schema is None and tool.name in shipped else tool
        for tool in tools
    ]


def own_tools() -> list[Tool]:
    """Every tool whose schema the file holds: the built-ins and memory's tools."""
    from agentkeel.memory.tools import memory_tools
    from agentkeel.tools import builtin_tools

    def no_store() -> Any:
        raise RuntimeError("schema generation never runs a tool")

    return builtin_tools(shipped=False) + memory_tools(no_store, "", shipped=False)


def generate() -> dict[str, dict[str, Any]]:
    return {tool.name: generated_schema(tool.input_model) for tool in own_tools()}


if __name__ == "__main__":
    SCHEMA_FILE.write_text(json.dumps(generate(), indent=1) + "\n", encoding="utf-8")
    print(f"wrote {SCHEMA_FILE}")
