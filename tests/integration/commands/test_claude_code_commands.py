"""Command files as Claude Code 2.1.328 treats them (issue #33, root causes 4, 9, 13, 7 and
``user-invocable: false``), each checked against a recorded run of the real Claude Code.

The fixture is shaped like the commands people publish (the official ``commit-commands``
plugin's /commit: ``allowed-tools: Bash(git add:*), Bash(git status:*), Bash(git commit:*)`` and
!`git status` context lines; a namespaced ``frontend/build.md``; a command with no frontmatter),
written here in our own words (that plugin is not under an open licence).

Claude Code was run as::

    ANTHROPIC_BASE_URL=http://127.0.0.1:PORT ANTHROPIC_API_KEY=sk-ant-fake-0000 HOME=$(mktemp -d) \\
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 claude -p "<prompt>" --allowedTools Read

against ``keel dev fake-llm --script S.json --port PORT`` in a git project holding these files,
and its request bodies read back from ``GET /_keel/requests``.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentkeel.commands.builtins import builtin_commands
from agentkeel.commands.custom import load_commands
from agentkeel.commands.registry import CommandRegistry
from agentkeel.models.fake.server import FakeLLMServer
from agents_fixtures import first_user_text, result_text, tool_results
from kit import KeelRun, session, wire_env

Start = Callable[[Any], FakeLLMServer]
Keel = Callable[..., KeelRun]

GREET = (
    "---\ndescription: Greet someone by name\nargument-hint: [name]\n---\n"
    "Say hello to $ARGUMENTS.\nToday: !`echo GREET-BANG-RAN`\n"
)
COMMIT = """---
allowed-tools: Bash(git add:*), Bash(git status:*), Bash(git commit:*)
description: Create a git commit
---
## Context
- Current git status: !`git status --short`

PROJECT-COMMIT-BODY: stage the changes and commit them in one message.
"""
BUILTIN_NAMES: tuple[str, ...] = ("plan", "review", "commit", "init", "status", "config", "context", "export")
BUILTIN_NAMES += ("memory", "model", "help", "clear", "compact", "cost")


def _commands(project: Path, files: dict[str, str]) -> None:
    for name, body in files.items():
        path = project / ".claude" / "commands" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)


def _git(project: Path, *args: str) -> str:
    env = {"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(["git", *args], cwd=project, env=env, capture_output=True, text=True, check=True)
    return done.stdout


def _repo(project: Path) -> None:
    _git(project, "init", "-q")
    _git(project, "config", "user.email", "dev@example.invalid")
    _git(project, "config", "user.name", "Dev")
    (project / "a.txt").write_text("a\n")
    _git(project, "add", "a.txt")
    _git(project, "commit", "-qm", "init")


def _bash(command: str, tid: str) -> dict[str, Any]:
    return {"tool_calls": [{"id": tid, "name": "Bash", "input": {"command": command, "description": command}}]}


def _result(server: FakeLLMServer, request: int, tid: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [
        b for b in tool_results(server.cursor.requests[request]["body"]) if b["tool_use_id"] == tid
    ]
    assert len(found) == 1, found
    return found[0]


def _listing(body: dict[str, Any]) -> list[str]:
    """The skills listing of a recorded request: in the session block after the stable prefix
    (the last system block), not in the Skill tool's description (models/caching.py)."""
    head = "The following skills are available for use with the Skill tool:\n\n"
    assert all(head not in t["description"] for t in body["tools"])
    text = body["system"][-1]["text"]
    return text.split(head, 1)[1].split("\n</session-context>", 1)[0].splitlines()


