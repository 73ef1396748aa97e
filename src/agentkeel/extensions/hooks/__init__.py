"""Claude Code-compatible hooks (SPEC 4): configuration, matching, handler runners, output
semantics and the ``hooks`` built-in extension that fires each event where it happens."""

from __future__ import annotations

from agentkeel.extensions.hooks.config import EVENTS, FIRED, Handler, HookConfig, HookSpec, load_hooks, parse_hooks
from agentkeel.extensions.hooks.dispatcher import HookContext, HookDispatcher, HookRan
from agentkeel.extensions.hooks.extension import HooksExtension, tool_response
from agentkeel.extensions.hooks.matchers import matcher_error
from agentkeel.extensions.hooks.output import Combined, Outcome

__all__ = [
    "EVENTS",
    "FIRED",
    "Combined",
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
