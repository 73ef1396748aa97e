"""Read-only views of a live session's setup: permission rules, hooks, skills, MCP servers.

Each is read from what the Runtime already built (its engine, settings layers and services), so
the web view shows what the session really runs with, not a second reading of the files.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentkeel.app.runtime import Runtime


def edit_shapes() -> dict[str, Any]:
    """Where each file-writing tool's (old, new) text is in its input (tools/views.py), so the web
    app draws a call's diff without naming a tool."""
    import msgspec

    from agentkeel.tools.views import EDIT_SHAPES

    return {name: msgspec.to_builtins(shape) for name, shape in EDIT_SHAPES.items()}


def session_config(rt: Runtime) -> dict[str, Any]:
    return {
        "model": rt.model.qualified,
        "cwd": str(rt.agent.context.cwd),
        "trusted": rt.trust.trusted,
        "permissions": permissions(rt),
        "hooks": hooks(rt),
        "skills": skills(rt),
        "mcp": mcp(rt),
        "tools": sorted(t.name for t in rt.agent.tools.list()),
        "warnings": list(rt.settings.warnings),
    }


def permissions(rt: Runtime) -> dict[str, Any]:
    engine = rt.permissions
    return {
        "mode": engine.mode,
        "working_directories": list(dict.fromkeys([engine.cwd, *engine.additional_dirs])),
        "rules": [{"kind": r.kind, "rule": r.text, "source": r.source, "scope": r.scope} for r in engine.rules],
    }


def hooks(rt: Runtime) -> list[dict[str, Any]]:
    """The hooks of every settings layer (each parsed once, when the layer was read), with their file."""
    rows: list[dict[str, Any]] = []
    for layer in rt.settings.layers:
        for spec in layer.hooks.hooks:
            h = spec.handler
            command = h.command if isinstance(h.command, str) else " ".join(h.command)
            rows.append(
                {
                    "event": spec.event,
                    "matcher": spec.matcher or "*",
                    "type": h.type,
                    "handler": (command or h.url or h.prompt or h.target)[:200],
                    "source": spec.source,
                    "scope": spec.scope,
                }
            )
    return rows


def skills(rt: Runtime) -> list[dict[str, Any]]:
    from agentkeel.skills.loader import SkillCatalog

    catalog = rt.agent.services.find(SkillCatalog)
    if catalog is None:
        return []
    return [
        {"name": s.name, "description": s.description, "source": s.source, "directory": str(s.directory)}
        for s in catalog
    ]


def mcp(rt: Runtime) -> list[dict[str, Any]]:
    from agentkeel.mcp.pool import McpPool

    pool = rt.agent.services.find(McpPool)
    return pool.status() if pool is not None else []
