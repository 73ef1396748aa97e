"""keel's Python SDK: the Claude Agent SDK's API, running keel in-process or as a subprocess.

    from agentkeel.sdk import KeelAgentOptions, query

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
    "query": "agentkeel.sdk.client",
    "KeelSDKClient": "agentkeel.sdk.client",
    "ClaudeSDKClient": "agentkeel.sdk.client",
    "KeelAgentOptions": "agentkeel.sdk.types",
    "ClaudeAgentOptions": "agentkeel.sdk.types",
    "KeelSDKError": "agentkeel.sdk.types",
    "HookMatcher": "agentkeel.sdk.types",
    "PermissionResultAllow": "agentkeel.sdk.types",
    "PermissionResultDeny": "agentkeel.sdk.types",
    "ToolPermissionContext": "agentkeel.sdk.types",
    "AssistantMessage": "agentkeel.sdk.types",
    "UserMessage": "agentkeel.sdk.types",
    "SystemMessage": "agentkeel.sdk.types",
    "ResultMessage": "agentkeel.sdk.types",
    "StreamEvent": "agentkeel.sdk.types",
    "TextBlock": "agentkeel.sdk.types",
    "ThinkingBlock": "agentkeel.sdk.types",
    "ToolUseBlock": "agentkeel.sdk.types",
    "ToolResultBlock": "agentkeel.sdk.types",
    "parse_message": "agentkeel.sdk.types",
    "tool": "agentkeel.sdk.tools",
    "create_sdk_mcp_server": "agentkeel.sdk.tools",
    "SdkMcpTool": "agentkeel.sdk.tools",
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
        raise AttributeError(f"module 'agentkeel.sdk' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return list(__all__)


if TYPE_CHECKING:
    from agentkeel.sdk.client import ClaudeSDKClient, KeelSDKClient, query
    from agentkeel.sdk.tools import SdkMcpTool, create_sdk_mcp_server, tool
    from agentkeel.sdk.types import (
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
