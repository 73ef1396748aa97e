"""keel's full-screen terminal UI (Textual). ``keel`` on a terminal starts it (the entry is
:mod:`agentkeel.ui.cli.tui`); ``--no-tui`` keeps the line mode. Nothing here is imported by ``keel -p``
or ``keel --version``: Textual loads only when the TUI starts.

The app drives the same :class:`~agentkeel.app.runtime.Runtime` as every other front end and reads
everything it shows from the runtime's event bus: there is no second engine.
"""

from __future__ import annotations

import importlib.util

__all__ = ["textual_available"]


def textual_available() -> bool:
    try:
        return importlib.util.find_spec("textual") is not None
    except (ImportError, ValueError):
        return False
