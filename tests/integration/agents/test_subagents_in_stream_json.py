"""``keel -p --output-format stream-json`` shows a subagent's work as Claude Code 2.1.328 does
(``claude -p delegate --output-format stream-json --verbose --allowedTools Agent,Bash``, a foreground
general-purpose agent running ``echo sub``): task_started, the subagent's prompt, task_progress, its
tool call and result with ``parent_tool_use_id``, task_updated, task_notification; its text is not
forwarded in ``-p`` (no ``forwardSubagentText``). Before: none of it (#34 item 12). The SDK side
(both settings of forwardSubagentText) is tests/integration/ui/sdk_ts/test_sdk_ts.py."""

from __future__ import annotations

from typing import Any

from kit import wire_env

AGENT = {"description": "say hi", "prompt": "run echo sub", "subagent_type": "general-purpose"}
STEPS = [
    {"tool_calls": [{"name": "Agent", "input": {**AGENT, "run_in_background": False}}]},
    {"text": "sub thinking", "tool_calls": [{"name": "Bash", "input": {"command": "echo sub"}}]},
    "sub done",
    "all done",
]


def test_p_stream_json_shows_the_subagent(keel: Any, fake_llm: Any) -> None:
    run = keel(
        "-p",
        "delegate",
        "--output-format",
        "stream-json",
        "--verbose",
        "--allowedTools",
        "Agent,Bash",
        env=wire_env(fake_llm(STEPS), "anthropic"),
    )
    assert run.code == 0, run.stderr
    lines = run.lines()
    call_id = next(
        b["id"] for m in lines if m["type"] == "assistant" for b in m["message"]["content"] if b.get("name") == "Agent"
    )
    tasks = [m for m in lines if m["type"] == "system" and m["subtype"].startswith("task_")]
    assert [m["subtype"] for m in tasks] == ["task_started", "task_progress", "task_updated", "task_notification"]
    assert all(m["session_id"] == lines[-1]["session_id"] for m in tasks)
    assert tasks[0]["tool_use_id"] == call_id and tasks[-1]["summary"] == "sub done"
    nested = [m for m in lines if m.get("parent_tool_use_id") == call_id]
    blocks = [(m["type"], b["type"]) for m in nested for b in m["message"]["content"]]
    assert blocks == [("user", "text"), ("assistant", "tool_use"), ("user", "tool_result")]
    assert lines[-1]["result"] == "all done"
