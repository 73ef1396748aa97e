"""Every hook event keel knows, in one table: what its matcher is matched against, what its
payload carries, what of a handler's answer it honours, and where keel fires it.

The dispatcher (payload, environment, matcher), the output parser (what a block or a permission
means), the configuration reader (which event names exist) and ``keel hooks`` (matching and
"keel would") all read :data:`SPECS`. Adding an event is one entry here and the code that fires
it (``LifecyclePoint.fire`` in the subsystem that owns the moment, or the ``hooks`` built-in).

Every payload starts with ``session_id``, ``transcript_path``, ``cwd``; then ``prompt_id`` (once a
prompt was submitted, unless ``prompt_id`` is off), ``permission_mode`` (``mode``), ``effort``
(``effort``), ``hook_event_name``, and the event's own ``fields`` (as Claude Code 2.1.328 sends
them; the reference captures are in ``tests/data``). keel's additions are named in ``extra``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import PurePath
from typing import Any, Literal

import msgspec

# what a block (exit 2, ``decision: "block"``, ``ok: false``) does at this event
Block = Literal[
    "deny",  # the tool call (or the permission request) is denied, with the reason
    "continue",  # the agent goes on with the reason as its next prompt (Stop, SubagentStop)
    "prompt",  # the prompt is not sent; the user sees the reason
    "feedback",  # the reason is added to the tool result the model reads
    "keep",  # the change is not applied (ConfigChange): the session keeps its settings
    "skip",  # the step is not taken (PreSkillExecute, PreCompact)
    "",  # nothing can be blocked: the reason is shown to the user
]


class EventSpec(msgspec.Struct, frozen=True):
    """One hook event. ``matcher``: the payload field a group's matcher is matched against (None:
    every group applies); ``basename``: matched against that path's last part."""

    name: str
    fires: str  # where keel fires it
    fields: tuple[str, ...] = ()  # the event's own payload fields, as Claude Code sends them
    extra: tuple[str, ...] = ()  # keel's additions to the payload
    matcher: str | None = None
    basename: bool = False
    mode: bool = False  # permission_mode in the payload
    effort: bool = False  # effort in the payload, CLAUDE_EFFORT in the environment
    prompt_id: bool = True  # prompt_id, once a prompt was submitted
    env_file: bool = False  # CLAUDE_ENV_FILE: what the handler exports there reaches Bash
    plain_context: bool = False  # a handler's plain stdout (exit 0, not JSON) is context for the model
    # honours permissionDecision and updatedInput ("tool"), and PermissionRequest's decision ("request")
    permission: Literal["", "tool", "request"] = ""
    legacy_decision: bool = False  # the older ``decision: "approve" | "block"`` is a permission
    block: Block = ""

    def match_value(self, fields: Mapping[str, Any]) -> str | None:
        """What a group's matcher is matched against in a payload with these ``fields``."""
        if self.matcher is None:
            return None
        value = fields.get(self.matcher)
        text = "" if value is None else str(value)
        return PurePath(text).name if self.basename and text else text


_TOOL = ("tool_name", "tool_input", "tool_use_id")

