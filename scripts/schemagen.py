"""Regenerate ``tools/schemas.json`` from the tools themselves: ``.venv/bin/python scripts/schemagen.py``.

A development tool, outside the package: it sees the built-in tools and memory's tools
(``tests/integration/tools/test_builtin_tools.py`` checks the shipped file is what it writes).
"""

from __future__ import annotations

import json
from typing import Any

from agentkeel.core.tools import Tool
from agentkeel.memory.tools import memory_tools
from agentkeel.tools import FACTORIES
from agentkeel.tools.schemas import SCHEMA_FILE, _factory_tools, entry_of

MEMORY_FACTORY = "agentkeel.memory.tools:memory_tools"


def own_tools() -> list[tuple[Tool, str]]:
    """Every tool the file holds, with its factory: the built-ins and memory's tools."""

    def no_store() -> Any:
        raise RuntimeError("schema generation never runs a tool")

    out = [(tool, factory) for factory in FACTORIES for tool in _factory_tools(factory).values()]
    return out + [(tool, MEMORY_FACTORY) for tool in memory_tools(no_store, "", shipped=False)]


def generate() -> dict[str, dict[str, Any]]:
    return {tool.name: entry_of(tool, factory) for tool, factory in own_tools()}


if __name__ == "__main__":
    SCHEMA_FILE.write_text(json.dumps(generate(), indent=1) + "\n", encoding="utf-8")
    print(f"wrote {SCHEMA_FILE}")
