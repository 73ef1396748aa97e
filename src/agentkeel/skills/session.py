"""The agent a session's skills run against (a per-agent service: each child has its own)."""

from __future__ import annotations

import msgspec

from agentkeel.core.loop import Agent


class SkillHost(msgspec.Struct):
    agent: Agent
    active_tools: tuple[str, ...] | None = None  # allowed-tools of the inline skill now running
    activated: set[str] = msgspec.field(default_factory=set)  # path-activated skills already announced
