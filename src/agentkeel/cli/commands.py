"""Subcommands: ``keel sessions list``, ``keel dev fake-llm``."""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path

from agentkeel.cli.main import EXIT_OK, EXIT_USAGE


def run_subcommand(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="keel")
    sub = p.add_subparsers(dest="command", required=True)

    sessions = sub.add_parser("sessions", help="list this project's sessions")
    ssub = sessions.add_subparsers(dest="action", required=True)
    ls = ssub.add_parser("list", help="sessions of the current directory, newest first")
    ls.add_argument("--json", action="store_true")
    ls.add_argument("--cwd", default=None)

    dev = sub.add_parser("dev", help="developer tools")
    dsub = dev.add_subparsers(dest="action", required=True)
    fake = dsub.add_parser("fake-llm", help="serve a scripted model over the Anthropic and OpenAI wire formats")
    fake.add_argument("--script", required=True, help="the script file (JSON); see agentkeel.fakellm.script")
    fake.add_argument("--host", default="127.0.0.1")
    fake.add_argument("--port", type=int, default=0, help="0 picks a free port")
    fake.add_argument("--verbose", action="store_true")

    args = p.parse_args(argv)
    if args.command == "sessions":
        return _sessions_list(args)
    return _fake_llm(args)


def _sessions_list(args: argparse.Namespace) -> int:
    from agentkeel.session.load import list_sessions
    from agentkeel.session.store import keel_home, project_dir

    cwd = (Path(args.cwd) if args.cwd else Path.cwd()).resolve()
    sessions = list_sessions(project_dir(keel_home(), cwd))
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "session_id": s.id,
                        "modified": s.modified.isoformat(timespec="seconds"),
                        "first_prompt": s.first_prompt,
                        "bytes": s.size,
                        "path": str(s.path),
                    }
                    for s in sessions
                ]
            )
        )
        return EXIT_OK
    if not sessions:
        print(f"no sessions for {cwd}")
        return EXIT_OK
    for s in sessions:
        print(f"{s.id}  {s.modified:%Y-%m-%d %H:%M}  {s.first_prompt[:70]}")
    return EXIT_OK


def _fake_llm(args: argparse.Namespace) -> int:
    from agentkeel.fakellm.script import Script, ScriptError
    from agentkeel.fakellm.server import FakeLLMServer

    try:
        script = Script.load(args.script)
    except ScriptError as e:
        print(f"keel: {e}", file=sys.stderr)
        return EXIT_USAGE
    try:
        server = FakeLLMServer(script, args.host, args.port, verbose=args.verbose)
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
