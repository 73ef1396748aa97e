"""A loopback OTLP receiver for the tests: http/json, http/protobuf and gRPC.

Everything received is kept as OTLP/JSON-shaped dicts (protobuf bodies are decoded with
opentelemetry-proto), so one set of readers serves every protocol. ``shape()`` reduces what was
received to the recorded form of tests/data/otel/: names, types, temporality, units, attribute
keys, with values only where they are stable across runs."""

from __future__ import annotations

import gzip
import json
import threading
from collections.abc import Iterator
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

KINDS = ("sum", "gauge", "histogram", "exponentialHistogram", "summary")
SIGNALS = {"/v1/metrics": "metrics", "/v1/logs": "logs", "/v1/traces": "traces"}


def _message(signal: str) -> Any:
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    kinds: dict[str, Any] = {
        "metrics": ExportMetricsServiceRequest,
        "logs": ExportLogsServiceRequest,
        "traces": ExportTraceServiceRequest,
    }
    return kinds[signal]()


def _decode_protobuf(signal: str, body: bytes) -> dict[str, Any]:
    from google.protobuf.json_format import MessageToDict

    message = _message(signal)
    message.ParseFromString(body)
    return dict(MessageToDict(message, use_integers_for_enums=True))


def _decode_json(signal: str, body: bytes) -> dict[str, Any]:
    """An OTLP/JSON body, checked as a collector reads it: every field known, every value of its
    type (the protobuf JSON mapping; a bad body raises, and the request is answered 400)."""
    from google.protobuf.json_format import ParseDict

    data = json.loads(body or b"{}")
    ParseDict(data, _message(signal), ignore_unknown_fields=False)
    return dict(data)


class Receiver:
    """One OTLP endpoint on 127.0.0.1 (its own port): ``protocol`` is http (json and protobuf
    both accepted, by Content-Type) or grpc."""

    def __init__(self, protocol: str = "http") -> None:
        self.protocol = protocol
        self.requests: list[tuple[str, str, dict[str, Any]]] = []  # (signal, content type, body)
        self.headers: list[dict[str, str]] = []
        self.refused: list[str] = []  # bodies a collector would refuse (bad OTLP)
        self._lock = threading.Lock()
        self._http: ThreadingHTTPServer | None = None
        self._grpc: Any = None
        self.port = 0

    # -- life

    def start(self) -> Receiver:
        if self.protocol == "grpc":
            self._start_grpc()
        else:
            self._start_http()
        return self

    def stop(self) -> None:
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
        if self._grpc is not None:
            self._grpc.stop(0)

    def __enter__(self) -> Receiver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _keep(self, signal: str, content_type: str, body: dict[str, Any], headers: dict[str, str]) -> None:
        with self._lock:
            self.requests.append((signal, content_type, body))
            self.headers.append(headers)

    def _start_http(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a: object) -> None:
                pass

            def do_POST(self) -> None:
                signal = SIGNALS.get(self.path.split("?")[0])
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                if self.headers.get("content-encoding") == "gzip":
                    raw = gzip.decompress(raw)
                ctype = (self.headers.get("content-type") or "").split(";")[0].strip()
                if signal is None:
                    self.send_response(404)
                    self.end_headers()
                    return
                try:
                    body = _decode_json(signal, raw) if ctype == "application/json" else _decode_protobuf(signal, raw)
                except Exception as exc:  # what a collector refuses: kept, answered 400
                    receiver.refused.append(f"{signal}: {type(exc).__name__}: {exc}")
                    self.send_response(400)
                    self.send_header("content-length", "0")
                    self.end_headers()
                    return
                receiver._keep(signal, ctype, body, {k.lower(): v for k, v in self.headers.items()})
                answer = b"{}" if ctype == "application/json" else b""
                self.send_response(200)
                self.send_header("content-type", ctype or "application/json")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self._http.server_address[1]
        threading.Thread(target=self._http.serve_forever, daemon=True).start()

    def _start_grpc(self) -> None:
        import grpc
        from google.protobuf.json_format import MessageToDict
        from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
        from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

        receiver = self

        def keep(signal: str, request: Any, context: Any) -> None:
            headers = {k.lower(): v for k, v in context.invocation_metadata()}
            receiver._keep(signal, "grpc", dict(MessageToDict(request, use_integers_for_enums=True)), headers)

        class Metrics(metrics_service_pb2_grpc.MetricsServiceServicer):  # type: ignore[misc]
            def Export(self, request: Any, context: Any) -> Any:
                keep("metrics", request, context)
                return metrics_service_pb2.ExportMetricsServiceResponse()

        class Logs(logs_service_pb2_grpc.LogsServiceServicer):  # type: ignore[misc]
            def Export(self, request: Any, context: Any) -> Any:
                keep("logs", request, context)
                return logs_service_pb2.ExportLogsServiceResponse()

        class Traces(trace_service_pb2_grpc.TraceServiceServicer):  # type: ignore[misc]
            def Export(self, request: Any, context: Any) -> Any:
                keep("traces", request, context)
                return trace_service_pb2.ExportTraceServiceResponse()

        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(Metrics(), server)
        logs_service_pb2_grpc.add_LogsServiceServicer_to_server(Logs(), server)
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Traces(), server)
        self.port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        self._grpc = server

    # -- readers

    def bodies(self, signal: str) -> list[dict[str, Any]]:
        with self._lock:
            return [b for s, _, b in self.requests if s == signal]

    def content_types(self) -> set[str]:
        with self._lock:
            return {c for _, c, _ in self.requests}

    def resources(self) -> list[dict[str, Any]]:
        out = []
        for signal in ("metrics", "logs"):
            key = "resourceMetrics" if signal == "metrics" else "resourceLogs"
            for body in self.bodies(signal):
                out += [attributes(r.get("resource", {}).get("attributes", [])) for r in body.get(key, [])]
        return out

    def points(self) -> Iterator[dict[str, Any]]:
        """Every metric data point: name, type, temporality, unit, monotonic, attributes, value, scope."""
        for body in self.bodies("metrics"):
            for rm in body.get("resourceMetrics", []):
                for sm in rm.get("scopeMetrics", []):
                    scope = sm.get("scope", {})
                    for m in sm.get("metrics", []):
                        kind = next(
                            k for k in ("sum", "gauge", "histogram", "exponentialHistogram", "summary") if k in m
                        )
                        data = m[kind]
                        for p in data.get("dataPoints", []):
                            value = p.get("asDouble", p.get("asInt"))
                            yield {
                                "name": m["name"],
                                "type": kind,
                                "unit": m.get("unit", ""),
                                "description": m.get("description", ""),
                                "temporality": data.get("aggregationTemporality"),
                                "monotonic": data.get("isMonotonic"),
                                "attributes": attributes(p.get("attributes", [])),
                                "value": float(value) if value is not None else None,
                                "scope": scope.get("name", ""),
                            }

    def records(self) -> Iterator[dict[str, Any]]:
        """Every log record: body (a string), attributes, severity, scope."""
        for body in self.bodies("logs"):
            for rl in body.get("resourceLogs", []):
                for sl in rl.get("scopeLogs", []):
                    scope = sl.get("scope", {})
                    for r in sl.get("logRecords", []):
                        yield {
                            "body": _value(r.get("body", {})),
                            "attributes": attributes(r.get("attributes", [])),
                            "severity": r.get("severityText", ""),
                            "scope": scope.get("name", ""),
                        }

    def events(self) -> list[dict[str, Any]]:
        return list(self.records())

    def everything(self) -> str:
        """All that was received, as one string (to look for what must never be sent)."""
        with self._lock:
            return json.dumps([b for _, _, b in self.requests])


