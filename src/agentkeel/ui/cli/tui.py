"""``keel`` on a terminal: whether the TUI starts (a terminal, not ``TERM=dumb``, not
``--no-tui``, Textual importable), the trust question (asked on the plain terminal, as the line
mode does, before the screen is taken), then the full-screen app (:mod:`agentkeel.ui.tui`)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from agentkeel.internal.env import KeelEnv
from agentkeel.ui.cli._common import EXIT_OK, EXIT_USAGE

if TYPE_CHECKING:
    from agentkeel.app.runtime import RuntimeOptions


def wants_tui(no_tui: bool) -> bool:
    """The TUI runs on a real terminal (stdin and stdout), unless ``--no-tui`` or ``TERM=dumb``."""
    if no_tui or os.environ.get("TERM", "") in ("dumb", ""):
        return False
    try:
        return sys.stdin.isatty() and sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


def load_tui() -> Callable[[argparse.Namespace, str], int] | None:
    """The TUI's entry point, or None when Textual is missing or cannot be imported."""
    from agentkeel.ui.tui import textual_available

    if not textual_available():
        return None
    try:
        import textual.app  # noqa: F401  (a broken install fails here, not half-way into the screen)
    except ImportError:
        return None
    return run_tui


def _trusted(cwd: Path) -> bool | None:
    """None: nothing to ask; True/False: the answer to this folder's trust question."""
    from agentkeel.config.trust import TrustStore
    from agentkeel.session.store import keel_home

    store = TrustStore(keel_home())
    state = store.state(cwd)
    if state.trusted or state.status == "nothing-to-trust":
        return None
    what = "have changed since you trusted them" if state.status == "changed" else "can run commands (hooks, MCP)"
    print(f"This folder's project settings ({', '.join(state.files)}) {what} and widen permissions.")
    try:
        answer = input(f"Trust {state.folder}? [y/N]: ").strip().lower()
    except EOFError:
        answer = ""
    if answer in ("y", "yes"):
        store.trust(cwd)
        return True
    print("Running without them; `keel trust` trusts this folder later.")
    return False


def _approve_mcp_servers(cwd: Path) -> bool:
    """The project's new .mcp.json servers, asked about on the plain terminal before the
    screen starts, like the trust question (see ``cli.mcp.approve_new_servers``)."""
    import asyncio

    from agentkeel.ui.cli.mcp import approve_new_servers

    async def ask(question: str) -> str:
        try:
            return await asyncio.to_thread(input, question)
        except EOFError:
            return ""

    ok = asyncio.run(approve_new_servers(cwd, ask, print))
    if not ok:
        print("keel: this session starts no MCP server of .mcp.json (answers not saved)")
    return ok


def _theme(env: dict[str, str]) -> str:
    """KEEL_THEME=light|dark, else the terminal's COLORFGBG (``15;0``: light text on dark)."""
    chosen = KeelEnv.of(env).choice("KEEL_THEME")
    if chosen in ("light", "dark"):
        return f"textual-{chosen}"
    parts = env.get("COLORFGBG", "").split(";")
    try:
        background = int(parts[-1])
    except ValueError:
        return "textual-dark"
    return "textual-light" if background in (7, 15) else "textual-dark"


def run_tui(args: argparse.Namespace, first_prompt: str) -> int:
    from agentkeel.app.runtime import KeelError
    from agentkeel.session.store import keel_home
    from agentkeel.ui.cli.headless import options_from_args
    from agentkeel.ui.tui.app import KeelApp

    home = keel_home()
    try:
        home.mkdir(parents=True, exist_ok=True)
    except OSError:
        pass
    try:
        trust = _trusted(options_from_args(args).cwd)
    except KeelError as e:
        print(f"keel: {e}", file=sys.stderr)
        return EXIT_USAGE

    mcp_ok = trust is False or _approve_mcp_servers(options_from_args(args).cwd)

    def make_options() -> RuntimeOptions:
        opts = options_from_args(args)
        if trust is False:
            opts.trust_project = False
        elif not mcp_ok:
            opts.skip_project_mcp = True
        return opts

    try:
        app = KeelApp(make_options, first_prompt=first_prompt, home=home, theme=_theme(dict(os.environ)))
    except KeelError as e:
        print(f"keel: {e}", file=sys.stderr)
        return EXIT_USAGE
    try:
        code = app.run()
    except KeyboardInterrupt:
        code = EXIT_OK
    return EXIT_OK if code is None else int(code)
