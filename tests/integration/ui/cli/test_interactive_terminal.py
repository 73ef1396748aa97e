"""Interactive mode in a real pseudo-terminal (pexpect), as a user meets it."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pexpect

from agentkeel.models.fake.server import FakeLLMServer
from kit import KEEL, wait_until, wire_env


def test_repl_streams_asks_interrupts_and_exits(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    target = project / "hello.txt"
    server = fake_llm(
        {
            "steps": [
                {
                    "text": "Writing the file.",
                    "tool_calls": [{"name": "Write", "input": {"file_path": str(target), "content": "hi\n"}}],
                },
                "The file is written.",
                {"text": "this takes forever", "delay_s": 30},
                "Still here after the interrupt.",
            ]
        }
    )
    env = {**os.environ, **wire_env(server, "anthropic"), "TERM": "dumb"}
    child = pexpect.spawn(KEEL, cwd=str(project), env=env, encoding="utf-8", timeout=60, dimensions=(40, 200))
    try:
        child.expect("/help for commands")
        child.expect("> ")
        child.sendline("write hello.txt")
        child.expect(r"\[y\] yes once")
        child.sendline("y")
        child.expect("The file is written.")
        assert target.read_text() == "hi\n"
        child.expect("> ")
        child.sendline("/cost")
        child.expect(r"\$\d+\.\d{4}")
        child.expect("> ")
        child.sendline("/permissions")
        child.expect("Permission mode: default")
        child.expect("Deny rules")
        child.expect("> ")
        child.sendline("slow question")
        # the slow request has reached the model: the turn is running
        wait_until(lambda: len(server.cursor.requests) >= 3, 60, "the slow request")
        assert len(server.cursor.requests) == 3
        child.sendintr()  # Ctrl-C interrupts the running turn
        child.expect(r"\[interrupted\]")
        child.expect("> ")
        child.sendline("are you there?")
        child.expect("Still here after the interrupt.")
        child.expect("> ")
        child.send("\x04")  # Ctrl-D exits
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0
    assert (tmp_path / "keelhome" / "history").read_text().count("write hello.txt") == 1


def test_untrusted_folder_prompts_once_and_always_for_project_persists(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    import json

    (project / ".keel").mkdir()
    (project / ".keel" / "settings.json").write_text(json.dumps({"permissions": {"deny": ["Bash(rm *)"]}}))
    server = fake_llm(
        {"steps": [{"tool_calls": [{"name": "Bash", "input": {"command": "npm --version"}}]}, "ran it", "bye"]}
    )
    env = {**os.environ, **wire_env(server, "anthropic"), "TERM": "dumb"}
    child = pexpect.spawn(KEEL, cwd=str(project), env=env, encoding="utf-8", timeout=60, dimensions=(40, 200))
    try:
        child.expect(r"Trust .*\? \[y/N\]")
        child.sendline("y")
        child.expect("> ")
        child.sendline("check npm")
        child.expect(r"\[p\] always in this project")
        child.sendline("p")
        child.expect("ran it")
        child.expect("> ")
        child.sendline("/exit")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    local = json.loads((project / ".keel" / "settings.local.json").read_text())
    assert local["permissions"]["allow"] == ["Bash(npm --version)"]
    # keel's own write to settings.local.json re-recorded trust: the next start does not ask again
    child = pexpect.spawn(KEEL, cwd=str(project), env=env, encoding="utf-8", timeout=60, dimensions=(40, 200))
    try:
        index = child.expect([r"Trust .*\? \[y/N\]", "/help for commands"])
        assert index == 1
    finally:
        child.close(force=True)
