"""What an SDK host sees of a session's subagents, as Claude Code 2.1.328 shows it in stream-json.

Recorded with a scripted ``Agent`` call (``claude -p delegate --output-format stream-json --verbose
--allowedTools Agent,Bash``, a foreground general-purpose agent that runs ``echo sub`` and answers
"sub done")::

    system/task_started   task_id, tool_use_id, description, subagent_type, is_backgrounded,
                          spawn_depth 1, task_type "local_agent", prompt
    user                  parent_tool_use_id = the Agent call's id: the subagent's prompt (text)
    system/task_progress  task_id, tool_use_id, description "Running echo sub", subagent_type,
                          last_tool_name "Bash", usage {total_tokens, tool_uses, duration_ms}
    assistant             parent_tool_use_id: the subagent's tool_use blocks (its text and
                          thinking only with ``forwardSubagentText``)
    user                  parent_tool_use_id: the subagent's tool results
    system/task_updated   patch {status "completed", end_time}
    system/task_notification  task_id, tool_use_id, status, output_file, summary (the agent's
                          answer), usage

Each forwarded message also carries ``agent_id``, ``subagent_type`` and ``task_description``.
Only the session's own subagents are shown (a subagent's subagents are not: Claude Code forwards
them only with ``forwardNestedSubagentToolCalls``). The spawner tells its listeners (started, each
event of the child's bus, finished); :class:`SubagentStream` is the listener a stream-json front end
adds, writing each line through the front end's own ``write``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from agentkeel.core.events import AssistantMessage, Event, ToolResults, UserMessage, new_id
from agentkeel.core.types import to_data
from agentkeel.tools import effects_of


class SubagentResult(Protocol):
    """What a listener reads of the spawner's SubagentResult."""

    @property
    def subtype(self) -> str: ...
    @property
    def text(self) -> str: ...
    @property
    def transcript(self) -> Path: ...


_HIDDEN_UNLESS_FORWARDED = {"text", "thinking", "redacted_thinking"}
# keel's subtype of a child's result -> Claude Code's task status
_STATUS = {"success": "completed", "interrupted": "stopped", "cancelled": "stopped"}


@dataclass
class SubagentActivity:
    """One running subagent as its listeners know it."""

    agent_id: str
    agent_type: str
    description: str
    tool_use_id: str
    prompt: str
    background: bool = False
    started: float = field(default_factory=time.monotonic)
    tokens: int = 0
    tool_uses: int = 0

    def usage(self) -> dict[str, int]:
        return {
            "total_tokens": self.tokens,
            "tool_uses": self.tool_uses,
            "duration_ms": int((time.monotonic() - self.started) * 1000),
        }


# (kind, activity, item): "started" (None), "event" (an Event of the child's bus), "finished" (its
# SubagentResult, or None when it was cancelled before it had one)
Listener = Callable[[str, SubagentActivity, Any], None]


class SubagentStream:
    """The stream-json lines of a session's subagents, written through ``write``."""

    def __init__(self, session_id: str, write: Callable[[dict[str, Any]], None], *, forward_text: bool) -> None:
        self.session_id = session_id
        self.write = write
        self.forward_text = forward_text

    def __call__(self, kind: str, activity: SubagentActivity, item: Event | SubagentResult | None) -> None:
        if kind == "started":
            self._system(
                "task_started",
                activity,
                description=activity.description,
                subagent_type=activity.agent_type,
                is_backgrounded=activity.background,
                spawn_depth=1,
                task_type="local_agent",
                prompt=activity.prompt,
            )
        elif kind == "event" and isinstance(item, Event):
            self._event(activity, item)
        elif kind == "finished":
            self._finished(activity, item if not isinstance(item, Event) else None)

    def _system(self, subtype: str, activity: SubagentActivity, **fields: Any) -> None:
        line: dict[str, Any] = {"type": "system", "subtype": subtype, "task_id": activity.agent_id}
        if subtype != "task_updated":
            line["tool_use_id"] = activity.tool_use_id
        line.update(fields)
        line.update({"uuid": new_id(), "session_id": self.session_id})
        self.write(line)

    def _message(self, kind: str, activity: SubagentActivity, message: dict[str, Any], event: Event) -> None:
        self.write(
            {
                "type": kind,
                "message": message,
                "parent_tool_use_id": activity.tool_use_id,
                "agent_id": activity.agent_id,
                "subagent_type": activity.agent_type,
                "task_description": activity.description,
                "session_id": self.session_id,
                "uuid": event.uuid,
                "timestamp": event.timestamp,
            }
        )

    def _event(self, activity: SubagentActivity, event: Event) -> None:
        if isinstance(event, UserMessage):
            message = to_data(event.message)
            content = message.get("content")
            if isinstance(content, str):
                message["content"] = [{"type": "text", "text": content}]
            self._message("user", activity, message, event)
        elif isinstance(event, AssistantMessage):
            message = to_data(event.message)
            usage = event.usage.to_wire()
            activity.tokens += sum(v for v in usage.values() if isinstance(v, int))
            blocks = [b for b in message.get("content", []) if isinstance(b, dict)]
            calls = [b for b in blocks if b.get("type") == "tool_use"]
            activity.tool_uses += len(calls)
            if calls:
                last = calls[-1]
                self._system(
                    "task_progress",
                    activity,
                    description=_progress(last),
                    subagent_type=activity.agent_type,
                    last_tool_name=last.get("name"),
                    usage=activity.usage(),
                )
            if not self.forward_text:
                blocks = [b for b in blocks if b.get("type") not in _HIDDEN_UNLESS_FORWARDED]
            if not blocks:
                return
            message.update(
                {
                    "content": blocks,
                    "type": "message",
                    "model": event.model,
                    "stop_reason": event.stop_reason,
                    "usage": usage,
                }
            )
            message.setdefault("id", "msg_" + event.uuid.replace("-", "")[:24])
            self._message("assistant", activity, message, event)
        elif isinstance(event, ToolResults):
            self._message("user", activity, to_data(event.message), event)

    def _finished(self, activity: SubagentActivity, result: SubagentResult | None) -> None:
        status = "stopped" if result is None else _STATUS.get(result.subtype, "failed")
        self._system("task_updated", activity, patch={"status": status, "end_time": int(time.time() * 1000)})
        self._system(
            "task_notification",
            activity,
            status=status,
            output_file="" if result is None else str(result.transcript),
            summary="" if result is None else result.text,
            usage=activity.usage(),
        )


def _progress(call: dict[str, Any]) -> str:
    """Claude Code's progress line: "Running <command>" for the shell tool, else the tool's name."""
    given = call.get("input")
    args: dict[str, Any] = given if isinstance(given, dict) else {}
    shell = effects_of(str(call.get("name") or "")).shell
    detail = args.get("description") or args.get("command") if shell else None
    return f"Running {detail}" if isinstance(detail, str) and detail else f"Running {call.get('name')}"
