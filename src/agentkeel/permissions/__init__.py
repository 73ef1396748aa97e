"""Permission decisions for tool calls, and the ask flow that attaches them to the loop.

The engine is a pure function of (tool, input, settings, mode); the loop sees it only as a
``before_tool`` extension (:func:`permission_gate`).
"""

from __future__ import annotations

from agentkeel.permissions.engine import Decision, PermissionEngine
from agentkeel.permissions.gate import AskFn, headless_denial, permission_gate

__all__ = ["AskFn", "Decision", "PermissionEngine", "headless_denial", "permission_gate"]
