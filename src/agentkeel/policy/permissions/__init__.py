"""Permission decisions for tool calls, and the ask flow that attaches them to the loop.

The engine is a pure function of (tool, input, rules, mode); the loop sees it only as a
``before_tool`` extension (:class:`PermissionGate`).
"""

from __future__ import annotations

from agentkeel.policy.permissions.engine import PermissionEngine
from agentkeel.policy.permissions.gate import Answer, AskFn, PermissionGate, RequestHook, headless_denial
from agentkeel.policy.permissions.setup import build_engine
from agentkeel.policy.permissions.verdicts import Decision, StageResult

__all__ = [
    "Answer",
    "AskFn",
    "Decision",
    "PermissionEngine",
    "PermissionGate",
    "RequestHook",
    "StageResult",
    "build_engine",
    "headless_denial",
]
