"""A user's skill or command and a project's of the same name: Claude Code 2.1.328 keeps the user's.

Recorded (2026-11-28) with ``~/.claude/skills/dup/SKILL.md`` ("USER skill"),
``.claude/skills/dup/SKILL.md`` ("PROJECT skill"), ``~/.claude/commands/cdup.md`` ("USER cmd") and
``.claude/commands/cdup.md`` ("PROJECT cmd")::

    ANTHROPIC_BASE_URL=http://127.0.0.1:PORT ANTHROPIC_API_KEY=sk-ant-fake-0000 HOME=HOME \\
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 claude --model claude-sonnet-4-5 -p hello --allowedTools Read

Claude Code listed ``- dup: USER skill`` and ``- cdup: USER cmd``; keel listed the project's.
The user typing ``/dup`` runs the one listed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkeel.models.fake.server import FakeLLMServer
from integration.compat.collections import listings
from kit import KeelRun, wire_env

Start = Callable[[Any], FakeLLMServer]
Keel = Callable[..., KeelRun]


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_the_users_skill_and_command_win(project: Path, tmp_path: Path, fake_llm: Start, keel: Keel) -> None:
    home = tmp_path / "home"
    _write(home / ".claude/skills/dup/SKILL.md", "---\nname: dup\ndescription: USER skill\n---\nuser body\n")
    _write(project / ".claude/skills/dup/SKILL.md", "---\nname: dup\ndescription: PROJECT skill\n---\nproject body\n")
    _write(home / ".claude/commands/cdup.md", "---\ndescription: USER cmd\n---\nuser command\n")
    _write(project / ".claude/commands/cdup.md", "---\ndescription: PROJECT cmd\n---\nproject command\n")
    server = fake_llm({"steps": ["ok", "ok"]})
    env = {**wire_env(server, "anthropic"), "HOME": str(home)}
    run = keel("-p", "hello", env=env)
    assert run.code == 0, run.stderr
    assert listings(server.cursor.requests[0]["body"])["skills"] == ["- dup: USER skill", "- cdup: USER cmd"]
    run = keel("-p", "/dup", env=env)
    assert run.code == 0, run.stderr
    sent = str(server.cursor.requests[-1]["body"]["messages"])
    assert "user body" in sent and "project body" not in sent
