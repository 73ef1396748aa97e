"""Agents as real projects write them, through the keel CLI against the scripted model (issue #33,
root causes 12 and 14): an orchestrator whose ``tools:`` grants ``Agent`` runs its own subagents,
down to Claude Code's depth; a read-only validator (``disallowedTools: Write, Edit``) has no tool
that writes files.

The fixtures are faithful minimal equivalents of the team agents of disler/claude-code-hooks-mastery
(``.claude/agents/team/builder.md``, ``validator.md``: the repository has no licence file, so
nothing is copied): markdown bodies, ``model: opus``, ``color:``, a comma-separated tool list.

Claude Code 2.1.328 was run on the same definitions (/work/shared/tools/fakellm.py with FAKELLM_PLAN
scripts keyed on each conversation's first user message, every request body recorded)::

    ANTHROPIC_BASE_URL=http://127.0.0.1:PORT ANTHROPIC_API_KEY=sk-ant-fake-0000 HOME=$(mktemp -d) \\
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 claude -p 'MAIN go' --allowedTools Bash,Agent
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkeel.models.fake.server import FakeLLMServer
from agentkeel.tools import AGENT_TOOLS, effects_of
from agents_fixtures import metas, result_text, tool_names, tool_results
from kit import KeelRun, wire_env

Start = Callable[[Any], FakeLLMServer]
Keel = Callable[..., KeelRun]

LEAD_DESCRIPTION = (
    "Coordinates a build. Use when a feature needs several workers. Examples: <example>Context: the user"
    ' wants a feature built. user: "build the greeting" assistant: "I\'ll use the team-lead agent"</example>'
)
BUILDER_DESCRIPTION = (
    "Generic engineering agent that executes ONE task at a time. Use when work needs to be done - writing"
    " code, creating files, implementing features."
)
VALIDATOR_DESCRIPTION = (
    "Read-only validation agent that checks if a task was completed successfully. Use after a builder"
    " finishes to verify work meets acceptance criteria."
)

TEAM_LEAD = f"""---
name: team-lead
description: {LEAD_DESCRIPTION}
model: opus
tools: Agent, Read, Bash
color: blue
---

# Team Lead

## Purpose

You plan the work and hand each task to ONE `builder` agent with the Agent tool. You do not write code.
"""

BUILDER = f"""---
name: builder
description: {BUILDER_DESCRIPTION}
model: opus
tools: Read, Write, Bash
color: cyan
---

# Builder

You execute ONE task. Do NOT spawn other agents or coordinate work. You are a worker, not a manager.
"""

VALIDATOR = f"""---
name: validator
description: {VALIDATOR_DESCRIPTION}
model: opus
disallowedTools: Write, Edit
color: yellow
---

# Validator

## Purpose

You are a read-only validation agent. You inspect, analyze, and report - you do NOT modify anything.

## Report

