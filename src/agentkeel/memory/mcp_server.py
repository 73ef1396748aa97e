"""``keel mem mcp``: the memory's three disclosure layers as an MCP server over stdio."""

from __future__ import annotations

import json
from typing import Any

from agentkeel.memory.store import MemoryStore


def serve(store: MemoryStore, project: str | None, cross_project: bool = False) -> None:
    """The tools answer for ``project``; other projects' entries only with ``cross_project``
    (``memory.crossProject``), as the session's memory tools (``tools.memory_tools``)."""
    from mcp.server.mcpserver import MCPServer

    from agentkeel.memory.tools import CROSS_PROJECT_OFF

    def mine(projects: list[str]) -> bool:
        return cross_project or project is None or all(p == project for p in projects)

    server = MCPServer("keel-memory")

    @server.tool()
    def search(query: str, limit: int = 10, type: str | None = None, all_projects: bool = False) -> str:
        """Search keel's memory; returns ids with one-line summaries (layer 1)."""
        if all_projects and not mine([""]):
            return json.dumps({"error": CROSS_PROJECT_OFF})
        hits = store.search(query, k=max(1, min(limit, 50)), type=type, project=None if all_projects else project)
        return json.dumps([h.to_dict() for h in hits], ensure_ascii=False)

    @server.tool()
    def timeline(id: str, before: int = 3, after: int = 3) -> str:
        """What happened around a memory id in its session (layer 2)."""
        hits = store.timeline(id, before, after)
        if not mine([h.project for h in hits]):
            return json.dumps({"error": f"{id} belongs to another project. {CROSS_PROJECT_OFF}"})
        return json.dumps([h.to_dict() for h in hits], ensure_ascii=False)

    @server.tool()
    def get(ids: list[str]) -> str:
        """Full entries by id (layer 3)."""
        allowed = [e.id for e in store.get(ids[:20]) if mine([e.project])]
        entries: list[dict[str, Any]] = [e.to_dict() for e in store.get(allowed, budget_tokens=8000)] if allowed else []
        return json.dumps(entries, ensure_ascii=False)

    server.run("stdio")
