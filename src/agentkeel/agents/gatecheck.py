"""Asking the session's tool checks about a call that is not a model's tool call.

Skill expansion runs `` !`cmd` `` and reads ``@file``: each goes through the same
``before_tool`` extensions (permission rules, PreToolUse hooks) and the same ask flow as a
model's call, and fails closed.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from agentkeel.core.extensions import ToolCall, Verdict
from agentkeel.core.loop import Agent
from agentkeel.core.tools import Workdir

log = logging.getLogger(__name__)


async def check_call(agent: Agent, name: str, tool_input: dict[str, Any]) -> str | None:
    """None when the call may run; otherwise why not."""
    workdir = agent.services.find(Workdir)
    call = ToolCall(
        id="skill_" + uuid.uuid4().hex[:12],
        name=name,
        input=dict(tool_input),
        tool=agent.tools.get(name),
        cwd=workdir.path if workdir is not None and workdir.path is not None else agent.context.cwd,
        mode=agent.mode(),
    )
    verdict = Verdict("allow")
    for ext in agent.ext:
        if ext.before_tool is None:
            continue
        try:
            answer = await ext.before_tool(call)
        except Exception:
            log.exception("before_tool extension %s failed", ext.name)
            return "the permission check failed; denied for safety"
        if answer is None:
            continue
        if answer.decision == "deny":
            return answer.reason or "denied"
        if answer.stronger_than(verdict):
            verdict = answer
    if verdict.decision == "ask":
        resolve = agent.ext.resolver()
        if resolve is None:
            return f"{verdict.reason or name + ' asks for approval'}; nobody to ask"
        try:
            answer = await resolve(call, verdict)
        except Exception:
            log.exception("resolving an ask for %s failed", name)
            return "asking for permission failed; denied for safety"
        if answer.decision != "allow":
            return answer.reason or "not approved"
    return None
