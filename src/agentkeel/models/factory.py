"""Build a provider for a resolved model from the environment: the module ``WIRES`` names for its
provider (``agentkeel.models``) makes it.

Two transports for the formats that have an official SDK: ``wire`` (the default: keel's own
clients on httpx, nothing else to install) and ``sdk`` (the official ``anthropic`` / ``openai``
SDKs, from the extras of the same names). The transport comes from the ``transport`` argument (the
``provider.transport`` setting), else ``KEEL_PROVIDER_TRANSPORT``, else ``wire``.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Literal

from agentkeel.core.provider import Provider
from agentkeel.internal.env import KeelEnv
from agentkeel.models import WIRES
from agentkeel.models.catalog import ModelConfigError, ModelInfo

Transport = Literal["wire", "sdk"]
TRANSPORTS: tuple[Transport, ...] = ("wire", "sdk")


def pick_transport(transport: str | None, env: Mapping[str, str]) -> Transport:
    chosen = transport or KeelEnv.of(env).provider_transport or "wire"
    for known in TRANSPORTS:
        if chosen == known:
            return known
    where = "provider.transport" if transport else "KEEL_PROVIDER_TRANSPORT"
    raise ModelConfigError(f"{where} must be 'wire' or 'sdk', got '{chosen}'")


def sdk_missing(package: str) -> ModelConfigError:
    return ModelConfigError(
        f"the {package} SDK is not installed: pip install 'agentkeel[{package}]', "
        'or use keel\'s own client (provider.transport "wire", the default)'
    )


def make_provider(info: ModelInfo, env: Mapping[str, str], *, transport: str | None = None) -> Provider:
    module = WIRES.get(info.provider)
    if module is None:
        raise ModelConfigError(f"unknown provider '{info.provider}'")
    provider: Provider = importlib.import_module(module).make(info, env, transport)
    return provider
