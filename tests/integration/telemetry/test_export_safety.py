"""The export keeps the collector's secrets: a redirect does not carry its Authorization header
elsewhere (and is a failed export, not a success); a malformed header entry or an endpoint with a
password is named in a notice without the secret."""

from __future__ import annotations

import http.server
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from kit import wire_env

from .receiver import Receiver

pytest.importorskip("opentelemetry.sdk")

SECRET = "9f8e7d6c5b4a39281706f5e4d3c2b1a0"  # an obviously fake token


@contextmanager
def _serve(handler: type[http.server.BaseHTTPRequestHandler]) -> Iterator[http.server.HTTPServer]:
    server = http.server.HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def test_a_redirecting_collector_is_a_failed_export_and_the_token_stays_home() -> None:
    from agentkeel.telemetry.otlpjson import _Poster

    elsewhere: list[dict[str, str]] = []

    class Other(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            elsewhere.append(dict(self.headers))
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"{}")

        do_GET = do_POST

    with _serve(Other) as other:
        location = f"http://localhost:{other.server_port}/steal"  # another host name for the check

        class Redirect(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                self.send_response(int(self.path.rsplit("/", 1)[-1]))
                self.send_header("Location", location)
                self.send_header("Content-Length", "0")
                self.end_headers()

        with _serve(Redirect) as redirect:
            for status in (301, 302, 307, 308):
                poster = _Poster(
                    f"http://127.0.0.1:{redirect.server_port}/v1/logs/{status}",
                    {"Authorization": f"Bearer {SECRET}"},
                    5,
                )
                assert poster.post({"resourceLogs": []}) is False, status
    assert elsewhere == []


def test_a_malformed_header_and_an_endpoint_password_are_not_echoed(keel: Any, fake_llm: Any) -> None:
    server = fake_llm(["hello"])
    with Receiver() as receiver:
        host_port = receiver.endpoint.split("://", 1)[1]
        env = {
            **wire_env(server, "anthropic"),
            "CLAUDE_CODE_ENABLE_TELEMETRY": "1",
            "OTEL_METRICS_EXPORTER": "otlp",
            "OTEL_LOGS_EXPORTER": "otlp",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
            "OTEL_EXPORTER_OTLP_HEADERS": f"x-api-key: {SECRET}",  # ':' for '=', a common slip
            # the logs endpoint with a password, answering 404: the session end names it
            "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": f"http://collector:{SECRET}@{host_port}/nowhere",
            "OTEL_LOGS_EXPORT_INTERVAL": "100",
        }
        result = keel("-p", "hi", env=env, timeout=120)
    assert result.code == 0, result.stderr[-2000:]
    assert "OTEL_EXPORTER_OTLP_HEADERS: entry 1 is not key=value" in result.stderr
    assert SECRET not in result.stderr and SECRET not in result.stdout
    home = Path(os.environ["KEEL_HOME"])
    holding = [str(p) for p in home.rglob("*") if p.is_file() and SECRET in p.read_text(errors="replace")]
    assert holding == []


def test_shown_strips_credentials_and_queries() -> None:
    from agentkeel.telemetry.config import shown

    assert shown(f"https://user:{SECRET}@otel.example:4318/v1/logs?token={SECRET}") == (
        "https://otel.example:4318/v1/logs"
    )
    assert shown("http://localhost:4318/v1/metrics") == "http://localhost:4318/v1/metrics"
    assert SECRET not in shown(f"collector:{SECRET}@nowhere")
