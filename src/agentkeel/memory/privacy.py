"""Privacy masking for memory: applied on write and again on read.

On write so a secret never reaches the log; on read so rows written before a pattern existed
(or imported from elsewhere) still come back masked.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from agentkeel.policy.redact import redact

_PRIVATE = re.compile(r"<private>.*?(?:</private>|\Z)", re.IGNORECASE | re.DOTALL)


class Masker:
    def __init__(self, extra_patterns: Iterable[str] = ()) -> None:
        self._extra = [re.compile(p) for p in extra_patterns]

    def text(self, value: str) -> str:
        if not value:
            return value
        value = _PRIVATE.sub("[private]", value)
        value = redact(value)
        for pattern in self._extra:
            value = pattern.sub("[REDACTED:custom]", value)
        return value

    def obj(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: self.obj(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.obj(v) for v in value]
        return value


DEFAULT_MASKER = Masker()
