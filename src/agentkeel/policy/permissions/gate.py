"""The ask flow as a ``before_tool`` extension.

engine -> (allow | deny | ask). An ask goes to the PermissionRequest extension point first
(hooks attach there), then to the host callback (the SDK's ``can_use_tool``, or the TTY
prompt in interactive mode). With nobody to ask, it is denied with a message the model can
act on. Any crash on the way denies (fail closed) and is logged.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Literal

import msgspec

from agentkeel.core.events import Event, PermissionDecided
from agentkeel.core.extensions import ToolCall, Verdict
from agentkeel.policy.permissions.engine import PermissionEngine
from agentkeel.policy.permissions.verdicts import Decision
from agentkeel.tools import FETCH

log = logging.getLogger("agentkeel.policy.permissions")

Answer = Literal["allow", "allow_session", "allow_project", "deny"]
AskFn = Callable[[ToolCall, Decision], Awaitable["Answer | bool"]]
RequestHook = Callable[[ToolCall, Decision], Awaitable["Literal['allow', 'deny'] | None"]]
NETWORK_TOOL = "SandboxNetworkAccess"  # the call a sandbox network ask is shown as (input: {"host": ...})


def headless_denial(call: ToolCall, decision: Decision | None = None) -> str:
    reason = f" ({decision.reason})" if decision is not None and decision.reason else ""
    rule = decision.suggestions[0] if decision is not None and decision.suggestions else call.name
    return (
        f"Permission to use {call.name} was not granted{reason}: keel is running without anyone to ask. "
        f"Do not retry the same call. To allow it, the user can re-run with --allowedTools '{rule}' (or add it to "
        "permissions.allow in .keel/settings.json), or choose --permission-mode acceptEdits / bypassPermissions."
    )


def remember_for_project(settings_file: Path, rules: list[str]) -> None:
    """Append allow rules to a settings file (``.keel/settings.local.json``), keeping the rest."""
    data: dict[str, object] = {}
    if settings_file.is_file():
        loaded = json.loads(settings_file.read_text(encoding="utf-8") or "{}")
        if not isinstance(loaded, dict):
            raise ValueError(f"{settings_file}: the top level is not an object")
        data = loaded
    perms = data.setdefault("permissions", {})
    if not isinstance(perms, dict):
        raise ValueError(f"{settings_file}: 'permissions' is not an object")
    allow = perms.setdefault("allow", [])
    if not isinstance(allow, list):
        raise ValueError(f"{settings_file}: 'permissions.allow' is not a list")
    allow += [r for r in rules if r not in allow]
    settings_file.parent.mkdir(parents=True, exist_ok=True)
    tmp = settings_file.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    tmp.replace(settings_file)
    from agentkeel.config.localfiles import ignore_local_files

    ignore_local_files(settings_file)


def _always_asks(decision: Decision) -> bool:
    """An ask nothing but the user answers (an ask rule, a protected path, a transactional tool)."""
    return any(s.verdict == "ask" and s.strength == "always" for s in decision.trace)


class PermissionGate(msgspec.Struct):
    engine: PermissionEngine
    emit: Callable[[Event], None]
    ask: AskFn | None = None
    request_hooks: list[RequestHook] = msgspec.field(default_factory=list)  # the PermissionRequest extension point
    project_settings: Path | None = None  # where "always for this project" is written
    on_project_rule: Callable[[], None] | None = None  # e.g. re-record project trust after writing

    async def __call__(self, call: ToolCall) -> Verdict:
        if call.tool is None:
            return Verdict("deny", f"unknown tool {call.name}", "permissions")
        try:
            decision = self.engine.decide(call.name, call.input, call.tool, shell_cwd=_cwd(call))
        except Exception:  # fail closed
            log.exception("permission engine crashed on %s", call.name)
            decision = Decision("deny", "the permission check failed; denied for safety", None, "error")
        if decision.decision == "ask" and call.approved_by and not _always_asks(decision):
            decision = Decision("allow", f"allowed by a {call.approved_by}", decision.rule, "hook", decision.trace)
        if decision.decision == "ask":
            decision = await self._ask(call, decision)
        return self._decided(call, decision)

    async def resolve(self, call: ToolCall, reason: str) -> Verdict:
        """Resolve an ask that another extension raised (a PreToolUse hook's "ask"): the same
        PermissionRequest point, host callback and prompt as the engine's own asks."""
        suggestions = self.engine.decide(call.name, call.input, call.tool, shell_cwd=_cwd(call)).suggestions
        decision = await self._ask(
            call, Decision("ask", reason or f"{call.name} asks for approval", None, "hook", (), suggestions)
        )
        return self._decided(call, decision)

    def can_ask(self) -> bool:
        """Someone can answer an ask: a PermissionRequest hook, or the host (prompt, ``can_use_tool``)."""
        return self.ask is not None or bool(self.request_hooks)

    async def ask_network(self, host: str) -> bool:
        """The sandbox's question about a host no rule allows (Claude Code's "Network request outside
        of sandbox"), as a ``SandboxNetworkAccess`` call (Claude Code's name) through the same
        PermissionRequest point and host callback as every ask. "Always" saves ``WebFetch(domain:host)``."""
        call = ToolCall(f"net-{secrets.token_hex(6)}", NETWORK_TOOL, {"host": host}, None)
        rule = f"{FETCH}(domain:{host})"
        reason = f"A sandboxed command wants to connect to {host}, which no rule allows"
        decision = await self._ask(call, Decision("ask", reason, None, "sandbox", (), (rule,)))
        self._decided(call, decision)
        return decision.decision == "allow"

    def _decided(self, call: ToolCall, decision: Decision) -> Verdict:
        """Record the final decision on the bus and answer the loop."""
        self.emit(
            PermissionDecided(
                tool_use_id=call.id,
                tool_name=call.name,
                decision=decision.decision,
                reason=decision.reason,
                source=decision.stage,
            )
        )
        return Verdict("allow" if decision.decision == "allow" else "deny", decision.reason, decision.stage)

    async def _ask(self, call: ToolCall, decision: Decision) -> Decision:
        for hook in self.request_hooks:
            try:
                answer = await hook(call, decision)
            except Exception:
                log.exception("PermissionRequest hook failed; denying")
                return Decision("deny", "a PermissionRequest hook failed; denied for safety", None, "hook")
            if answer == "deny":
                return Decision("deny", f"{call.name} was denied by a PermissionRequest hook", None, "hook")
            if answer == "allow":
                return Decision("allow", f"{call.name} was allowed by a PermissionRequest hook", None, "hook")
        if self.ask is None:
            return Decision("deny", headless_denial(call, decision), decision.rule, "ask")
        try:
            raw = await self.ask(call, decision)
        except Exception:
            log.exception("permission prompt failed; denying")
            raw = "deny"
        choice: Answer = ("allow" if raw else "deny") if isinstance(raw, bool) else raw
        if choice == "deny":
            return Decision("deny", f"The user denied permission to use {call.name}.", decision.rule, "ask")
        if choice in ("allow_session", "allow_project") and decision.suggestions:
            rules = list(decision.suggestions)
            self.engine.add(rules, "allow", "session", "session")
            if choice == "allow_project" and self.project_settings is not None:
                try:
                    remember_for_project(self.project_settings, rules)
                    self.engine.add(rules, "allow", str(self.project_settings), "local")
                    if self.on_project_rule is not None:
                        self.on_project_rule()
                except (OSError, ValueError) as e:  # convenience: fail open to "this session"
                    log.warning("could not save the rule to %s: %s", self.project_settings, e)
        return Decision("allow", "approved by the user", decision.rule, "ask")


def _cwd(call: ToolCall) -> str | None:
    """The session's live working directory (the shell's, after any ``cd``), as the loop saw it."""
    return str(call.cwd) if call.cwd is not None else None
