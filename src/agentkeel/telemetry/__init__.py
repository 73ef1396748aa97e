"""OpenTelemetry export, as Claude Code exports it (``CLAUDE_CODE_ENABLE_TELEMETRY=1``).

``telemetry_extension`` is the ``telemetry`` built-in: with telemetry off it reads the switch and
returns None, importing nothing of OpenTelemetry; on, it subscribes a :class:`Recorder` to the
session's bus and exports through the SDK (the ``otel`` extra), flushing at the session's end so a
``keel -p`` run sends everything before it exits. docs/monitoring.md is the user's page."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol

from agentkeel.core.events import EventBus, Notice
from agentkeel.core.extensions import Extension, PromptInfo, ToolCall, Verdict
from agentkeel.core.provider import ProviderError
from agentkeel.telemetry.config import TelemetryConfig, enabled, read_config, shown

if TYPE_CHECKING:
    from agentkeel.core.provider import Provider
    from agentkeel.policy.permissions import PermissionEngine

__all__ = ["TelemetryConfig", "enabled", "read_config", "telemetry_builtin", "telemetry_extension"]

MISSING = (
    "telemetry: CLAUDE_CODE_ENABLE_TELEMETRY is set but the OpenTelemetry packages are not installed; "
    "nothing is exported (install them: pip install 'agentkeel[otel]')"
)


def telemetry_extension(
    bus: EventBus,
    env: Mapping[str, str],
    *,
    session_id: str,
    model: str,
    provider: str,
    mode: Callable[[], str],
    notices: list[str],
) -> Extension | None:
    """The ``telemetry`` built-in for one session, or None when telemetry is off."""
    config = read_config(env)
    if config is None:
        return None
    notices.extend(config.warnings)
    if not config.active:
        return None
    from agentkeel._version import __version__
    from agentkeel.telemetry.recorder import Recorder, edits_files, host_resource

    try:
        from agentkeel.telemetry.otel import OtelSink
    except ImportError:
        notices.append(MISSING)
        return None
    resource = {
        "service.name": "keel",
        "service.version": __version__,
        **host_resource(),
        **dict(config.resource),
    }
    try:
        sink = OtelSink(config, resource, __version__)
    except ImportError as exc:  # the SDK is there, the protocol's exporter is not
        notices.append(f"{MISSING} ({exc})")
        return None
    except Exception as exc:  # a bad endpoint or option: say so once, run without telemetry
        notices.append(f"telemetry: could not start the exporters ({type(exc).__name__}: {exc}); nothing is exported")
        return None
    recorder = Recorder(
        config,
        sink,
        session_id=session_id,
        model=model,
        provider=provider,
        env=dict(env),
        version=__version__,
        mode=mode,
    )

    async def on_prompt(info: PromptInfo) -> None:
        recorder.prompt(info)

    async def on_error(err: ProviderError) -> None:
        recorder.error(err)

    async def before_tool(call: ToolCall) -> Verdict | None:
        if edits_files(call.name):
            recorder.before_edit(call.name, call.input, call.id)
        return None  # no opinion: telemetry never decides a call

    async def close() -> None:
        flushed = await asyncio.to_thread(sink.shutdown_within, config.flush_s)
        if not flushed:
            where = ", ".join(
                sorted({shown(s.endpoint) for s in (config.metrics, config.logs) if "otlp" in s.exporters})
            )
            message = (
                f"telemetry: the collector ({where}) did not take the last export within {config.flush_s:g} s; "
                "it is not sent (OTEL_EXPORTER_OTLP_TIMEOUT sets the wait, in ms)"
            )
        elif sink.failed:
            failed = ", ".join(shown(e) for e in sink.failed)
            message = f"telemetry: the collector ({failed}) refused or did not answer the last export"
        else:
            return
        bus.emit(Notice(level="warning", message=message))

    return Extension(
        "telemetry",
        on_prompt=on_prompt,
        on_error=on_error,
        before_tool=before_tool,
        subscribers=[recorder],
        close=close,
    )


class Parts(Protocol):
    """What the built-in reads of a session's parts (app.extensions.SessionParts)."""

    bus: EventBus
    env: dict[str, str]
    session_id: str
    model: str
    provider: Provider
    engine: PermissionEngine
    notices: list[str]


def telemetry_builtin(parts: Parts) -> Extension | None:
    """The ``telemetry`` entry of app.extensions.BUILTINS."""
    engine = parts.engine
    return telemetry_extension(
        parts.bus,
        parts.env,
        session_id=parts.session_id,
        model=parts.model,
        provider=parts.provider.name,
        mode=lambda: str(engine.mode),
        notices=parts.notices,
    )