```
**Status**: PASS | FAIL
```
"""

DEEP = """---
name: deep
description: Splits a task and delegates the rest to another deep agent.
tools: Agent, Bash
---
Delegate what remains to a `deep` agent.
"""


def _team(project: Path) -> None:
    team = project / ".claude" / "agents" / "team"
    team.mkdir(parents=True)
    (team / "team-lead.md").write_text(TEAM_LEAD)
    (team / "builder.md").write_text(BUILDER)
    (team / "validator.md").write_text(VALIDATOR)
    (project / ".claude" / "agents" / "deep.md").write_text(DEEP)


def _agent(subagent: str, prompt: str) -> dict[str, Any]:
    return {"name": "Agent", "input": {"subagent_type": subagent, "description": f"run {subagent}", "prompt": prompt}}


def _can_delegate(body: dict[str, Any]) -> bool:
    """Is the agent tool offered? keel shows it as ``Task`` (``Agent``, Claude Code's name, runs too)."""
    return bool(set(tool_names(body)) & set(AGENT_TOOLS))


def _home(project: Path) -> Path:
    return project.parent / "keelhome"


def test_an_agent_whose_tools_grant_agent_runs_its_own_subagent(project: Path, fake_llm: Start, keel: Keel) -> None:
    """Claude Code: team-lead's request offers ``['Agent', 'Bash']`` (also with ``tools: Task, Bash``,
    and every tool with no ``tools:`` line); its Agent call runs builder (offered ``['Bash']``) to
    the end, and team-lead gets builder's report ("[Subagent hand-back] ..."). keel offered the
    team-lead no Agent tool (children could not nest by default)."""
    _team(project)
    hello = project / "hello.py"
    write = {"name": "Write", "input": {"file_path": str(hello), "content": "print('hello')\n"}}
    server = fake_llm(
        [
            {"tool_calls": [_agent("team-lead", "Build the greeting feature")]},
            {"tool_calls": [_agent("builder", "Create hello.py that prints hello")]},
            {"tool_calls": [write]},
            "BUILT hello.py",
            "team report: builder created hello.py",
            "all done",
        ]
    )
    run = keel("-p", "build the greeting", "--permission-mode", "acceptEdits", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    bodies = [r["body"] for r in server.cursor.requests]
    lead, builder = bodies[1], bodies[2]
    assert _can_delegate(lead), tool_names(lead)
    assert set(tool_names(builder)) == {"Read", "Write", "Bash"}, tool_names(builder)
    assert hello.read_text() == "print('hello')\n"
    [handback] = tool_results(bodies[4])
    assert "BUILT hello.py" in result_text(handback) and not handback.get("is_error"), handback
    assert sorted(m["depth"] for m in metas(_home(project))) == [1, 2]
    assert sorted(m["agent_type"] for m in metas(_home(project))) == ["builder", "team-lead"]


def test_agents_nest_three_levels_deep_as_in_claude_code(project: Path, fake_llm: Start, keel: Keel) -> None:
    """Claude Code: a ``deep`` agent (``tools: Agent, Bash``) that always delegates to ``deep``:
    levels 1 and 2 are offered ``['Agent', 'Bash']``, level 3 only ``['Bash']``, and its Agent call
    gets "No such tool available: Agent. Agent is not among the tools available here."; the reports
    then flow back up. keel keeps that limit (KEEL_SUBAGENT_MAX_DEPTH, default 3)."""
    _team(project)
    server = fake_llm(
        [
            {"tool_calls": [_agent("deep", "LEVEL-1")]},
            {"tool_calls": [_agent("deep", "LEVEL-2")]},
            {"tool_calls": [_agent("deep", "LEVEL-3")]},
            {"tool_calls": [_agent("deep", "LEVEL-4")]},
            "level 3 done",
            "level 2 done",
            "level 1 done",
            "main done",
        ]
    )
    run = keel("-p", "go deep", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    bodies = [r["body"] for r in server.cursor.requests]
    assert [_can_delegate(b) for b in bodies[1:4]] == [True, True, False]
    assert set(tool_names(bodies[3])) == {"Bash"}
    [refused] = tool_results(bodies[4])
    assert refused.get("is_error") and "Agent" in result_text(refused), refused
    assert sorted(m["depth"] for m in metas(_home(project))) == [1, 2, 3]
    assert "main done" in run.stdout


def test_a_read_only_validator_has_no_tool_that_writes_files(project: Path, fake_llm: Start, keel: Keel) -> None:
    """Root cause 12. Claude Code, ``claude -p 'MAIN go' --permission-mode acceptEdits --allowedTools
    Agent``: the validator is offered ``['Agent', 'Bash', 'Read', 'Skill', ...]``; its Write and Edit
    get "No such tool available: Write. Write is not among the tools available here", MultiEdit "No
    such tool available" (2.1.328 has none), but NotebookEdit *ran* (the real validator.md lists
    NotebookEdit for that reason). keel acts on what a tool does: none of the four writes."""
    _team(project)
    app = project / "app.py"
    app.write_text("x = 1\n")
    cell = {"cell_type": "code", "id": "c1", "metadata": {}, "source": ["x=1"], "outputs": [], "execution_count": None}
    notebook = project / "n.ipynb"
    notebook.write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    before = notebook.read_text()
    edits = [{"old_string": "x = 1", "new_string": "x = 3"}]
    writes = [
        {"name": "Write", "input": {"file_path": str(project / "new.py"), "content": "y = 2\n"}},
        {"name": "Edit", "input": {"file_path": str(app), "old_string": "x = 1", "new_string": "x = 2"}},
        {"name": "MultiEdit", "input": {"file_path": str(app), "edits": edits}},
        {"name": "NotebookEdit", "input": {"notebook_path": str(notebook), "cell_id": "c1", "new_source": "x=9"}},
    ]
    reads = [
        {"name": "Read", "input": {"file_path": str(app)}},
        {"name": "Read", "input": {"file_path": str(notebook)}},
    ]
    server = fake_llm(
        [
            {"tool_calls": [_agent("validator", "VALIDATE the change to app.py")]},
            {"tool_calls": reads},
            {"tool_calls": writes},
            "**Status**: FAIL",
            "validated",
        ]
    )
    run = keel("-p", "validate", "--permission-mode", "acceptEdits", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    bodies = [r["body"] for r in server.cursor.requests]
    offered = tool_names(bodies[1])
    assert "Read" in offered and "Bash" in offered, offered
    assert not [name for name in offered if effects_of(name).writes], offered
    results = tool_results(bodies[3])[-4:]
    assert len(results) == 4 and all(r.get("is_error") for r in results), results
    assert app.read_text() == "x = 1\n" and notebook.read_text() == before
    assert not (project / "new.py").exists()


def test_a_validator_cannot_write_through_an_agent_it_starts(project: Path, fake_llm: Start, keel: Keel) -> None:
    """Claude Code, an outer agent with ``disallowedTools: Write`` (and no ``tools:``) starting an
    inner one with ``tools: Read, Write, Bash``: the inner is offered Write and the file is
    written. keel withholds what an agent's ``disallowedTools`` took away from every agent below it
    (a deliberate difference: a restriction is not undone by delegating)."""
    _team(project)
    target = project / "written.txt"
    write = {"name": "Write", "input": {"file_path": str(target), "content": "x\n"}}
    server = fake_llm(
        [
            {"tool_calls": [_agent("validator", "VALIDATE and fix")]},
            {"tool_calls": [_agent("builder", "write the fix")]},
            {"tool_calls": [write]},
            "builder done",
            "validator done",
            "ok",
        ]
    )
    run = keel("-p", "validate", "--permission-mode", "acceptEdits", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    bodies = [r["body"] for r in server.cursor.requests]
    assert _can_delegate(bodies[1]), tool_names(bodies[1])  # the validator has no tools: line, so Agent
    assert set(tool_names(bodies[2])) == {"Read", "Bash"}, tool_names(bodies[2])
    assert not target.exists()


def test_the_sessions_environment_sets_the_subagent_limits(tmp_path: Path) -> None:
    """KEEL_SUBAGENT_MAX_DEPTH / _CONCURRENCY come from the environment the session is given
    (RuntimeOptions.env), not from keel's own process environment."""
    import asyncio

    from agentkeel import Runtime, RuntimeOptions
    from agentkeel.agents.spawner import SubagentSpawner

    (tmp_path / "p").mkdir()
    script = tmp_path / "s.json"
    script.write_text('{"steps": ["done"]}')
    env = {"HOME": str(tmp_path), "KEEL_HOME": str(tmp_path / "kh"), "PATH": "/usr/bin:/bin"}
    env |= {"KEEL_SUBAGENT_MAX_DEPTH": "1", "KEEL_SUBAGENT_CONCURRENCY": "1"}

    async def limits() -> tuple[int, int]:
        rt = Runtime.create(RuntimeOptions(cwd=tmp_path / "p", model=f"scripted:{script}", env=env))
        try:
            spawner = rt.agent.services.find(SubagentSpawner)
            assert spawner is not None
            return spawner.max_depth, spawner.concurrency
        finally:
            await rt.aclose()

    assert asyncio.run(limits()) == (1, 1)