def _value(v: dict[str, Any]) -> Any:
    if "stringValue" in v:
        return v["stringValue"]
    if "intValue" in v:
        return int(v["intValue"])
    if "doubleValue" in v:
        return float(v["doubleValue"])
    if "boolValue" in v:
        return bool(v["boolValue"])
    if "arrayValue" in v:
        return [_value(x) for x in v["arrayValue"].get("values", [])]
    if "kvlistValue" in v:
        return attributes(v["kvlistValue"].get("values", []))
    return None


def attributes(kvs: list[dict[str, Any]]) -> dict[str, Any]:
    return {kv["key"]: _value(kv.get("value", {})) for kv in kvs}


def _kind(value: Any) -> str:
    return {bool: "bool", int: "int", float: "double", str: "string", list: "array", dict: "map"}.get(
        type(value), "none"
    )


def shape(receiver: Receiver, stable: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The recorded form: per metric its type, temporality, unit, monotonic and attribute keys (with
    the values of the ``stable`` keys); per event (by ``event.name``) its attribute keys and their
    value kinds (with the values of ``stable`` keys); the resource's attribute keys."""
    metrics: dict[str, Any] = {}
    for p in receiver.points():
        m = metrics.setdefault(
            p["name"],
            {
                "type": p["type"],
                "temporality": p["temporality"],
                "unit": p["unit"],
                "monotonic": p["monotonic"],
                "description": p["description"],
                "scope": p["scope"],
                "attributes": {},
                "values": {},
            },
        )
        for k, v in p["attributes"].items():
            m["attributes"][k] = _kind(v)
            if k in stable:
                m["values"].setdefault(k, [])
                if v not in m["values"][k]:
                    m["values"][k].append(v)
    events: dict[str, Any] = {}
    for r in receiver.records():
        name = r["attributes"].get("event.name", r["body"])
        e = events.setdefault(str(name), {"body": r["body"], "scope": r["scope"], "attributes": {}, "values": {}})
        for k, v in r["attributes"].items():
            e["attributes"][k] = _kind(v)
            if k in stable:
                e["values"].setdefault(k, [])
                if v not in e["values"][k]:
                    e["values"][k].append(v)
    resource: dict[str, str] = {}
    for attrs in receiver.resources():
        resource.update({k: _kind(v) for k, v in attrs.items()})
    for m in metrics.values():
        m["attributes"] = dict(sorted(m["attributes"].items()))
        for vals in m["values"].values():
            vals.sort(key=str)
    for e in events.values():
        e["attributes"] = dict(sorted(e["attributes"].items()))
        for vals in e["values"].values():
            vals.sort(key=str)
    return {
        "metrics": dict(sorted(metrics.items())),
        "events": dict(sorted(events.items())),
        "resource": dict(sorted(resource.items())),
    }
