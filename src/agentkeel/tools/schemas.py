"""The JSON Schemas keel's own tools show the model, generated once from their pydantic input models.

Generating them at run time costs about 10 ms before the first request: pydantic builds each
model's core schema, then its JSON Schema. Reading ``schemas.json`` costs 0.1 ms. The file is
derived data: ``tests/test_tools.py`` fails when it disagrees with the models, and

    python -m agentkeel.schemagen

rewrites it (the generator lives above ``tools`` and ``memory``, whose tools it covers).
A tool missing from the file, or an unreadable file, falls back to generating.
"""

from __future__ import annotations

import json
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from agentkeel.core.tools import Tool

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
