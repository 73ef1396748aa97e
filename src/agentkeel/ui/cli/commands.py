"""Subcommands: ``keel sessions list``, ``keel permissions check|list``, ``keel trust``, ``keel hooks``,
``keel dev fake-llm``."""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentkeel.ui.cli._common import EXIT_OK, EXIT_USAGE, split_tools

if TYPE_CHECKING:
    from agentkeel.policy.permissions import PermissionEngine
    from agentkeel.policy.permissions.rules import RuleKind

MODES = ["default", "acceptEdits", "plan", "bypassPermissions", "dontAsk"]


def run_subcommand(argv: list[str]) -> int:
    if argv[0] == "batch":
        from agentkeel.ui.cli.batch import main as batch_main

        return batch_main(argv[1:])
    p = argparse.ArgumentParser(prog="keel")
    sub = p.add_subparsers(dest="command", required=True)

    perms = sub.add_parser("permissions", help="check a tool call against the permission rules, or list them")
    psub = perms.add_subparsers(dest="action", required=True)
    check = psub.add_parser("check", help="decide one tool call without running it (the loop's own code path)")
    check.add_argument("--tool", required=True, help="tool name, e.g. Bash, Read, WebFetch, mcp__srv__tool")
    check.add_argument("--input", required=True, help='the tool input as JSON, e.g. \'{"command": "git status"}\'')
    check.add_argument(
        "--shell-cwd", default=None, help="where the shell is now, after earlier cd's (Bash only; default: --cwd)"
    )
    _engine_args(check)
    check.add_argument("--json", action="store_true", help="print the decision as JSON")
    plist = psub.add_parser("list", help="the effective rules with the files they come from (as /permissions)")
    _engine_args(plist)
    plist.add_argument("--json", action="store_true")

    trust = sub.add_parser("trust", help="trust a folder's project settings, hooks and MCP servers")
    trust.add_argument("path", nargs="?", default=None, help="the folder (default: the current directory)")
    trust.add_argument("--list", action="store_true", help="list trusted folders")
    trust.add_argument("--revoke", action="store_true", help="stop trusting the folder")
    trust.add_argument("--status", action="store_true", help="show whether the folder is trusted")

    dev = sub.add_parser("dev", help="developer tools")
    dsub = dev.add_subparsers(dest="action", required=True)
    fake = dsub.add_parser("fake-llm", help="serve a scripted model over the Anthropic and OpenAI wire formats")
    fake.add_argument("--script", required=True, help="the script file (JSON); see agentkeel.models.fake.script")
    fake.add_argument("--host", default="127.0.0.1")
    fake.add_argument("--port", type=int, default=0, help="0 picks a free port")
    fake.add_argument("--verbose", action="store_true")
    fake.add_argument("--context-window", type=int, default=None, help="refuse requests over this many tokens")

    from agentkeel.ui.cli import agents, hooks, mem, plugins, sandbox
    from agentkeel.ui.cli import mcp as mcp_cli
    from agentkeel.ui.cli import serve as serve_cli
    from agentkeel.ui.cli import sessions as sessions_cli

    sessions_cli.add_parser(sub)
    mem.add_parser(sub)
    hooks.add_parser(sub)
    sandbox.add_parser(sub)
    plugins.add_parser(sub)
    agents.add_parser(sub)
    mcp_cli.add_parser(sub)
    serve_cli.add_parser(sub)

    args = p.parse_args(argv)
    if args.command == "sandbox":
        return sandbox.run(args)
    if args.command == "mem":
        return mem.run(args)
    if args.command == "hooks":
        return hooks.run(args)
    if args.command == "plugins":
        return plugins.run(args)
    if args.command == "agents":
        return agents.run(args)
    if args.command == "mcp":
        return mcp_cli.run(args)
    if args.command == "serve":
        return serve_cli.run(args)
    if args.command == "sessions":
        return sessions_cli.run(args)
    if args.command == "permissions":
        return _permissions(args)
    if args.command == "trust":
        return _trust(args)
    return _fake_llm(args)


def _engine_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--mode", choices=MODES, help="permission mode (default: from settings)")
    p.add_argument("--settings", action="append", default=[], metavar="FILE", help="an extra settings file")
    p.add_argument("--cwd", default=None, help="the working directory to decide for")
    p.add_argument("--allowedTools", "--allowed-tools", nargs="+", dest="allowed_tools", metavar="RULE")
    p.add_argument("--disallowedTools", "--disallowed-tools", nargs="+", dest="disallowed_tools", metavar="RULE")
    p.add_argument("--add-dir", nargs="+", default=[], dest="add_dirs", metavar="DIR")
    p.add_argument("--channel", default="interactive", help="interactive | headless | sdk | subagent")


