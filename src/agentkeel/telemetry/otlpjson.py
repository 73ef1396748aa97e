"""OTLP over HTTP with JSON bodies (``OTEL_EXPORTER_OTLP_PROTOCOL=http/json``).

The OpenTelemetry Python project ships exporters for grpc and http/protobuf only (its JSON exporter
is a pre-release of opentelemetry-python-contrib that pins other versions of the shared packages),
so this is the small one keel needs: the request is built by the official protobuf encoder, turned
into OTLP/JSON (the protobuf JSON mapping, enums as integers, ids as hex) and posted with the
standard library (httpx's synchronous client would add half a second of imports to a ``-p`` run;
proxies are honoured from the environment, as the protobuf exporter's ``requests`` does).
Imported only when telemetry is on."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any

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


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A collector that answers 3xx has not taken the export: the POST is not replayed elsewhere
    (where the collector's Authorization header would go with it)."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class _Poster:
    def __init__(self, endpoint: str, headers: dict[str, str], timeout_s: float) -> None:
        self.endpoint = endpoint
        self.headers = {**headers, "Content-Type": "application/json"}
        self.timeout_s = timeout_s
        self._opener = urllib.request.build_opener(_NoRedirect)  # proxies from the environment still apply

    def post(self, body: dict[str, Any]) -> bool:
        if not self.endpoint.startswith(("http://", "https://")):  # never file: or another scheme
            return False
        data = json.dumps(body, separators=(",", ":")).encode()
        request = urllib.request.Request(self.endpoint, data=data, headers=self.headers, method="POST")  # noqa: S310
        try:
            with self._opener.open(request, timeout=self.timeout_s) as response:
                response.read()
                return 200 <= int(response.status) < 300
        except (urllib.error.URLError, OSError, ValueError):
            return False

    def close(self) -> None:
        pass


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
