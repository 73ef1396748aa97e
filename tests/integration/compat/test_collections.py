"""keel's agent and skill listings on four public Claude Code collections equal Claude Code
2.1.328's, line for line and in order (issue #33: the real-configuration comparison).

The fixture (tests/data/compat/collections, built by its vendor.py from the MIT-licensed
VoltAgent/awesome-claude-code-subagents, wshobson/agents, davila7/claude-code-templates and
obra/superpowers): 158 project agents, 346 project commands in 40 folders, 48 user skills and a
folder of 92 plugins (202 agents, 105 commands, 209 skills). Claude Code's side was recorded once
(tests/data/compat/record_claude_collections.py)::

    ANTHROPIC_BASE_URL=http://127.0.0.1:PORT ANTHROPIC_API_KEY=sk-ant-fake-0000 HOME=FIXTURE/home \\
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 [SLASH_COMMAND_TOOL_CHAR_BUDGET=1000000] \\
    claude --model claude-sonnet-4-5 -p hello --allowedTools Read --plugin-dir FIXTURE/plugins

With the default budget (8,000 characters on a 200k-token model) Claude Code listed all 596 skills
and commands by name only; with the large budget, each with its description. It listed 359 agents
(its own left out) by name, ignoring case. What this found in keel, all fixed: plugin skills listed
first (Claude Code: user skills, project skills, commands, plugin commands, plugin skills); no
listing budget (131,000 characters of descriptions on a large set-up); plugin commands without a
``description`` offered (Claude Code leaves them out); a command's first line kept its ``#``;
``when_to_use`` joined with a space (Claude Code: `` - ``); a skill whose frontmatter name differs
from its folder not shown as ``folder (name)``; a folded (``>``) agent description kept its final
newline, which split the listing line; agents not sorted by name; a project skill or command hid
the user's of the same name (Claude Code keeps the user's).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from agentkeel.models.fake.server import FakeLLMServer
from integration.compat.collections import BUDGETS, MODEL, PROMPT, RECORDING, build, comparable, listings
from kit import KeelRun, wire_env

Start = Callable[[Any], FakeLLMServer]
Keel = Callable[..., KeelRun]


@pytest.mark.parametrize("budget", list(BUDGETS))
def test_listings_equal_claude_codes(budget: str, tmp_path: Any, fake_llm: Start, keel: Keel) -> None:
    claude = json.loads(RECORDING.read_text(encoding="utf-8"))["runs"][budget]
    project, home, plugins = build(tmp_path / "fixture")
    server = fake_llm({"steps": ["ok"]})
    env = {**wire_env(server, "anthropic"), "HOME": str(home)}
    if BUDGETS[budget] is not None:
        env["SLASH_COMMAND_TOOL_CHAR_BUDGET"] = str(BUDGETS[budget])
    args = ("--model", MODEL, "-p", PROMPT, "--allowedTools", "Read", "--plugin-dir", str(plugins))
    run = keel(*args, cwd=project, env=env)
    assert run.code == 0, run.stderr
    ours = listings(server.cursor.requests[0]["body"])
    assert len(ours["skills"]) > 500 and len(ours["agents"]) > 300  # the fixture was read, not skipped
    assert comparable(ours["agents"]) == comparable(claude["agents"])
    assert comparable(ours["skills"]) == comparable(claude["skills"])
