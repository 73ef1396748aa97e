"""Claude Code plugins: a folder with ``.claude-plugin/plugin.json`` and its commands, agents,
skills, hooks and MCP servers."""

from agentkeel.plugins.loader import Plugin, find_plugins

__all__ = ["Plugin", "find_plugins"]
