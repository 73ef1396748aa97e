"""The ask flow as a ``before_tool`` extension: engine -> (ask callback | headless denial)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from agentkeel.core.events import Event, PermissionDecided
from agentkeel.core.extensions import BeforeTool, ToolCall, Verdict
from agentkeel.permissions.engine import Decision, PermissionEngine

log = logging.getLogger("agentkeel.permissions")

AskFn = Callable[[ToolCall, Decision], Awaitable[bool]]


def headless_denial(call: ToolCall) -> str:
    return (
        f"Permission to use {call.name} was not granted: keel is running without anyone to ask. "
        f'To allow it, re-run with --allowedTools {call.name} (or add "{call.name}" to permissions.allow in '
        ".keel/settings.json), or choose --permission-mode acceptEdits / bypassPermissions."
    )


def permission_gate(engine: PermissionEngine, ask: AskFn | None, emit: Callable[[Event], None]) -> BeforeTool:
    async def gate(call: ToolCall) -> Verdict:
        if call.tool is None:
            return Verdict("deny", f"unknown tool {call.name}", "permissions")
        try:
            decision = engine.decide(call.tool, call.input)
        except Exception:  # fail closed
            log.exception("permission engine crashed on %s", call.name)
            decision = Decision("deny", "the permission check failed; denied for safety", None, "error")
        if decision.decision == "ask":
            granted = False
            if ask is not None:
                try:
                    granted = await ask(call, decision)
                except Exception:
                    log.exception("permission prompt failed")
            reason = (
                "approved by the user"
                if granted
                else (headless_denial(call) if ask is None else f"The user denied permission to use {call.name}.")
            )
            decision = Decision("allow" if granted else "deny", reason, decision.rule, "ask")
        emit(
            PermissionDecided(
                tool_use_id=call.id,
                tool_name=call.name,
                decision=decision.decision,
                reason=decision.reason,
                source=decision.stage,
            )
        )
        return Verdict("allow" if decision.decision == "allow" else "deny", decision.reason, decision.stage)

    return gate
