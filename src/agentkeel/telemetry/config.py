"""The telemetry switches, read from the session's environment as Claude Code reads them.

Nothing here imports OpenTelemetry: a session with telemetry off reads these variables and stops.
Settings files' ``env`` sections count (the session's environment already holds them), so the
setup Claude Code documents (``"env": {"CLAUDE_CODE_ENABLE_TELEMETRY": "1", ...}`` in a managed or
user settings file) works unchanged."""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import unquote, urlsplit, urlunsplit

import msgspec

EXPORTERS = ("otlp", "console", "none")
PROTOCOLS = ("grpc", "http/protobuf", "http/json")
SIGNALS = ("metrics", "logs")
DEFAULT_METRIC_INTERVAL_MS = 60_000  # Claude Code's (and the OTel SDK's) default
DEFAULT_LOGS_INTERVAL_MS = 5_000
DEFAULT_TIMEOUT_MS = 10_000
# the most a session's end waits for the collector when no OTEL_EXPORTER_OTLP_TIMEOUT says otherwise
# (Claude Code's -p ends about as soon with an unreachable collector)
DEFAULT_FLUSH_MS = 3_000


class Signal(msgspec.Struct, frozen=True):
    """Where one signal goes: its exporters (otlp, console), and for otlp the protocol, the full
    endpoint URL (http) or address (grpc), the headers and the timeout."""

    exporters: tuple[str, ...] = ()
    protocol: str = "grpc"
    endpoint: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    timeout_s: float = DEFAULT_TIMEOUT_MS / 1000
    interval_s: float = DEFAULT_METRIC_INTERVAL_MS / 1000
    temporality: str = "delta"  # metrics only: delta (Claude Code's default) | cumulative


class TelemetryConfig(msgspec.Struct, frozen=True):
    metrics: Signal
    logs: Signal
    log_user_prompts: bool = False  # OTEL_LOG_USER_PROMPTS=1: prompt (and response) text, redacted
    include_session_id: bool = True  # OTEL_METRICS_INCLUDE_SESSION_ID
    include_version: bool = False  # OTEL_METRICS_INCLUDE_VERSION
    resource: tuple[tuple[str, str], ...] = ()  # OTEL_RESOURCE_ATTRIBUTES (+ OTEL_SERVICE_NAME)
    flush_s: float = DEFAULT_FLUSH_MS / 1000  # the wait for the last export at the session's end
    warnings: tuple[str, ...] = ()  # one line each: a switch keel could not read, and what it did instead

    @property
    def active(self) -> bool:
        return bool(self.metrics.exporters or self.logs.exporters)


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def _falsy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("0", "false", "no", "off")


def enabled(env: Mapping[str, str]) -> bool:
    """``CLAUDE_CODE_ENABLE_TELEMETRY`` is on: the only question asked of a session by default."""
    return _truthy(env.get("CLAUDE_CODE_ENABLE_TELEMETRY"))


def _pairs(raw: str, what: str, warnings: list[str]) -> tuple[tuple[str, str], ...]:
    """``k=v,k2=v2`` (W3C baggage style, values percent-decoded), as the OTel SDK reads headers
    and resource attributes. A malformed entry is skipped with a warning."""
    out: list[tuple[str, str]] = []
    for position, item in enumerate(raw.split(","), 1):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():  # never echoed: a header's value is often a secret
            warnings.append(f"telemetry: {what}: entry {position} is not key=value (write name=value); skipped")
            continue
        out.append((unquote(key.strip()), unquote(value.strip())))
    return tuple(out)


