"""keel's memory: an append-only log of what happened, indexed for fast, budgeted recall.

``open_store(path_or_dsn)`` is the entry point::

    store = open_store("~/.keel/memory/memory.db")          # or "postgresql://..."
    store.add_many([{"id": "D1:3", "type": "fact", "text": "...", "timestamp": "2023-05-08T13:56:00Z"}])
    hits = store.search("support group", k=5, project="web")  # layer 1: ids + one-line summaries
    store.timeline(hits[0].id)                              # layer 2: what happened around it
    store.get([h.id for h in hits], budget_tokens=2000)     # layer 3: full entries

Nothing heavy is imported until a store is opened.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from agentkeel.internal.env import KeelEnv
from agentkeel.internal.home import keel_home
from agentkeel.memory.model import EVENT_TYPES, Entry, Hit, Record, RecordError

if TYPE_CHECKING:
    from agentkeel.memory.embed import Embedder
    from agentkeel.memory.store import MemoryStore

__all__ = ["EVENT_TYPES", "Entry", "Hit", "Record", "RecordError", "default_location", "open_store"]


def default_location() -> Path:
    return keel_home() / "memory" / "memory.db"


def resolve_embedder(spec: str | None) -> Embedder | None:
    """``auto`` (local MiniLM when its weights are installed, else none), ``none``, ``minilm``, ``openai:<model>``."""
    from agentkeel.memory.embed import EmbedderError, get_embedder

    if spec in (None, "", "auto"):  # the environment refines a default, never an explicit choice
        spec = KeelEnv.of().memory_embedder
    if spec == "auto":
        try:
            return get_embedder("minilm")
        except EmbedderError:
            return None
    return get_embedder(spec)


def open_store(
    path_or_dsn: str | os.PathLike[str] | None = None,
    *,
    embedder: str | None = None,
    mask_patterns: tuple[str, ...] = (),
) -> MemoryStore:
    """Open (creating if needed) a memory store: a SQLite file path or a URL (``postgresql://``;
    the schemes are ``backends.BACKENDS``)."""
    from agentkeel.memory.privacy import DEFAULT_MASKER, Masker

    masker = Masker(mask_patterns) if mask_patterns else DEFAULT_MASKER
    chosen = resolve_embedder(embedder)
    from agentkeel.memory.backends import open_location

    return open_location(str(path_or_dsn) if path_or_dsn is not None else str(default_location()), chosen, masker)
