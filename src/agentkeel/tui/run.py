"""``keel`` on a terminal: the trust question (asked on the plain terminal, as the line mode
does, before the screen is taken), then the full-screen app."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from agentkeel.cli._common import EXIT_OK, EXIT_USAGE


def _trusted(cwd: Path) -> bool | None:
    """None: nothing to ask; True/False: the answer to this folder's trust question."""
    from agentkeel.session.store import keel_home
    from agentkeel.trust import TrustStore

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


def _theme(env: dict[str, str]) -> str:
    """KEEL_THEME=light|dark, else the terminal's COLORFGBG (``15;0``: light text on dark)."""
    chosen = env.get("KEEL_THEME", "").lower()
    if chosen in ("light", "dark"):
        return f"textual-{chosen}"
    parts = env.get("COLORFGBG", "").split(";")
    try:
        background = int(parts[-1])
    except ValueError:
        return "textual-dark"
    return "textual-light" if background in (7, 15) else "textual-dark"


def run_tui(args: argparse.Namespace, first_prompt: str) -> int:
    from agentkeel.cli.headless import options_from_args
    from agentkeel.runtime import KeelError
    from agentkeel.session.store import keel_home
    from agentkeel.tui.app import KeelApp

    home = keel_home()
    try:
        home.mkdir(parents=True, exist_ok=True)
    except OSError:
        pass
    trust = _trusted(options_from_args(args).cwd)

    def make_options() -> object:
        opts = options_from_args(args)
        if trust is False:
            opts.trust_project = False
        return opts

    try:
        app = KeelApp(make_options, first_prompt=first_prompt, home=home, theme=_theme(dict(os.environ)))  # type: ignore[arg-type]
    except KeelError as e:
        print(f"keel: {e}", file=sys.stderr)
        return EXIT_USAGE
    try:
        code = app.run()
    except KeyboardInterrupt:
        code = EXIT_OK
    return EXIT_OK if code is None else int(code)
