"""Recovery: model fallback on repeated provider errors (``--fallback-model``, setting ``fallbackModel``)."""

from __future__ import annotations

from msgspec.structs import replace as dc_replace

from agentkeel.core.events import EventBus
from agentkeel.core.extensions import Extension
from agentkeel.core.provider import ModelRequest, ProviderError
from agentkeel.reliability.state import ReliabilityState, notice

FALLBACK_KINDS = frozenset({"overloaded", "rate_limit", "server", "not_found"})


def model_fallback(bus: EventBus, state: ReliabilityState) -> Extension | None:
    """Failure: the model stays overloaded (529), rate-limited or failing (5xx) through every
    retry, or the model id is gone, and the run ends although another model would answer.
    Recovery: after the provider's own retries gave up, the request goes to the configured fallback
    model of the same provider, and the session stays on it (a notice says so). Without a fallback
    model this built-in takes no part."""
    if not state.fallback_model:
        return None

    async def recover(err: ProviderError, request: ModelRequest, attempt: int) -> ModelRequest | None:
        if err.kind not in FALLBACK_KINDS or request.model == state.fallback_model:
            return None
        state.fallback_active = True
        notice(
            bus,
            "model-fallback",
            f"{request.model} failed ({err.kind}: {err}); switching to {state.fallback_model} for this session",
            "warning",
        )
        return dc_replace(request, model=state.fallback_model)

    async def before_request(request: ModelRequest) -> ModelRequest:
        return dc_replace(request, model=state.fallback_model) if state.fallback_active else request

    return Extension("model-fallback", recover=recover, before_request=before_request)
