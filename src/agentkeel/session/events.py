"""The session layer's own persisted events: file checkpoints, rewinds and forks.

Declared with every other persisted type in :mod:`agentkeel.core.events` (one table, so whether a
loaded entry is typed never depends on what was imported); named here for the session layer."""

from __future__ import annotations

from agentkeel.core.events import Checkpoint, RewindDone, RewindIntent, RewindMarker, SessionForked

__all__ = ["Checkpoint", "RewindDone", "RewindIntent", "RewindMarker", "SessionForked"]
