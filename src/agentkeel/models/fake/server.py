"""``keel dev fake-llm``: a loopback HTTP server that plays a script over the real wire formats.

Anthropic Messages (``POST /v1/messages``, ``/v1/messages/count_tokens``) and OpenAI Chat
Completions (``POST /v1/chat/completions``), streamed as SSE or whole, so that tests and
benchmarks drive the official SDK clients; OpenAI Embeddings (``POST /v1/embeddings``) answer
deterministic bag-of-words vectors outside the script. ``GET /_keel/requests`` returns every request
received (body, headers, raw body length, and the server's token count: ``input_tokens`` in all,
``cache_read_input_tokens``, ``cache_creation_input_tokens``, ``over_window``), for tests to assert
on. The server keeps a prompt cache (:mod:`agentkeel.models.fake.cache`) and, given a context window
(``--context-window`` or the script's ``context_window``), refuses larger requests as the real APIs do.
Streams are sent with chunked transfer encoding, as the real APIs do; the script's stream faults
(a broken or reset connection, an ``error`` event, a stall after the headers, an empty body) are played here.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from agentkeel.internal import jsonc
from agentkeel.models.fake.cache import PromptCache, too_long_error
from agentkeel.models.fake.render import (
    anthropic_error,
    anthropic_message,
    anthropic_sse,
    openai_completion,
    openai_error,
    openai_sse,
    stream_error_event,
)
from agentkeel.models.fake.script import Script, ScriptCursor, Step, estimate_tokens, openai_embeddings


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
        record = {
            "wire": wire,
            "path": path,
            "body": body,
            "headers": {k.lower(): v for k, v in self.headers.items()},
            "body_bytes": len(raw.encode("utf-8")),
            "peer_port": self.client_address[1],
            "received_at": time.time(),
        }
        # input tokens are counted from the body's content, not its spacing: clients that serialise
        # the same request differently (an SDK, keel's own client) are billed alike
        window = self.server.context_window or self.server.cursor.script.context_window
        prompt = self.server.cache.account(wire, body)
        record.update(
            input_tokens=prompt.total,
            cache_read_input_tokens=prompt.cache_read,
            cache_creation_input_tokens=prompt.cache_creation,
            over_window=bool(window and prompt.total > window),
        )
        if window and prompt.total > window:
            self.server.cursor.record(record)
            self._json(*too_long_error(wire, prompt.total, window))
            return
        step = self.server.cursor.next(record, raw)
        if step.delay_s:
            time.sleep(step.delay_s)
        model = str(body.get("model", "fake-model"))
        n = len(self.server.cursor.requests)
        sized = jsonc.dumps(body, sort_keys=True)
        if step.error_status is not None:
            self._error(wire, step)
            return
        if wire == "anthropic":
            msg_id = f"msg_fake_{n:04d}"
            if body.get("stream") and not step.ignore_stream:
                self._sse(wire, anthropic_sse(step, model, msg_id, sized, prompt), step)
            else:
                self._json(200, anthropic_message(step, model, msg_id, sized, prompt))
        else:
            msg_id = f"chatcmpl-fake-{n:04d}"
            if body.get("stream") and not step.ignore_stream:
                self._sse(wire, openai_sse(step, model, msg_id, sized, prompt), step)
            else:
                self._json(200, openai_completion(step, model, msg_id, sized, prompt))

    def _error(self, wire: str, step: Step) -> None:
        assert step.error_status is not None
        payload = anthropic_error(step) if wire == "anthropic" else openai_error(step)
        headers = {}
        if step.retry_after is not None:
            headers["retry-after"] = f"{step.retry_after:g}"
        if step.retry_after_ms is not None:
            headers["retry-after-ms"] = f"{step.retry_after_ms:g}"
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

    def _sse(self, wire: str, events: list[bytes], step: Step) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        if step.empty_body:
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if step.stream_error is not None:
            events = [*events[: step.stream_error.after], stream_error_event(wire, step.stream_error)]
        cut = next((n for n in (step.break_after, step.reset_after, step.stall_after) if n is not None), None)
        self.wfile.write(b"".join(_chunk(e) for e in events[:cut]))
        self.wfile.flush()
        if cut is None:
            self.wfile.write(b"0\r\n\r\n")
        elif step.stall_after is not None:
            self._stall(step.stall_s)
        else:  # a stream that breaks: drop the connection mid-body, cleanly (FIN) or with a reset (RST)
            self.close_connection = True
            try:
                if step.reset_after is not None:
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.connection.close()
                else:
                    self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _stall(self, seconds: float) -> None:
        """Send nothing more until the time is up or the client hangs up, then close."""
        self.close_connection = True
        self.connection.settimeout(seconds)
        try:
            self.connection.recv(1)  # returns b"" when the client closes; times out otherwise
        except OSError:
            pass


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


class FakeLLMServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request: object, client_address: object) -> None:
        """A client that hangs up mid-stream (an interrupt) is normal here: one line, no traceback."""
        import sys

        exc = sys.exc_info()[1]
        if self.verbose or not isinstance(exc, ConnectionError | BrokenPipeError):
            print(f"fake-llm: request from {client_address} failed: {exc!r}", file=sys.stderr)

    def __init__(
        self,
        script: Script,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        verbose: bool = False,
        context_window: int | None = None,
    ) -> None:
        self.cursor = ScriptCursor(script)
        self.cache = PromptCache()
        self.context_window = context_window  # overrides the script's
        self.embedding_requests: list[dict[str, Any]] = []  # kept apart: embeddings do not advance the script
        self.verbose = verbose
        super().__init__((host, port), _Handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"

    def start_background(self) -> threading.Thread:
        # a short poll interval: shutdown() waits up to one interval, and tests stop many servers
        thread = threading.Thread(target=self.serve_forever, args=(0.02,), name="fake-llm", daemon=True)
        thread.start()
        return thread
