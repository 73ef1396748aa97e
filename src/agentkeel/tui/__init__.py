"""keel's full-screen terminal UI (Textual). ``keel`` on a terminal starts it; ``--no-tui`` keeps
the line mode. Nothing here is imported by ``keel -p`` or ``keel --version``: Textual loads only
when the TUI starts.

The app drives the same :class:`~agentkeel.runtime.Runtime` as every other front end and reads
everything it shows from the runtime's event bus: there is no second engine.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from collections.abc import Callable

__all__ = ["load_tui", "textual_available", "wants_tui"]


def textual_available() -> bool:
    try:
        return importlib.util.find_spec("textual") is not None
    except (ImportError, ValueError):
        return False


def load_tui() -> Callable[[argparse.Namespace, str], int] | None:
    """The TUI's entry point, or None when Textual is missing or cannot be imported."""
    if not textual_available():
        return None
    try:
        import textual.app  # noqa: F401  (a broken install fails here, not half-way into the screen)

        from agentkeel.tui.run import run_tui
    except ImportError:
        return None
    return run_tui


def wants_tui(no_tui: bool) -> bool:
    """The TUI runs on a real terminal (stdin and stdout), unless ``--no-tui`` or ``TERM=dumb``."""
    if no_tui or os.environ.get("TERM", "") in ("dumb", ""):
        return False
    try:
        return sys.stdin.isatty() and sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False
