"""The ``sandbox`` settings key, in Claude Code's shape: parsed once, from the merged settings, when
they are loaded (:attr:`agentkeel.config.settings.LoadedSettings.sandbox`).

    "sandbox": {
      "enabled": true,
      "autoAllowBashIfSandboxed": true,
      "excludedCommands": ["docker *"],
      "allowUnsandboxedCommands": true,
      "failIfUnavailable": false,
      "network": {"allowedDomains": ["pypi.org"], "allowLocalBinding": false,
                  "allowUnixSockets": ["~/.ssh/agent.sock"], "allowAllUnixSockets": false},
      "filesystem": {"allowWrite": ["~/.cache/pip"], "denyWrite": ["./deploy"], "denyRead": ["~/.aws"]}
    }

A key keel does not know is a warning, never a reason to stop; a value of the wrong type is a
warning too, and the key keeps its default (the safe side: sandboxing stays as configured,
nothing is widened by a typo).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Claude Code keys keel accepts without acting on them (no warning)
_COMPAT = frozenset({"enableWeakerNestedSandbox", "ignoreViolations", "credentials"})
_NETWORK_COMPAT = frozenset({"httpProxyPort", "socksProxyPort", "allowManagedDomainsOnly"})
_FS_COMPAT = frozenset({"allowRead"})


@dataclass(frozen=True)
class SandboxConfig:
    enabled: bool = False
    auto_allow: bool = True  # autoAllowBashIfSandboxed: Claude Code's default is true
    excluded_commands: tuple[str, ...] = ()
    allow_unsandboxed: bool = True  # allowUnsandboxedCommands (the dangerouslyDisableSandbox escape hatch)
    fail_if_unavailable: bool = False
    allowed_domains: tuple[str, ...] = ()
    allow_local_binding: bool = False
    allow_all_unix_sockets: bool = False
    # host Unix sockets (or directories of them) a sandboxed command may connect to; every other
    # one is covered (sandbox/sockets.py). Claude Code's key; on Linux it ignores it and blocks all.
    allow_unix_sockets: tuple[str, ...] = ()
    allow_write: tuple[str, ...] = ()
    deny_write: tuple[str, ...] = ()
    deny_read: tuple[str, ...] = ()
    warnings: tuple[str, ...] = field(default=(), compare=False)


_BOOLS = {
    "enabled": "enabled",
    "autoAllowBashIfSandboxed": "auto_allow",
    "allowUnsandboxedCommands": "allow_unsandboxed",
    "failIfUnavailable": "fail_if_unavailable",
}


def parse_config(raw: object, where: str = "settings") -> SandboxConfig:
    """Read the merged ``sandbox`` value; never raises."""
    if raw is None:
        return SandboxConfig()
    warnings: list[str] = []
    if not isinstance(raw, dict):
        return SandboxConfig(warnings=(f"{where}: 'sandbox' is not an object; ignored",))
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key in _BOOLS:
            _bool(values, _BOOLS[key], value, f"sandbox.{key}", warnings, where)
        elif key == "excludedCommands":
            values["excluded_commands"] = _strings(value, "sandbox.excludedCommands", warnings, where)
        elif key == "network":
            _network(values, value, warnings, where)
        elif key == "filesystem":
            _filesystem(values, value, warnings, where)
        elif key not in _COMPAT:
            warnings.append(f"{where}: unknown key 'sandbox.{key}' ignored")
    return SandboxConfig(**values, warnings=tuple(warnings))


def _bool(values: dict[str, Any], attr: str, value: object, name: str, warnings: list[str], where: str) -> None:
    if isinstance(value, bool):
        values[attr] = value
    else:
        warnings.append(f"{where}: '{name}' must be true or false; ignored")


def _strings(value: object, name: str, warnings: list[str], where: str) -> tuple[str, ...]:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    warnings.append(f"{where}: '{name}' must be a list of strings; ignored")
    return ()


def _network(values: dict[str, Any], value: object, warnings: list[str], where: str) -> None:
    if not isinstance(value, dict):
        warnings.append(f"{where}: 'sandbox.network' is not an object; ignored")
        return
    for key, v in value.items():
        if key == "allowedDomains":
            values["allowed_domains"] = _strings(v, "sandbox.network.allowedDomains", warnings, where)
        elif key == "allowLocalBinding":
            _bool(values, "allow_local_binding", v, "sandbox.network.allowLocalBinding", warnings, where)
        elif key == "allowUnixSockets":
            values["allow_unix_sockets"] = _strings(v, "sandbox.network.allowUnixSockets", warnings, where)
        elif key == "allowAllUnixSockets":
            _bool(values, "allow_all_unix_sockets", v, "sandbox.network.allowAllUnixSockets", warnings, where)
        elif key not in _NETWORK_COMPAT:
            warnings.append(f"{where}: unknown key 'sandbox.network.{key}' ignored")


def _filesystem(values: dict[str, Any], value: object, warnings: list[str], where: str) -> None:
    if not isinstance(value, dict):
        warnings.append(f"{where}: 'sandbox.filesystem' is not an object; ignored")
        return
    names = {"allowWrite": "allow_write", "denyWrite": "deny_write", "denyRead": "deny_read"}
    for key, v in value.items():
        if key in names:
            values[names[key]] = _strings(v, f"sandbox.filesystem.{key}", warnings, where)
        elif key not in _FS_COMPAT:
            warnings.append(f"{where}: unknown key 'sandbox.filesystem.{key}' ignored")
