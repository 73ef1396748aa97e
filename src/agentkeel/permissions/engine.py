"""The permission engine: allow, ask or deny one tool call, with the rule and stage that decided."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from agentkeel.core.tools import Tool
from agentkeel.settings import PermissionMode

DecisionKind = Literal["allow", "ask", "deny"]


@dataclass(frozen=True)
class Decision:
    decision: DecisionKind
    reason: str
    rule: str | None = None
    stage: str = "default"


def _bare(rule: str) -> str | None:
    rule = rule.strip()
    return rule if rule and "(" not in rule else None


class PermissionEngine:
    """Tool-level rules (``Read``, ``Bash``) and modes. Read-only tools are allowed by default;
    writes and shell ask, as in Claude Code's default mode."""

    def __init__(
        self,
        *,
        mode: PermissionMode = "default",
        allow: Iterable[str] = (),
        ask: Iterable[str] = (),
        deny: Iterable[str] = (),
    ) -> None:
        self.mode: PermissionMode = mode
        self.allow = [r.strip() for r in allow if r.strip()]
        self.ask = [r.strip() for r in ask if r.strip()]
        self.deny = [r.strip() for r in deny if r.strip()]

    def hidden(self, tool: Tool) -> bool:
        """A bare deny rule removes the tool from the model's view."""
        return tool.name in {_bare(r) for r in self.deny}

    def decide(self, tool: Tool, tool_input: dict[str, Any]) -> Decision:
        for rule in self.deny:
            if _bare(rule) == tool.name:
                return Decision("deny", f"{tool.name} is denied by rule {rule}", rule, "deny-rules")
        if self.mode == "bypassPermissions":
            return Decision("allow", "bypassPermissions mode", None, "mode")
        for rule in self.ask:
            if _bare(rule) == tool.name:
                return self._asked(Decision("ask", f"{tool.name} requires approval (rule {rule})", rule, "ask-rules"))
        for rule in self.allow:
            if _bare(rule) == tool.name:
                return Decision("allow", f"allowed by rule {rule}", rule, "allow-rules")
        if tool.read_only and not tool.is_external:
            return Decision("allow", f"{tool.name} is read-only", None, "tool-default")
        if self.mode == "plan":
            return Decision("deny", f"{tool.name} is not available in plan mode (read-only tools only)", None, "mode")
        if self.mode == "acceptEdits" and tool.group == "fs":
            return Decision("allow", "acceptEdits mode allows file edits", None, "mode")
        return self._asked(Decision("ask", f"{tool.name} requires approval", None, "default"))

    def _asked(self, decision: Decision) -> Decision:
        if self.mode == "dontAsk":
            return Decision("deny", decision.reason + " and dontAsk mode denies what would ask", decision.rule, "mode")
        return decision
