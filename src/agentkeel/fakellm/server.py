"""``keel dev fake-llm``: a loopback HTTP server that plays a script over the real wire formats.

Anthropic Messages (``POST /v1/messages``, ``/v1/messages/count_tokens``) and OpenAI Chat
Completions (``POST /v1/chat/completions``), streamed as SSE or whole, so that tests and
benchmarks drive the official SDK clients; OpenAI Embeddings (``POST /v1/embeddings``) answer
deterministic bag-of-words vectors outside the script. ``GET /_keel/requests`` returns every request
body received, for tests to assert on.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from agentkeel.fakellm.script import (
    Script,
    ScriptCursor,
    Step,
    anthropic_error,
    anthropic_message,
    anthropic_sse,
    estimate_tokens,
    openai_completion,
    openai_embeddings,
    openai_error,
    openai_sse,
)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: FakeLLMServer

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.verbose:
            super().log_message(format, *args)

    # --- routing ---------------------------------------------------------------------

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/_keel/requests":
            self._json(200, self.server.cursor.requests)
        elif path in ("/_keel/health", "/health"):
            self._json(200, {"ok": True})
        elif path.endswith("/models"):
            self._json(200, {"object": "list", "data": [{"id": "fake-model", "object": "model", "type": "model"}]})
        else:
            self._json(404, {"error": {"message": f"no route {path}"}})

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length).decode("utf-8", "replace") if length else ""
        try:
            body = json.loads(raw) if raw else {}
        except json.JSONDecodeError:
            self._json(400, {"type": "error", "error": {"type": "invalid_request_error", "message": "bad JSON"}})
            return
        if path.endswith("/messages/count_tokens"):
            self._json(200, {"input_tokens": estimate_tokens(raw)})
        elif path.endswith("/messages"):
            self._reply("anthropic", path, body, raw)
        elif path.endswith("/chat/completions"):
            self._reply("openai", path, body, raw)
        elif path.endswith("/embeddings"):
            self.server.embedding_requests.append(body)
            self._json(200, openai_embeddings(body))
        else:
            self._json(404, {"error": {"message": f"no route {path}"}})

    # --- replies ---------------------------------------------------------------------

    def _reply(self, wire: str, path: str, body: dict[str, Any], raw: str) -> None:
        step = self.server.cursor.next({"wire": wire, "path": path, "body": body, "received_at": time.time()})
        if step.delay_s:
            time.sleep(step.delay_s)
        model = str(body.get("model", "fake-model"))
        n = len(self.server.cursor.requests)
        if step.error_status is not None:
            self._error(wire, step)
            return
        if wire == "anthropic":
            msg_id = f"msg_fake_{n:04d}"
            if body.get("stream"):
                self._sse(anthropic_sse(step, model, msg_id, raw), step)
            else:
                self._json(200, anthropic_message(step, model, msg_id, raw))
        else:
            msg_id = f"chatcmpl-fake-{n:04d}"
            if body.get("stream"):
                self._sse(openai_sse(step, model, msg_id, raw), step)
            else:
                self._json(200, openai_completion(step, model, msg_id, raw))

    def _error(self, wire: str, step: Step) -> None:
        assert step.error_status is not None
        payload = anthropic_error(step) if wire == "anthropic" else openai_error(step)
        headers = {}
        if step.retry_after is not None:
            headers["retry-after"] = f"{step.retry_after:g}"
        self._json(step.error_status, payload, headers)

    def _json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("request-id", "req_fake")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _sse(self, events: list[bytes], step: Step) -> None:
        body = b"".join(events)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if step.break_after is None:
            self.wfile.write(body)
            return
        # a stream that breaks: send a prefix, then drop the connection mid-body
        self.wfile.write(b"".join(events[: step.break_after]))
        self.wfile.flush()
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class FakeLLMServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request: object, client_address: object) -> None:
        """A client that hangs up mid-stream (an interrupt) is normal here: one line, no traceback."""
        import sys

        exc = sys.exc_info()[1]
        if self.verbose or not isinstance(exc, ConnectionError | BrokenPipeError):
            print(f"fake-llm: request from {client_address} failed: {exc!r}", file=sys.stderr)

    def __init__(self, script: Script, host: str = "127.0.0.1", port: int = 0, *, verbose: bool = False) -> None:
        self.cursor = ScriptCursor(script)
        self.embedding_requests: list[dict[str, Any]] = []  # kept apart: embeddings do not advance the script
        self.verbose = verbose
        super().__init__((host, port), _Handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"

    def start_background(self) -> threading.Thread:
        thread = threading.Thread(target=self.serve_forever, name="fake-llm", daemon=True)
        thread.start()
        return thread
