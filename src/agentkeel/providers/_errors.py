"""Classify HTTP failures into :class:`ProviderError` kinds (shared by the SDK adapters)."""

from __future__ import annotations

from collections.abc import Mapping

from agentkeel.core.provider import ErrorKind, ProviderError


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    if not headers:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return float(ms) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value:
        try:
            return float(value)
        except ValueError:
            return None
    return None


def from_status(
    status: int, message: str, headers: Mapping[str, str] | None, *, endpoint: str, model: str
) -> ProviderError:
    kind: ErrorKind
    if status == 429:
        kind = "rate_limit"
    elif status in (503, 529):
        kind = "overloaded"
    elif status >= 500:
        kind = "server"
    elif status in (401, 403):
        kind = "auth"
        message = f"{message} (check the API key for {endpoint})"
    elif status == 404:
        kind = "not_found"
        message = f"model '{model}' or endpoint not found at {endpoint}: check --model and the base URL ({message})"
    elif status in (400, 413, 422):
        kind = "bad_request"
    else:
        kind = "other"
    return ProviderError(kind, f"HTTP {status}: {message}", status=status, retry_after=parse_retry_after(headers))


def unreachable(endpoint: str, detail: str) -> ProviderError:
    return ProviderError(
        "connection", f"cannot reach {endpoint} ({detail}): check the base URL and that the server is running"
    )
