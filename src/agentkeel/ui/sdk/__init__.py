"""keel's Python SDK: the Claude Agent SDK's API, running keel in-process or as a subprocess.

    from agentkeel.ui.sdk import KeelAgentOptions, query

    async for message in query(prompt="fix the failing test", options=KeelAgentOptions(cwd=".")):
        print(message)

``KeelAgentOptions(transport="subprocess")`` runs the same code against a ``keel`` process
(the stream-json control protocol); the default runs the engine in this process. Names match
the Claude Agent SDK (``ClaudeSDKClient``, ``ClaudeAgentOptions``, ``tool``,
``create_sdk_mcp_server``, ``HookMatcher``, ``PermissionResultAllow``...) where they overlap.
Everything is imported on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "query": "agentkeel.ui.sdk.client",
    "KeelSDKClient": "agentkeel.ui.sdk.client",
    "ClaudeSDKClient": "agentkeel.ui.sdk.client",
    "KeelAgentOptions": "agentkeel.ui.sdk.types",
    "ClaudeAgentOptions": "agentkeel.ui.sdk.types",
    "KeelSDKError": "agentkeel.ui.sdk.types",
    "HookMatcher": "agentkeel.ui.sdk.types",
    "PermissionResultAllow": "agentkeel.ui.sdk.types",
    "PermissionResultDeny": "agentkeel.ui.sdk.types",
    "ToolPermissionContext": "agentkeel.ui.sdk.types",
    "AssistantMessage": "agentkeel.ui.sdk.types",
    "UserMessage": "agentkeel.ui.sdk.types",
    "SystemMessage": "agentkeel.ui.sdk.types",
    "ResultMessage": "agentkeel.ui.sdk.types",
    "StreamEvent": "agentkeel.ui.sdk.types",
    "TextBlock": "agentkeel.ui.sdk.types",
    "ThinkingBlock": "agentkeel.ui.sdk.types",
    "ToolUseBlock": "agentkeel.ui.sdk.types",
    "ToolResultBlock": "agentkeel.ui.sdk.types",
    "parse_message": "agentkeel.ui.sdk.types",
    "tool": "agentkeel.ui.sdk.tools",
    "create_sdk_mcp_server": "agentkeel.ui.sdk.tools",
    "SdkMcpTool": "agentkeel.ui.sdk.tools",
}

__all__ = [
    "AssistantMessage",
    "ClaudeAgentOptions",
    "ClaudeSDKClient",
    "HookMatcher",
    "KeelAgentOptions",
    "KeelSDKClient",
    "KeelSDKError",
    "PermissionResultAllow",
    "PermissionResultDeny",
    "ResultMessage",
    "SdkMcpTool",
    "StreamEvent",
    "SystemMessage",
    "TextBlock",
    "ThinkingBlock",
    "ToolPermissionContext",
    "ToolResultBlock",
    "ToolUseBlock",
    "UserMessage",
    "create_sdk_mcp_server",
    "parse_message",
    "query",
    "tool",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'agentkeel.ui.sdk' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return list(__all__)


if TYPE_CHECKING:
    from agentkeel.ui.sdk.client import ClaudeSDKClient, KeelSDKClient, query
    from agentkeel.ui.sdk.tools import SdkMcpTool, create_sdk_mcp_server, tool
    from agentkeel.ui.sdk.types import (
        AssistantMessage,
        ClaudeAgentOptions,
        HookMatcher,
        KeelAgentOptions,
        KeelSDKError,
        PermissionResultAllow,
        PermissionResultDeny,
        ResultMessage,
        StreamEvent,
        SystemMessage,
        TextBlock,
        ThinkingBlock,
        ToolPermissionContext,
        ToolResultBlock,
        ToolUseBlock,
        UserMessage,
        parse_message,
    )
