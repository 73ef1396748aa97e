"""Agent definitions: the built-ins and Markdown files with YAML frontmatter.

Sources, lowest precedence first (a later one with the same name wins): built-ins, plugins
(namespaced ``plugin:name``), ``~/.claude/agents``, ``~/.keel/agents``, ``.claude/agents``,
``.keel/agents``. Frontmatter keys are Claude Code's: name, description, tools,
disallowedTools, model, permissionMode, maxTurns, skills, hooks, isolation.

As in Claude Code 2.1.328, a user or project file is an agent only with both ``name`` and
``description`` (a README, or keel's own per-agent ``.keel/agents/<type>/MEMORY.md``, is not; one
with frontmatter that lacks either gets a warning); a plugin's agent may leave out ``name`` (its
file name is used).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from agentkeel.internal.frontmatter import FrontmatterError, flag, names, read, text
from agentkeel.tools import read_only_names

log = logging.getLogger(__name__)

PERMISSION_MODES = ("default", "acceptEdits", "plan", "bypassPermissions", "dontAsk")
READ_ONLY_TOOLS = read_only_names()  # the built-ins that change nothing, as they declare


class AgentDef(msgspec.Struct, frozen=True):
    name: str
    description: str
    prompt: str
    tools: tuple[str, ...] | None = None  # None: every tool of the parent
    disallowed_tools: tuple[str, ...] = ()
    model: str | None = None  # None or "inherit": the parent's model
    permission_mode: str | None = None
    max_turns: int | None = None
    skills: tuple[str, ...] = ()
    hooks: dict[str, Any] = msgspec.field(default_factory=dict)
    isolation: str | None = None  # "worktree"
    background: bool = False
    source: str = "built-in"  # built-in | user | project | plugin:<name> | sdk
    path: Path | None = None

    def summary(self) -> str:
        tools = "All tools" if self.tools is None else ", ".join(self.tools) or "no tools"
        return f"- {self.name}: {self.description} (Tools: {tools})"


GENERAL_PURPOSE = AgentDef(
    "general-purpose",
    "General-purpose agent for researching complex questions, searching for code, and executing multi-step "
    "tasks. When you are searching for a keyword or file and are not confident that you will find the right "
    "match in the first few tries use this agent to perform the search for you.",
    "You are an agent for keel, an AI coding agent. Given the user's message, use the tools available to complete "
    "the task. Do what has been asked; nothing more, nothing less. When you complete the task, respond with a "
    "concise report of what was done and what you found: the caller relays it to the user. Share relevant "
    "file paths (absolute) and code snippets only when they matter.",
)
EXPLORE = AgentDef(
    "Explore",
    "Fast agent specialized for exploring codebases: find files by patterns, search code for keywords, answer "
    "questions about the codebase. Read-only.",
    "You are a file search specialist for keel. You explore codebases and answer questions about them. You are "
    "in a READ-ONLY mode: you cannot create, modify or delete files. Use Glob, Grep, LS and Read; report what you "
    "found with absolute file paths.",
    tools=READ_ONLY_TOOLS,
    permission_mode="plan",
)
PLAN = AgentDef(
    "Plan",
    "Software architect agent for designing implementation plans: returns step-by-step plans, identifies critical "
    "files and considers trade-offs. Read-only.",
    "You are a software architect and planning specialist for keel. Explore the codebase (READ-ONLY: no file "
    "changes) and design an implementation plan: the steps, the critical files, the risks and trade-offs.",
    tools=READ_ONLY_TOOLS,
    permission_mode="plan",
)
BUILTIN_AGENTS = (GENERAL_PURPOSE, EXPLORE, PLAN)


class AgentCatalog(msgspec.Struct):
    agents: dict[str, AgentDef] = msgspec.field(default_factory=dict)
    warnings: list[str] = msgspec.field(default_factory=list)

    def add(self, agent: AgentDef) -> None:
        self.agents[agent.name] = agent

    def get(self, name: str) -> AgentDef | None:
        """By exact name, else case-insensitively (``explore`` is ``Explore``)."""
        found = self.agents.get(name)
        if found is not None:
            return found
        folded = [a for n, a in self.agents.items() if n.lower() == name.lower()]
        return folded[0] if len(folded) == 1 else None

    def names(self) -> list[str]:
        return list(self.agents)

    def __iter__(self) -> Any:
        return iter(self.agents.values())


def _int(value: Any, path: Path, key: str, warnings: list[str]) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        warnings.append(f"{path}: {key} must be a whole number >= 1; ignored")
        return None
    return value


MEMORY_FILES = ("MEMORY.md", "MEMORY.local.md")  # per-agent memory kept beside the definitions


def agent_from_file(
    path: Path, source: str, namespace: str = "", *, needs_name: bool = False
) -> tuple[AgentDef | None, list[str]]:
    """``needs_name``: a user or project file, which Claude Code loads only with a ``name`` and a
    ``description``."""
    warnings: list[str] = []
    try:
        doc = read(path)
    except FrontmatterError as e:
        return None, [str(e)]
    meta = doc.meta
    if needs_name and not (text(meta.get("name")).strip() and text(meta.get("description")).strip()):
        if not meta:  # no frontmatter: a README or a memory file, not meant as an agent
            return None, []
        return None, [f"{path}: not an agent without both 'name' and 'description' in its frontmatter; add them"]
    name = text(meta.get("name")) or path.stem
    if namespace:
        name = f"{namespace}:{name}"
    description = text(meta.get("description")).strip()  # a folded ``>`` value ends in a newline
    if not description:
        warnings.append(f"{path}: no description in the frontmatter; the model cannot tell when to use '{name}'")
    mode = meta.get("permissionMode")
    if mode is not None and mode not in PERMISSION_MODES:
        warnings.append(f"{path}: permissionMode must be one of {', '.join(PERMISSION_MODES)}; ignored")
        mode = None
    isolation = meta.get("isolation")
    if isolation is not None and isolation != "worktree":
        warnings.append(f"{path}: isolation must be 'worktree'; ignored")
        isolation = None
    tools = names(meta.get("tools"))
    if tools is not None and tools in (["*"], ["all"]):
        tools = None
    elif "tools" in meta and not [t for t in tools or () if t.strip()]:
        tools = []  # ``tools: []`` or a blank ``tools:``: no tools, as Claude Code 2.1.328 runs the agent
    model = text(meta.get("model")) or None
    raw_hooks = meta.get("hooks")
    hooks: dict[str, Any] = dict(raw_hooks) if isinstance(raw_hooks, dict) else {}
    agent = AgentDef(
        name=name,
        description=description or name,
        prompt=doc.body,
        tools=tuple(tools) if tools is not None else None,
        disallowed_tools=tuple(names(meta.get("disallowedTools")) or ()),
        model=None if model == "inherit" else model,
        permission_mode=mode,
        max_turns=_int(meta.get("maxTurns"), path, "maxTurns", warnings),
        skills=tuple(names(meta.get("skills")) or ()),
        hooks=hooks,
        isolation=isolation,
        background=flag(meta.get("background")),
        source=source,
        path=path,
    )
    return agent, warnings


def agent_from_mapping(name: str, spec: Any) -> tuple[AgentDef | None, str]:
    """An agent given in code (the SDK's ``agents={"name": {"description", "prompt", "tools", "model"}}``)."""
    if not isinstance(spec, dict) or not isinstance(spec.get("prompt", ""), str):
        return None, f"agents.{name}: needs an object with 'description' and 'prompt'"
    tools = names(spec.get("tools"))
    model = text(spec.get("model")) or None
    return (
        AgentDef(
            name=name,
            description=text(spec.get("description")) or name,
            prompt=str(spec.get("prompt", "")),
            tools=tuple(tools) if tools is not None else None,
            disallowed_tools=tuple(names(spec.get("disallowedTools")) or ()),
            model=None if model == "inherit" else model,
            permission_mode=spec.get("permissionMode") if spec.get("permissionMode") in PERMISSION_MODES else None,
            max_turns=spec.get("maxTurns") if isinstance(spec.get("maxTurns"), int) else None,
            skills=tuple(names(spec.get("skills")) or ()),
            isolation="worktree" if spec.get("isolation") == "worktree" else None,
            source="sdk",
        ),
        "",
    )


def agent_dirs(cwd: Path, home: Path) -> list[tuple[Path, str]]:
    return [
        (home / ".claude" / "agents", "user"),
        (home / ".keel" / "agents", "user"),
        (cwd / ".claude" / "agents", "project"),
        (cwd / ".keel" / "agents", "project"),
    ]


def load_agents(
    cwd: Path,
    home: Path,
    *,
    plugins: Sequence[tuple[str, Path]] = (),
    extra: Sequence[AgentDef] = (),
    scopes: frozenset[str] | None = None,
) -> AgentCatalog:
    """Every agent definition this session can use. ``plugins``: (plugin name, its agents dir);
    ``scopes``: read only the user's and/or the project's folders (``--setting-sources``)."""
    catalog = AgentCatalog()
    for agent in BUILTIN_AGENTS:
        catalog.add(agent)
    sources: list[tuple[Path, str, str]] = [(d, f"plugin:{n}", n) for n, d in plugins]
    sources += [(d, s, "") for d, s in agent_dirs(cwd, home) if scopes is None or s in scopes]
    for directory, source, namespace in sources:
        if directory.is_file() and directory.suffix == ".md":  # a plugin manifest may list one file
            files = [directory]
        elif directory.is_dir():
            files = sorted(directory.rglob("*.md"))
        else:
            continue
        for path in files:
            if not namespace and path.name in MEMORY_FILES:
                continue
            found, warnings = agent_from_file(path, source, namespace, needs_name=not namespace)
            catalog.warnings += warnings
            if found is not None:
                catalog.add(found)
    for agent in extra:
        catalog.add(agent)
    return catalog
