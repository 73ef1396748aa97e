"""Secret redaction for anything keel writes down or hands on: transcripts, tool results, memory.

Pure functions over strings. Each finding is replaced by ``[REDACTED:<kind>]`` so a reader
knows something was there without learning what.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

# Every pattern runs over whole file contents and command output on every turn, so two rules hold:
# - Linear time. A start that fails must not rescan the same run from every later position.
#   Written the obvious way, the assignment pattern takes seconds on one 5 kB base64 line and
#   minutes on a repeated key name (tests/test_redact.py measures the growth).
# - A literal first. re finds a leading literal with a fast scan but tries a leading ``\b`` at
#   every position, 50-80x slower on ordinary text; so ``\bsk-`` is written ``sk-(?<=\bsk-)``,
#   which matches exactly the same spans.


def _jwt(match: re.Match[str]) -> str:
    return "[REDACTED:jwt]" if match.group("rest") else match.group(0)


_PATTERNS: list[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]]] = [
    (
        re.compile(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----[\s\S]*?(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|\Z)"
        ),
        "[REDACTED:private_key]",
    ),
    (re.compile(r"sk-ant-(?<=\bsk-ant-)[A-Za-z0-9_\-]{16,}"), "[REDACTED:anthropic_key]"),
    (re.compile(r"sk-(?<=\bsk-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}"), "[REDACTED:openai_key]"),
    (
        re.compile(r"g(?<=\bg)(?:h[pousr]_[A-Za-z0-9]{30,}|ithub_pat_[A-Za-z0-9_]{40,})"),
        "[REDACTED:github_token]",
    ),
    (re.compile(r"xox(?<=\bxox)[abprs]-[A-Za-z0-9\-]{10,}"), "[REDACTED:slack_token]"),
    (re.compile(r"A(?<=\bA)(?:KIA|SIA)[A-Z0-9]{16}\b"), "[REDACTED:aws_access_key]"),
    (re.compile(r"AIza(?<=\bAIza)[0-9A-Za-z_\-]{35}\b"), "[REDACTED:google_api_key]"),
    # header.payload.signature. The header's run is consumed whether or not a JWT follows, so a
    # failed start skips the run: a later start inside it ends at the same place and fails alike.
    (
        re.compile(r"eyJ(?<=\beyJ)[A-Za-z0-9_\-]{8,}+(?P<rest>\.eyJ[A-Za-z0-9_\-]{8,}+\.[A-Za-z0-9_\-]{8,}+)?"),
        _jwt,
    ),
]
# These two match after a lookbehind (the prefix stays in the text, and may sit inside an earlier
# match), so they keep that form and run only when their prefix occurs at all.
_BEARER = re.compile(r"(?i)(?<=\bbearer )[A-Za-z0-9_\-.=~+/]{12,}")
_URL_CREDENTIALS = re.compile(r"(?<=://)[^/\s:@]+:[^/\s@]+(?=@)")

# key = value / "key": "value" where the key names a secret. The key is a whole word (nothing
# word-like before it), taken possessively: no separator begins with a word character, so giving
# characters back could never help. Words followed by a separator are found first (_KEYED), and
# only those naming a secret (_SECRET_NAME) are tried in full.
_WORD = r"[A-Za-z0-9_.\-]"
_KEYED = re.compile(rf"""(?<!{_WORD}){_WORD}++["']?\s*[:=]""")
_SECRET_NAME = re.compile(
    r"(?i)password|passwd|pwd|secret|api[_\-]?key|access[_\-]?key|auth[_\-]?token|access[_\-]?token|"
    r"refresh[_\-]?token|client[_\-]?secret|private[_\-]?key|token"
)
_ASSIGNMENT = re.compile(
    rf"""(?x)
    (?<!{_WORD})(?P<key>{_WORD}++)
    (?P<sep>["']?\s*[:=]\s*["']?)
    (?P<value>[^\s"',;}}{{\]\[]{{6,}})
    """
)
# 13-19 digits in groups; the first iteration unrolled so the scan can start from a digit.
_CARD = re.compile(r"\d(?<=\b\d)[ -]?(?:\d[ -]?){12,18}\b")


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
    if "bearer " in text.lower():
        text = _BEARER.sub("[REDACTED:bearer_token]", text)
    if "://" in text:
        text = _URL_CREDENTIALS.sub("[REDACTED:url_credentials]", text)
    return _CARD.sub(_card, _assignments(text))


def _assignments(text: str) -> str:
    """``_ASSIGNMENT.sub`` with the secret-name test first: the same matches, a fraction of the work."""
    out: list[str] = []
    copied = scanned = 0  # text[:copied] is in out; no match may start before scanned
    for keyed in _KEYED.finditer(text):
        start = keyed.start()
        if start < scanned or _SECRET_NAME.search(text, start, keyed.end()) is None:
            continue
        m = _ASSIGNMENT.match(text, start)
        if m is None:
            continue
        scanned = m.end()
        if _secret_like(m.group("value")):
            out += (text[copied:start], m.group("key"), m.group("sep"), "[REDACTED:secret]")
            copied = scanned
    return "".join(out) + text[copied:] if out else text


def redact_obj(value: Any) -> Any:
    """Redact every string inside a JSON-like value (dict keys are kept)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: redact_obj(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_obj(v) for v in value]
    return value
