"""The recorder's sink over the OpenTelemetry SDK: one meter provider and one logger provider per
session, their exporters chosen by the switches (otlp over grpc, http/protobuf or http/json;
console, on stderr). Imported only when telemetry is on."""

from __future__ import annotations

import sys
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk._logs import LoggerProvider, ReadableLogRecord
from opentelemetry.sdk._logs.export import (
    BatchLogRecordProcessor,
    ConsoleLogRecordExporter,
    LogRecordExporter,
    LogRecordExportResult,
)
from opentelemetry.sdk.metrics import Counter, MeterProvider
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    ConsoleMetricExporter,
    MetricExporter,
    MetricExportResult,
    MetricReader,
    MetricsData,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import Resource

from agentkeel.telemetry.config import Signal, TelemetryConfig
from agentkeel.telemetry.recorder import EVENTS, METER, METRICS, Attributes


def _temporality(signal: Signal) -> dict[type, AggregationTemporality]:
    kind = AggregationTemporality.DELTA if signal.temporality == "delta" else AggregationTemporality.CUMULATIVE
    return {Counter: kind}


class _Outcomes:
    """Which endpoints' last export failed (what the session's end reports)."""

    def __init__(self) -> None:
        self.failed: set[str] = set()
        self._lock = threading.Lock()

    def record(self, endpoint: str, ok: bool) -> None:
        with self._lock:
            (self.failed.discard if ok else self.failed.add)(endpoint)


class _WatchedMetrics(MetricExporter):
    def __init__(self, inner: MetricExporter, signal: Signal, outcomes: _Outcomes) -> None:
        super().__init__(preferred_temporality=_temporality(signal))
        self.inner, self.endpoint, self.outcomes = inner, signal.endpoint, outcomes

    def export(self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any) -> MetricExportResult:
        result = self.inner.export(metrics_data, timeout_millis=timeout_millis, **kwargs)
        self.outcomes.record(self.endpoint, result == MetricExportResult.SUCCESS)
        return result

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return self.inner.force_flush(timeout_millis)

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self.inner.shutdown(timeout_millis=timeout_millis, **kwargs)


class _WatchedLogs(LogRecordExporter):
    def __init__(self, inner: LogRecordExporter, signal: Signal, outcomes: _Outcomes) -> None:
        self.inner, self.endpoint, self.outcomes = inner, signal.endpoint, outcomes

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        result = self.inner.export(batch)
        self.outcomes.record(self.endpoint, result == LogRecordExportResult.SUCCESS)
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()  # type: ignore[no-untyped-call]

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self.inner.force_flush(timeout_millis)


def _metric_exporter(name: str, signal: Signal) -> MetricExporter:
    temporality = _temporality(signal)
    if name == "console":
        return ConsoleMetricExporter(out=sys.stderr, preferred_temporality=temporality)
    headers = dict(signal.headers)
    if signal.protocol == "http/json":
        from agentkeel.telemetry.otlpjson import JsonMetricExporter

        return JsonMetricExporter(signal.endpoint, headers, signal.timeout_s, preferred_temporality=temporality)
    if signal.protocol == "http/protobuf":
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

        return OTLPMetricExporter(
            endpoint=signal.endpoint, headers=headers, timeout=signal.timeout_s, preferred_temporality=temporality
        )
    from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter as GrpcMetricExporter

    return GrpcMetricExporter(
        endpoint=signal.endpoint,
        insecure=signal.endpoint.startswith("http://"),
        headers=headers,
        timeout=signal.timeout_s,
        preferred_temporality=temporality,
    )


def _log_exporter(name: str, signal: Signal) -> LogRecordExporter:
    if name == "console":
        return ConsoleLogRecordExporter(out=sys.stderr)
    headers = dict(signal.headers)
    if signal.protocol == "http/json":
        from agentkeel.telemetry.otlpjson import JsonLogExporter

        return JsonLogExporter(signal.endpoint, headers, signal.timeout_s)
    if signal.protocol == "http/protobuf":
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter

        return OTLPLogExporter(endpoint=signal.endpoint, headers=headers, timeout=signal.timeout_s)
    from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcLogExporter

    return GrpcLogExporter(
        endpoint=signal.endpoint,
        insecure=signal.endpoint.startswith("http://"),
        headers=headers,
        timeout=signal.timeout_s,
    )


class OtelSink:
    """Counters and log events on the OpenTelemetry SDK; ``close`` flushes both and shuts down."""

    def __init__(self, config: TelemetryConfig, resource: Mapping[str, str], version: str) -> None:
        self.resource = Resource.create(dict(resource))
        self.outcomes = _Outcomes()
        readers: list[MetricReader] = [
            PeriodicExportingMetricReader(
                self._watched_metrics(name, config.metrics), export_interval_millis=config.metrics.interval_s * 1000
            )
            for name in config.metrics.exporters
        ]
        self.meters: MeterProvider | None = None
        self.counters: dict[str, Any] = {}
        if readers:
            self.meters = MeterProvider(metric_readers=readers, resource=self.resource, shutdown_on_exit=False)
            meter = self.meters.get_meter(METER, version)
            for metric in METRICS.values():
                self.counters[metric.name] = meter.create_counter(
                    metric.name, unit=metric.unit, description=metric.description
                )
        self.logs: LoggerProvider | None = None
        self.logger: Any = None
        if config.logs.exporters:
            self.logs = LoggerProvider(resource=self.resource, shutdown_on_exit=False)
            for name in config.logs.exporters:
                self.logs.add_log_record_processor(
                    BatchLogRecordProcessor(
                        self._watched_logs(name, config.logs), schedule_delay_millis=config.logs.interval_s * 1000
                    )
                )
            self.logger = self.logs.get_logger(EVENTS, version)

    def _watched_metrics(self, name: str, signal: Signal) -> MetricExporter:
        exporter = _metric_exporter(name, signal)
        return exporter if name == "console" else _WatchedMetrics(exporter, signal, self.outcomes)

    def _watched_logs(self, name: str, signal: Signal) -> LogRecordExporter:
        exporter = _log_exporter(name, signal)
        return exporter if name == "console" else _WatchedLogs(exporter, signal, self.outcomes)

    @property
    def failed(self) -> list[str]:
        """The endpoints whose last export failed."""
        return sorted(self.outcomes.failed)

    def add(self, metric: str, value: float, attributes: Attributes) -> None:
        counter = self.counters.get(metric)
        if counter is not None:
            counter.add(float(value), attributes)

    def emit(self, event: str, attributes: Attributes) -> None:
        if self.logger is not None:
            self.logger.emit(body=event, attributes=attributes)

    def shutdown(self) -> None:
        """Export what is left, then stop (blocking: the caller bounds the wait)."""
        if self.logs is not None:
            self.logs.shutdown()
        if self.meters is not None:
            self.meters.shutdown()

    def shutdown_within(self, timeout_s: float) -> bool:
        """``shutdown`` in a daemon thread, waited for at most ``timeout_s``: an unreachable collector
        never holds the process at its exit. True when everything was handed over in time."""
        done = threading.Event()

        def run() -> None:
            try:
                self.shutdown()
            finally:
                done.set()

        threading.Thread(target=run, name="keel-telemetry-flush", daemon=True).start()
        return done.wait(timeout_s)
