"""keel's full-screen terminal UI (Textual). ``keel`` on a terminal starts it; ``--no-tui`` keeps
the line mode. Nothing here is imported by ``keel -p`` or ``keel --version``: Textual loads only
when the TUI starts.

The app drives the same :class:`~agentkeel.runtime.Runtime` as every other front end and reads
everything it shows from the runtime's event bus: there is no second engine.
"""

from __future__ import annotations

import importlib.util
import os
import sys

__all__ = ["textual_available", "wants_tui"]


def textual_available() -> bool:
    return importlib.util.find_spec("textual") is not None


def wants_tui(no_tui: bool) -> bool:
    """The TUI runs on a real terminal (stdin and stdout), unless ``--no-tui`` or ``TERM=dumb``."""
    if no_tui or os.environ.get("TERM", "") in ("dumb", ""):
        return False
    try:
        return sys.stdin.isatty() and sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False
