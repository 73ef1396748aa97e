"""Build a provider for a resolved model from the environment (SDK env vars honoured)."""

from __future__ import annotations

from collections.abc import Mapping

from agentkeel.core.provider import Provider
from agentkeel.providers.catalog import OPENAI_COMPATIBLE, ModelConfigError, ModelInfo, default_base_url


def make_provider(info: ModelInfo, env: Mapping[str, str]) -> Provider:
    if info.provider == "anthropic":
        key, token = env.get("ANTHROPIC_API_KEY"), env.get("ANTHROPIC_AUTH_TOKEN")
        if not key and not token:
            raise ModelConfigError("ANTHROPIC_API_KEY is not set: export it, or pick another --model")
        try:
            from agentkeel.providers.anthropic_messages import AnthropicProvider
        except ImportError:
            raise ModelConfigError("the anthropic SDK is not installed: pip install 'agentkeel[anthropic]'") from None
        return AnthropicProvider(api_key=key, auth_token=token, base_url=env.get("ANTHROPIC_BASE_URL") or None)
    if info.provider in OPENAI_COMPATIBLE:
        if info.provider == "openai":
            base_url = env.get("OPENAI_BASE_URL") or None
            key = env.get("OPENAI_API_KEY")
            if not key and not base_url:
                raise ModelConfigError("OPENAI_API_KEY is not set: export it (or OPENAI_BASE_URL for a local server)")
        else:
            prefix = info.provider.upper()
            base_url = env.get(f"{prefix}_BASE_URL") or default_base_url(info.provider)
            key = env.get(f"{prefix}_API_KEY") or (
                "" if info.provider != "openrouter" else env.get("OPENROUTER_API_KEY")
            )
        try:
            from agentkeel.providers.openai_chat import OpenAIChatProvider
        except ImportError:
            raise ModelConfigError("the openai SDK is not installed: pip install 'agentkeel[openai]'") from None
        return OpenAIChatProvider(api_key=key or None, base_url=base_url)
    if info.provider == "scripted":
        from agentkeel.fakellm.script import ScriptError
        from agentkeel.providers.scripted import ScriptedProvider

        path = env.get("KEEL_SCRIPT") or info.model
        try:
            return ScriptedProvider(path)
        except ScriptError as e:
            raise ModelConfigError(str(e)) from None
    raise ModelConfigError(f"unknown provider '{info.provider}'")
