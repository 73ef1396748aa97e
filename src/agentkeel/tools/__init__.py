"""keel's built-in tools, with Claude Code's names and input shapes."""

from __future__ import annotations

import functools
import importlib

from agentkeel.core.tools import NO_EFFECTS, Effects, Tool

# The permission rule families of Claude Code's grammar that keel's engine must name: a rule
# ``Read(...)`` governs every tool whose ``effects.rule`` is READ, ``Edit(...)`` every tool whose
# rule is EDIT (Write, Edit, MultiEdit, NotebookEdit...). The one place these names are spelled.
READ = "Read"
EDIT = "Edit"
SHELL = "Bash"
FETCH = "WebFetch"
AGENT = "Task"
AGENT_ALIAS = "Agent"  # Claude Code's newer name for Task: the same tool, the same rules
AGENT_TOOLS = (AGENT, AGENT_ALIAS)
SKILL = "Skill"
MCP_LIST = "ListMcpResourcesTool"  # Claude Code's names for the MCP resource tools (mcp/ builds them)
MCP_READ = "ReadMcpResourceTool"
# other names of a tool, read in rules and hook matchers as the tool's name: keel's former names (a
# settings file written for them) and Claude Code 2.1.328's names and aliases for keel's tools
RENAMED = {
    "ListMcpResources": MCP_LIST,
    "ReadMcpResource": MCP_READ,
    "TaskStop": "KillShell",  # Claude Code's name; KillShell and KillBash are its aliases
    "KillBash": "KillShell",
    "TaskOutput": "BashOutput",  # Claude Code's earlier names of the background output reader
    "BashOutputTool": "BashOutput",
    AGENT_ALIAS: AGENT,
}


def names_of(name: str) -> tuple[str, ...]:
    """Every name of the tool ``name`` names (``Agent`` -> Task, Agent; ``KillShell`` -> KillShell,
    TaskStop, KillBash): what a rule, a hook matcher or an agent's tool list may call it."""
    canonical = RENAMED.get(name, name)
    return (canonical, *(k for k, v in RENAMED.items() if v == canonical))


# Tools keel builds outside ``tools/`` (agents, skills, plan mode), as Claude Code's grammar and
# keel's pruning know them: for code that holds only a name (a rule check without the session's
# registry). Their ``Tool`` objects may declare more; these are what a name alone tells.
ELSEWHERE: dict[str, Effects] = {
    AGENT: Effects(rule=AGENT, named_by=("subagent_type",), protected=True, delegates=True),
    "Agent": Effects(rule=AGENT, named_by=("subagent_type",), protected=True, delegates=True),
    SKILL: Effects(rule=SKILL, named_by=("skill", "command"), protected=True),
}

# Built-ins registered (a call by name runs: an old transcript, an SDK caller, a hook's script) but
# not offered to the model unless an agent definition names them: Glob lists a directory
# (``dir/*``), and Edit, called once per change (several at once in parallel), does MultiEdit's job.
# Claude Code 2.1.328 offers neither; rules and hooks naming them keep working (MultiEdit is
# governed by ``Edit(...)`` rules, LS by ``Read(...)``). About 300 tokens a request.
NOT_OFFERED = frozenset({"LS", "MultiEdit"})

FACTORIES = (
    "agentkeel.tools.files:file_tools",
    "agentkeel.tools.shell:shell_tools",
    "agentkeel.tools.search:search_tools",
    "agentkeel.tools.web:web_tools",
    "agentkeel.tools.todo:todo_tools",
    "agentkeel.tools.notebook:notebook_tools",
)


def builtin_tools(*, shipped: bool = True) -> list[Tool]:
    """The built-in tools. ``shipped``: stand-ins built from ``tools/schemas.json`` that import
    their module at first use (see there); otherwise the real tools, built now.

    Made as a session starts: first the temporary files of a keel killed mid-write are removed."""
    from agentkeel.tools.writing import sweep

    sweep()
    if shipped:
        from agentkeel.tools.schemas import shipped_builtins

        lazy = shipped_builtins(FACTORIES)
        if lazy is not None:
            return _offered(lazy)
    return _offered(real_builtin_tools())


def _never() -> bool:
    return False


def _offered(tools: list[Tool]) -> list[Tool]:
    """The built-ins, those of NOT_OFFERED registered but not shown to the model."""
    from msgspec.structs import replace

    return [replace(t, is_enabled=_never) if t.name in NOT_OFFERED else t for t in tools]


def offered_when_named(tool: Tool) -> Tool:
    """``tool`` as an agent definition that names it has it: shown, even when NOT_OFFERED."""
    from msgspec.structs import replace

    return replace(tool, is_enabled=None) if tool.name in NOT_OFFERED and tool.is_enabled is _never else tool


def real_builtin_tools() -> list[Tool]:
    """The built-in tools, built now: each factory in FACTORIES, in order."""
    out: list[Tool] = []
    for entry in FACTORIES:
        module, _, factory = entry.partition(":")
        out += getattr(importlib.import_module(module), factory)()
    return out


def read_only_names() -> tuple[str, ...]:
    """The built-ins offered to the model that change nothing (a read-only agent's tools: Explore, Plan)."""
    return tuple(t.name for t in _described() if t.read_only and t.name not in NOT_OFFERED)


def file_reader_names() -> tuple[str, ...]:
    """The built-ins offered to the model that read or list files and change nothing (a hook agent's tools)."""
    return tuple(
        t.name for t in _described() if t.effects.touches_files and not t.effects.writes and t.name not in NOT_OFFERED
    )


def _described() -> list[Tool]:
    """The built-ins as their shipped stand-ins describe them (no tool module imported), else built."""
    from agentkeel.tools.schemas import shipped_builtins

    return shipped_builtins(FACTORIES) or real_builtin_tools()


def effects_of(name: str) -> Effects:
    """The effects the built-in tool ``name`` declares; none for a tool keel does not ship (MCP,
    plugin and SDK tools declare their own on the ``Tool``). For code that has a tool's name but
    not the session's registry (a Claude Code hook payload, a logged call, a permission check by
    name). Read from the shipped stand-ins: no tool module is imported."""
    return _builtin_effects().get(name) or ELSEWHERE.get(name, NO_EFFECTS)


def effects_for(tool: Tool | None, name: str) -> Effects:
    """What a call of ``tool`` (named ``name``) does: the tool's own declaration, else what keel
    knows of the name (a stand-in whose tool declared nothing, a check with no tool at hand)."""
    if tool is not None and tool.effects != NO_EFFECTS:
        return tool.effects
    return effects_of(name)


@functools.cache
def _builtin_effects() -> dict[str, Effects]:
    from agentkeel.tools.schemas import shipped_effects

    shipped = shipped_effects()
    if shipped is not None:
        return shipped
    return {tool.name: tool.effects for tool in real_builtin_tools()}
