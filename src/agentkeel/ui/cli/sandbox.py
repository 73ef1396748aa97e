"""``keel sandbox status [--json] [--cwd DIR] [--settings FILE]``: whether bubblewrap and socat are
here and work, what the Bash sandbox enforces for this project, and why not when it does not.
:func:`render` is the text ``/sandbox`` shows in interactive mode too."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentkeel.ui.cli._common import EXIT_OK, EXIT_USAGE

if TYPE_CHECKING:
    from agentkeel.core.handle import SessionHandle


def add_parser(sub: Any) -> None:
    p = sub.add_parser("sandbox", help="the Bash sandbox (bubblewrap): what is installed and enforced")
    ssub = p.add_subparsers(dest="action", required=True)
    st = ssub.add_parser("status", help="bubblewrap/socat presence, what is enforced here, and why not")
    st.add_argument("--json", action="store_true")
    st.add_argument("--cwd", default=None, help="the project to report for (default: the current directory)")
    st.add_argument("--settings", action="append", default=[], metavar="FILE", help="an extra settings file")


def run(args: argparse.Namespace) -> int:
    from agentkeel.app.runtime import project_trust, read_settings
    from agentkeel.config.settings import SettingsError
    from agentkeel.policy.sandbox import status
    from agentkeel.session.store import keel_home

    cwd = (Path(args.cwd) if args.cwd else Path.cwd()).resolve()
    home_dir = keel_home()
    try:
        loaded = read_settings(
            cwd,
            Path.home(),
            home_dir,
            [Path(f) for f in args.settings],
            os.environ,
            trusted=project_trust(cwd, home_dir).trusted,
        )
    except SettingsError as e:
        print(f"keel: {e}")
        return EXIT_USAGE
    report = status(loaded.settings.sandbox, cwd=cwd, home=Path.home(), keel_home=home_dir)
    print(json.dumps(report, indent=2) if args.json else render(report))
    return EXIT_OK


def render(report: dict[str, Any]) -> str:
    bwrap = report["bwrap"] or "not installed"
    works = "works" if report["bwrap_works"] else "does not work here"
    lines = [
        f"bubblewrap: {bwrap}" + (f" ({report['bwrap_version']}, {works})" if report["bwrap"] else ""),
        f"socat: {report['socat'] or 'not installed (network stays off: no domain proxy)'}",
        f"sandbox: {'on' if report['active'] else 'off'}" + (f" - {report['why_not']}" if report["why_not"] else ""),
    ]
    enforced = report["enforced"]
    if enforced:
        lines += [
            "  writable: " + ", ".join(enforced["writable"]),
            "  read-only inside them: config and hooks of every git dir (.git, .git/modules/**, .git/worktrees/*), "
            ".claude/, .keel/, .vscode/, shell rc files, $KEEL_HOME",
            "  hidden: " + (", ".join(enforced["hidden"]) or "(nothing that exists)"),
            f"  network: {enforced['network']}",
            f"  unix sockets: {enforced['unix_sockets']}",
            f"  processes: {enforced['namespaces']}",
            f"  ask-free when sandboxed (autoAllowBashIfSandboxed): {'yes' if enforced['auto_allow'] else 'no'}",
            "  may run unsandboxed on request (allowUnsandboxedCommands): "
            + ("yes, after asking" if enforced["unsandboxed_allowed"] else "no"),
        ]
        if enforced["excluded_commands"]:
            lines.append("  excluded (run outside): " + ", ".join(enforced["excluded_commands"]))
    lines += [f"warning: {w}" for w in report["warnings"]]
    return "\n".join(lines)


async def slash(runtime: SessionHandle, args: str) -> str:
    """``/sandbox [on|off]``: the session's sandbox status (as ``keel sandbox status``), or turn
    sandbox mode on or off for this session (settings are not changed)."""
    from agentkeel.commands.registry import CommandFailed
    from agentkeel.config.settings import LoadedSettings
    from agentkeel.policy.permissions import PermissionEngine
    from agentkeel.policy.sandbox import Sandbox, status

    arg = args.strip().lower()
    services = runtime.agent.services
    engine = runtime.agent.services.get(PermissionEngine)
    sandbox: Sandbox | None = services.find(Sandbox)
    note = ""
    if arg == "off":
        if sandbox is not None:
            sandbox.session_enabled = False
        note = "Sandbox mode is off for this session: Bash runs unsandboxed, under the normal permission flow."
    elif arg == "on":
        sandbox = _turn_on(runtime, sandbox)
        note = "Sandbox mode is on for this session: Bash runs in the sandbox" + (
            "; a command that would only ask runs without asking (autoAllowBashIfSandboxed)."
            if sandbox.config.auto_allow
            else "."
        )
    elif arg:
        raise CommandFailed("usage: /sandbox [on|off]")
    report = status(
        runtime.agent.services.get(LoadedSettings).settings.sandbox,
        cwd=Path(engine.cwd),
        home=Path(engine.home),
        keel_home=Path(engine.keel_home) if engine.keel_home else None,
        session=sandbox,
    )
    text = render(report)
    return f"{text}\n{note}" if note else text + "\n(/sandbox on|off turns sandbox mode on or off for this session)"


def _turn_on(runtime: SessionHandle, sandbox: Any) -> Any:
    """The session's sandbox, made from the settings' ``sandbox`` (enabled) when there is none yet."""
    from agentkeel.commands.registry import CommandFailed
    from agentkeel.config.settings import LoadedSettings
    from agentkeel.policy.permissions import PermissionEngine, PermissionGate
    from agentkeel.policy.sandbox import Sandbox, SandboxError, setup_sandbox

    if sandbox is None:
        raw = runtime.agent.services.get(LoadedSettings).settings.sandbox
        engine = runtime.agent.services.get(PermissionEngine)
        notes: list[str] = []
        try:
            sandbox = setup_sandbox(
                {**(raw if isinstance(raw, dict) else {}), "enabled": True},
                cwd=Path(engine.cwd),
                home=Path(engine.home),
                keel_home=Path(engine.keel_home) if engine.keel_home else None,
                additional_dirs=tuple(Path(d) for d in engine.additional_dirs),
                engine=engine,
                warnings=notes,
            )
        except SandboxError as e:
            raise CommandFailed(str(e)) from None
        if sandbox is None:
            raise CommandFailed(notes[-1] if notes else "the sandbox cannot run here (see `keel sandbox status`)")
        sandbox.asker = runtime.agent.services.find(PermissionGate)
        runtime.agent.services.put(Sandbox, sandbox)
    sandbox.session_enabled = True
    if not sandbox.active:
        raise CommandFailed(f"the sandbox cannot run here: {sandbox.why_inactive}")
    return sandbox
