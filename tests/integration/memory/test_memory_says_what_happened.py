"""Memory says what happened (issue #31 item 9): a session whose edits were all denied is not a
success, and its summary does not claim the change; a search with no match returns nothing."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkeel.models.fake.server import FakeLLMServer
from conftest import KeelRun, wire_env


def _exported(keel: Callable[..., KeelRun], kind: str) -> list[dict[str, Any]]:
    out = keel("mem", "--embedder", "none", "export", "--type", kind)
    assert out.code == 0, out.stderr
    return [json.loads(x) for x in out.stdout.splitlines()]


def test_a_session_whose_edits_were_all_denied_is_no_success(
    project: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    calc = project / "calc.py"
    calc.write_text("def add(a, b):\n    return a - b\n")
    edit = {"file_path": str(calc), "old_string": "a - b", "new_string": "a + b"}
    server = fake_llm(
        {
            "steps": [
                {"tool_calls": [{"name": "Read", "input": {"file_path": str(calc)}}]},
                {"tool_calls": [{"name": "Edit", "input": edit}]},
                {"tool_calls": [{"name": "Edit", "input": edit}]},
                "Fixed: add subtracted instead of adding.",
            ]
        }
    )
    # headless in default mode: nobody to approve the edits, so both are denied
    run = keel("-p", "fix the bug in calc", env=wire_env(server, "anthropic"))
    assert calc.read_text() == "def add(a, b):\n    return a - b\n", run.stderr
    lessons = _exported(keel, "lesson")
    assert len(lessons) == 1, lessons
    meta = lessons[0]["metadata"]
    assert meta["success"] is False and meta["score"] <= 0.25, lessons[0]["text"]
    assert not lessons[0]["text"].startswith("Succeeded")
    assert any("denied" in w and "Edit x2" in w for w in meta["weaknesses"]), meta
    summaries = _exported(keel, "session_summary")
    assert summaries and "Changed:" not in summaries[-1]["text"], summaries
    assert "Not run (denied): Edit x2" in summaries[-1]["text"]


# -- other projects' memories (issue #30 item 12) -------------------------------------------------------


def _seed_other_project(home: Path) -> None:
    from agentkeel.memory import open_store

    store = open_store(home / "memory" / "memory.db", embedder="none")
    store.add_many(
        [
            {"id": "other-1", "type": "fact", "project": "elsewhere-1234", "text": "the launch code is zebra42"},
            {"id": "other-2", "type": "lesson", "project": "elsewhere-1234", "text": "Lesson: zebra42 deploys"},
        ]
    )
    store.close()


def _cross_project_run(
    project: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> tuple[str, KeelRun]:
    server = fake_llm(
        {
            "steps": [
                {"tool_calls": [{"name": "MemorySearch", "input": {"query": "launch code", "all_projects": True}}]},
                {"tool_calls": [{"name": "MemoryGet", "input": {"ids": ["other-1"]}}]},
                {"tool_calls": [{"name": "MemoryTimeline", "input": {"id": "other-1"}}]},
                "done",
            ]
        }
    )
    run = keel(
        "-p",
        "what is the launch code zebra42",
        "--output-format",
        "stream-json",
        "--verbose",
        "--allowedTools",
        "MemorySearch,MemoryGet,MemoryTimeline",
        env=wire_env(server, "anthropic"),
    )
    assert run.code == 0, run.stderr
    results = [
        block
        for line in run.lines()
        if line.get("type") == "user"
        for block in line["message"]["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]
    assert len(results) == 3, run.stdout[-2000:]
    return json.dumps(results), run


def test_another_projects_memories_are_not_read_without_the_users_setting(
    project: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    import os

    home = Path(os.environ["KEEL_HOME"])
    _seed_other_project(home)
    results, _ = _cross_project_run(project, fake_llm, keel)
    assert "launch code is zebra42" not in results  # neither found by search, nor read by id, nor around it
    assert "crossProject" in results
    # the project's own settings cannot turn it on before the folder is trusted
    (project / ".keel").mkdir(exist_ok=True)
    (project / ".keel" / "settings.json").write_text(json.dumps({"memory": {"crossProject": True}}))
    results, _ = _cross_project_run(project, fake_llm, keel)
    assert "launch code is zebra42" not in results


def test_the_user_can_allow_reading_other_projects(
    project: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    import os

    home = Path(os.environ["KEEL_HOME"])
    _seed_other_project(home)
    (home / "settings.json").write_text(json.dumps({"memory": {"crossProject": True}}))
    results, _ = _cross_project_run(project, fake_llm, keel)
    assert "launch code is zebra42" in results


def test_keel_mem_mcp_keeps_to_its_project_without_the_setting(project: Path) -> None:
    import os

    import anyio
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    from conftest import KEEL

    home = Path(os.environ["KEEL_HOME"])
    _seed_other_project(home)

    async def talk() -> list[str]:
        params = StdioServerParameters(command=KEEL, args=["mem", "mcp"], cwd=str(project), env=dict(os.environ))
        out: list[str] = []
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            for name, args in [
                ("search", {"query": "launch code zebra42", "all_projects": True}),
                ("timeline", {"id": "other-1"}),
                ("get", {"ids": ["other-1"]}),
            ]:
                result: Any = await session.call_tool(name, args)
                out.append("".join(getattr(c, "text", "") for c in result.content))
        return out

    replies = anyio.run(talk)
    assert all("zebra42" not in reply for reply in replies), replies
    assert "crossProject" in replies[0] and "crossProject" in replies[1]
    assert json.loads(replies[2]) == []
