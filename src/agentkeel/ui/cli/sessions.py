"""``keel sessions list|turns|fork|replay``: the session index, a session's turns, forking, replay."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from agentkeel.ui.cli._common import EXIT_OK, EXIT_USAGE


def add_parser(sub: Any) -> None:
    sessions = sub.add_parser("sessions", help="list, fork and replay sessions")
    ssub = sessions.add_subparsers(dest="action", required=True)
    ls = ssub.add_parser("list", help="sessions of the current directory, newest first (from the session index)")
    ls.add_argument("--json", action="store_true")
    ls.add_argument("--cwd", default=None, help="the project folder (default: the current directory)")
    ls.add_argument("--all", action="store_true", help="sessions of every project")
    ls.add_argument("--limit", type=int, default=1000, help="at most this many (default 1000)")
    turns = ssub.add_parser("turns", help="a session's user turns (the numbers /rewind and fork take)")
    turns.add_argument("session", help="a session id or a unique prefix")
    turns.add_argument("--cwd", default=None)
    turns.add_argument("--json", action="store_true")
    fork = ssub.add_parser("fork", help="copy a session into a new one (before turn N with --at-turn)")
    fork.add_argument("session", help="a session id or a unique prefix")
    fork.add_argument("--at-turn", type=int, default=None, metavar="N", help="keep the turns before turn N")
    fork.add_argument("--cwd", default=None)
    replay = ssub.add_parser("replay", help="re-emit a session's events (for UIs, demos and debugging)")
    replay.add_argument("session", help="a session id or a unique prefix")
    replay.add_argument("--speed", type=float, default=0.0, help="pacing: 1 as recorded, 2 twice as fast; 0 at once")
    replay.add_argument("--output-format", choices=["text", "stream-json"], default="text")
    replay.add_argument("--cwd", default=None)


def run(args: argparse.Namespace) -> int:
    from agentkeel.session.history import RewindError

    try:
        if args.action == "list":
            return _list(args)
        if args.action == "turns":
            return _turns(args)
        if args.action == "fork":
            return _fork(args)
        return _replay(args)
    except RewindError as e:
        print(f"keel: {e}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # the reader went away (| head): a normal end
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except OSError as e:
        print(f"keel: cannot read the session: {e.strerror or e} ({getattr(e, 'filename', '')})", file=sys.stderr)
        return EXIT_USAGE


def _cwd(args: argparse.Namespace) -> Path:
    return (Path(args.cwd) if args.cwd else Path.cwd()).resolve()


def _list(args: argparse.Namespace) -> int:
    from agentkeel.session.index import SessionIndex
    from agentkeel.session.store import keel_home

    cwd = _cwd(args)
    index = SessionIndex(keel_home())
    rows = index.list(None if args.all else cwd, limit=max(1, args.limit))
    if index.warning:
        print(f"keel: {index.warning}", file=sys.stderr)
    if args.json:
        out = []
        for r in rows:
            try:
                size = r.path.stat().st_size
            except OSError:
                size = 0
            out.append(
                {
                    "session_id": r.session_id,
                    "modified": r.last_activity,
                    "title": r.title,
                    "first_prompt": r.first_prompt,
                    "cwd": r.cwd,
                    "cost_usd": r.cost_usd,
                    "turns": r.turns,
                    "parent_id": r.parent_id,
                    "bytes": size,
                    "path": str(r.path),
                }
            )
        print(json.dumps(out))
        return EXIT_OK
    if not rows:
        print(f"no sessions for {cwd}" if not args.all else "no sessions")
        return EXIT_OK
    for r in rows:
        when = r.last_activity[:16].replace("T", " ")
        fork = f"  (fork of {r.parent_id[:8]})" if r.parent_id else ""
        cost = f"  ${r.cost_usd:.4f}" if r.cost_usd else ""
        where = f"  {r.cwd}" if args.all else ""
        print(f"{r.session_id}  {when}  {r.turns:>3} turn(s){cost}  {r.title[:60]}{fork}{where}")
    return EXIT_OK


def _session(args: argparse.Namespace) -> Path:
    from agentkeel.session.fork import resolve_session
    from agentkeel.session.history import RewindError
    from agentkeel.session.store import keel_home

    home, cwd = keel_home(), _cwd(args)
    try:
        return resolve_session(home, cwd, args.session)
    except RewindError:
        if args.cwd:
            raise
    # not this project's: an exact id (or unique prefix) of any project's session
    matches = sorted((home / "projects").glob(f"*/{args.session.strip()}*.jsonl")) if "/" not in args.session else []
    if len(matches) == 1:
        return matches[0]
    raise RewindError(
        f"no session '{args.session}' for {cwd}: see `keel sessions list` (or `--all`)"
        if not matches
        else f"'{args.session}' matches {len(matches)} sessions of several projects: give more of the id"
    )


def _turns(args: argparse.Namespace) -> int:
    from agentkeel.session.history import user_turns

    turns = user_turns(_session(args))
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "index": t.index,
                        "text": t.text,
                        "timestamp": t.timestamp,
                        "uuid": t.event_uuid,
                        "files_changed": list(t.files_changed),
                    }
                    for t in turns
                ]
            )
        )
        return EXIT_OK
    for t in turns:
        files = f"  [{len(t.files_changed)} file(s)]" if t.files_changed else ""
        print(f"{t.index:>3}. {t.timestamp[:19].replace('T', ' ')}  {t.text[:70].replace(chr(10), ' ')}{files}")
    return EXIT_OK


def _fork(args: argparse.Namespace) -> int:
    from agentkeel.session.fork import fork_session
    from agentkeel.session.store import keel_home

    path = _session(args)
    cwd = _cwd(args) if path.parent.name == _project_name(_cwd(args)) else _session_cwd(path)
    new_id = fork_session(keel_home(), cwd, path.stem, args.at_turn)
    print(new_id)
    return EXIT_OK


def _project_name(cwd: Path) -> str:
    from agentkeel.session.store import encode_project

    return encode_project(cwd)


def _session_cwd(path: Path) -> Path:
    from agentkeel.session.history import RewindError
    from agentkeel.session.index import SessionIndex, home_of

    row = next((r for r in SessionIndex(home_of(path)).list(None, limit=100_000) if r.path == path), None)
    if row is None or not row.cwd:
        raise RewindError(f"cannot tell which folder session {path.stem} belongs to: run this from that folder")
    return Path(row.cwd)


def _replay(args: argparse.Namespace) -> int:
    if args.speed < 0:
        print("keel: --speed must be 0 (at once) or more", file=sys.stderr)
        return EXIT_USAGE
    path = _session(args)
    try:
        asyncio.run(_print_replay(path, args.speed, args.output_format))
    except KeyboardInterrupt:
        return 130
    return EXIT_OK


async def _print_replay(path: Path, speed: float, fmt: str) -> None:
    from agentkeel.core.events import UserMessage, event_data
    from agentkeel.protocol import stream_json
    from agentkeel.session.history import replay

    session = stream_json.Session(path.stem)
    async for event in replay(path, speed):
        if fmt == "stream-json":
            line = stream_json.encode(event, session)
            if line is None and isinstance(event, UserMessage):
                line = {
                    "type": "user",
                    "message": event_data(event)["message"],
                    "parent_tool_use_id": None,
                    "session_id": path.stem,
                    "uuid": event.uuid,
                    "timestamp": event.timestamp,
                }
            if line is None:
                line = {"type": "system", "subtype": "keel_event", "session_id": path.stem, "event": event_data(event)}
            sys.stdout.write(stream_json.dumps(line))
        else:
            text = _text_line(event)
            if text:
                sys.stdout.write(text + "\n")
        sys.stdout.flush()


def _text_line(event: Any) -> str:
    from agentkeel.core.events import AssistantMessage, Notice, RunFinished, ToolFinished, UserMessage
    from agentkeel.core.types import TextBlock, ToolUseBlock
    from agentkeel.session.events import Checkpoint, RewindMarker, SessionForked

    if isinstance(event, UserMessage):
        first = next((b.text for b in event.message.content if isinstance(b, TextBlock)), "")
        return f"> {first}" if first else ""
    if isinstance(event, AssistantMessage):
        parts = [b.text for b in event.message.content if isinstance(b, TextBlock) and b.text]
        uses = [b for b in event.message.content if isinstance(b, ToolUseBlock)]
        parts += [f"[{b.name}] {json.dumps(b.input)[:100]}" for b in uses]
        return "\n".join(parts)
    if isinstance(event, ToolFinished):
        return f"  = {event.name} {'failed' if event.is_error else 'ok'} ({event.duration_ms} ms) {event.summary[:80]}"
    if isinstance(event, Checkpoint):
        return f"  checkpoint ({event.tool}): {', '.join(sorted(event.files))}"
    if isinstance(event, RewindMarker):
        return f"-- rewound ({event.mode}) to before turn {event.turn_index}"
    if isinstance(event, SessionForked):
        return f"-- forked from {event.parent_id}"
    if isinstance(event, Notice):
        return f"  ({event.level}: {event.message})"
    if isinstance(event, RunFinished):
        return f"-- {event.subtype}, {event.num_turns} request(s), ${event.total_cost_usd:.4f}"
    return ""
