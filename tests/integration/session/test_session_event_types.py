"""Every persisted event type keel writes is declared in one table (``core/events.py``): a log
loaded by a process that imported nothing but the loader comes back typed, and its view is the
same as the writer's (a rewind applies, whoever imports what)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from agentkeel.core.events import (
    EVENT_TYPES,
    AssistantMessage,
    Checkpoint,
    CoordinatorProgress,
    HookRan,
    RewindDone,
    RewindIntent,
    RewindMarker,
    SessionForked,
    UserMessage,
    event_data,
)
from agentkeel.core.types import Message, TextBlock

LOAD = """
import json, sys
from agentkeel.session.load import load_session
loaded = load_session(__import__("pathlib").Path(sys.argv[1]))
print(json.dumps({
    "types": [type(e).__name__ for e in loaded.events],
    "view": [m.text() for m in loaded.messages],
    "skipped": loaded.report.skipped,
    "modules": sorted(m for m in sys.modules if m.startswith(("agentkeel.session.events", "agentkeel.extensions",
                                                             "agentkeel.agents"))),
}))
"""


def test_a_log_loads_typed_in_a_process_that_imported_only_the_loader(tmp_path: Path) -> None:
    one, answer = Message.user("first question"), Message(role="assistant", content=[TextBlock(text="first answer")])
    events = [
        UserMessage(message=one),
        AssistantMessage(message=answer),
        HookRan(event="Stop", runs=[{"handler": "true", "exit_code": 0}]),
        Checkpoint(tool_use_id="toolu_1", tool="Write", files={"/p/a.txt": None}),
        CoordinatorProgress(task_id="t1", status="started"),
        SessionForked(parent_id="parent-session"),
        UserMessage(message=Message.user("second question")),
        AssistantMessage(message=Message(role="assistant", content=[TextBlock(text="second answer")])),
        RewindIntent(rewind_id="r1", turn_index=1),
        RewindDone(rewind_id="r1"),
        RewindMarker(messages=[one, answer], turn_index=1),
    ]
    log = tmp_path / "session.jsonl"
    log.write_text("".join(json.dumps(event_data(e)) + "\n" for e in events))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    out = subprocess.run(
        [sys.executable, "-c", LOAD, str(log)], capture_output=True, text=True, timeout=60, env=env, check=True
    )
    loaded = json.loads(out.stdout)
    assert loaded["modules"] == []  # nothing but the loader (and core) was imported
    assert loaded["types"] == [type(e).__name__ for e in events]
    assert loaded["skipped"] == []
    # the rewind applied: the view is the conversation before the second question
    assert loaded["view"] == ["first question", "first answer"]


def test_no_persisted_event_type_is_declared_or_registered_outside_the_table() -> None:
    src = Path(__file__).parents[3] / "src" / "agentkeel"
    elsewhere = [
        f"{path.relative_to(src)}: {line}"
        for path in src.rglob("*.py")
        if path != src / "core" / "events.py"
        for line in path.read_text().splitlines()
        if re.match(r"class \w+\((Event|Compaction)\b", line) or "register_event_type(" in line
    ]
    assert elsewhere == []
    assert {"hook", "compaction", "checkpoint", "rewind", "fork", "coordinator"} <= set(EVENT_TYPES)
