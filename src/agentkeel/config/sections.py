"""The lenient sections of one settings layer, parsed once when the layer is read.

Claude Code reads these keys without refusing the file: a value of the wrong shape is ignored
(MCP approval, plugins) or reported entry by entry by its reader (MCP servers, whose ``${VAR}``
expansion needs the session's environment). The strict keys are the :class:`~agentkeel.config.settings.Settings`
Struct; ``hooks`` is :mod:`agentkeel.config.hooks`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec


class McpSection(msgspec.Struct, frozen=True):
    """``mcpServers`` (as written: each entry is checked, and expanded, by agentkeel.mcp.config)
    and the per-server approval of a project's ``.mcp.json`` servers."""

    declared: bool = False  # the layer has an ``mcpServers`` key
    servers: Any = None  # its value, as written
    enable_all: bool | None = None  # enableAllProjectMcpServers (None: not said)
    enabled: tuple[str, ...] = ()  # enabledMcpjsonServers
    disabled: tuple[str, ...] = ()  # disabledMcpjsonServers


class PluginSection(msgspec.Struct, frozen=True):
    """``enabledPlugins`` (``{"name@marketplace": true}``) and the directory marketplaces
    ``extraKnownMarketplaces`` declares (relative paths resolved against the settings file's folder)."""

    enabled: dict[str, bool] = msgspec.field(default_factory=dict)
    marketplaces: dict[str, Path] = msgspec.field(default_factory=dict)


def _names(value: object) -> tuple[str, ...]:
    return tuple(n for n in value if isinstance(n, str)) if isinstance(value, list) else ()


def mcp_section(data: Mapping[str, Any]) -> McpSection:
    enable_all = data.get("enableAllProjectMcpServers")
    return McpSection(
        declared="mcpServers" in data,
        servers=data.get("mcpServers"),
        enable_all=enable_all if isinstance(enable_all, bool) else None,
        enabled=_names(data.get("enabledMcpjsonServers")),
        disabled=_names(data.get("disabledMcpjsonServers")),
    )


def plugin_section(data: Mapping[str, Any], path: Path) -> PluginSection:
    enabled = data.get("enabledPlugins")
    markets: dict[str, Path] = {}
    known = data.get("extraKnownMarketplaces")
    for name, entry in known.items() if isinstance(known, dict) else ():
        src = entry.get("source") if isinstance(entry, dict) else None
        if isinstance(src, dict) and src.get("source") in ("directory", "local") and src.get("path"):
            where = Path(str(src["path"])).expanduser()
            markets[str(name)] = where if where.is_absolute() else (path.parent / where).resolve()
    return PluginSection(
        enabled={str(k): bool(v) for k, v in enabled.items()} if isinstance(enabled, dict) else {},
        marketplaces=markets,
    )
