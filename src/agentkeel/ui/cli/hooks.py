"""``keel hooks list`` (the effective hooks with their source files), ``keel hooks test EVENT``
(run the matching handlers on a payload; print what each returned and what keel would do) and
``keel hooks events`` (the events keel fires: the table in ``extensions/protocol/hook_events.py``)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentkeel.tools import SHELL
from agentkeel.ui.cli._common import EXIT_OK, EXIT_USAGE

if TYPE_CHECKING:
    from agentkeel.hooks import Combined, HookConfig


def add_parser(sub: Any) -> None:
    hooks = sub.add_parser("hooks", help="list the effective hooks, or try one event's hooks on a payload")
    hsub = hooks.add_subparsers(dest="action", required=True)
    ls = hsub.add_parser("list", help="every hook keel would run here, with the file it comes from")
    test = hsub.add_parser("test", help="run the hooks of one event on a payload and say what keel would do")
    events = hsub.add_parser("events", help="every hook event keel fires: matcher, payload fields, what a block does")
    events.add_argument("--json", action="store_true")
    test.add_argument("event", help="the event, e.g. PreToolUse, Stop, SessionStart")
    test.add_argument("--input", default="{}", help=f'payload fields as JSON, e.g. \'{{"tool_name": "{SHELL}", ...}}\'')
    for p in (ls, test):
        p.add_argument("--settings", action="append", default=[], metavar="FILE", help="an extra settings file")
        p.add_argument("--cwd", default=None, help="the project directory (default: the current one)")
        p.add_argument(
            "--plugin-dir", action="append", default=[], dest="plugin_dirs", metavar="DIR", help="a plugin's directory"
        )
        p.add_argument("--json", action="store_true")


def _load(args: argparse.Namespace) -> tuple[Path, HookConfig, list[str]]:
    from agentkeel.app.runtime import project_trust, read_settings
    from agentkeel.hooks import matcher_error
    from agentkeel.hooks.config import load_hooks, plugin_hooks, plugin_roots
    from agentkeel.session.store import keel_home

    cwd = (Path(args.cwd) if args.cwd else Path.cwd()).resolve()
    home_dir = keel_home()
    trust = project_trust(cwd, home_dir)
    extra = [Path(f) for f in args.settings]
    loaded = read_settings(cwd, Path.home(), home_dir, extra, os.environ, trusted=trust.trusted)
    dirs = plugin_roots([Path(d) for d in args.plugin_dirs], loaded.layers)
    plugins = plugin_hooks(dirs, project=cwd, trusted=trust.trusted)
    config = load_hooks(loaded.layers, plugins=plugins)
    notes = [w for w in loaded.warnings if "hooks" in w] + config.warnings
    notes += [f"{h.source}: hooks.{h.event}: {e}" for h in config.hooks if (e := matcher_error(h.matcher))]
    return cwd, config, notes


def run(args: argparse.Namespace) -> int:
    from agentkeel.app.runtime import KeelError

    if args.action == "events":
        return _events(as_json=args.json)
    try:
        cwd, config, notes = _load(args)
    except KeelError as e:
        print(f"keel: {e}", file=sys.stderr)
        return EXIT_USAGE
    if args.action == "list":
        return _list(config, notes, as_json=args.json)
    return _test(args, cwd, config, notes)


def _list(config: HookConfig, notes: list[str], *, as_json: bool) -> int:
    if as_json:
        rows = [
            {
                "event": h.event,
                "matcher": h.matcher,
                "type": h.handler.type,
                "handler": h.handler.label,
                "source": h.source,
                "scope": h.scope,
                "fired": True,  # every event a configuration may name is one keel fires (spec.py)
            }
            for h in config.hooks
        ]
        print(json.dumps({"hooks": rows, "warnings": notes}, indent=2))
        return EXIT_OK
    if not config.hooks:
        print("No hooks.")
    for h in config.hooks:
        flags = [f"timeout {h.handler.timeout:g}s"]
        flags += [f for f, on in (("once", h.handler.once), ("async", h.handler.run_async)) if on]
        flags += ["failClosed"] * h.handler.fail_closed + ([f"if {h.handler.condition}"] if h.handler.condition else [])
        head = f"{h.event:<18} {h.matcher or '*':<14} {h.handler.type:<7} {h.handler.label}"
        print(f"{head}  [{', '.join(flags)}]")
        print(f"{'':<18} from {h.source} ({h.scope})")
    for note in notes:
        print(f"warning: {note}")
    return EXIT_OK


def _test(args: argparse.Namespace, cwd: Path, config: HookConfig, notes: list[str]) -> int:
    from agentkeel.protocol.hook_events import SPECS

    if args.event not in SPECS:
        print(f"keel: unknown hook event '{args.event}' (known: {', '.join(SPECS)})", file=sys.stderr)
        return EXIT_USAGE
    try:
        fields = json.loads(args.input)
    except json.JSONDecodeError as e:
        print(f"keel: --input is not valid JSON ({e.msg} at column {e.colno})", file=sys.stderr)
        return EXIT_USAGE
    if not isinstance(fields, dict):
        print(f'keel: --input must be a JSON object, e.g. \'{{"tool_name": "{SHELL}"}}\'', file=sys.stderr)
        return EXIT_USAGE
    matcher = SPECS[args.event].matcher
    if matcher is not None and matcher not in fields and any(h.event == args.event and h.matcher for h in config.hooks):
        notes.append(f"--input has no '{matcher}': {args.event} matchers are matched against it")
    for note in notes:
        print(f"keel: {note}", file=sys.stderr)
    result = asyncio.run(_fire(args.event, fields, cwd, config))
    if args.json:
        print(json.dumps(_as_json(args.event, result), indent=2, ensure_ascii=False))
        return EXIT_OK
    if not result.outcomes:
        print(f"No {args.event} hook matches this payload.")
    for o in result.outcomes:
        code = "-" if o.raw.exit_code is None else str(o.raw.exit_code)
        print(f"{o.spec.handler.type} {o.spec.handler.label}  (from {o.spec.source})")
        print(f"  exit {code}, {o.duration_ms} ms, {o.summary}" + (f": {o.error}" if o.error else ""))
        for name, text in (("stdout", o.raw.stdout), ("stderr", o.raw.stderr)):
            if text.strip():
                shown = text.strip() if len(text) < 500 else text.strip()[:500] + "..."
                print(f"  {name}: {shown}")
    print("keel would: " + would(args.event, result))
    return EXIT_OK


async def _fire(event: str, fields: dict[str, Any], cwd: Path, config: HookConfig) -> Combined:
    from agentkeel.core.events import Event
    from agentkeel.core.extensions import ToolCall
    from agentkeel.hooks import HookContext, HookDispatcher

    def quiet(_event: Event) -> None:
        pass

    ctx = HookContext("hooks-test", cwd / "hooks-test.jsonl", cwd, quiet, env=dict(os.environ))
    dispatcher = HookDispatcher(config, ctx)
    call = None
    if "tool_name" in fields:
        from agentkeel.tools import builtin_tools

        name = str(fields["tool_name"])
        tool = next((t for t in builtin_tools() if t.name == name), None)
        tool_input = fields.get("tool_input") if isinstance(fields.get("tool_input"), dict) else {}
        call = ToolCall(str(fields.get("tool_use_id", "toolu_test")), name, dict(tool_input or {}), tool, cwd)
    try:
        return await dispatcher.fire(event, fields, call=call)
    finally:
        await dispatcher.drain()


# what keel does when a handler blocks, by the event's spec (``EventSpec.block``)
BLOCKS = {
    "deny": "deny it",
    "continue": "continue the conversation with",
    "prompt": "block the prompt",
    "feedback": "show the model",
    "keep": "keep the current settings",
    "skip": "skip it",
    "": "show the user",
}


def would(event: str, result: Combined) -> str:
    """What keel does with these answers, in one line."""
    from agentkeel.protocol.hook_events import SPECS

    stop = result.stop
    if stop is not None:
        return f"stop the session ({stop.stop_reason or 'continue: false'})"
    what = SPECS[event]
    failed = result.failed_closed()
    if what.permission == "tool" and failed:
        return "deny the call (a failClosed hook failed)"
    if what.permission == "tool":
        permission, update = result.permission, result.updated_input
        change = f"; run it with input {json.dumps(update)}" if update is not None else ""
        if permission == "deny":
            return f"deny the call: {result.reason_for('deny') or 'blocked'}"
        if permission == "ask":
            return f"ask the user{change}"
        if permission == "allow":
            return f"allow the call without asking (deny rules and protected paths still apply){change}"
        return f"let the permission rules decide{change}"
    if what.permission == "request" and result.permission in ("allow", "deny"):
        return f"{result.permission} the request"
    if result.blocked:
        reason = result.block_reason
        return f"{BLOCKS[what.block]}: {reason}"
    context = result.context
    if context:
        return "add to the model's context: " + " | ".join(c.strip() for c in context)
    return "carry on as usual"


def _as_json(event: str, result: Combined) -> dict[str, Any]:
    return {
        "event": event,
        "hooks": [
            {
                "handler": o.spec.handler.label,
                "source": o.spec.source,
                "exit_code": o.raw.exit_code,
                "stdout": o.raw.stdout,
                "stderr": o.raw.stderr,
                "error": o.error,
                "outcome": o.summary,
                "duration_ms": o.duration_ms,
            }
            for o in result.outcomes
        ],
        "keel_would": would(event, result),
    }


def _events(*, as_json: bool) -> int:
    from agentkeel.protocol.hook_events import SPECS

    if as_json:
        rows = [
            {
                "event": s.name,
                "matcher": s.matcher,
                "fields": list(s.fields),
                "keel_fields": list(s.extra),
                "block": s.block,
                "fires": s.fires,
            }
            for s in SPECS.values()
        ]
        print(json.dumps({"events": rows}, indent=2))
        return EXIT_OK
    for s in SPECS.values():
        matcher = f"matcher: {s.matcher}" if s.matcher else "no matcher"
        block = f"; a block: {BLOCKS[s.block]}" if s.block else ""
        print(f"{s.name:<20} {s.fires} ({matcher}{block})")
        print(f"{'':<20} payload: {', '.join((*s.fields, *s.extra)) or '(common fields only)'}")
    return EXIT_OK
