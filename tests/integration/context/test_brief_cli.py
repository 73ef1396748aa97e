"""The brief through the CLI, read from the request bodies the scripted model recorded: the
environment note reaches the model whatever the system prompt (``--system-prompt ""`` is the
Agent SDK's default, and Claude Code still sends its environment then), the system prompt holds
nothing volatile, and the note is the same bytes on every request of a session."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkeel.models.fake.server import FakeLLMServer
from kit import KeelRun, session_files, wire_env


def git(cwd: Path, *args: str) -> None:
    argv = ["git", "-c", "user.email=t@example.invalid", "-c", "user.name=t", *args]
    subprocess.run(argv, cwd=cwd, check=True, capture_output=True)


def in_repo(project: Path) -> None:
    git(project, "init", "-q", "-b", "main")
    (project / "notes.txt").write_text("n\n")
    git(project, "add", "notes.txt")
    git(project, "commit", "-q", "-m", "BRIEF-COMMIT-42 the first one")
    (project / "notes.txt").write_text("changed\n")


def system_of(body: dict[str, Any]) -> str:
    """The system prompt's stable part: the wire sends the session parts (listings) in a later block."""
    system = body.get("system") or ""
    return system if isinstance(system, str) else str(system[0].get("text", "")) if system else ""


def bare(message: dict[str, Any]) -> str:
    """A message as JSON without its cache breakpoints (the wire moves them along the conversation)."""
    content = [{k: v for k, v in b.items() if k != "cache_control"} for b in message["content"]]
    return json.dumps({**message, "content": content})


def first_blocks(body: dict[str, Any]) -> list[str]:
    content = body["messages"][0]["content"]
    return [content] if isinstance(content, str) else [b.get("text", "") for b in content if b.get("type") == "text"]


def test_an_empty_system_prompt_keeps_the_environment(
    fake_llm: Callable[[Any], FakeLLMServer], project: Path, keel: Callable[..., KeelRun]
) -> None:
    in_repo(project)
    server = fake_llm({"steps": ["Hi."]})
    run = keel("-p", "say hi", "--system-prompt", "", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    (req,) = [r["body"] for r in server.cursor.requests]
    assert system_of(req) == ""  # the brief is replaced...
    prompt, note = first_blocks(req)  # ...the environment is not: it follows the prompt
    assert prompt == "say hi" and note.startswith("<environment>")
    assert f"Working directory: {project}" in note and "Platform: " in note and "Today's date: " in note
    assert "Git branch: main" in note and "M notes.txt" in note and "BRIEF-COMMIT-42" in note


def test_append_keeps_the_brief_and_the_environment_and_nothing_volatile_is_in_the_system(
    fake_llm: Callable[[Any], FakeLLMServer], project: Path, keel: Callable[..., KeelRun]
) -> None:
    in_repo(project)
    server = fake_llm({"steps": [{"tool_calls": [{"name": "LS", "input": {"path": str(project)}}]}, "Done."]})
    env = wire_env(server, "anthropic")
    run = keel("-p", "look", "--append-system-prompt", "APPENDED-RULE-7", "--allowedTools", "LS", env=env)
    assert run.code == 0, run.stderr
    first, second = [r["body"] for r in server.cursor.requests]
    system = system_of(first)
    assert system.startswith("You are keel") and system.rstrip().endswith("APPENDED-RULE-7")
    assert "# Tools" in system and "# Care" in system
    for volatile in ("BRIEF-COMMIT-42", "notes.txt", "Today's date", str(project)):
        assert volatile not in system, volatile
    # the second request carries the same first message, note included, byte for byte
    assert bare(first["messages"][0]) == bare(second["messages"][0])
    assert any(b.startswith("<environment>") for b in first_blocks(second))
    assert system_of(second) == system
    # the log keeps the prompt as the user typed it
    transcripts = session_files(Path(os.environ["KEEL_HOME"]))
    assert transcripts and all("<environment>" not in t.read_text() for t in transcripts)


def test_two_sessions_of_a_project_send_the_same_system_prompt(
    fake_llm: Callable[[Any], FakeLLMServer], project: Path, keel: Callable[..., KeelRun]
) -> None:
    in_repo(project)
    server = fake_llm({"steps": ["Zero.", "One.", "Two."]})
    env = wire_env(server, "anthropic")
    # the first session of a project has an empty memory, so no memory tools: compare the next two
    assert keel("-p", "zeroth", env=env).code == 0
    assert keel("-p", "first", env=env).code == 0
    git(project, "commit", "-qam", "BRIEF-COMMIT-43 between the sessions")
    assert keel("-p", "second", env=env).code == 0
    one, two = [r["body"] for r in server.cursor.requests[1:]]
    assert system_of(one) == system_of(two) and json.dumps(one["tools"]) == json.dumps(two["tools"])
    notes = [next(b for b in first_blocks(body) if b.startswith("<environment>")) for body in (one, two)]
    assert "BRIEF-COMMIT-43" not in notes[0] and "BRIEF-COMMIT-43" in notes[1]
