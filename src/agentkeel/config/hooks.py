"""Claude Code's ``hooks`` settings shape, parsed once per settings layer (and for the SDK's and
plugins' hooks): the lenient reader every hook consumer asks.

``{"hooks": {"<Event>": [{"matcher": "...", "hooks": [{handler}, ...]}]}}``. Each handler
becomes one :class:`HookSpec` that remembers where it came from (the settings file, or
``sdk``). A malformed entry is one warning naming the file and the key, and is skipped:
hooks are a convenience, so a bad one never stops the session (SPEC 4).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

import msgspec

from agentkeel.protocol.hook_events import SPECS

HandlerType = Literal["command", "http", "prompt", "agent", "python"]

# every event keel knows and fires, in the order of the table (spec.py)
EVENTS: tuple[str, ...] = tuple(SPECS)
FIRED: frozenset[str] = frozenset(EVENTS)

# seconds, as Claude Code: a command may run ten minutes, a model or a URL half a minute
DEFAULT_TIMEOUT: dict[str, float] = {"command": 600.0, "python": 60.0, "http": 30.0, "prompt": 30.0, "agent": 60.0}
AGENT_MAX_TURNS = 10  # an agent handler's default bound on model requests
_TYPES: frozenset[str] = frozenset({"command", "http", "prompt", "python", "agent"})


@dataclass(frozen=True)
class Handler:
    """One handler as configured. ``command`` is a shell string, or a list (exec form, no shell)."""

    type: HandlerType
    command: str | tuple[str, ...] = ""
    url: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    allowed_env: tuple[str, ...] = ()
    prompt: str = ""
    model: str = ""
    target: str = ""  # python: "module:function" (an entry point)
    func: Callable[..., Any] | None = field(default=None, compare=False)  # python: an SDK callable
    timeout: float = 600.0
    once: bool = False
    run_async: bool = False
    status_message: str = ""
    fail_closed: bool = False  # PreToolUse: a failure of this handler denies the call
    condition: str = ""  # the handler-level ``if``: a permission rule such as "Bash(rm *)"
    plugin_root: str = ""  # a plugin's hook: its directory (CLAUDE_PLUGIN_ROOT)
    max_turns: int = AGENT_MAX_TURNS  # agent: model requests at most
    rewake: bool = False  # asyncRewake: runs in the background; its block wakes the model

    @property
    def key(self) -> tuple[object, ...]:
        """Identical handlers (same type and what they run) run once per event."""
        what: object = self.func if self.func is not None else self.target
        return (self.type, self.command, self.url, self.headers, self.prompt, self.model, what, self.condition)

    @cached_property
    def label(self) -> str:
        if self.type == "command":
            text = self.command if isinstance(self.command, str) else " ".join(self.command)
        elif self.type == "http":
            text = self.url
        elif self.type in ("prompt", "agent"):
            text = f"{self.type}: {self.prompt}"
        else:
            text = self.target or getattr(self.func, "__qualname__", repr(self.func))
        text = " ".join(text.split())
        return text if len(text) <= 60 else text[:57] + "..."


class HookSpec(msgspec.Struct, frozen=True):
    event: str
    matcher: str
    handler: Handler
    source: str  # the settings file, or "sdk"
    scope: str  # user | project | local | cli | managed | sdk


class HookConfig(msgspec.Struct):
    hooks: list[HookSpec] = msgspec.field(default_factory=list)
    warnings: list[str] = msgspec.field(default_factory=list)

    def for_event(self, event: str) -> list[HookSpec]:
        return [h for h in self.hooks if h.event == event]


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return None
    return float(value)


def parse_handler(raw: object, where: str) -> tuple[Handler | None, str]:
    """A handler from its JSON (or SDK) form, or None and why not."""
    if not isinstance(raw, Mapping):
        return None, f"{where}: a handler must be an object with a 'type'"
    kind = raw.get("type", "command" if "command" in raw else None)
    if kind not in _TYPES:
        return None, f"{where}: unknown handler type {kind!r} (command, http, prompt, agent, python)"
    timeout = raw.get("timeout")
    seconds = _number(timeout) if timeout is not None else DEFAULT_TIMEOUT[str(kind)]
    if seconds is None:
        return None, f"{where}: 'timeout' must be a positive number of seconds"
    condition = raw.get("if", "")
    if not isinstance(condition, str):
        return None, f"{where}: 'if' must be a permission rule such as \"Bash(rm *)\""
    common: dict[str, Any] = {
        "timeout": seconds,
        "once": raw.get("once") is True,
        "run_async": raw.get("async") is True or raw.get("asyncRewake") is True,
        "rewake": raw.get("asyncRewake") is True,
        "status_message": str(raw.get("statusMessage") or ""),
        "fail_closed": raw.get("failClosed") is True,
        "condition": condition.strip(),
    }
    if kind == "command":
        command = raw.get("command")
        if isinstance(command, str) and command.strip():
            return Handler("command", command=command, **common), ""
        if isinstance(command, list) and command and all(isinstance(a, str) for a in command):
            return Handler("command", command=tuple(command), **common), ""
        return None, f"{where}: a command handler needs 'command' (a string, or a list for the exec form)"
    if kind == "http":
        url = raw.get("url")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            return None, f"{where}: an http handler needs 'url' (http:// or https://)"
        headers = raw.get("headers") or {}
        allowed = raw.get("allowedEnvVars") or []
        if not isinstance(headers, Mapping) or not all(isinstance(v, str) for v in headers.values()):
            return None, f"{where}: 'headers' must map names to strings"
        if not isinstance(allowed, list) or not all(isinstance(v, str) for v in allowed):
            return None, f"{where}: 'allowedEnvVars' must be a list of variable names"
        pairs = tuple((str(k), str(v)) for k, v in headers.items())
        return Handler("http", url=url, headers=pairs, allowed_env=tuple(allowed), **common), ""
    if kind in ("prompt", "agent"):
        prompt = raw.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            return None, f"{where}: a{'n' if kind == 'agent' else ''} {kind} handler needs 'prompt'"
        model = raw.get("model")
        model = model if isinstance(model, str) else ""
        if kind == "prompt":
            return Handler("prompt", prompt=prompt, model=model, **common), ""
        turns = raw.get("maxTurns", AGENT_MAX_TURNS)
        if isinstance(turns, bool) or not isinstance(turns, int) or not 1 <= turns <= 50:
            return None, f"{where}: 'maxTurns' must be a whole number from 1 to 50"
        return Handler("agent", prompt=prompt, model=model, max_turns=turns, **common), ""
    target = raw.get("callable", raw.get("entrypoint"))
    if callable(target):
        return Handler("python", func=target, **common), ""
    if isinstance(target, str) and ":" in target:
        return Handler("python", target=target.strip(), **common), ""
    return None, f"{where}: a python handler needs 'callable' (a function, or \"module:function\")"


def parse_hooks(data: object, source: str, scope: str) -> HookConfig:
    """One layer's ``hooks`` value."""
    out = HookConfig()
    if not data:
        return out
    if not isinstance(data, Mapping):
        out.warnings.append(f"{source}: 'hooks' must be an object of event names; ignored")
        return out
    for event, groups in data.items():
        if event not in SPECS:
            known = ", ".join(EVENTS[:13])
            out.warnings.append(f"{source}: unknown hook event '{event}' ignored (known: {known}, ...)")
            continue
        if not isinstance(groups, list):
            out.warnings.append(f"{source}: hooks.{event} must be a list of matcher groups; ignored")
            continue
        for i, group in enumerate(groups):
            where = f"{source}: hooks.{event}[{i}]"
            if not isinstance(group, Mapping) or not isinstance(group.get("hooks"), list):
                out.warnings.append(f'{where} must be {{"matcher": ..., "hooks": [...]}}; ignored')
                continue
            matcher = group.get("matcher") or ""
            if not isinstance(matcher, str):
                out.warnings.append(f"{where}.matcher must be a string; ignored")
                continue
            for j, raw in enumerate(group["hooks"]):
                handler, why = parse_handler(raw, f"{where}.hooks[{j}]")
                if handler is None:
                    out.warnings.append(why)
                    continue
                out.hooks.append(HookSpec(event, matcher, handler, source, scope))
    return out
