"""``keel mem mcp``: the memory's three disclosure layers as an MCP server over stdio."""

from __future__ import annotations

import json
from typing import Any

from agentkeel.memory.store import MemoryStore


def serve(store: MemoryStore, project: str | None) -> None:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("keel-memory")

    @server.tool()
    def search(query: str, limit: int = 10, type: str | None = None, all_projects: bool = False) -> str:
        """Search keel's memory; returns ids with one-line summaries (layer 1)."""
        hits = store.search(query, k=max(1, min(limit, 50)), type=type, project=None if all_projects else project)
        return json.dumps([h.to_dict() for h in hits], ensure_ascii=False)

    @server.tool()
    def timeline(id: str, before: int = 3, after: int = 3) -> str:
        """What happened around a memory id in its session (layer 2)."""
        return json.dumps([h.to_dict() for h in store.timeline(id, before, after)], ensure_ascii=False)

    @server.tool()
    def get(ids: list[str]) -> str:
        """Full entries by id (layer 3)."""
        entries: list[dict[str, Any]] = [e.to_dict() for e in store.get(ids[:20], budget_tokens=8000)]
        return json.dumps(entries, ensure_ascii=False)

    server.run("stdio")
