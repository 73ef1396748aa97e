"""``keel agents list|logs|wait|stop``: this project's subagents (background ones included).

Every subagent is a session of its own (``<session>/subagents/agent-<id>.jsonl``) with a meta
file beside it, so these work while its parent runs and after it exits."""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

from agentkeel.ui.cli._common import EXIT_OK, EXIT_RUN_ERROR, EXIT_USAGE

FINISHED = ("success", "error_max_turns", "error_max_budget_usd", "error_during_execution", "interrupted", "cancelled")


def add_parser(sub: Any) -> None:
    agents = sub.add_parser("agents", help="list this project's subagents, show their logs, wait for or stop one")
    asub = agents.add_subparsers(dest="action", required=True)
    ls = asub.add_parser("list", help="subagents, newest first")
    ls.add_argument("--all", action="store_true", help="finished ones too (default: the last 20)")
    ls.add_argument("--json", action="store_true")
    logs = asub.add_parser("logs", help="a subagent's conversation and result")
    logs.add_argument("agent_id")
    wait = asub.add_parser("wait", help="wait until a subagent finishes; print its result")
    wait.add_argument("agent_id")
    wait.add_argument("--timeout", type=float, default=600.0)
    stop = asub.add_parser("stop", help="ask a running subagent to stop (its transcript stays valid)")
    stop.add_argument("agent_id")


def _metas() -> list[tuple[Path, dict[str, Any]]]:
    from agentkeel.session.store import keel_home, project_dir

    root = project_dir(keel_home(), Path.cwd().resolve())
    out = []
    for path in root.glob("*/subagents/agent-*.meta.json"):
        try:
            out.append((path, json.loads(path.read_text(encoding="utf-8"))))
        except (OSError, ValueError):
            continue
    out.sort(key=lambda item: float(item[1].get("started") or 0), reverse=True)
    return out


def _find(ref: str) -> tuple[Path, dict[str, Any]] | None:
    hits = [(p, m) for p, m in _metas() if str(m.get("agent_id", "")).startswith(ref)]
    if len(hits) != 1:
        what = "no subagent" if not hits else f"{len(hits)} subagents"
        print(f"keel: {what} matching '{ref}' in this project: see `keel agents list`")
        return None
    return hits[0]


def _alive(meta: dict[str, Any]) -> bool:
    pid = meta.get("pid")
    if not isinstance(pid, int):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _status(meta: dict[str, Any]) -> str:
    status = str(meta.get("status", "?"))
    if status == "running" and not _alive(meta):
        return "lost (its process exited)"
    return status


def run(args: argparse.Namespace) -> int:
    if args.action == "list":
        items = _metas() if args.all else _metas()[:20]
        if args.json:
            print(json.dumps([{**m, "status": _status(m)} for _, m in items], indent=1))
            return EXIT_OK
        if not items:
            print("No subagents in this project yet.")
        for _, m in items:
            when = time.strftime("%m-%d %H:%M", time.localtime(float(m.get("started") or 0)))
            desc = str(m.get("description") or "")[:50]
            print(f"{m.get('agent_id')}  {when}  {m.get('agent_type')}  {_status(m)}  {desc}")
        return EXIT_OK
    found = _find(args.agent_id)
    if found is None:
        return EXIT_USAGE
    path, meta = found
    if args.action == "logs":
        return _logs(meta)
    if args.action == "stop":
        if meta.get("status") != "running" or not _alive(meta):
            print(f"{meta.get('agent_id')} is not running ({_status(meta)})")
            return EXIT_OK
        path.with_name(f"agent-{meta['agent_id']}.stop").write_text("stop\n", encoding="utf-8")
        print(f"asked {meta['agent_id']} to stop")
        return EXIT_OK
    deadline = time.monotonic() + args.timeout
    while meta.get("status") == "running" and _alive(meta) and time.monotonic() < deadline:
        time.sleep(0.2)
        meta = json.loads(path.read_text(encoding="utf-8"))
    print(meta.get("result", ""))
    return EXIT_OK if meta.get("status") == "success" else EXIT_RUN_ERROR


def _logs(meta: dict[str, Any]) -> int:
    from agentkeel.session.load import load_session

    transcript = Path(str(meta.get("transcript", "")))
    try:
        loaded = load_session(transcript)
    except OSError as e:
        print(f"keel: cannot read {transcript}: {e.strerror or e}")
        return EXIT_USAGE
    head = f"# {meta.get('agent_id')} ({meta.get('agent_type')}) {_status(meta)}"
    print(f"{head}  parent {meta.get('parent_session_id')}")
    for message in loaded.messages:
        for block in message.content:
            kind = type(block).__name__
            if kind == "TextBlock":
                print(f"[{message.role}] {getattr(block, 'text', '')}")
            elif kind == "ToolUseBlock":
                print(f"[tool_use] {getattr(block, 'name', '')} {json.dumps(getattr(block, 'input', {}))[:200]}")
            elif kind == "ToolResultBlock":
                content = getattr(block, "content", "")
                print(f"[tool_result] {str(content)[:200]}")
    return EXIT_OK
