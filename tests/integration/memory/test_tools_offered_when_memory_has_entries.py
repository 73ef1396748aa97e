"""Through ``keel -p``: the memory tools are in the request's tool list only when memory held
entries when the session started (#35 item 3: a tool the model can only get "no results" from
costs tokens on every request). Decided once per session, so the tool list never changes mid-session."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkeel.models.fake.server import FakeLLMServer
from kit import KeelRun, wire_env

MEMORY_TOOLS = {"MemorySearch", "MemoryTimeline", "MemoryGet"}


def _tool_lists(server: FakeLLMServer) -> list[set[str]]:
    return [{t["name"] for t in r["body"].get("tools", [])} for r in server.cursor.requests]


def test_memory_tools_only_once_memory_has_entries(
    project: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    (project / "notes.txt").write_text("the release checklist lives in docs/release.md\n")
    read = {"name": "Read", "input": {"file_path": str(project / "notes.txt")}}
    first = fake_llm({"steps": [{"tool_calls": [read]}, "Read it."]})
    run = keel("-p", "where is the release checklist", "--allowedTools", "Read", env=wire_env(first, "anthropic"))
    assert run.code == 0, run.stderr
    lists = _tool_lists(first)
    assert len(lists) == 2 and all(not (names & MEMORY_TOOLS) for names in lists), lists  # empty memory: none
    assert all(names == lists[0] for names in lists)  # the same list all session

    second = fake_llm({"steps": ["Checked."]})
    run = keel("-p", "the release checklist again", env=wire_env(second, "anthropic"))
    assert run.code == 0, run.stderr
    assert _tool_lists(second)[0] >= MEMORY_TOOLS  # the first session left entries: offered
