"""A host's own words for a denial (``PermissionResultDeny(message=...)``, a ``can_use_tool``
answer's ``message``) become the tool result the model reads, as in Claude Code."""

from __future__ import annotations

from agentkeel.core.extensions import Extension, ToolCall
from agentkeel.core.tools import ToolOutput


class DenialMessages:
    def __init__(self) -> None:
        self.pending: dict[str, str] = {}  # tool_use_id -> the host's message

    def extension(self) -> Extension:
        async def after_tool(call: ToolCall, output: ToolOutput) -> ToolOutput:
            message = self.pending.pop(call.id, None)
            if message and output.is_error:
                return ToolOutput(f"Permission to use {call.name} was denied: {message}", is_error=True)
            return output

        return Extension(name="sdk-denial-messages", after_tool=after_tool)
