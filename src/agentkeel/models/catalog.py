"""Model names, aliases, context windows and prices, read from ``models.json``.

``provider:model`` names are resolved here; which provider to use when no model is
given is decided from the environment (see :func:`resolve_model`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

import msgspec

from agentkeel.core.types import Usage
from agentkeel.models import WIRES

CATALOG_FILE = Path(__file__).with_name("models.json")


class ModelConfigError(ValueError):
    """A model name or provider configuration that cannot work; the message says what to do."""


class Prices(msgspec.Struct, frozen=True):
    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0

    def cost(self, usage: Usage) -> float:
        return (
            usage.input_tokens * self.input
            + usage.output_tokens * self.output
            + usage.cache_read_tokens * self.cache_read
            + usage.cache_write_tokens * self.cache_write
        ) / 1_000_000


class ModelInfo(msgspec.Struct, frozen=True):
    provider: str
    model: str
    context_window: int
    max_output: int
    prices: Prices = msgspec.field(default_factory=Prices)
    min_cache_tokens: int = 0  # the shortest prefix the provider caches (0: no known minimum)

    @property
    def qualified(self) -> str:
        return f"{self.provider}:{self.model}"


@lru_cache(maxsize=1)
def _catalog() -> dict[str, Any]:
    text = CATALOG_FILE.read_text(encoding="utf-8")  # beside the module, as keel's other data (no importlib.resources)
    data: dict[str, Any] = json.loads(text)
    return data


def default_base_url(provider: str) -> str | None:
    url = _catalog()["base_urls"].get(provider)
    return str(url) if url else None


def model_info(provider: str, model: str) -> ModelInfo:
    cat = _catalog()
    entry = cat["models"].get(f"{provider}:{model}") or cat["fallback"]
    price = entry.get("price") or {}
    return ModelInfo(
        provider=provider,
        model=model,
        context_window=int(entry["context_window"]),
        max_output=int(entry["max_output"]),
        prices=Prices(**{k: float(v) for k, v in price.items()}),
        min_cache_tokens=min_cache_tokens(provider, model),
    )


def min_cache_tokens(provider: str, model: str) -> int:
    """The shortest prompt prefix the provider caches for this model: the catalog's entry for the
    longest prefix of ``provider:model`` it names; 0 when it names none."""
    name = f"{provider}:{model}"
    table: dict[str, int] = _catalog().get("min_cache_tokens") or {}
    best = max((key for key in table if name.startswith(key)), key=len, default=None)
    return int(table[best]) if best is not None else 0


_HOSTED = frozenset({"anthropic", "openai"})


def untrusted_model_allowed(name: str, env: Mapping[str, str]) -> bool:
    """May a project the user has not trusted choose this model? Only a model of the built-in
    catalog (or its alias) of a hosted provider the user has already configured: never a
    provider prefix that reaches a script, a local server or a base URL of the project's
    choosing, and never a provider without the user's own credentials."""
    cat = _catalog()
    name = cat["aliases"].get(name, name)
    if ":" not in name:
        name = next((key for key in cat["models"] if key.split(":", 1)[1] == name), "")
    provider = name.split(":", 1)[0]
    if provider not in _HOSTED or name not in cat["models"] or "fake" in name:
        return False
    if provider == "anthropic":
        return bool(env.get("ANTHROPIC_API_KEY") or env.get("ANTHROPIC_AUTH_TOKEN"))
    return bool(env.get("OPENAI_API_KEY") or env.get("OPENAI_BASE_URL"))


def resolve_model(name: str | None, env: Mapping[str, str]) -> ModelInfo:
    """Turn ``--model`` (or its absence) into a provider and model.

    No name: ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN) -> anthropic; OPENAI_API_KEY or
    OPENAI_BASE_URL -> openai; else an error that says how to configure one.
    """
    cat = _catalog()
    if not name:
        if env.get("ANTHROPIC_API_KEY") or env.get("ANTHROPIC_AUTH_TOKEN"):
            return model_info("anthropic", cat["defaults"]["anthropic"])
        if env.get("OPENAI_API_KEY") or env.get("OPENAI_BASE_URL"):
            return model_info("openai", cat["defaults"]["openai"])
        raise ModelConfigError(
            "no model provider configured: set ANTHROPIC_API_KEY, or OPENAI_API_KEY / OPENAI_BASE_URL "
            "(e.g. OPENAI_BASE_URL=http://localhost:11434/v1 for Ollama), or pass --model provider:model"
        )
    name = cat["aliases"].get(name, name)
    provider, sep, model = name.partition(":")
    if sep:
        if provider not in WIRES:
            raise ModelConfigError(
                f"unknown provider '{provider}' in model '{name}': use one of {', '.join(sorted(WIRES))}"
            )
        model = model or cat["defaults"].get(provider, "")
        if not model:
            raise ModelConfigError(f"no default model for '{provider}': name one, as {provider}:<model>")
        return model_info(provider, model)
    if name.startswith("claude"):
        return model_info("anthropic", name)
    if name.startswith(("gpt-", "o1", "o3", "o4", "chatgpt")):
        return model_info("openai", name)
    if env.get("OPENAI_BASE_URL"):
        return model_info("openai", name)
    raise ModelConfigError(
        f"unknown model '{name}': name it as provider:model, e.g. anthropic:claude-sonnet-4-5, "
        "openai:gpt-4.1 or ollama:qwen3"
    )
