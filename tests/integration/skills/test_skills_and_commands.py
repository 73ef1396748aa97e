"""Skills and slash commands in detail: arguments, !`cmd` through the permission checks, @file,
allowed-tools, context: fork, path activation; the registry's namespaces, aliases and precedence."""

from __future__ import annotations

import asyncio
import importlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentkeel.commands.builtins import builtin_commands
from agentkeel.commands.custom import load_commands
from agentkeel.commands.registry import Command, CommandRegistry, parse_line, route
from agentkeel.models.fake.server import FakeLLMServer
from agentkeel.skills.expand import substitute_arguments
from agents_fixtures import claude_project, first_user_text, result_text, system_text, tool_names, tool_results
from kit import KeelRun, wire_env

Start = Callable[[Any], FakeLLMServer]
Keel = Callable[..., KeelRun]


def _skill(project: Path, name: str, text: str) -> None:
    folder = project / ".claude" / "skills" / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(text)


def test_argument_substitution() -> None:
    assert substitute_arguments("$0 and $1 / $ARGUMENTS[1] / $ARGUMENTS", "x 'y z'") == "x and y z / y z / x 'y z'"
    assert substitute_arguments("fix $issue on $branch", "42 main", ["issue", "branch"]) == "fix 42 on main"
    assert substitute_arguments("$issues stays", "42", ["issue"]) == "$issues stays\n\nARGUMENTS: 42"
    assert substitute_arguments("no placeholder", "a b") == "no placeholder\n\nARGUMENTS: a b"
    assert substitute_arguments("no placeholder", "") == "no placeholder"
    assert substitute_arguments("missing $3", "a") == "missing $3\n\nARGUMENTS: a"  # no argument 3: as written


