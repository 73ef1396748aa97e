"""keel's home directory: ``$KEEL_HOME``, else ``~/.keel``, with ``~`` expanded; resolved one way.

The library reads the environment it is given (a session's, a server's, a test's), and this
process's only when it is given none.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def keel_home(env: Mapping[str, str] | None = None) -> Path:
    """``$KEEL_HOME`` of ``env`` (default: this process's environment, read now), else ``~/.keel``."""
    chosen = (os.environ if env is None else env).get("KEEL_HOME")
    return Path(chosen).expanduser() if chosen else Path.home() / ".keel"