SPECS: dict[str, EventSpec] = {
    s.name: s
    for s in (
        EventSpec(
            "SessionStart",
            "before the first request; its context goes with the first prompt",
            ("source",),
            matcher="source",
            prompt_id=False,
            env_file=True,
            plain_context=True,
        ),
        EventSpec("SessionEnd", "when the session closes", ("reason",)),
        EventSpec(
            "UserPromptSubmit",
            "a prompt, before it is sent",
            ("prompt",),
            mode=True,
            plain_context=True,
            block="prompt",
        ),
        EventSpec(
            "PreToolUse",
            "a tool call, before the permission gate (deny > ask > allow)",
            _TOOL,
            matcher="tool_name",
            mode=True,
            effort=True,
            permission="tool",
            legacy_decision=True,
            block="deny",
        ),
        EventSpec(
            "PostToolUse",
            "a tool call that ran and succeeded, before the result guard",
            (*_TOOL, "tool_response", "duration_ms"),
            ("tool_metadata",),
            matcher="tool_name",
            mode=True,
            effort=True,
            block="feedback",
        ),
        EventSpec(
            "PostToolUseFailure",
            "a tool call that ran and failed",
            (*_TOOL, "error", "is_interrupt", "duration_ms"),
            ("tool_metadata",),
            matcher="tool_name",
            mode=True,
            effort=True,
            block="feedback",
        ),
        EventSpec(
            "PostToolBatch",
            "after the last tool call of one assistant message",
            ("tool_calls",),
            mode=True,
            effort=True,
            block="feedback",
        ),
        EventSpec(
            "PermissionRequest",
            "a call the permission rules would ask about, before the user is asked",
            ("tool_name", "tool_input", "permission_suggestions"),
            ("tool_use_id",),
            matcher="tool_name",
            mode=True,
            effort=True,
            permission="request",
            block="deny",
        ),
        EventSpec(
            "PermissionDenied", "a call the permission gate denied", (*_TOOL, "reason"), matcher="tool_name", mode=True
        ),
        EventSpec(
            "Notification",
            "a notice keel shows the user",
            ("message", "title", "notification_type"),
            matcher="notification_type",
        ),
        EventSpec(
            "Stop",
            "the agent would stop; a block continues it",
            ("stop_hook_active", "last_assistant_message", "background_tasks", "session_crons"),
            mode=True,
            effort=True,
            block="continue",
        ),
        EventSpec(
            "StopFailure", "a run ends on a provider error", ("error", "error_details"), matcher="error", mode=True
        ),
        EventSpec("CwdChanged", "a cd in Bash moved the session", ("old_cwd", "new_cwd"), env_file=True),
        EventSpec("SubagentStart", "a subagent starts", ("agent_id", "agent_type"), matcher="agent_type"),
        EventSpec(
            "SubagentStop",
            "a subagent would stop; a block continues it",
            (
                "agent_id",
                "agent_type",
                "agent_transcript_path",
                "stop_hook_active",
                "last_assistant_message",
                "background_tasks",
                "session_crons",
            ),
            matcher="agent_type",
            mode=True,
            effort=True,
            block="continue",
        ),
        EventSpec(
            "PreCompact",
            "before the context is compacted",
            ("trigger", "custom_instructions"),
            matcher="trigger",
            block="skip",
        ),
        EventSpec("PostCompact", "after a compaction", ("trigger",), ("stage", "summary"), matcher="trigger"),
        EventSpec(
            "InstructionsLoaded",
            "an instruction file (CLAUDE.md, AGENTS.md, a rule) was loaded",
            ("file_path", "memory_type", "load_reason"),
            ("parent_file_path", "globs"),
            matcher="load_reason",
        ),
        EventSpec(
            "ConfigChange",
            "a settings file changed (checked at turn boundaries)",
            ("source", "file_path"),
            matcher="source",
            block="keep",
        ),
        EventSpec(
            "FileChanged",
            "a path a hook's watchPaths named changed (checked at turn boundaries)",
            ("file_path", "event"),
            matcher="file_path",
            basename=True,
        ),
        EventSpec(
            "PreSkillExecute",
            "a skill, before it runs",
            ("skill_name", "args", "skill_path"),
            matcher="skill_name",
            block="skip",
        ),
        EventSpec(
            "PostSkillExecute",
            "a skill, after it ran",
            ("skill_name", "args", "skill_path", "is_error"),
            matcher="skill_name",
        ),
        EventSpec("AgentIterationStart", "before each model request", ("iteration",)),
        EventSpec(
            "AgentIterationEnd",
            "an answer without tool calls, or the last call of its batch",
            ("iteration", "tool_calls", "interrupted"),
        ),
    )
}

NOTHING = EventSpec("", "")  # an event name no entry has: nothing in the payload beyond the common fields


def spec(event: str) -> EventSpec:
    return SPECS.get(event, NOTHING)
