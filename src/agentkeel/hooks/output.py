"""What a handler's result means (SPEC 4, Claude Code's semantics), as data.

exit 0: success; stdout is parsed as JSON when it starts with ``{``, and plain stdout is
context for UserPromptSubmit and SessionStart. exit 2: block, with stderr as the reason (for
Stop and SubagentStop, a JSON ``reason`` on stdout first, as Claude Code 2.1.328 reads it). A
first stdout line ``{"async": true, ...}`` is Claude Code's async protocol: the lines after it
are the handler's answer.
Any other exit: a non-blocking error shown to the user. JSON fields: ``continue``,
``stopReason``, ``suppressOutput``, ``systemMessage``, ``decision: "block"`` + ``reason``,
and ``hookSpecificOutput`` (``permissionDecision``, ``permissionDecisionReason``,
``updatedInput``, ``additionalContext``, ``watchPaths``; PermissionRequest's ``decision``).
Several handlers' answers combine by strength: deny > ask > allow.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import msgspec

from agentkeel.hooks.config import HookSpec
from agentkeel.hooks.runners import Raw, async_line
from agentkeel.protocol.hook_events import EventSpec, spec

Permission = Literal["allow", "ask", "deny"]
_STRENGTH = {"allow": 0, "ask": 1, "deny": 2}


class Outcome(msgspec.Struct):
    spec: HookSpec
    raw: Raw
    duration_ms: int = 0
    blocked: bool = False  # exit 2, decision "block", ok: false
    reason: str = ""
    permission: Permission | None = None  # PreToolUse's permissionDecision; PermissionRequest's behavior
    updated_input: dict[str, Any] | None = None
    context: list[str] = msgspec.field(default_factory=list)
    system_message: str = ""
    stop: bool = False  # "continue": false
    stop_reason: str = ""
    suppress: bool = False
    watch_paths: list[str] = msgspec.field(default_factory=list)
    error: str = ""  # a failure shown to the user (non-blocking unless the handler is failClosed)

    @property
    def failed(self) -> bool:
        return bool(self.error)

    @property
    def summary(self) -> str:
        if self.error:
            return "error"
        if self.permission is not None:
            return self.permission
        if self.blocked:
            return "block"
        if self.stop:
            return "stop"
        return "context" if self.context else "ok"


def _first_line(text: str, limit: int = 300) -> str:
    line = next((x.strip() for x in text.splitlines() if x.strip()), "")
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _after_async(stdout: str) -> str:
    """A handler that opens with Claude Code's ``{"async": true, "asyncTimeout": ...}`` line has
    its answer (if any) in the lines after it."""
    first, _, rest = stdout.lstrip().partition("\n")
    return rest if async_line(first) else stdout


def _json_reason(stdout: str) -> str:
    text = stdout.strip()
    if not text.startswith("{"):
        return ""
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return ""
    reason = data.get("reason") if isinstance(data, dict) else None
    return reason.strip() if isinstance(reason, str) else ""


def interpret(event: str, hook: HookSpec, raw: Raw, duration_ms: int = 0) -> Outcome:
    """One handler's answer, read as the event's spec says (what a block means, whether a
    permission or plain stdout counts)."""
    out = Outcome(hook, raw, duration_ms)
    what = spec(event)
    name = f"{event} hook `{hook.handler.label}`"
    if raw.error:
        out.error = f"{name} {raw.error}"
        return out
    stdout = _after_async(raw.stdout)
    if raw.exit_code == 2:
        out.blocked = True
        out.reason = raw.stderr.strip() or f"blocked by {name}"
        if what.block == "continue":  # Claude Code: the JSON reason on stdout, else stderr, else a note
            said = _json_reason(stdout)
            command = hook.handler.command if isinstance(hook.handler.command, str) else hook.handler.label
            out.reason = said or raw.stderr.strip() or f"[{command}]: No stderr output"
        if what.block == "deny":
            out.permission = "deny"
        return out
    if raw.exit_code != 0:
        detail = _first_line(raw.stderr) or _first_line(raw.stdout)
        out.error = f"{name} failed (exit {raw.exit_code})" + (f": {detail}" if detail else "")
        return out
    data: Any = raw.parsed
    text = stdout.strip()
    if data is None and text.startswith("{"):
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, RecursionError):
            out.error = f"{name} printed output that is not valid JSON: {_first_line(text, 80)}"
            return out
    if isinstance(data, dict):
        _apply_json(what, out, data)
    elif text and what.plain_context:
        out.context.append(text)
    return out


def _apply_json(what: EventSpec, out: Outcome, data: dict[str, Any]) -> None:
    if data.get("continue") is False:
        out.stop = True
        out.stop_reason = str(data.get("stopReason") or "")
    out.suppress = data.get("suppressOutput") is True
    if isinstance(data.get("systemMessage"), str):
        out.system_message = data["systemMessage"]
    decision, reason = data.get("decision"), data.get("reason")
    if decision == "block":
        out.blocked = True
        out.reason = str(reason or "")
        if what.legacy_decision:
            out.permission = "deny"
    elif decision == "approve" and what.legacy_decision:  # the older PreToolUse form
        out.permission = "allow"
        out.reason = str(reason or "")
    if data.get("ok") is False:  # a prompt handler's answer
        out.blocked = True
        out.reason = str(data.get("reason") or "")
    specific = data.get("hookSpecificOutput")
    if not isinstance(specific, dict):
        return
    extra = specific.get("additionalContext")
    if isinstance(extra, str) and extra.strip():
        out.context.append(extra)
    watch = specific.get("watchPaths")
    if isinstance(watch, list):
        out.watch_paths = [str(p) for p in watch]
    if not what.permission:
        return
    permission = specific.get("permissionDecision")
    if permission in _STRENGTH:
        out.permission = permission
        out.reason = str(specific.get("permissionDecisionReason") or out.reason)
        out.blocked = out.blocked or permission == "deny"
    if isinstance(specific.get("updatedInput"), dict):
        out.updated_input = specific["updatedInput"]
    behaviour = specific.get("decision")  # PermissionRequest: {"behavior": "allow"|"deny", ...}
    if what.permission == "request" and isinstance(behaviour, dict):
        if behaviour.get("behavior") in ("allow", "deny"):
            out.permission = behaviour["behavior"]
            out.reason = str(behaviour.get("message") or out.reason)
        if isinstance(behaviour.get("updatedInput"), dict):
            out.updated_input = behaviour["updatedInput"]


class Combined(msgspec.Struct):
    """Every handler's answer for one event, folded."""

    outcomes: list[Outcome]

    @property
    def permission(self) -> Permission | None:
        best: Permission | None = None
        for o in self.outcomes:
            if o.permission is not None and (best is None or _STRENGTH[o.permission] > _STRENGTH[best]):
                best = o.permission
        return best

    def reason_for(self, permission: Permission | None = None) -> str:
        reasons = [o.reason for o in self.outcomes if o.reason and (permission is None or o.permission == permission)]
        return "\n".join(dict.fromkeys(reasons))

    @property
    def blocked(self) -> bool:
        return any(o.blocked for o in self.outcomes)

    @property
    def block_reason(self) -> str:
        return "\n".join(dict.fromkeys(o.reason for o in self.outcomes if o.blocked and o.reason))

    @property
    def updated_input(self) -> dict[str, Any] | None:
        updates = [o.updated_input for o in self.outcomes if o.updated_input is not None]
        return updates[-1] if updates else None

    @property
    def context(self) -> list[str]:
        return [c for o in self.outcomes for c in o.context]

    @property
    def stop(self) -> Outcome | None:
        return next((o for o in self.outcomes if o.stop), None)

    def failed_closed(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.failed and o.spec.handler.fail_closed]
