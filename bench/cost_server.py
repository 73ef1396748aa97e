"""The scripted Anthropic Messages server of ``cost_vs_claude_code.py``: it answers each workload's
script (one tool-call step per request, counted by the markers in the request so that it survives
compaction; a summary when asked for one) over streamed SSE, and records every request body."""

from __future__ import annotations

import json
import re
import threading
import uuid
from http.server import BaseHTTPRequestHandler
from typing import Any

MARK = "STEPMARK-"
FACT = "FAILING: tests/test_billing.py::test_refund_rounds_half_even"


def _text_of(msgs: list[dict[str, Any]], role: str, which: int) -> str:
    found = [m for m in msgs if m.get("role") == role]
    if not found:
        return ""
    c = found[which].get("content")
    if isinstance(c, str):
        return c
    return " ".join(str(b.get("text", "")) for b in c or [] if isinstance(b, dict) and b.get("type") == "text")


def is_summary_request(body: dict[str, Any], raw: str) -> bool:
    """keel's summariser (its mark) or Claude Code's compaction (a summary asked for with no tool use)."""
    if "<keel-compact-request>" in raw:
        return True
    last = _text_of(body.get("messages") or [], "user", -1).lower()
    if "<environment>" in last or "<memory-context>" in last:  # keel's context blocks, not a summary request
        return False  # (keel's own summary requests carry its mark)
    return "summary" in last and ("conversation" in last or "compact" in last) and "step" not in last[-40:]


def _summary(raw: str) -> str:
    """A summary that keeps the step count (and the early fact when the request still holds it),
    in the tags Claude Code expects."""
    ks = [int(k) for k in re.findall(re.escape(MARK) + r"(\d+)", raw)]
    keep = f" {FACT}." if FACT in raw else ""
    return f"<summary>Ran the steps through {MARK}{max(ks) if ks else -1}.{keep}</summary>"


class Script:
    """One workload's replies: ``steps(n)`` the tool calls of step n (None: the final answer)."""

    def __init__(self, steps: list[list[dict[str, Any]]] | None = None, final: str = "done", marker: bool = False):
        self.fixed = steps or []
        self.final = final
        self.marker = marker  # count steps by the markers in the request (survives compaction)

    def step_index(self, body: dict[str, Any], raw: str) -> int:
        msgs = body.get("messages") or []
        if self.marker:
            ks = [int(k) for k in re.findall(re.escape(MARK) + r"(\d+)", raw)]
            return max(ks) + 1 if ks else 0
        return sum(
            1
            for m in msgs
            if isinstance(m.get("content"), list)
            for b in m["content"]
            if isinstance(b, dict) and b.get("type") == "tool_result"
        )

    def calls(self, n: int) -> list[dict[str, Any]] | None:
        return self.fixed[n] if n < len(self.fixed) else None


class Recorder:
    def __init__(self) -> None:
        self.script: Script = Script()
        self.bodies: list[tuple[bytes, int]] = []  # raw body, output tokens of the reply
        self.lock = threading.Lock()

    def reset(self, script: Script) -> None:
        with self.lock:
            self.script = script
            self.bodies = []


def handler(rec: Recorder) -> type[BaseHTTPRequestHandler]:
    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a: Any) -> None:
            pass

        def _json(self, obj: Any, code: int = 200) -> None:
            data = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path.startswith("/v1/models"):
                return self._json({"data": [{"id": "claude-sonnet-4-5", "type": "model"}]})
            self._json({"ok": True})

        def do_HEAD(self) -> None:
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def do_POST(self) -> None:
            n = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(n) if n else b"{}"
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = {}
            if self.path.startswith("/v1/messages/count_tokens"):
                return self._json({"input_tokens": max(1, len(raw) // 4)})
            if not self.path.startswith("/v1/messages"):
                return self._json({"type": "error", "error": {"type": "not_found_error", "message": self.path}}, 404)
            text = raw.decode("utf-8", "replace")
            script = rec.script
            blocks: list[dict[str, Any]]
            if not body.get("tools"):
                if is_summary_request(body, text):
                    blocks = [{"type": "text", "text": _summary(text)}]
                else:
                    blocks = [{"type": "text", "text": "ok"}]
            elif is_summary_request(body, text):
                blocks = [{"type": "text", "text": _summary(text)}]
            else:
                calls = script.calls(script.step_index(body, text))
                if calls is None:
                    blocks = [{"type": "text", "text": script.final}]
                else:
                    blocks = [
                        {
                            "type": "tool_use",
                            "id": "toolu_" + uuid.uuid4().hex[:20],
                            "name": c["name"],
                            "input": c["input"],
                        }
                        for c in calls
                    ]
            out_tokens = max(1, len(json.dumps(blocks)) // 4)
            with rec.lock:
                rec.bodies.append((raw, out_tokens))
            stop = "tool_use" if blocks[0]["type"] == "tool_use" else "end_turn"
            usage = {"input_tokens": max(1, len(raw) // 4), "output_tokens": out_tokens}
            msg = {
                "id": "msg_" + uuid.uuid4().hex[:20],
                "type": "message",
                "role": "assistant",
                "model": body.get("model", "claude-sonnet-4-5"),
                "content": blocks,
                "stop_reason": stop,
                "stop_sequence": None,
                "usage": usage,
            }
            if not body.get("stream"):
                return self._json(msg)
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.send_header("connection", "close")
            self.end_headers()

            def ev(name: str, data: Any) -> None:
                self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())

            start = dict(
                msg, content=[], stop_reason=None, usage={"input_tokens": usage["input_tokens"], "output_tokens": 1}
            )
            ev("message_start", {"type": "message_start", "message": start})
            for i, block in enumerate(blocks):
                if block["type"] == "text":
                    ev(
                        "content_block_start",
                        {"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}},
                    )
                    delta = {"type": "text_delta", "text": block["text"]}
                else:
                    head = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
                    ev("content_block_start", {"type": "content_block_start", "index": i, "content_block": head})
                    delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
                ev("content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta})
                ev("content_block_stop", {"type": "content_block_stop", "index": i})
            ev(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": out_tokens},
                },
            )
            ev("message_stop", {"type": "message_stop"})
            self.wfile.flush()
            self.close_connection = True

    return H
