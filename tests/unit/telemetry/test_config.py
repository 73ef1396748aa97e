"""The telemetry switches, read as Claude Code (and the OTel spec) reads them."""

from __future__ import annotations

from agentkeel.telemetry.config import read_config


def test_off_unless_switched_on() -> None:
    assert read_config({}) is None
    assert read_config({"CLAUDE_CODE_ENABLE_TELEMETRY": "0", "OTEL_METRICS_EXPORTER": "otlp"}) is None
    on = read_config({"CLAUDE_CODE_ENABLE_TELEMETRY": "1"})
    assert on is not None and not on.active  # on, but no exporter chosen: nothing to send


def test_endpoints_protocols_and_headers() -> None:
    config = read_config(
        {
            "CLAUDE_CODE_ENABLE_TELEMETRY": "1",
            "OTEL_METRICS_EXPORTER": "otlp,console",
            "OTEL_LOGS_EXPORTER": "otlp",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/",
            "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL": "grpc",
            "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": "http://collector:4317",
            "OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Bearer%20abc,x-team=a",
            "OTEL_EXPORTER_OTLP_LOGS_HEADERS": "x-team=b",
            "OTEL_METRIC_EXPORT_INTERVAL": "1500",
            "OTEL_LOGS_EXPORT_INTERVAL": "250",
        }
    )
    assert config is not None and config.active and not config.warnings
    assert config.metrics.exporters == ("otlp", "console")
    assert config.metrics.protocol == "http/json"
    assert config.metrics.endpoint == "http://collector:4318/v1/metrics"  # the base gets the signal's path
    assert config.metrics.interval_s == 1.5
    assert dict(config.metrics.headers) == {"Authorization": "Bearer abc", "x-team": "a"}
    assert config.logs.protocol == "grpc" and config.logs.endpoint == "http://collector:4317"  # as given
    assert dict(config.logs.headers) == {"Authorization": "Bearer abc", "x-team": "b"}  # the signal's own wins
    assert config.logs.interval_s == 0.25


def test_privacy_and_attribute_switches() -> None:
    config = read_config(
        {
            "CLAUDE_CODE_ENABLE_TELEMETRY": "true",
            "OTEL_LOG_USER_PROMPTS": "1",
            "OTEL_METRICS_INCLUDE_SESSION_ID": "false",
            "OTEL_METRICS_INCLUDE_VERSION": "true",
            "OTEL_RESOURCE_ATTRIBUTES": "team=platform,cost%20center=42",
            "OTEL_SERVICE_NAME": "claude-code",
        }
    )
    assert config is not None
    assert config.log_user_prompts and not config.include_session_id and config.include_version
    assert dict(config.resource) == {"team": "platform", "cost center": "42", "service.name": "claude-code"}
    defaults = read_config({"CLAUDE_CODE_ENABLE_TELEMETRY": "1"})
    assert defaults is not None
    assert not defaults.log_user_prompts and defaults.include_session_id and not defaults.include_version
    assert defaults.metrics.protocol == "grpc" and defaults.metrics.endpoint == "http://localhost:4317"
    assert defaults.metrics.temporality == "delta" and defaults.metrics.interval_s == 60.0
    assert defaults.flush_s == 3.0  # the wait at the end of a session
    timed = read_config({"CLAUDE_CODE_ENABLE_TELEMETRY": "1", "OTEL_EXPORTER_OTLP_TIMEOUT": "500"})
    assert timed is not None and timed.flush_s == 0.5


def test_bad_values_are_one_line_each_and_fail_open() -> None:
    config = read_config(
        {
            "CLAUDE_CODE_ENABLE_TELEMETRY": "1",
            "OTEL_METRICS_EXPORTER": "otlp,prometheus",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/xml",
            "OTEL_METRIC_EXPORT_INTERVAL": "soon",
            "OTEL_RESOURCE_ATTRIBUTES": "team=a,broken",
        }
    )
    assert config is not None
    assert config.metrics.exporters == ("otlp",)
    assert config.metrics.protocol == "grpc"
    assert config.metrics.interval_s == 60.0
    assert dict(config.resource) == {"team": "a"}
    assert len(config.warnings) == 4
    assert all(w.startswith("telemetry: ") and "\n" not in w for w in config.warnings)
    assert any("prometheus" in w for w in config.warnings)
    assert any("http/xml" in w for w in config.warnings)
    odd = read_config(
        {
            "CLAUDE_CODE_ENABLE_TELEMETRY": "1",
            "OTEL_LOGS_EXPORTER": "otlp",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
            "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": "file:///etc/passwd",
        }
    )
    assert odd is not None and odd.logs.exporters == () and not odd.active
    assert len(odd.warnings) == 1 and "file:///etc/passwd" in odd.warnings[0]