def test_bang_commands_go_through_permissions_and_arguments_never_run(
    project: Path, tmp_path: Path, fake_llm: Start, keel: Keel
) -> None:
    claude_project(project)
    _skill(project, "stat", "---\ndescription: status\n---\nBranch: !`git log -1 --format=%s`\nArgs: $ARGUMENTS\n")
    settings = tmp_path / "deny.json"
    settings.write_text(json.dumps({"permissions": {"deny": ["Bash(git log:*)"]}}))
    server = fake_llm(["ok"])
    pwned = project / "pwned"
    run = keel("-p", f"/stat !`touch {pwned}`", "--settings", str(settings), env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    text = first_user_text(server.cursor.requests[0]["body"])
    assert "Branch: [!`git log -1 --format=%s` was not run:" in text and "denied by rule Bash(git log:*)" in text
    assert f"Args: !`touch {pwned}`" in text and not pwned.exists()


def test_file_inclusion_respects_read_denials(project: Path, tmp_path: Path, fake_llm: Start, keel: Keel) -> None:
    claude_project(project)
    (project / "notes.md").write_text("the notes body\n")
    (project / "secret.md").write_text("top secret\n")
    _skill(project, "ctx", "---\ndescription: context\n---\nRead @notes.md and @secret.md and mail @someone\n")
    settings = tmp_path / "deny.json"
    settings.write_text(json.dumps({"permissions": {"deny": ["Read(./secret.md)"]}}))
    server = fake_llm(["ok"])
    run = keel("-p", "/ctx", "--settings", str(settings), env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    text = first_user_text(server.cursor.requests[0]["body"])
    assert f'<file path="{project / "notes.md"}">\nthe notes body\n' in text
    assert "top secret" not in text and "@secret.md [not included:" in text
    assert "mail @someone" in text


def test_allowed_tools_of_an_inline_skill_grant_and_do_not_narrow(project: Path, fake_llm: Start, keel: Keel) -> None:
    """Claude Code 2.1.328, `claude -p "/look" --allowedTools Write` with `allowed-tools: Bash(touch:*), Read`
    (script: Bash "touch granted-by-skill", Write w.txt, text): both ran; the skill granted the touch
    and did not take Write away. The model calling Skill("look") is refused under -p (the model may
    not grant itself tools): tests/integration/commands/test_claude_code_commands.py."""
    claude_project(project)
    _skill(project, "look", "---\ndescription: look only\nallowed-tools: Bash(touch:*), Read\n---\nOnly look.\n")
    server = fake_llm(
        [
            {"tool_calls": [{"id": "toolu_touch", "name": "Bash", "input": {"command": "touch granted-by-skill"}}]},
            {"tool_calls": [{"id": "toolu_w", "name": "Write", "input": {"file_path": "w.txt", "content": "x"}}]},
            "done",
        ]
    )
    run = keel("-p", "/look", "--allowedTools", "Write", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    touched = [b for b in tool_results(server.cursor.requests[1]["body"]) if b["tool_use_id"] == "toolu_touch"]
    written = [b for b in tool_results(server.cursor.requests[2]["body"]) if b["tool_use_id"] == "toolu_w"]
    assert not touched[0].get("is_error") and (project / "granted-by-skill").exists()
    assert not written[0].get("is_error") and (project / "w.txt").read_text() == "x"


def test_fork_skill_runs_in_a_subagent(project: Path, fake_llm: Start, keel: Keel) -> None:
    claude_project(project)
    _skill(
        project,
        "deep",
        "---\ndescription: deep research\ncontext: fork\nagent: Explore\n---\nResearch $ARGUMENTS deeply.\n",
    )
    server = fake_llm(
        [
            {"tool_calls": [{"id": "toolu_deep", "name": "Skill", "input": {"skill": "deep", "args": "the cache"}}]},
            "the cache is an LRU",
            "summary",
        ]
    )
    run = keel("-p", "research", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    child = server.cursor.requests[1]["body"]
    assert "file search specialist" in system_text(child) and "Bash" not in tool_names(child)
    assert first_user_text(child) == "Research the cache deeply."
    [result] = [b for b in tool_results(server.cursor.requests[2]["body"]) if b["tool_use_id"] == "toolu_deep"]
    assert result_text(result) == "the cache is an LRU"


def test_path_activated_skill_is_announced_once(project: Path, fake_llm: Start, keel: Keel) -> None:
    claude_project(project)
    _skill(project, "pystyle", "---\ndescription: Python style rules\npaths: ['*.py']\n---\nUse black.\n")
    read = {"tool_calls": [{"name": "Read", "input": {"file_path": str(project / "a.py")}}]}
    server = fake_llm([read, read, "ok"])
    run = keel("-p", "read a.py", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    first = result_text(tool_results(server.cursor.requests[1]["body"])[-1])
    second = result_text(tool_results(server.cursor.requests[2]["body"])[-1])
    assert "<system-reminder>Skills that apply to a.py" in first and "- pystyle: Python style rules" in first
    assert "system-reminder" not in second


def test_registry_namespaces_aliases_precedence_and_completion(tmp_path: Path) -> None:
    project = tmp_path / "p"
    (project / ".claude" / "commands" / "frontend").mkdir(parents=True)
    (project / ".claude" / "commands" / "frontend" / "build.md").write_text(
        "---\nargument-hint: <target>\n---\nBuild\n"
    )
    (project / ".claude" / "commands" / "help.md").write_text("my help\n")
    (project / ".keel" / "commands").mkdir(parents=True)
    (project / ".keel" / "commands" / "bad.md").write_text("---\n: : [\n---\nbody\n")
    registry = CommandRegistry()
    for command in builtin_commands():
        registry.register(command)
    load_commands(registry, project, tmp_path / "home")
    assert registry.get("frontend:build") is not None and registry.get("build") is registry.get("frontend:build")
    # Claude Code 2.1.328 runs a project's help.md as /help (tests/integration/commands/test_claude_code_commands.py)
    assert registry.get("help") is not None and registry.get("help").kind == "custom"  # type: ignore[union-attr]
    assert any("bad.md: the YAML frontmatter is not valid" in w for w in registry.warnings)
    assert registry.get("reset") is registry.get("clear")
    names = [c["name"] for c in registry.completions("/fr")]
    assert names == ["/frontend:build"] and registry.completions("/fr")[0]["argument_hint"] == "<target>"
    assert parse_line("/usr/bin/env") is None and parse_line("hello") is None and parse_line("/x a b") == ("x", "a b")

    async def expand(runtime: Any, args: str) -> str:
        return f"mcp prompt with {args}"

    assert registry.register_prompt("mcp__docs__summarise", "Summarise docs", expand)
    routed = asyncio.run(route(registry, None, "/mcp__docs__summarise now"))
    assert routed.kind == "prompt" and routed.text == "mcp prompt with now"


def test_every_importable_builtin_target_resolves() -> None:
    """/compact /context /cost /memory live in another subsystem: each one whose module exists must resolve."""
    required = {"help", "clear", "compact", "memory", "model", "permissions", "hooks", "agents", "skills"}
    required |= {"status", "cost", "context", "todos", "resume", "export", "init", "review"}
    commands = {c.name: c for c in builtin_commands()}
    assert required <= set(commands)
    for command in commands.values():
        if isinstance(command.handler, str):
            module = command.handler.partition(":")[0]
            try:
                importlib.import_module(module)
            except ImportError:
                assert command.name != "cost" or command.fallback is not None
                continue
            assert command.resolve_handler() is not None, f"{command.handler} does not resolve"
        else:
            assert command.handler is not None or command.expand is not None, command.name


def test_unknown_target_is_one_clear_line() -> None:
    registry = CommandRegistry()
    registry.register(Command("ghost", "missing", handler="agentkeel.nowhere:ghost"))
    routed = asyncio.run(route(registry, None, "/ghost"))
    assert routed.kind == "error" and routed.text == "/ghost is not available in this build of keel"


@pytest.mark.parametrize("line", ["/init", "/review the parser"])
def test_prompt_builtins_go_to_the_model(line: str, project: Path, fake_llm: Start, keel: Keel) -> None:
    server = fake_llm(["drafted"])
    run = keel("-p", line, env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    text = first_user_text(server.cursor.requests[0]["body"])
    assert ("create an AGENTS.md" in text) if line == "/init" else ("Review the current changes" in text)


def test_interactive_completion_comes_from_the_registry(project: Path, tmp_path: Path) -> None:
    from prompt_toolkit.document import Document

    from agentkeel.app.runtime import Runtime, RuntimeOptions
    from agentkeel.ui.cli.interactive import slash_completer

    claude_project(project)
    env = {"ANTHROPIC_API_KEY": "sk-ant-test-not-a-real-key", "KEEL_HOME": str(tmp_path / "keelhome")}
    rt = Runtime.create(RuntimeOptions(cwd=project, env=env, home=tmp_path / "userhome"))
    try:
        completer = slash_completer(rt)
        found = list(completer.get_completions(Document("/fi"), None))
        assert [c.text for c in found] == ["/fix-issue"]
        assert "<number> Fix a GitHub issue" in found[0].display_meta_text
        assert [c.text for c in completer.get_completions(Document("/he"), None)] == ["/help"]
        assert list(completer.get_completions(Document("/help x"), None)) == []
    finally:
        asyncio.run(rt.aclose())
