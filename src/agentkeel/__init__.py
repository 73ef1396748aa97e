"""keel: an AI agent runtime. This module is the public surface an embedding program uses.

Names are imported on first use (``import agentkeel`` stays free: ``keel --version`` loads
nothing else). The list below is the documented surface; ``tests/unit/app/test_public_api.py`` checks
that it is exactly what ``__all__`` says and that every name resolves.

    from agentkeel import Runtime, RuntimeOptions, Extension
    rt = Runtime.create(RuntimeOptions(cwd=Path("."), model="anthropic:claude-sonnet-4-5"))
    result = await rt.run("fix the failing test"); await rt.aclose()
"""

from __future__ import annotations

import importlib

from agentkeel._version import __version__

TYPE_CHECKING = False  # not typing's: ``typing`` (and ``re``) stay out of ``keel --version``
if TYPE_CHECKING:
    from typing import Any

_EXPORTS: dict[str, str] = {
    # running a session
    "Runtime": "agentkeel.app.runtime",
    "RuntimeOptions": "agentkeel.app.runtime",
    "KeelError": "agentkeel.app.runtime",
    "RunResult": "agentkeel.core.run",
    # extending the loop
    "Extension": "agentkeel.core.extensions",
    "Extensions": "agentkeel.core.extensions",
    "ToolCall": "agentkeel.core.extensions",
    "Verdict": "agentkeel.core.extensions",
    "PromptInfo": "agentkeel.core.extensions",
    "PromptVerdict": "agentkeel.core.extensions",
    "StopInfo": "agentkeel.core.extensions",
    # tools
    "Tool": "agentkeel.core.tools",
    "ToolOutput": "agentkeel.core.tools",
    "ToolContext": "agentkeel.core.tools",
    "ToolError": "agentkeel.core.tools",
    "Services": "agentkeel.core.tools",
    "Workdir": "agentkeel.core.tools",
    # events
    "Event": "agentkeel.core.events",
    "EventBus": "agentkeel.core.events",
    "register_event_type": "agentkeel.core.events",
    "SessionStarted": "agentkeel.core.events",
    "SessionEnded": "agentkeel.core.events",
    "UserMessage": "agentkeel.core.events",
    "AssistantMessage": "agentkeel.core.events",
    "ToolResults": "agentkeel.core.events",
    "RequestStarted": "agentkeel.core.events",
    "TextDelta": "agentkeel.core.events",
    "ThinkingDelta": "agentkeel.core.events",
    "StreamRetry": "agentkeel.core.events",
    "ToolStarted": "agentkeel.core.events",
    "ToolFinished": "agentkeel.core.events",
    "CwdChanged": "agentkeel.core.events",
    "PermissionDecided": "agentkeel.core.events",
    "TodosUpdated": "agentkeel.core.events",
    "Notice": "agentkeel.core.events",
    "Interrupted": "agentkeel.core.events",
    "RunFinished": "agentkeel.core.events",
    # conversation types
    "Message": "agentkeel.core.types",
    "TextBlock": "agentkeel.core.types",
    "ImageBlock": "agentkeel.core.types",
    "ThinkingBlock": "agentkeel.core.types",
    "ToolUseBlock": "agentkeel.core.types",
    "ToolResultBlock": "agentkeel.core.types",
    "Usage": "agentkeel.core.types",
    "replace": "agentkeel.core.types",
    # models
    "ModelRequest": "agentkeel.core.provider",
    "ModelResponse": "agentkeel.core.provider",
    "ProviderError": "agentkeel.core.provider",
    # permissions, as a host answers them
    "PermissionMode": "agentkeel.config.settings",
    "PermissionDecision": "agentkeel.policy.permissions",
    "PermissionAnswer": "agentkeel.policy.permissions",
    # sessions and trust, as a front end lists and opens them
    "keel_home": "agentkeel.session.store",
    "TrustStore": "agentkeel.config.trust",
}
_RENAMED = {"PermissionDecision": "Decision", "PermissionAnswer": "Answer"}

__all__ = [
    "AssistantMessage",
    "CwdChanged",
    "Event",
    "EventBus",
    "Extension",
    "Extensions",
    "ImageBlock",
    "Interrupted",
    "KeelError",
    "Message",
    "ModelRequest",
    "ModelResponse",
    "Notice",
    "PermissionAnswer",
    "PermissionDecided",
    "PermissionDecision",
    "PermissionMode",
    "PromptInfo",
    "PromptVerdict",
    "ProviderError",
    "RequestStarted",
    "RunFinished",
    "RunResult",
    "Runtime",
    "RuntimeOptions",
    "Services",
    "SessionEnded",
    "SessionStarted",
    "StopInfo",
    "StreamRetry",
    "TextBlock",
    "TextDelta",
    "ThinkingBlock",
    "ThinkingDelta",
    "TodosUpdated",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolError",
    "ToolFinished",
    "ToolOutput",
    "ToolResultBlock",
    "ToolResults",
    "ToolStarted",
    "ToolUseBlock",
    "TrustStore",
    "Usage",
    "UserMessage",
    "Verdict",
    "Workdir",
    "__version__",
    "keel_home",
    "register_event_type",
    "replace",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'agentkeel' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), _RENAMED.get(name, name))
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:
    from agentkeel.app.runtime import KeelError, Runtime, RuntimeOptions
    from agentkeel.config.settings import PermissionMode
    from agentkeel.config.trust import TrustStore
    from agentkeel.core.events import (
        AssistantMessage,
        CwdChanged,
        Event,
        EventBus,
        Interrupted,
        Notice,
        PermissionDecided,
        RequestStarted,
        RunFinished,
        SessionEnded,
        SessionStarted,
        StreamRetry,
        TextDelta,
        ThinkingDelta,
        TodosUpdated,
        ToolFinished,
        ToolResults,
        ToolStarted,
        UserMessage,
        register_event_type,
    )
    from agentkeel.core.extensions import (
        Extension,
        Extensions,
        PromptInfo,
        PromptVerdict,
        StopInfo,
        ToolCall,
        Verdict,
    )
    from agentkeel.core.provider import ModelRequest, ModelResponse, ProviderError
    from agentkeel.core.run import RunResult
    from agentkeel.core.tools import Services, Tool, ToolContext, ToolError, ToolOutput, Workdir
    from agentkeel.core.types import (
        ImageBlock,
        Message,
        TextBlock,
        ThinkingBlock,
        ToolResultBlock,
        ToolUseBlock,
        Usage,
        replace,
    )
    from agentkeel.policy.permissions import Answer as PermissionAnswer
    from agentkeel.policy.permissions import Decision as PermissionDecision
    from agentkeel.session.store import keel_home
