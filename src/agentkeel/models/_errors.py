"""Classify model-API failures into :class:`ProviderError` kinds, for the wire clients and the SDK
adapters alike: HTTP statuses, error bodies, ``error`` events mid-stream, timeouts, prompt too long.

Every message is one line that says what happened and, where the user can act, what to do.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from typing import Any

from agentkeel.core.provider import ErrorKind, PromptTooLongError, ProviderError
from agentkeel.models.endpoints import shown_url

_MAX_DETAIL = 300

# error types (Anthropic's, OpenAI's, OpenAI-compatible servers') -> kind
_TYPE_KINDS: dict[str, ErrorKind] = {
    "overloaded_error": "overloaded",
    "rate_limit_error": "rate_limit",
    "rate_limit_exceeded": "rate_limit",
    "api_error": "server",
    "server_error": "server",
    "internal_server_error": "server",
    "service_unavailable": "overloaded",
    "timeout_error": "timeout",
    "authentication_error": "auth",
    "invalid_api_key": "auth",
    "permission_error": "auth",
    "not_found_error": "not_found",
    "model_not_found": "not_found",
    "invalid_request_error": "bad_request",
    "request_too_large": "bad_request",
}

_TOO_LONG = re.compile(
    r"prompt is too long|context[_ ]length[_ ]exceeded|maximum context length|exceeds? (?:the )?(?:available )?context"
    r"|exceed_context_size|context window|input length and `?max_tokens`? exceed",
    re.IGNORECASE,
)
_ANTHROPIC_FIGURES = re.compile(r"(\d+) tokens > (\d+)")
_SUM_FIGURES = re.compile(r"(\d+) \+ (\d+) > (\d+)")
_OPENAI_LIMIT = re.compile(r"maximum context length is (\d+)", re.IGNORECASE)
_OPENAI_TOKENS = re.compile(r"(?:resulted in|requested(?: about)?) (\d+) tokens", re.IGNORECASE)


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds to wait, from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date)."""
    if not headers:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return float(ms) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    from email.utils import parsedate_to_datetime  # an HTTP date: rare, and email is a heavy import

    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def one_line(text: str, limit: int = _MAX_DETAIL) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def error_fields(payload: Any) -> tuple[str, str]:
    """``(type or code, message)`` of an error object in Anthropic's or OpenAI's shape, else ``("", "")``."""
    if isinstance(payload, Mapping) and isinstance(payload.get("error"), Mapping):
        payload = payload["error"]
    if not isinstance(payload, Mapping):
        return "", ""
    code = payload.get("code")
    kind = payload.get("type")
    # OpenAI puts the precise reason in "code" (context_length_exceeded, invalid_api_key)
    label = code if isinstance(code, str) and code else kind if isinstance(kind, str) else ""
    if not label and isinstance(code, int):
        label = str(code)
    message = payload.get("message")
    return label, message if isinstance(message, str) else ""


