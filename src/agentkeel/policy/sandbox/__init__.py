"""An OS sandbox under the Bash tool: bubblewrap on Linux, configured by Claude Code's ``sandbox``
settings key. The permission engine decides what may run; the sandbox bounds what a command
that runs can touch, so one wrong analysis does not hand a command the user's full rights.

:func:`setup_sandbox` builds the per-session :class:`Sandbox` service from settings (the Bash
tool finds it in ``Services``); :func:`status` is what ``keel sandbox status`` prints.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentkeel.policy.sandbox.config import SandboxConfig, parse_config
from agentkeel.policy.sandbox.probe import Probe, probe
from agentkeel.policy.sandbox.service import Sandbox, SandboxError

if TYPE_CHECKING:
    from agentkeel.policy.permissions.engine import PermissionEngine

__all__ = ["Probe", "Sandbox", "SandboxConfig", "SandboxError", "parse_config", "probe", "setup_sandbox", "status"]


def setup_sandbox(
    raw: object,
    *,
    cwd: Path,
    home: Path,
    keel_home: Path | None,
    additional_dirs: tuple[Path, ...] = (),
    engine: PermissionEngine | None = None,
    warnings: list[str] | None = None,
) -> Sandbox | None:
    """The session's sandbox, or None when settings do not enable it. Without a working
    bubblewrap: one warning and the normal permission flow, or :class:`SandboxError` with
    ``failIfUnavailable``. ``raw``: the parsed ``LoadedSettings.sandbox``, or the key as written."""
    config = raw if isinstance(raw, SandboxConfig) else parse_config(raw)
    notes = warnings if warnings is not None else []
    notes += config.warnings
    if not config.enabled:
        return None
    found = probe()
    if not found.available:
        if config.fail_if_unavailable:
            raise SandboxError(
                f"the sandbox is required (sandbox.failIfUnavailable) but cannot run: {found.problem}; "
                "install bubblewrap (scripts/setup, or apt-get install bubblewrap) or turn the setting off"
            )
        notes.append(
            f"sandbox.enabled is set but the sandbox cannot run ({found.problem}); Bash runs unsandboxed under the "
            "normal permission flow (see `keel sandbox status`)"
        )
        return None
    sandbox = Sandbox(
        config, cwd=cwd, home=home, keel_home=keel_home, additional_dirs=additional_dirs, engine=engine, found=found
    )
    if engine is not None:
        engine.sandbox_auto_allow = sandbox.auto_allow
    return sandbox


def status(
    raw: object, *, cwd: Path, home: Path, keel_home: Path | None, session: Sandbox | None = None
) -> dict[str, Any]:
    """What ``keel sandbox status`` (and ``/sandbox``) shows: the tools, whether they work, what is
    enforced and why not; with ``session``, that session's sandbox (its rules, its /sandbox toggle)."""
    config = session.config if session is not None else raw if isinstance(raw, SandboxConfig) else parse_config(raw)
    found = probe()
    sandbox = session if session is not None else Sandbox(config, cwd=cwd, home=home, keel_home=keel_home, found=found)
    enabled = sandbox.enabled
    active = enabled and found.available
    enforced: dict[str, Any] = {}
    if active:
        enforced = {
            "writable": [*sandbox.writable(with_tmp=False), "<session temp dir>"],
            "hidden": sorted({p for p in sandbox.hidden() if os.path.lexists(p)}),
            "network": _network(config, found, asks=session is not None and session.can_ask()),
            "unix_sockets": _sockets(sandbox),
            "namespaces": "user, pid, net, ipc, uts, cgroup; --die-with-parent",
            "auto_allow": config.auto_allow,
            "unsandboxed_allowed": config.allow_unsandboxed,
            "excluded_commands": list(config.excluded_commands),
        }
    if sandbox.session_enabled is False:
        why = sandbox.why_inactive
    elif not enabled:
        why = "sandbox.enabled is not true in settings"
    elif not found.available:
        why = found.problem + (
            " (keel refuses to run: sandbox.failIfUnavailable)" if config.fail_if_unavailable else ""
        )
    else:
        why = ""
    return {
        "bwrap": found.bwrap,
        "bwrap_version": found.version,
        "bwrap_works": found.works,
        "socat": found.socat,
        "enabled": enabled,
        "active": active,
        "why_not": why,
        "enforced": enforced,
        "warnings": list(config.warnings),
    }


def _network(config: SandboxConfig, found: Probe, *, asks: bool) -> str:
    if not found.socat or not (config.allowed_domains or asks):
        return "off"
    domains = ", ".join(config.allowed_domains) or "no domain in sandbox.network.allowedDomains"
    rest = "a new host is asked about once" if asks else "other hosts are refused"
    return f"proxy: {domains} (and WebFetch domain allow rules); {rest}"


def _sockets(sandbox: Sandbox) -> str:
    if sandbox.config.allow_all_unix_sockets:
        return "every host socket reachable (sandbox.network.allowAllUnixSockets)"
    allowed = sandbox.allowed_sockets()
    covered = len(sandbox.sockets(allowed))
    named = f"; allowed: {', '.join(allowed)}" if allowed else ""
    return f"host sockets covered ({covered} now; /run emptied){named}"