def shown(url: str) -> str:
    """An endpoint as a message may show it: no user, password or query (they may hold a secret)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        netloc = f"[{host}]" if ":" in host else host
        if parts.port is not None:
            netloc += f":{parts.port}"
    except ValueError:
        return "(an endpoint that is not a URL)"
    if not parts.scheme or not netloc:
        return "(an endpoint that is not a URL)" if "@" in url or "?" in url else url
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _interval(env: Mapping[str, str], name: str, default_ms: int, warnings: list[str]) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default_ms / 1000
    try:
        value = int(float(raw))
    except ValueError:
        value = 0
    if value <= 0:
        warnings.append(f"telemetry: {name}={raw!r} is not a positive number of milliseconds; using {default_ms}")
        return default_ms / 1000
    return value / 1000


def _signal(env: Mapping[str, str], signal: str, warnings: list[str]) -> Signal:
    upper = signal.upper()
    variable = f"OTEL_{upper}_EXPORTER"
    exporters: list[str] = []
    for name in (n.strip().lower() for n in env.get(variable, "").split(",")):
        if not name or name == "none":
            continue
        if name not in EXPORTERS:
            warnings.append(f"telemetry: {variable}: unknown exporter '{name}' (known: otlp, console, none); ignored")
            continue
        if name not in exporters:
            exporters.append(name)
    protocol = (
        env.get(f"OTEL_EXPORTER_OTLP_{upper}_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "grpc"
    ).strip()
    if protocol not in PROTOCOLS and "otlp" in exporters:
        warnings.append(
            f"telemetry: OTEL_EXPORTER_OTLP_PROTOCOL: unknown protocol '{protocol}' for {signal} "
            "(known: grpc, http/protobuf, http/json); using grpc"
        )
        protocol = "grpc"
    endpoint = env.get(f"OTEL_EXPORTER_OTLP_{upper}_ENDPOINT", "").strip()
    if not endpoint:
        # the general endpoint is a base: http protocols add /v1/<signal>, as the OTel spec says
        base = env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
        if protocol == "grpc":
            endpoint = base or "http://localhost:4317"
        else:
            endpoint = (base or "http://localhost:4318").rstrip("/") + f"/v1/{signal}"
    if "otlp" in exporters and not endpoint.startswith(("http://", "https://")) and protocol != "grpc":
        warnings.append(
            f"telemetry: the {signal} endpoint '{shown(endpoint)}' is not an http:// or https:// URL; "
            f"{signal} are not exported over otlp"
        )
        exporters.remove("otlp")
    headers = _pairs(env.get("OTEL_EXPORTER_OTLP_HEADERS", ""), "OTEL_EXPORTER_OTLP_HEADERS", warnings)
    own = _pairs(env.get(f"OTEL_EXPORTER_OTLP_{upper}_HEADERS", ""), f"OTEL_EXPORTER_OTLP_{upper}_HEADERS", warnings)
    if own:
        headers = tuple((k, v) for k, v in headers if k not in dict(own)) + own
    timeout_raw = env.get(f"OTEL_EXPORTER_OTLP_{upper}_TIMEOUT") or env.get("OTEL_EXPORTER_OTLP_TIMEOUT") or ""
    timeout = _interval({"T": timeout_raw}, "T", DEFAULT_TIMEOUT_MS, []) if timeout_raw.strip() else 10.0
    if signal == "metrics":
        interval = _interval(env, "OTEL_METRIC_EXPORT_INTERVAL", DEFAULT_METRIC_INTERVAL_MS, warnings)
    else:
        interval = _interval(env, "OTEL_LOGS_EXPORT_INTERVAL", DEFAULT_LOGS_INTERVAL_MS, warnings)
    temporality = env.get("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "delta").strip().lower() or "delta"
    if temporality not in ("delta", "cumulative"):
        if signal == "metrics":
            warnings.append(
                f"telemetry: OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE={temporality!r} "
                "(known: delta, cumulative); using delta"
            )
        temporality = "delta"
    return Signal(
        exporters=tuple(exporters),
        protocol=protocol,
        endpoint=endpoint,
        headers=headers,
        timeout_s=timeout,
        interval_s=interval,
        temporality=temporality,
    )


def read_config(env: Mapping[str, str]) -> TelemetryConfig | None:
    """The telemetry configuration of a session, or None when telemetry is off."""
    if not enabled(env):
        return None
    warnings: list[str] = []
    resource = _pairs(env.get("OTEL_RESOURCE_ATTRIBUTES", ""), "OTEL_RESOURCE_ATTRIBUTES", warnings)
    service = env.get("OTEL_SERVICE_NAME", "").strip()
    if service:
        resource = (*((k, v) for k, v in resource if k != "service.name"), ("service.name", service))
    metrics, logs = _signal(env, "metrics", warnings), _signal(env, "logs", warnings)
    timeouts = ("OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", "OTEL_EXPORTER_OTLP_LOGS_TIMEOUT")
    given = any(env.get(name, "").strip() for name in timeouts)
    flush = max(metrics.timeout_s, logs.timeout_s) if given else DEFAULT_FLUSH_MS / 1000
    return TelemetryConfig(
        metrics=metrics,
        logs=logs,
        flush_s=flush,
        log_user_prompts=_truthy(env.get("OTEL_LOG_USER_PROMPTS")),
        include_session_id=not _falsy(env.get("OTEL_METRICS_INCLUDE_SESSION_ID")),
        include_version=_truthy(env.get("OTEL_METRICS_INCLUDE_VERSION")),
        resource=resource,
        warnings=tuple(warnings),
    )
