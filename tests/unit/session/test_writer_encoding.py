"""The session writer encodes a typed event straight from its Struct: every line is byte for byte
the line the plain-data way (``event_data`` then ``_encode``) writes, for every kind of event a
session logs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentkeel.core.events import (
    AssistantMessage,
    Event,
    Notice,
    OpaqueEvent,
    RequestStarted,
    SessionStarted,
    ToolFinished,
    UserMessage,
    event_data,
)
from agentkeel.core.types import Message, TextBlock, ToolUseBlock, Usage
from agentkeel.session.load import load_session
from agentkeel.session.store import SessionWriter, _encode
from tests.unit.core.test_shortcuts_agree import _events


def _plain(event: Event, parent: str | None) -> bytes:
    return _encode({"uuid": event.uuid, "parentUuid": parent, "sessionId": "sid", **event_data(event)})


def _more() -> list[Event]:
    return [
        SessionStarted(session_id="sid", cwd="/p", model="m", source="resume"),
        UserMessage(message=Message.user("héllo 😀 \u2028 \x00")),
        AssistantMessage(
            message=Message(
                role="assistant", content=[TextBlock(text="x"), ToolUseBlock(id="t", name="Bash", input={})]
            ),
            model="m",
            usage=Usage(input_tokens=3, output_tokens=4),
            cost_usd=0.25,
        ),
        ToolFinished(tool_use_id="t", name="X", is_error=False, duration_ms=1, metadata={"n": 10**30}),  # too big
        ToolFinished(tool_use_id="t", name="X", is_error=False, duration_ms=1, metadata={"ok": None, "f": 1e-7}),
        Notice(level="info", message="n"),
        RequestStarted(turn=1, model="m", message_count=2),
        OpaqueEvent(data={"type": "plugin_thing", "payload": {"k": [1, 2]}}),
    ]


@pytest.mark.parametrize("index", range(len(_events()) + len(_more())))
def test_each_line_is_the_plain_data_line(tmp_path: Path, index: int) -> None:
    event = [*_events(), *_more()][index]
    path = tmp_path / "s.jsonl"
    writer = SessionWriter(path, "sid", parent_uuid="parent-1")
    writer(event)
    writer.close()
    assert path.read_bytes() == _plain(event, "parent-1") + b"\n"


async def test_a_real_sessions_log_is_written_as_before(tmp_path: Path, project: Path) -> None:
    """Every event of a session with tool calls, a compaction and a result, written again both ways."""
    from agentkeel import Runtime, RuntimeOptions

    steps: list[object] = []
    for i in range(30):
        f = project / f"m{i}.py"
        f.write_text("".join(f"def f{j}(x):\n    return x + {j}\n\n" for j in range(200)))
        steps.append({"text": f"step {i}", "tool_calls": [{"name": "Read", "input": {"file_path": str(f)}}]})
    steps.append("done")
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"steps": steps}))
    rt = Runtime.create(
        RuntimeOptions(cwd=project, model=f"scripted:{script}", max_turns=40, permission_mode="bypassPermissions")
    )
    try:
        await rt.run("go")
    finally:
        await rt.aclose()
    logged = load_session(rt.session_path).events
    assert {e.type for e in logged} >= {"assistant", "tool_results", "tool_end", "compaction", "result"}
    again = tmp_path / "again.jsonl"
    writer = SessionWriter(again, "sid")
    for event in logged:
        writer(event)
    writer.close()
    parent = None
    for line, event in zip(again.read_bytes().splitlines(), logged, strict=True):
        assert line == _plain(event, parent)
        parent = event.uuid
