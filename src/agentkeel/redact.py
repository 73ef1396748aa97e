"""Secret redaction for anything keel writes down or hands on: transcripts, tool results, memory.

Pure functions over strings. Each finding is replaced by ``[REDACTED:<kind>]`` so a reader
knows something was there without learning what.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

# Every pattern runs over whole file contents and command output, so each is linear in its input:
# a start that fails must not rescan the same run from every later position. (Written the obvious
# way, the assignment pattern takes seconds on one 5 kB base64 line and minutes on a repeated key
# name; tests/test_redact.py measures the growth.)

# key = value / "key": "value" where the key names a secret. The key is a whole word (nothing
# word-like before it) holding a secret name (the lookahead), taken possessively: no separator
# begins with a word character, so giving characters back could never help.
_ASSIGNMENT = re.compile(
    r"""(?ix)
    (?<![A-Za-z0-9_.\-])
    (?P<key>(?=[A-Za-z0-9_.\-]*?(?:password|passwd|pwd|secret|api[_\-]?key|access[_\-]?key|auth[_\-]?token|
        access[_\-]?token|refresh[_\-]?token|client[_\-]?secret|private[_\-]?key|token))[A-Za-z0-9_.\-]++)
    (?P<sep>["']?\s*[:=]\s*["']?)
    (?P<value>[^\s"',;}{\]\[]{6,})
    """
)


def _jwt(match: re.Match[str]) -> str:
    return "[REDACTED:jwt]" if match.group("rest") else match.group(0)


_PATTERNS: list[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]]] = [
    (
        re.compile(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----[\s\S]*?(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|\Z)"
        ),
        "[REDACTED:private_key]",
    ),
    (re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{16,}"), "[REDACTED:anthropic_key]"),
    (re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}"), "[REDACTED:openai_key]"),
    (re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,})"), "[REDACTED:github_token]"),
    (re.compile(r"\bxox[abprs]-[A-Za-z0-9\-]{10,}"), "[REDACTED:slack_token]"),
    (re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"), "[REDACTED:aws_access_key]"),
    (re.compile(r"\bAIza[0-9A-Za-z_\-]{35}\b"), "[REDACTED:google_api_key]"),
    # header.payload.signature. The header's run is consumed whether or not a JWT follows, so a
    # failed start skips the run: a later start inside it ends at the same place and fails alike.
    (re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}+(?P<rest>\.eyJ[A-Za-z0-9_\-]{8,}+\.[A-Za-z0-9_\-]{8,}+)?"), _jwt),
    (re.compile(r"(?i)(?<=\bbearer )[A-Za-z0-9_\-.=~+/]{12,}"), "[REDACTED:bearer_token]"),
    (re.compile(r"(?<=://)[^/\s:@]+:[^/\s@]+(?=@)"), "[REDACTED:url_credentials]"),
]
_CARD = re.compile(r"\b(?:\d[ -]?){13,19}\b")


def _luhn(digits: str) -> bool:
    total, parity = 0, len(digits) % 2
    for i, ch in enumerate(digits):
        d = int(ch)
        if i % 2 == parity:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def _card(match: re.Match[str]) -> str:
    digits = re.sub(r"\D", "", match.group(0))
    if 13 <= len(digits) <= 19 and _luhn(digits) and len(set(digits)) >= 2:
        return "[REDACTED:card_number]"
    return match.group(0)


_CODE_VALUE = re.compile(
    r"^(?:\[REDACTED|self\.|this\.|os\.|process\.|env\.|config\.|settings\.|None$|null$|true$|false$)|[()$<>]"
)


def _secret_like(value: str) -> bool:
    """A value after ``password=`` that is a literal, not code reading one (``get_token()``)."""
    return _CODE_VALUE.search(value) is None


def redact(text: str) -> str:
    """Mask every secret found in text."""
    if not text:
        return text
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    text = _ASSIGNMENT.sub(
        lambda m: (
            m.group(0) if not _secret_like(m.group("value")) else f"{m.group('key')}{m.group('sep')}[REDACTED:secret]"
        ),
        text,
    )
    return _CARD.sub(_card, text)


def redact_obj(value: Any) -> Any:
    """Redact every string inside a JSON-like value (dict keys are kept)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: redact_obj(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_obj(v) for v in value]
    return value
