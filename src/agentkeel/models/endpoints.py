"""Where a model lives and how to authenticate: base URL, credentials, headers and timeout, read
from the environment with Claude Code's and the SDKs' variable names. Shared by the wire clients
and the SDK adapters, so that both paths send the same things.

Anthropic: ``ANTHROPIC_API_KEY`` (sent as ``x-api-key``), ``ANTHROPIC_AUTH_TOKEN`` (``Authorization:
Bearer``), ``ANTHROPIC_BASE_URL``, ``ANTHROPIC_BETAS`` (comma-separated ``anthropic-beta`` values),
``ANTHROPIC_CUSTOM_HEADERS`` (``Name: Value`` lines). OpenAI-compatible: ``OPENAI_API_KEY``
(optional for local servers), ``OPENAI_BASE_URL``, ``OPENAI_ORG_ID``, ``OPENAI_PROJECT_ID``, and
``<PROVIDER>_API_KEY`` / ``<PROVIDER>_BASE_URL`` for ollama, vllm, ... Both: ``API_TIMEOUT_MS``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import msgspec

from agentkeel.models.catalog import ModelConfigError, default_base_url

ANTHROPIC_API_URL = "https://api.anthropic.com"
OPENAI_API_URL = "https://api.openai.com/v1"
ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_TIMEOUT_S = 600.0
CONNECT_TIMEOUT_S = 10.0

_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


_USERINFO = re.compile(r"(?<=://)[^/@\s]*@")


def shown_url(url: str) -> str:
    """A URL as a message may show it: without the user and password a base URL can carry before its
    ``@``, which would otherwise reach the terminal, the -p result and logs."""
    return _USERINFO.sub("", url)


class AnthropicEndpoint(msgspec.Struct, frozen=True):
    base_url: str = ANTHROPIC_API_URL
    api_key: str | None = None
    auth_token: str | None = None
    betas: tuple[str, ...] = ()
    custom_headers: Mapping[str, str] = msgspec.field(default_factory=dict)
    timeout_s: float = DEFAULT_TIMEOUT_S

    @property
    def key_hint(self) -> str:
        if self.auth_token and not self.api_key:
            return "ANTHROPIC_AUTH_TOKEN"
        return "ANTHROPIC_API_KEY" + (" and ANTHROPIC_AUTH_TOKEN" if self.auth_token else "")

    def extra_headers(self) -> dict[str, str]:
        """What the SDK does not add by itself: the beta list, then the user's own headers."""
        out: dict[str, str] = {}
        if self.betas:
            out["anthropic-beta"] = ",".join(self.betas)
        out.update(self.custom_headers)
        return out

    def headers(self) -> dict[str, str]:
        out = {"anthropic-version": ANTHROPIC_VERSION}
        if self.api_key:
            out["x-api-key"] = self.api_key
        if self.auth_token:
            out["authorization"] = f"Bearer {self.auth_token}"
        return _merge(out, self.extra_headers())


class OpenAIEndpoint(msgspec.Struct, frozen=True):
    base_url: str = OPENAI_API_URL
    api_key: str | None = None
    organization: str | None = None
    project: str | None = None
    custom_headers: Mapping[str, str] = msgspec.field(default_factory=dict)
    timeout_s: float = DEFAULT_TIMEOUT_S
    key_hint: str = "OPENAI_API_KEY"

    def headers(self) -> dict[str, str]:
        out: dict[str, str] = {}
        if self.api_key:  # local servers (Ollama, llama.cpp, ...) need none
            out["authorization"] = f"Bearer {self.api_key}"
        if self.organization:
            out["openai-organization"] = self.organization
        if self.project:
            out["openai-project"] = self.project
        return _merge(out, dict(self.custom_headers))


def _merge(base: dict[str, str], over: dict[str, str]) -> dict[str, str]:
    """``over`` wins, whatever the case of its header names."""
    lowered = {k.lower() for k in over}
    return {**{k: v for k, v in base.items() if k.lower() not in lowered}, **over}


def parse_custom_headers(text: str, variable: str = "ANTHROPIC_CUSTOM_HEADERS") -> dict[str, str]:
    """Claude Code's format: one ``Name: Value`` per line, split at the first colon."""
    out: dict[str, str] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        name, sep, value = line.partition(":")
        name, value = name.strip(), value.strip()
        if not sep or not _HEADER_NAME.match(name) or any(c in value for c in "\r\n\0"):
            raise ModelConfigError(f"{variable} line {n} is not 'Name: Value': fix or remove it")
        out[name] = value
    return out


def timeout_from_env(env: Mapping[str, str]) -> float:
    raw = env.get("API_TIMEOUT_MS", "").strip()
    if not raw:
        return DEFAULT_TIMEOUT_S
    try:
        ms = float(raw)
    except ValueError:
        ms = 0.0
    if not ms > 0 or ms == float("inf"):
        raise ModelConfigError(f"API_TIMEOUT_MS must be a positive number of milliseconds, got '{raw}'")
    return ms / 1000


def _base_url(value: str, variable: str) -> str:
    url = value.strip().rstrip("/")
    if not url.startswith(("http://", "https://")) or len(url) <= len("https://"):
        raise ModelConfigError(f"{variable} must be an http:// or https:// URL, got '{value}'")
    return url


def anthropic_endpoint(env: Mapping[str, str]) -> AnthropicEndpoint:
    key, token = env.get("ANTHROPIC_API_KEY") or None, env.get("ANTHROPIC_AUTH_TOKEN") or None
    if not key and not token:
        raise ModelConfigError("ANTHROPIC_API_KEY is not set: export it, or pick another --model")
    base = env.get("ANTHROPIC_BASE_URL")
    betas = tuple(b.strip() for b in env.get("ANTHROPIC_BETAS", "").split(",") if b.strip())
    return AnthropicEndpoint(
        base_url=_base_url(base, "ANTHROPIC_BASE_URL") if base else ANTHROPIC_API_URL,
        api_key=key,
        auth_token=token,
        betas=betas,
        custom_headers=parse_custom_headers(env.get("ANTHROPIC_CUSTOM_HEADERS", "")),
        timeout_s=timeout_from_env(env),
    )


def openai_endpoint(provider: str, env: Mapping[str, str]) -> OpenAIEndpoint:
    """``openai`` reads OPENAI_*; ``ollama``, ``vllm``, ... read ``<PROVIDER>_BASE_URL`` (default from
    models.json) and ``<PROVIDER>_API_KEY``."""
    prefix = provider.upper()
    if provider == "openai":
        base = env.get("OPENAI_BASE_URL") or None
        key = env.get("OPENAI_API_KEY") or None
        if not key and not base:
            raise ModelConfigError("OPENAI_API_KEY is not set: export it (or OPENAI_BASE_URL for a local server)")
        url = _base_url(base, "OPENAI_BASE_URL") if base else OPENAI_API_URL
    else:
        base = env.get(f"{prefix}_BASE_URL") or default_base_url(provider)
        if not base:
            raise ModelConfigError(f"{prefix}_BASE_URL is not set: export the server's URL (ending in /v1)")
        url = _base_url(base, f"{prefix}_BASE_URL")
        key = env.get(f"{prefix}_API_KEY") or None
    return OpenAIEndpoint(
        base_url=url,
        api_key=key,
        organization=(env.get("OPENAI_ORG_ID") or None) if provider == "openai" else None,
        project=(env.get("OPENAI_PROJECT_ID") or None) if provider == "openai" else None,
        timeout_s=timeout_from_env(env),
        key_hint=f"{prefix}_API_KEY",
    )
