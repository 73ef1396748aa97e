"""The agent a session's skills run against (a per-agent service: each child has its own)."""

from __future__ import annotations

from dataclasses import dataclass, field

from agentkeel.core.loop import Agent


@dataclass
class SkillHost:
    agent: Agent
    active_tools: tuple[str, ...] | None = None  # allowed-tools of the inline skill now running
    activated: set[str] = field(default_factory=set)  # path-activated skills already announced
