"""Compact JSON, one encoder (``agentkeel.internal.jsonc``)."""

from __future__ import annotations

import json

from agentkeel.internal import jsonc


def test_compact_utf8_and_what_utf8_cannot_carry() -> None:
    value = {"b": [1, 2.5, None], "a": "héllo ✓"}
    assert jsonc.dumps(value) == '{"b":[1,2.5,null],"a":"héllo ✓"}'
    assert jsonc.dumps(value, sort_keys=True).startswith('{"a":')
    assert json.loads(jsonc.encode(value)) == value
    assert jsonc.encode({"t": "bad \ud800 half"}) == b'{"t":"bad ? half"}'  # a lone surrogate: '?', no crash
    assert jsonc.dumps({"p": object}, default=lambda o: "obj") == '{"p":"obj"}'
