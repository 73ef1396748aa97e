"""Build a provider for a resolved model from the environment.

Two transports: ``wire`` (the default: keel's own clients on httpx, nothing else to install) and
``sdk`` (the official ``anthropic`` / ``openai`` SDKs, from the extras of the same names). The
transport comes from the ``transport`` argument (the ``provider.transport`` setting), else
``KEEL_PROVIDER_TRANSPORT``, else ``wire``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from agentkeel.core.provider import Provider
from agentkeel.providers.catalog import OPENAI_COMPATIBLE, ModelConfigError, ModelInfo
from agentkeel.providers.endpoints import anthropic_endpoint, openai_endpoint

Transport = Literal["wire", "sdk"]
TRANSPORTS: tuple[Transport, ...] = ("wire", "sdk")


def pick_transport(transport: str | None, env: Mapping[str, str]) -> Transport:
    chosen = transport or env.get("KEEL_PROVIDER_TRANSPORT") or "wire"
    for known in TRANSPORTS:
        if chosen == known:
            return known
    where = "provider.transport" if transport else "KEEL_PROVIDER_TRANSPORT"
    raise ModelConfigError(f"{where} must be 'wire' or 'sdk', got '{chosen}'")


def _sdk_missing(package: str) -> ModelConfigError:
    return ModelConfigError(
        f"the {package} SDK is not installed: pip install 'agentkeel[{package}]', "
        'or use keel\'s own client (provider.transport "wire", the default)'
    )


def make_provider(info: ModelInfo, env: Mapping[str, str], *, transport: str | None = None) -> Provider:
    how = pick_transport(transport, env) if info.provider != "scripted" else "wire"
    if info.provider == "anthropic":
        endpoint = anthropic_endpoint(env)
        if how == "wire":
            from agentkeel.providers.anthropic_wire import AnthropicWireProvider

            return AnthropicWireProvider(endpoint)
        try:
            from agentkeel.providers.anthropic_messages import AnthropicProvider

            return AnthropicProvider(endpoint=endpoint)
        except ImportError:
            raise _sdk_missing("anthropic") from None
    if info.provider in OPENAI_COMPATIBLE:
        oa = openai_endpoint(info.provider, env)
        if how == "wire":
            from agentkeel.providers.openai_wire import OpenAIWireProvider

            return OpenAIWireProvider(oa)
        try:
            from agentkeel.providers.openai_chat import OpenAIChatProvider

            return OpenAIChatProvider(endpoint=oa)
        except ImportError:
            raise _sdk_missing("openai") from None
    if info.provider == "scripted":
        from agentkeel.fakellm.script import ScriptError
        from agentkeel.providers.scripted import ScriptedProvider

        path = env.get("KEEL_SCRIPT") or info.model
        try:
            return ScriptedProvider(path)
        except ScriptError as e:
            raise ModelConfigError(str(e)) from None
    raise ModelConfigError(f"unknown provider '{info.provider}'")