def body_fields(body: bytes | str) -> tuple[str, str]:
    """``(type, message)`` from an error response body: JSON in either shape, or the text itself."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    try:
        label, message = error_fields(json.loads(text))
    except ValueError:
        return "", text.strip()
    return label, message or text.strip()


def prompt_too_long(status: int | None, label: str, message: str) -> PromptTooLongError | None:
    if status not in (None, 200, 400, 413, 422) or not (_TOO_LONG.search(message) or _TOO_LONG.search(label)):
        return None
    tokens = limit = None
    if m := _SUM_FIGURES.search(message):
        tokens, limit = int(m[1]) + int(m[2]), int(m[3])
    elif m := _ANTHROPIC_FIGURES.search(message):
        tokens, limit = int(m[1]), int(m[2])
    else:
        if m := _OPENAI_LIMIT.search(message):
            limit = int(m[1])
        if m := _OPENAI_TOKENS.search(message):
            tokens = int(m[1])
    prefix = f"HTTP {status}: " if status and status != 200 else ""
    return PromptTooLongError(
        f"{prefix}{one_line(message or label)} (the conversation no longer fits the model's context window)",
        status=status,
        tokens=tokens,
        limit=limit,
    )


def from_status(
    status: int,
    message: str,
    headers: Mapping[str, str] | None,
    *,
    endpoint: str,
    model: str,
    key_hint: str = "the API key",
    label: str = "",
) -> ProviderError:
    """An HTTP error status (with the error's message and type, when the body had them)."""
    endpoint = shown_url(endpoint)
    message = one_line(message) or f"status {status}"
    kind: ErrorKind
    if status == 429:
        kind = "rate_limit"
    elif status in (503, 529):
        kind = "overloaded"
    elif status >= 500:
        kind = "server"
    elif status == 408:
        kind = "timeout"
    elif status == 409:
        kind = "conflict"
    elif status in (401, 403):
        kind = "auth"
        what = "rejected" if status == 401 else "not allowed to do this"
        message = f"{message}: the credentials were {what} by {endpoint}; check {key_hint}"
    elif status == 404:
        kind = "not_found"
        message = f"model '{model}' or endpoint not found at {endpoint}: check --model and the base URL ({message})"
    elif status in (400, 413, 422):
        too_long = prompt_too_long(status, label, message)
        if too_long is not None:
            return too_long
        kind = "bad_request"
    else:
        kind = "other"
    return ProviderError(kind, f"HTTP {status}: {message}", status=status, retry_after=parse_retry_after(headers))


def from_response(
    status: int, body: bytes, headers: Mapping[str, str], *, endpoint: str, model: str, key_hint: str
) -> ProviderError:
    endpoint = shown_url(endpoint)
    label, message = body_fields(body)
    return from_status(status, message, headers, endpoint=endpoint, model=model, key_hint=key_hint, label=label)


def from_stream_error(error: Any, *, endpoint: str) -> ProviderError:
    """An ``error`` event (or an ``{"error": ...}`` chunk) that ended a stream the server had begun
    with 200: Anthropic's ``overloaded_error`` and the like. Server-side trouble unless it says otherwise."""
    endpoint = shown_url(endpoint)
    label, message = error_fields(error)
    too_long = prompt_too_long(None, label, message)
    if too_long is not None:
        return too_long
    kind = _TYPE_KINDS.get(label.lower())
    if kind is None and label.isdigit():
        kind = from_status(int(label), message, None, endpoint=endpoint, model="").kind
    what = f"{label}: {one_line(message)}" if label and message else one_line(message) or label or "unknown error"
    return ProviderError(kind or "server", f"{endpoint} reported an error mid-stream ({what})")


def unreachable(endpoint: str, detail: str) -> ProviderError:
    endpoint = shown_url(endpoint)
    return ProviderError(
        "connection", f"cannot reach {endpoint} ({detail}): check the base URL and that the server is running"
    )


def timed_out(endpoint: str, timeout_s: float, *, waiting_for: str) -> ProviderError:
    endpoint = shown_url(endpoint)
    return ProviderError(
        "timeout",
        f"no {waiting_for} from {endpoint} within {timeout_s:g} s: the server stalled "
        "(API_TIMEOUT_MS sets how long to wait, in milliseconds)",
    )


def sdk_status_error(exc: Any, *, endpoint: str, model: str, key_hint: str) -> ProviderError:
    """An official SDK's status error (anthropic.APIStatusError, openai.APIStatusError) as keel's."""
    endpoint = shown_url(endpoint)
    label, message = error_fields(exc.body)
    return from_status(
        exc.status_code,
        message or str(exc.message),
        exc.response.headers,
        endpoint=endpoint,
        model=model,
        key_hint=key_hint,
        label=label,
    )


def sdk_transport_error(exc: Exception, *, endpoint: str, timeout_s: float) -> ProviderError | None:
    """An exception of the HTTP stack under an SDK (httpx, httpcore, h11) raised while the stream is
    read, which the SDK lets through unwrapped: a timeout, or a broken stream. None for anything else."""
    endpoint = shown_url(endpoint)
    if not type(exc).__module__.startswith(("httpx", "httpcore", "h11")):
        return None
    if "Timeout" in type(exc).__name__:
        return timed_out(endpoint, timeout_s, waiting_for="data")
    return ProviderError("stream_broken", f"the response stream from {endpoint} broke: {type(exc).__name__}: {exc}")
