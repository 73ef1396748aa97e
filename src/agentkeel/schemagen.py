"""Regenerate ``tools/schemas.json`` from the input models: ``python -m agentkeel.schemagen``.

An application-layer module: it sees the built-in tools and memory's tools, so it cannot
live in ``tools`` (``memory.tools`` imports ``tools.schemas``).
"""

from __future__ import annotations

import json
from typing import Any

from agentkeel.core.tools import Tool, generated_schema
from agentkeel.memory.tools import memory_tools
from agentkeel.tools import builtin_tools
from agentkeel.tools.schemas import SCHEMA_FILE


def own_tools() -> list[Tool]:
    """Every tool whose schema the file holds: the built-ins and memory's tools."""

    def no_store() -> Any:
        raise RuntimeError("schema generation never runs a tool")

    return builtin_tools(shipped=False) + memory_tools(no_store, "", shipped=False)


def generate() -> dict[str, dict[str, Any]]:
    return {tool.name: generated_schema(tool.input_model) for tool in own_tools()}


if __name__ == "__main__":
    SCHEMA_FILE.write_text(json.dumps(generate(), indent=1) + "\n", encoding="utf-8")
    print(f"wrote {SCHEMA_FILE}")
