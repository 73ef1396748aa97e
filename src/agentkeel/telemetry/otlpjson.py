"""OTLP over HTTP with JSON bodies (``OTEL_EXPORTER_OTLP_PROTOCOL=http/json``).

The OpenTelemetry Python project ships exporters for grpc and http/protobuf only (its JSON exporter
is a pre-release of opentelemetry-python-contrib that pins other versions of the shared packages),
so this is the small one keel needs: the request is built by the official protobuf encoder, turned
into OTLP/JSON (the protobuf JSON mapping, enums as integers, ids as hex) and posted with httpx.
Imported only when telemetry is on."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

import httpx
from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics
from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult
from opentelemetry.sdk.metrics.export import AggregationTemporality, MetricExporter, MetricExportResult, MetricsData

_IDS = ("traceId", "spanId", "parentSpanId")


def _hex_ids(value: Any) -> Any:
    """OTLP/JSON writes trace and span ids as hex, where the protobuf mapping writes base64."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k in _IDS and isinstance(v, str):
                out[k] = base64.b64decode(v).hex()
            else:
                out[k] = _hex_ids(v)
        return out
    if isinstance(value, list):
        return [_hex_ids(v) for v in value]
    return value


def to_json(message: Any) -> dict[str, Any]:
    data = MessageToDict(message, use_integers_for_enums=True, preserving_proto_field_name=False)
    return dict(_hex_ids(data))


class _Poster:
    def __init__(self, endpoint: str, headers: dict[str, str], timeout_s: float) -> None:
        self.endpoint = endpoint
        self.client = httpx.Client(
            headers={**headers, "content-type": "application/json"}, timeout=timeout_s, trust_env=False
        )

    def post(self, body: dict[str, Any]) -> bool:
        try:
            response = self.client.post(self.endpoint, json=body)
        except httpx.HTTPError:
            return False
        return response.is_success

    def close(self) -> None:
        self.client.close()


class JsonMetricExporter(MetricExporter):
    def __init__(
        self,
        endpoint: str,
        headers: dict[str, str],
        timeout_s: float,
        preferred_temporality: dict[type, AggregationTemporality] | None = None,
    ) -> None:
        super().__init__(preferred_temporality=preferred_temporality)
        self._poster = _Poster(endpoint, headers, timeout_s)

    def export(self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any) -> MetricExportResult:
        ok = self._poster.post(to_json(encode_metrics(metrics_data)))
        return MetricExportResult.SUCCESS if ok else MetricExportResult.FAILURE

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self._poster.close()


class JsonLogExporter(LogRecordExporter):
    def __init__(self, endpoint: str, headers: dict[str, str], timeout_s: float) -> None:
        self._poster = _Poster(endpoint, headers, timeout_s)

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        ok = self._poster.post(to_json(encode_logs(batch)))
        return LogRecordExportResult.SUCCESS if ok else LogRecordExportResult.FAILURE

    def shutdown(self) -> None:
        self._poster.close()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True
