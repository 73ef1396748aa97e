"""An agent whose frontmatter says ``tools: []`` or a blank ``tools:`` runs with no tools, as under
Claude Code 2.1.328; an agent without the key has every tool.

Recorded (2026-11-28): ``.claude/agents/empty.md`` (``tools: []``), ``blank.md`` (``tools:``) and
``full.md`` (no key); the model calls ``Agent`` with each ``subagent_type``::

    ANTHROPIC_BASE_URL=http://127.0.0.1:PORT ANTHROPIC_API_KEY=sk-ant-fake-0000 HOME=$(mktemp -d) \\
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 claude --model claude-sonnet-4-5 -p go --allowedTools Agent,Read

The subagent's request offered no tools for ``empty`` and ``blank`` and eight for ``full`` (its agent
listing nevertheless says "(Tools: All tools)" for all three; keel says "(Tools: no tools)").
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentkeel.models.fake.server import FakeLLMServer
from kit import KeelRun, wire_env

Keel = Callable[..., KeelRun]
FakeLLM = Callable[[Any], FakeLLMServer]


@pytest.mark.parametrize(
    ("agent", "line", "has_tools"), [("empty", "tools: []", False), ("blank", "tools:", False), ("full", "", True)]
)
def test_an_empty_tools_list_grants_none(
    agent: str, line: str, has_tools: bool, project: Path, fake_llm: FakeLLM, keel: Keel
) -> None:
    agents = project / ".claude" / "agents"
    agents.mkdir(parents=True)
    (agents / f"{agent}.md").write_text(
        f"---\nname: {agent}\ndescription: a test agent\n{line}\n---\nYou are {agent}.\n"
    )
    task = {"description": "x", "prompt": "say hi", "subagent_type": agent}
    server = fake_llm({"steps": [{"tool_calls": [{"name": "Task", "input": task}]}, "hi from sub", "done"]})
    run = keel("-p", "go", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    [child] = [r["body"] for r in server.cursor.requests if f"You are {agent}." in str(r["body"].get("system"))]
    assert bool(child.get("tools")) is has_tools
    listing = json.dumps(server.cursor.requests[0]["body"])  # the agent listing: wherever the request carries it
    assert (f"- {agent}: a test agent (Tools: no tools)" in listing) is not has_tools
