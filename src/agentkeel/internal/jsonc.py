"""Compact JSON, one encoder: no spaces, UTF-8 as is (not ``\\uXXXX``), what the wire, the logs
and the caches write. :func:`encode` turns a character UTF-8 cannot carry (a lone surrogate from
a broken tool output) into '?', never a crash. The session log keeps its own msgspec fast path
(``session/store.py``), which writes the same bytes."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any


def dumps(value: Any, *, sort_keys: bool = False, default: Callable[[Any], Any] | None = None) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=sort_keys, default=default)


def encode(value: Any, *, sort_keys: bool = False) -> bytes:
    return dumps(value, sort_keys=sort_keys).encode("utf-8", "replace")
