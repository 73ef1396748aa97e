"""``keel serve [--host H] [--port N] [--cwd DIR] [--allow-bypass-permissions]``: the HTTP API and the
web app (agentkeel.ui.serve). Every request needs the token printed in the address (or KEEL_SERVE_TOKEN)."""

from __future__ import annotations

import argparse
import os
import secrets
import socket
import sys
from pathlib import Path
from typing import Any

from agentkeel.internal.env import KeelEnv
from agentkeel.ui.cli._common import EXIT_OK, EXIT_USAGE

EXIT_ERROR = 1
MIN_TOKEN = 16


def _serve_token(chosen: str | None) -> str:
    """What the owner must show: KEEL_SERVE_TOKEN when set (checked above), else a new random one per start."""
    return chosen or secrets.token_urlsafe(24)


def add_parser(sub: Any) -> None:
    p = sub.add_parser("serve", help="an HTTP API and a web app for keel sessions (loopback by default)")
    p.add_argument("--host", default="127.0.0.1", help="loopback by default (the token guards every address)")
    p.add_argument("--port", type=int, default=7378, help="0 picks a free port")
    p.add_argument("--cwd", default=None, help="the project new sessions start in (default: the current directory)")
    p.add_argument("--token", action="store_true", help=argparse.SUPPRESS)  # the token is always required now
    p.add_argument(
        "--allow-bypass-permissions",
        action="store_true",
        help="let web clients choose bypassPermissions (tools run without asking); off by default",
    )
    p.add_argument("--no-memory", action="store_true", help="leave the memory views out")


def run(args: argparse.Namespace) -> int:
    try:
        import starlette  # noqa: F401
        import uvicorn
    except ImportError:
        print("keel serve: needs starlette and uvicorn: pip install 'agentkeel[serve]'", file=sys.stderr)
        return EXIT_ERROR
    from agentkeel.ui.serve.app import build_app
    from agentkeel.ui.serve.guard import is_loopback
    from agentkeel.ui.serve.sessions import SessionManager

    cwd = Path(args.cwd).expanduser() if args.cwd else Path.cwd()
    if not cwd.is_dir():
        print(f"keel serve: --cwd {args.cwd} is not a directory", file=sys.stderr)
        return EXIT_USAGE
    loopback = is_loopback(args.host)
    chosen = KeelEnv.of().serve_token
    if chosen is not None and len(chosen) < MIN_TOKEN:
        print(f"keel serve: KEEL_SERVE_TOKEN is too short: use at least {MIN_TOKEN} random characters", file=sys.stderr)
        return EXIT_USAGE
    token = _serve_token(chosen)
    from agentkeel.internal.private import private_home
    from agentkeel.session.store import keel_home

    try:
        changed = private_home(keel_home())  # the transcripts it serves are the user's alone
    except OSError:
        changed = None  # a session says what is wrong with KEEL_HOME when it starts
    if changed:
        print(f"keel serve: {changed}", file=sys.stderr)
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((args.host.strip("[]"), args.port))
        sock.listen(128)  # before the address is printed: a client that reads it can connect at once
    except OSError as exc:
        sock.close()
        print(f"keel serve: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_ERROR
    port = sock.getsockname()[1]
    shown = f"[{args.host.strip('[]')}]" if family == socket.AF_INET6 else args.host
    manager = SessionManager(cwd, allow_bypass=args.allow_bypass_permissions)
    app = build_app(
        manager, token=token, loopback_only=loopback, memory_app=None if args.no_memory else _memory_app(cwd)
    )
    url = f"http://{shown}:{port}/"
    if chosen is None:
        print(f"keel serve on {url}?token={token}", flush=True)
    else:
        print(f"keel serve on {url} (token from KEEL_SERVE_TOKEN)", flush=True)
    if args.allow_bypass_permissions:
        print(
            "keel serve: warning: web clients may choose bypassPermissions (tools run without asking)", file=sys.stderr
        )
    if not loopback:
        print(
            f"keel serve: warning: reachable beyond this machine on {args.host}; the token guards it", file=sys.stderr
        )
    config = uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=5)
    try:
        uvicorn.Server(config).run(sockets=[sock])
    except KeyboardInterrupt:
        pass
    return EXIT_OK


def _memory_app(cwd: Path) -> Any:
    """The memory dashboard's app for this project, built at its first request."""

    def build() -> Any:
        from agentkeel.app.runtime import project_trust, read_settings
        from agentkeel.config.settings import MemorySettings
        from agentkeel.memory import open_store
        from agentkeel.memory.project import project_id
        from agentkeel.memory.web import build_app
        from agentkeel.session.store import keel_home

        home_dir = keel_home()
        trust = project_trust(cwd, home_dir)
        loaded = read_settings(cwd, Path.home(), home_dir, [], os.environ, trusted=trust.trusted)
        config = loaded.settings.memory or MemorySettings()
        location = config.store or str(home_dir / "memory" / "memory.db")
        store = open_store(location, embedder="none", mask_patterns=tuple(config.maskPatterns))
        return build_app(store, project_id(cwd, config.project))

    return build
