"""Hook configuration: the hooks of every settings layer (each parsed once, when the layer was
read: :attr:`agentkeel.config.settings.SettingsLayer.hooks`), of plugins and of the SDK.

``disableAllHooks: true`` in any layer turns off every hook but the managed ones (and the
SDK's, which the embedding program passed itself); said by the managed layer, it turns off
all of them. Managed ``allowManagedHooksOnly: true`` leaves only the managed (and SDK) hooks.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import msgspec

from agentkeel.config.hooks import (
    AGENT_MAX_TURNS,
    DEFAULT_TIMEOUT,
    EVENTS,
    FIRED,
    Handler,
    HandlerType,
    HookConfig,
    HookSpec,
    parse_handler,
    parse_hooks,
)
from agentkeel.config.settings import SettingsLayer

# the parser lives with the settings (each layer's ``hooks`` is parsed once, when it is read)
from agentkeel.plugins.loader import manifest_hook_files, plugin_manifest

__all__ = [
    "AGENT_MAX_TURNS",
    "DEFAULT_TIMEOUT",
    "EVENTS",
    "FIRED",
    "PLUGIN_ROOT",
    "Handler",
    "HandlerType",
    "HookConfig",
    "HookSpec",
    "load_hooks",
    "parse_handler",
    "parse_hooks",
    "plugin_hooks",
    "plugin_roots",
]

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
        inert = not trusted and project is not None and root.is_relative_to(project.resolve())
        for path, data in _plugin_hook_sources(root, out.warnings):
            if inert:
                out.warnings.append(f"{path}: hooks of a plugin inside this untrusted project are inert (`keel trust`)")
                continue
            part = parse_hooks(data, str(path), "plugin")
            out.hooks += [_in_plugin(spec, str(root)) for spec in part.hooks]
            out.warnings += part.warnings
    return out


def _plugin_hook_sources(root: Path, warnings: list[str]) -> list[tuple[Path, Any]]:
    """(file, its hooks table) of a plugin: ``hooks/hooks.json``, then what its manifest's
    ``"hooks"`` names: files inside the plugin, or an inline table (Claude Code reads all of them)."""
    out: list[tuple[Path, Any]] = []
    default = root / "hooks" / "hooks.json"
    files = [default, *[p for p in manifest_hook_files(root) if p != default.resolve()]]
    for path in files:
        if not path.is_file():
            if os.path.lexists(path) or path != default:  # never opened: a folder, a FIFO, a dangling link
                warnings.append(f"{path}: not a readable file; the plugin's hooks are ignored")
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError, RecursionError) as e:
            warnings.append(f"{path}: cannot read plugin hooks ({type(e).__name__}: {e}); ignored")
            continue
        if not isinstance(data, Mapping):
            warnings.append(f"{path}: the top level must be a JSON object; ignored")
            continue
        out.append((path, data.get("hooks", {})))
    inline = plugin_manifest(root).get("hooks")
    if isinstance(inline, Mapping):
        out.append((root / ".claude-plugin" / "plugin.json", inline.get("hooks", inline)))
    return out


def plugin_roots(dirs: Iterable[Path], layers: Iterable[SettingsLayer]) -> list[Path]:
    """The plugin directories whose hooks a session runs: ``--plugin-dir`` ones, then the plugins
    settings enable (``enabledPlugins`` from a directory marketplace). The plugin loader reports
    the ones it cannot load; here they are left out. A ``--plugin-dir`` on a folder of plugins
    names each child plugin, as for its commands, agents and skills."""
    from agentkeel.plugins.loader import find_plugins, plugin_roots_of

    dirs = [root for d in dirs for root in plugin_roots_of(Path(d))]
    layers = list(layers)
    if not any(la.plugins.enabled for la in layers):
        return dirs
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
    managed_only = any(la.settings.allowManagedHooksOnly is True for la in managed)
    managed_off = any(la.settings.disableAllHooks is True for la in managed)
    user_off = any(la.settings.disableAllHooks is True for la in layers)
    out = HookConfig()
    for layer in layers:
        if managed_off or ((user_off or managed_only) and layer.scope != "managed"):
            continue
        part = layer.hooks  # parsed when the layer was read
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