def _build(args: argparse.Namespace) -> PermissionEngine:
    import os

    from agentkeel.app.runtime import project_trust, read_settings
    from agentkeel.policy.permissions import build_engine
    from agentkeel.session.store import keel_home

    cwd = (Path(args.cwd) if args.cwd else Path.cwd()).resolve()
    home_dir = keel_home()
    trust = project_trust(cwd, home_dir)
    loaded = read_settings(
        cwd, Path.home(), home_dir, [Path(f) for f in args.settings], os.environ, trusted=trust.trusted
    )
    engine = build_engine(
        loaded,
        cwd=cwd,
        mode=args.mode,
        allowed_tools=split_tools(args.allowed_tools),
        disallowed_tools=split_tools(args.disallowed_tools),
        add_dirs=[Path(d) for d in args.add_dirs],
        home=Path.home(),
        keel_home=home_dir,
        channel=args.channel,
    )
    engine.warnings[:0] = loaded.warnings
    return engine


def _permissions(args: argparse.Namespace) -> int:
    from agentkeel.app.runtime import KeelError

    try:
        engine = _build(args)
    except KeelError as e:
        print(f"keel: {e}", file=sys.stderr)
        return EXIT_USAGE
    if args.action == "list":
        if args.json:
            print(json.dumps(rules_json(engine), indent=2))
        else:
            print(describe_rules(engine))
        return EXIT_OK
    try:
        tool_input = json.loads(args.input)
    except json.JSONDecodeError as e:
        print(f"keel: --input is not valid JSON ({e.msg} at column {e.colno})", file=sys.stderr)
        return EXIT_USAGE
    if not isinstance(tool_input, dict):
        print('keel: --input must be a JSON object, e.g. \'{"command": "ls"}\'', file=sys.stderr)
        return EXIT_USAGE
    from agentkeel.tools import builtin_tools

    tool = next((t for t in builtin_tools() if t.name == args.tool), None)
    decision = engine.decide(args.tool, tool_input, tool, shell_cwd=args.shell_cwd)
    if args.json:
        print(json.dumps(decision.to_json(), ensure_ascii=False))
    else:
        rule = f" [rule: {decision.rule}]" if decision.rule else ""
        print(f"{decision.decision}: {decision.reason} (stage {decision.stage}){rule}")
    for warning in engine.warnings:
        print(f"keel: {warning}", file=sys.stderr)
    return EXIT_OK


def rules_json(engine: PermissionEngine) -> dict[str, Any]:
    return {
        "mode": engine.mode,
        "working_directories": list(dict.fromkeys([engine.cwd, *engine.additional_dirs])),
        "rules": [{"kind": r.kind, "rule": r.text, "source": r.source, "scope": r.scope} for r in engine.rules],
        "channels": {
            c: [{"kind": r.kind, "rule": r.text, "source": r.source} for r in rules]
            for c, rules in engine.channel_rules.items()
        },
        "groups": engine.groups,
        "warnings": engine.warnings,
    }


def describe_rules(engine: PermissionEngine) -> str:
    """What /permissions shows: mode, working directories, then deny, ask, allow with their sources."""
    lines = [
        f"Permission mode: {engine.mode}",
        "Working directories: " + ", ".join([engine.cwd, *engine.additional_dirs]),
    ]
    kinds: tuple[RuleKind, ...] = ("deny", "ask", "allow")
    for kind in kinds:
        rules = engine.rules_of(kind)
        lines.append(f"{kind.capitalize()} rules ({len(rules)}):")
        lines += [f"  {r.text:<40} {r.source}" for r in rules] or ["  (none)"]
    for channel, rules in engine.channel_rules.items():
        lines.append(f"Channel {channel}: " + ", ".join(f"{r.kind} {r.text}" for r in rules))
    if engine.groups:
        lines.append("Groups: " + ", ".join(f"{g}={v}" for g, v in engine.groups.items()))
    lines += [f"warning: {w}" for w in engine.warnings]
    return "\n".join(lines)


def _trust(args: argparse.Namespace) -> int:
    from agentkeel.config.trust import TrustStore
    from agentkeel.session.store import keel_home

    store = TrustStore(keel_home())
    if args.list:
        for folder, when in store.folders():
            print(f"{folder}  (trusted {when})")
        return EXIT_OK
    target = Path(args.path or ".").expanduser()
    if not target.is_dir():
        print(f"keel: {target} is not a directory", file=sys.stderr)
        return EXIT_USAGE
    if args.revoke:
        print(f"{target.resolve()}: " + ("no longer trusted" if store.revoke(target) else "was not trusted"))
        return EXIT_OK
    if args.status:
        state = store.state(target)
        print(f"{state.folder}: {state.status}" + (f" ({', '.join(state.files)})" if state.files else ""))
        return EXIT_OK
    state = store.trust(target)
    files = ", ".join(state.files) or "no project settings yet; later ones will ask again"
    print(f"trusted {state.folder} ({files})")
    return EXIT_OK


def _fake_llm(args: argparse.Namespace) -> int:
    from agentkeel.models.fake.script import Script, ScriptError
    from agentkeel.models.fake.server import FakeLLMServer

    try:
        script = Script.load(args.script)
    except ScriptError as e:
        print(f"keel: {e}", file=sys.stderr)
        return EXIT_USAGE
    try:
        server = FakeLLMServer(script, args.host, args.port, verbose=args.verbose, context_window=args.context_window)
    except OSError as e:
        print(f"keel: cannot listen on {args.host}:{args.port}: {e.strerror}", file=sys.stderr)
        return EXIT_USAGE

    def stop(*_: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    print(f"fake-llm listening on {server.url}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return EXIT_OK
