"""Building the engine from settings layers and CLI flags (the one path the loop and
``keel permissions check`` share)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from agentkeel.config.settings import LoadedSettings, PermissionMode
from agentkeel.policy.permissions.engine import PermissionEngine, rule_root


def build_engine(
    loaded: LoadedSettings,
    *,
    cwd: Path,
    mode: PermissionMode | None = None,
    allowed_tools: Iterable[str] = (),
    disallowed_tools: Iterable[str] = (),
    add_dirs: Iterable[Path] = (),
    home: Path,
    keel_home: Path | None = None,
    channel: str = "interactive",
) -> PermissionEngine:
    perms = loaded.settings.permissions
    chosen: PermissionMode = mode or perms.defaultMode or "default"
    warnings: list[str] = []
    if chosen == "bypassPermissions" and perms.disableBypassPermissionsMode == "disable":
        warnings.append("bypassPermissions is disabled by settings (disableBypassPermissionsMode); using default")
        chosen = "default"
    dirs = [*add_dirs, *(Path(d).expanduser() for d in perms.additionalDirectories)]
    engine = PermissionEngine(
        cwd=str(cwd),
        mode=chosen,
        additional_dirs=tuple(str((cwd / d).resolve()) for d in dirs),
        home=str(home),
        keel_home=str(keel_home) if keel_home else None,
        channel=channel,
        groups=dict(perms.groups),
    )
    engine.warnings += warnings
    for layer in loaded.layers:
        own = layer.settings.permissions  # this file's own rules, validated when it was read
        root = rule_root(str(layer.path))
        engine.add(own.deny, "deny", str(layer.path), layer.scope, root)
        engine.add(own.ask, "ask", str(layer.path), layer.scope, root)
        engine.add(own.allow, "allow", str(layer.path), layer.scope, root)
    engine.add(disallowed_tools, "deny", "--disallowedTools", "cli", str(cwd))
    engine.add(allowed_tools, "allow", "--allowedTools", "cli", str(cwd))
    for name, rules in perms.channels.items():
        engine.add_channel(name, rules.deny, "deny", f"permissions.channels.{name}")
        engine.add_channel(name, rules.ask, "ask", f"permissions.channels.{name}")
        engine.add_channel(name, rules.allow, "allow", f"permissions.channels.{name}")
    return engine
