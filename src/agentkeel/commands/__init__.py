"""Slash commands: one registry for built-ins, custom commands, skills, plugin commands and MCP prompts."""

from agentkeel.commands.registry import Command, CommandRegistry, Routed

__all__ = ["Command", "CommandRegistry", "Routed"]
