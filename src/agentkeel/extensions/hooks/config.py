"""Hook configuration: Claude Code's ``hooks`` shape, read from every settings layer and the SDK.

``{"hooks": {"<Event>": [{"matcher": "...", "hooks": [{handler}, ...]}]}}``. Each handler
becomes one :class:`HookSpec` that remembers where it came from (the settings file, or
``sdk``). A malformed entry is one warning naming the file and the key, and is skipped:
hooks are a convenience, so a bad one never stops the session (SPEC 4).

``disableAllHooks: true`` in any layer turns off every hook but the managed ones (and the
SDK's, which the embedding program passed itself); said by the managed layer, it turns off
all of them. Managed ``allowManagedHooksOnly: true`` leaves only the managed (and SDK) hooks.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import msgspec

from agentkeel.extensions.hooks.spec import SPECS
from agentkeel.settings import SettingsLayer

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


PLUGIN_ROOT = "${CLAUDE_PLUGIN_ROOT}"


def _expand(value: str, root: str) -> str:
    return value.replace(PLUGIN_ROOT, root).replace("$CLAUDE_PLUGIN_ROOT", root)


def _in_plugin(spec: HookSpec, root: str) -> HookSpec:
    h = spec.handler
    command = h.command if isinstance(h.command, tuple) else _expand(h.command, root)
    if isinstance(command, tuple):
        command = tuple(_expand(a, root) for a in command)
    handler = replace(h, command=command, url=_expand(h.url, root), prompt=_expand(h.prompt, root), plugin_root=root)
    return msgspec.structs.replace(spec, handler=handler)


def plugin_hooks(dirs: Iterable[Path], *, project: Path | None = None, trusted: bool = True) -> HookConfig:
    """``<plugin>/hooks/hooks.json`` of each plugin directory, ``${CLAUDE_PLUGIN_ROOT}`` expanded.

    The file is Claude Code's: ``{"description": ..., "hooks": {"<Event>": [...]}}``. A plugin that
    lives inside an untrusted project is that project's code: its hooks stay inert, as the
    project's own hooks do, until the folder is trusted."""
    out = HookConfig()
    for raw_dir in dirs:
        root = Path(raw_dir).expanduser().resolve()
        path = root / "hooks" / "hooks.json"
        if not path.is_file():
            if os.path.lexists(path):  # a folder, a FIFO, a dangling or looping link: never opened
                out.warnings.append(f"{path}: not a readable file; the plugin's hooks are ignored")
            continue
        if not trusted and project is not None and root.is_relative_to(project.resolve()):
            out.warnings.append(f"{path}: hooks of a plugin inside this untrusted project are inert (`keel trust`)")
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError, RecursionError) as e:
            out.warnings.append(f"{path}: cannot read plugin hooks ({type(e).__name__}: {e}); ignored")
            continue
        if not isinstance(data, Mapping):
            out.warnings.append(f"{path}: the top level must be a JSON object; ignored")
            continue
        part = parse_hooks(data.get("hooks", {}), str(path), "plugin")
        out.hooks += [_in_plugin(spec, str(root)) for spec in part.hooks]
        out.warnings += part.warnings
    return out


def plugin_roots(dirs: Iterable[Path], layers: Iterable[SettingsLayer]) -> list[Path]:
    """The plugin directories whose hooks a session runs: ``--plugin-dir`` ones, then the plugins
    settings enable (``enabledPlugins`` from a directory marketplace). The plugin loader reports
    the ones it cannot load; here they are left out."""
    dirs, layers = list(dirs), list(layers)
    if not any(la.data.get("enabledPlugins") for la in layers):
        return dirs
    from agentkeel.plugins.loader import find_plugins

    found, _ = find_plugins(dirs, layers)
    return list(dict.fromkeys([*dirs, *(p.root for p in found)]))


def load_hooks(
    layers: Iterable[SettingsLayer],
    sdk: Mapping[str, Any] | None = None,
    plugins: HookConfig | None = None,
) -> HookConfig:
    """Every layer's hooks, lowest precedence first, then plugins' and the SDK's; with the disable
    switches (plugin hooks are not managed ones)."""
    layers = list(layers)
    managed = [la for la in layers if la.scope == "managed"]
    managed_only = any(la.data.get("allowManagedHooksOnly") is True for la in managed)
    managed_off = any(la.data.get("disableAllHooks") is True for la in managed)
    user_off = any(la.data.get("disableAllHooks") is True for la in layers)
    out = HookConfig()
    for layer in layers:
        if managed_off or ((user_off or managed_only) and layer.scope != "managed"):
            continue
        part = parse_hooks(layer.data.get("hooks"), str(layer.path), layer.scope)
        out.hooks += part.hooks
        out.warnings += part.warnings
    if plugins is not None:
        out.warnings += plugins.warnings
        if not (managed_off or user_off or managed_only):
            out.hooks += plugins.hooks
    if sdk and not managed_off:
        part = parse_hooks(sdk, "sdk", "sdk")
        out.hooks += part.hooks
        out.warnings += part.warnings
    return out