def test_commands_are_listed_and_run_through_the_skill_tool(project: Path, fake_llm: Start, keel: Keel) -> None:
    """Claude Code (script: Skill {"skill": "greet", "args": "Bob"}, then text; prompt "say hi";
    no SKILL.md, only .claude/commands/{greet,nodesc,frontend/build,...}.md) offers the Skill tool and
    lists every command: "The following skills are available for use with the Skill tool:\\n\\n
    - commit: Create a git commit\\n- frontend:build: Build the frontend\\n- greet: Greet someone by
    name\\n- nodesc: Just a body with no frontmatter, first line here.\\n..." (name order, no built-in
    such as /help). The call's tool_result is "Launching skill: greet", followed by the expanded
    body with its !`cmd` run: "Say hello to Bob.\\nToday: GREET-BANG-RAN"."""
    _commands(
        project,
        {
            "greet.md": GREET,
            "nodesc.md": "Just a body with no frontmatter, first line here.\n",
            "frontend/build.md": "---\ndescription: Build the frontend\n---\nBuild it.\n",
            "manual.md": "---\ndescription: Only by hand\ndisable-model-invocation: true\n---\nManual.\n",
        },
    )
    server = fake_llm(
        [{"tool_calls": [{"id": "toolu_greet", "name": "Skill", "input": {"skill": "greet", "args": "Bob"}}]}, "done"]
    )
    run = keel("-p", "say hi", "--allowedTools", "Read", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    first = server.cursor.requests[0]["body"]
    assert [t for t in first["tools"] if t["name"] == "Skill"]
    assert _listing(first) == [
        "- frontend:build: Build the frontend",
        "- greet: Greet someone by name",
        "- nodesc: Just a body with no frontmatter, first line here.",
    ]
    text = result_text(_result(server, 1, "toolu_greet"))
    assert text.startswith("Launching skill: greet")
    assert "Say hello to Bob.\nToday: GREET-BANG-RAN" in text and "!`" not in text


def test_project_commands_take_the_names_of_built_ins(
    project: Path, tmp_path: Path, fake_llm: Start, keel: Keel
) -> None:
    """Claude Code, with .claude/commands/<name>.md holding "PROJECT-<name>-BODY $ARGUMENTS" for each of
    plan review commit init status config context export memory model help clear compact cost, and
    `claude -p "/<name> xx"`: every one sent the project's body to the model (the first user message
    held "<command-name>/plan</command-name>" and "PROJECT-plan-BODY xx"); none ran a built-in."""
    _commands(
        project,
        {f"{n}.md": f"---\ndescription: project {n}\n---\nPROJECT-{n}-BODY $ARGUMENTS\n" for n in BUILTIN_NAMES},
    )
    registry = CommandRegistry()
    for command in builtin_commands():
        registry.register(command)
    load_commands(registry, project, tmp_path / "home")
    for name in BUILTIN_NAMES:
        found = registry.get(name)
        assert (
            found is not None and found.kind == "custom" and found.path == project / ".claude/commands" / f"{name}.md"
        )
    assert registry.get("allowed-tools") is not None  # an alias of a built-in nobody overrode stays
    server = fake_llm({"steps": ["ok"], "loop": True})
    for name in ("plan", "commit", "status", "help"):
        run = keel("-p", f"/{name} xx", env=wire_env(server, "anthropic"))
        assert run.code == 0, run.stderr
        assert run.stdout.strip() == "ok"
        text = first_user_text(server.cursor.requests[-1]["body"])
        assert f"<command-name>/{name}</command-name>" in text and f"PROJECT-{name}-BODY xx" in text


def test_allowed_tools_of_a_command_grant_its_calls_for_its_turn(project: Path, fake_llm: Start) -> None:
    """Claude Code, `claude -p "/commit" --allowedTools Read` on the /commit above with an untracked
    b.txt; script: Bash "git add b.txt", Bash "git commit -m 'add b'", Bash "touch zz-not-granted",
    text. The add and the commit ran without a prompt (the commit was made); the touch was refused
    ("touch in '.../zz-not-granted' needs approval ...", is_error) and the file not created.
    The grant is the command's: here a next prompt's `git add` is refused again."""
    _repo(project)
    _commands(project, {"commit.md": COMMIT})
    (project / "b.txt").write_text("b\n")
    (project / "c.txt").write_text("c\n")
    server = fake_llm(
        [
            _bash("git add b.txt", "toolu_add"),
            _bash("git commit -m 'add b'", "toolu_commit"),
            _bash("touch zz-not-granted", "toolu_touch"),
            "committed",
            _bash("git add c.txt", "toolu_add2"),
            "refused",
        ]
    )

    async def go() -> None:
        from agentkeel.commands.run import run_prompt

        rt = session(project, server=server, allowed_tools=["Read"])
        try:
            first = await run_prompt(rt, "/commit")
            assert first.result == "committed", first
            second = await run_prompt(rt, "stage c.txt too")
            assert second.result == "refused", second
        finally:
            await rt.aclose()

    asyncio.run(go())
    typed = first_user_text(server.cursor.requests[0]["body"])
    assert typed.startswith("<command-message>commit</command-message>\n<command-name>/commit</command-name>\n\n")
    assert "<command-args>" not in typed and "PROJECT-COMMIT-BODY" in typed  # no args: no args line
    assert "?? b.txt" in first_user_text(server.cursor.requests[0]["body"])  # the !`git status` line ran
    assert not _result(server, 1, "toolu_add").get("is_error")
    assert not _result(server, 2, "toolu_commit").get("is_error")
    assert _git(project, "log", "--format=%s", "-1").strip() == "add b"
    assert _result(server, 3, "toolu_touch").get("is_error") and not (project / "zz-not-granted").exists()
    assert _result(server, 5, "toolu_add2").get("is_error")  # the turn ended: the grant with it
    assert "c.txt" not in _git(project, "diff", "--cached", "--name-only")


def test_a_grant_never_widens_a_deny_rule(project: Path, fake_llm: Start, keel: Keel) -> None:
    """A deny rule still denies what a command's allowed-tools grants (Claude Code's deny rules are
    checked first)."""
    _repo(project)
    _commands(project, {"commit.md": COMMIT})
    (project / "b.txt").write_text("b\n")
    settings = project.parent / "deny.json"
    settings.write_text(json.dumps({"permissions": {"deny": ["Bash(git commit:*)"]}}))
    server = fake_llm([_bash("git add b.txt", "toolu_add"), _bash("git commit -m 'add b'", "toolu_commit"), "done"])
    run = keel(
        "-p", "/commit", "--allowedTools", "Read", "--settings", str(settings), env=wire_env(server, "anthropic")
    )
    assert run.code == 0, run.stderr
    assert not _result(server, 1, "toolu_add").get("is_error")
    assert _result(server, 2, "toolu_commit").get("is_error")
    assert _git(project, "log", "--format=%s", "-1").strip() == "init"


def test_command_model_is_used_for_its_turn(project: Path, fake_llm: Start) -> None:
    """Claude Code, `claude -p "/modelcmd"` with `model: claude-3-5-haiku-20241022` in the command's
    frontmatter: the request for that turn named "model": "claude-3-5-haiku-20241022" (the session's
    own model otherwise)."""
    _commands(
        project, {"modelcmd.md": "---\ndescription: Quick one\nmodel: claude-3-5-haiku-20241022\n---\nMODELCMD-BODY\n"}
    )
    server = fake_llm(["quick", "normal"])

    async def go() -> None:
        from agentkeel.commands.run import run_prompt

        rt = session(project, server=server, model="anthropic:claude-sonnet-4-5")
        try:
            assert (await run_prompt(rt, "/modelcmd")).result == "quick"
            assert (await run_prompt(rt, "and now")).result == "normal"
        finally:
            await rt.aclose()

    asyncio.run(go())
    first, second = (r["body"] for r in server.cursor.requests)
    assert "MODELCMD-BODY" in first_user_text(first)
    assert first["model"] == "claude-3-5-haiku-20241022"
    assert second["model"] == "claude-sonnet-4-5"


def test_fork_command_runs_in_its_agent(project: Path, fake_llm: Start, keel: Keel) -> None:
    """Claude Code, `claude -p "/forkcmd now"` with `context: fork` and `agent: Explore`: one request,
    the Explore agent's (no Edit or Write among its tools), whose only user message held the command's
    body ("FORKCMD-BODY look around" and the arguments); the report ("fork-report-XYZ") was printed
    as the result, with no request of the main conversation."""
    _commands(
        project,
        {
            "forkcmd.md": (
                "---\ndescription: Look around\ncontext: fork\nagent: Explore\n---\n"
                "FORKCMD-BODY look around $ARGUMENTS\n"
            )
        },
    )
    server = fake_llm(["fork-report-XYZ", "main conversation answer"])
    run = keel("-p", "/forkcmd now", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    assert run.stdout.strip() == "fork-report-XYZ"
    [child] = [r["body"] for r in server.cursor.requests]
    tools = [t["name"] for t in child["tools"]]
    assert "Read" in tools and "Write" not in tools and "Edit" not in tools
    assert first_user_text(child).startswith("FORKCMD-BODY look around now")


@pytest.mark.parametrize("line", ["/hidden", "/hidden some args"])
def test_a_skill_users_may_not_invoke_is_refused(line: str, project: Path, fake_llm: Start, keel: Keel) -> None:
    """Claude Code, `claude -p "/hidden"` for a skill with `user-invocable: false`: printed "This skill
    can only be invoked by Claude, not directly by users. Ask Claude to use the "hidden" skill for
    you.", exit 0, and made no model request."""
    skill = project / ".claude" / "skills" / "hidden"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: hidden\ndescription: Background only\nuser-invocable: false\n---\nHIDDEN\n"
    )
    server = fake_llm(["should not be asked"])
    run = keel("-p", line, env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    assert run.stdout.strip() == (
        'This skill can only be invoked by Claude, not directly by users. Ask Claude to use the "hidden" skill for you.'
    )
    assert server.cursor.requests == []


@pytest.mark.parametrize("allowed", ["Read", "Read,Skill(commit)"])
def test_the_model_cannot_grant_itself_a_commands_tools(
    allowed: str, project: Path, fake_llm: Start, keel: Keel
) -> None:
    """Claude Code, `claude -p "commit it" --allowedTools Read` (script: Skill {"skill": "commit"},
    Bash "git add b.txt", text): the Skill call was refused ("Execute skill: commit. The user can
    add the allow rule Skill(commit) to .claude/settings.local.json to let it run without asking.",
    is_error) and the git add then needed approval ("This command requires approval"). With
    `--allowedTools "Read,Skill(commit)"` the result was "Launching skill: commit" with the body,
    and the git add ran (b.txt staged)."""
    _repo(project)
    _commands(project, {"commit.md": COMMIT})
    (project / "b.txt").write_text("b\n")
    server = fake_llm(
        [
            {"tool_calls": [{"id": "toolu_skill", "name": "Skill", "input": {"skill": "commit"}}]},
            _bash("git add b.txt", "toolu_add"),
            "done",
        ]
    )
    run = keel("-p", "commit it", "--allowedTools", allowed, env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    skill = _result(server, 1, "toolu_skill")
    staged = _git(project, "diff", "--cached", "--name-only").split()
    if allowed == "Read":
        # keel's headless refusal says the same in its own words (how to allow it)
        assert skill.get("is_error") and "Permission to use Skill was not granted" in result_text(skill)
        assert "/commit pre-approves Bash(git add:*)" in result_text(skill)
        assert "PROJECT-COMMIT-BODY" not in json.dumps(server.cursor.requests[1]["body"])
        assert _result(server, 2, "toolu_add").get("is_error") and staged == []
    else:
        assert not skill.get("is_error") and result_text(skill).startswith("Launching skill: commit")
        assert "PROJECT-COMMIT-BODY" in result_text(skill)
        assert not _result(server, 2, "toolu_add").get("is_error") and staged == ["b.txt"]


def test_the_model_cannot_grant_itself_a_skills_tools(project: Path, fake_llm: Start, keel: Keel) -> None:
    """Claude Code, `claude -p "look" --allowedTools Write` with .claude/skills/look/SKILL.md
    (`allowed-tools: Bash(git status:*), Read`; script: Skill {"skill": "look"}, ...): the Skill call
    was refused ("Execute skill: look. The user can add the allow rule Skill(look) ...", is_error)
    and the skill's body never reached the model."""
    skill = project / ".claude" / "skills" / "look"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: look\ndescription: Look\nallowed-tools: Bash(touch:*)\n---\nLOOK-BODY\n"
    )
    server = fake_llm(
        [
            {"tool_calls": [{"id": "toolu_skill", "name": "Skill", "input": {"skill": "look"}}]},
            _bash("touch not-granted", "toolu_touch"),
            "done",
        ]
    )
    run = keel("-p", "look", "--allowedTools", "Write", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    assert _result(server, 1, "toolu_skill").get("is_error")
    assert "LOOK-BODY" not in json.dumps(server.cursor.requests[1]["body"])
    assert _result(server, 2, "toolu_touch").get("is_error") and not (project / "not-granted").exists()


def test_user_and_plugin_commands_are_listed_too(project: Path, tmp_path: Path, fake_llm: Start, keel: Keel) -> None:
    """Claude Code, `claude -p "say hi" --plugin-dir PLUG` with PLUG/commands/hello.md (plugin
    "shipit") and ~/.claude/commands/mine.md: the listing held "- mine: A user command" among the
    project's commands (one name order) and then "- shipit:hello: Say hello from the plugin"."""
    _commands(project, {"greet.md": GREET, "zeta.md": "---\ndescription: Last by name\n---\nZ\n"})
    mine = Path(os.environ["HOME"]) / ".claude" / "commands" / "mine.md"
    mine.parent.mkdir(parents=True)
    mine.write_text("---\ndescription: A user command\n---\nUSER-CMD\n")
    plug = tmp_path / "plug"
    (plug / ".claude-plugin").mkdir(parents=True)
    (plug / ".claude-plugin" / "plugin.json").write_text(json.dumps({"name": "shipit", "version": "1.0.0"}))
    (plug / "commands").mkdir()
    (plug / "commands" / "hello.md").write_text("---\ndescription: Say hello from the plugin\n---\nPLUGIN-HELLO\n")
    server = fake_llm(["ok"])
    run = keel("-p", "say hi", "--plugin-dir", str(plug), env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    assert _listing(server.cursor.requests[0]["body"]) == [
        "- greet: Greet someone by name",
        "- mine: A user command",
        "- zeta: Last by name",
        "- shipit:hello: Say hello from the plugin",
    ]


def test_a_commands_grant_covers_its_own_bang_lines(project: Path, fake_llm: Start, keel: Keel) -> None:
    """Claude Code, `claude -p "/banggrant" --allowedTools Read` with `allowed-tools: Bash(touch:*)` and
    the body "Result: !`touch bang-granted && echo TOUCHED`": the file was made and the model got
    "Result: TOUCHED". (Without the allowed-tools line Claude Code refused the whole command:
    "Shell command permission check failed for pattern ...", no model request.)"""
    _commands(
        project,
        {
            "banggrant.md": (
                "---\ndescription: bang\nallowed-tools: Bash(touch:*)\n---\n"
                "Result: !`touch bang-granted && echo TOUCHED`\n"
            )
        },
    )
    server = fake_llm(["ok"])
    run = keel("-p", "/banggrant", "--allowedTools", "Read", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    assert "Result: TOUCHED" in first_user_text(server.cursor.requests[0]["body"])
    assert (project / "bang-granted").exists()
