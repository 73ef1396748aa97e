"""Subagents: the Task tool, agent definitions, background agents, worktrees and the coordinator."""

from agentkeel.agents.defs import AgentCatalog, AgentDef, load_agents
from agentkeel.agents.spawner import SubagentResult, SubagentSpawner

__all__ = ["AgentCatalog", "AgentDef", "SubagentResult", "SubagentSpawner", "load_agents"]
