"""Claude Code-compatible hooks (SPEC 4): configuration, matching, handler runners, output
semantics and the ``hooks`` built-in extension that fires each event where it happens.

Names are imported on first use: a session reads its hook configuration through the light
``config`` module and loads the dispatcher (runners, HTTP, output parsing) only when some hook
is configured."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentkeel.hooks.config import EVENTS, FIRED, Handler, HookConfig, HookSpec, load_hooks, parse_hooks
    from agentkeel.hooks.dispatcher import HookContext, HookDispatcher, HookRan
    from agentkeel.hooks.extension import HooksExtension, tool_response
    from agentkeel.hooks.matchers import matcher_error
    from agentkeel.hooks.output import Combined, Outcome
    from agentkeel.protocol.hook_events import SPECS, EventSpec

_WHERE = {
    "EVENTS": "config",
    "FIRED": "config",
    "Handler": "config",
    "HookConfig": "config",
    "HookSpec": "config",
    "load_hooks": "config",
    "parse_hooks": "config",
    "HookContext": "dispatcher",
    "HookDispatcher": "dispatcher",
    "HookRan": "dispatcher",
    "HooksExtension": "extension",
    "tool_response": "extension",
    "matcher_error": "matchers",
    "Combined": "output",
    "Outcome": "output",
    "SPECS": "spec",
    "EventSpec": "spec",
}

__all__ = [
    "EVENTS",
    "FIRED",
    "SPECS",
    "Combined",
    "EventSpec",
    "Handler",
    "HookConfig",
    "HookContext",
    "HookDispatcher",
    "HookRan",
    "HookSpec",
    "HooksExtension",
    "Outcome",
    "load_hooks",
    "matcher_error",
    "parse_hooks",
    "tool_response",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
