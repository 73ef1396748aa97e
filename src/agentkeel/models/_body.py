"""Request bodies that serialise only what is new.

A session appends: turn 200 sends the 199 messages of turn 199 plus one. ``BodyCache`` keeps the JSON
of each message (and of the tool list) from the last request, by identity (the view hands the same
message objects to every request, and they are frozen), so each turn encodes only the new messages
and the body is spliced together from bytes. A message's bytes never change between turns, which
is also what prompt caching needs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from agentkeel.internal import jsonc

T = TypeVar("T")

_HOLE = "\x00keel:spliced\x00"  # never in a real body: json escapes NUL, and nothing else is spliced


def encode_json(body: Any) -> bytes:
    """Compact UTF-8 JSON; a character UTF-8 cannot carry (a lone surrogate) becomes '?', not a crash."""
    return jsonc.encode(body)


class BodyCache:
    """The JSON of the last request's items, by identity; one per provider (one session)."""

    def __init__(self) -> None:
        self._items: dict[int, tuple[object, bytes]] = {}
        self._tools: tuple[tuple[Any, ...], bytes] | None = None

    def items(self, items: Sequence[T], to_json: Callable[[T], bytes]) -> list[bytes]:
        """Each item's JSON: from the last request when it held the same object, else encoded now."""
        last: dict[int, tuple[object, bytes]] = self._items
        kept: dict[int, tuple[object, bytes]] = {}
        out: list[bytes] = []
        for item in items:
            hit = last.get(id(item))
            raw = hit[1] if hit is not None and hit[0] is item else to_json(item)
            kept[id(item)] = (item, raw)
            out.append(raw)
        self._items = kept
        return out

    def tools(self, key: tuple[Any, ...], to_json: Callable[[], bytes]) -> bytes:
        """The tool list's JSON, encoded again only when ``key`` (which holds what it depends on) changes."""
        if self._tools is None or self._tools[0] != key:
            self._tools = (key, to_json())
        return self._tools[1]


def spliced(body: dict[str, Any], parts: dict[str, bytes]) -> bytes:
    """``body`` as JSON with the value of each key of ``parts`` (already JSON) put in its place.

    The holes are found in the skeleton alone (nothing spliced yet), where a key followed by the
    hole can only be the body's own key: inside a JSON string the quotes would be escaped."""
    skeleton = encode_json({k: (_HOLE if k in parts else v) for k, v in body.items()})
    hole = encode_json(_HOLE)
    cuts = sorted((skeleton.index(encode_json(key) + b":" + hole), key) for key in parts)
    out: list[bytes] = []
    done = 0
    for at, key in cuts:
        start = at + len(encode_json(key)) + 1
        out += (skeleton[done:start], parts[key])
        done = start + len(hole)
    out.append(skeleton[done:])
    return b"".join(out)


def json_array(parts: list[bytes]) -> bytes:
    return b"[" + b",".join(p for p in parts if p) + b"]"
