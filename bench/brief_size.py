"""What keel tells the model, in characters and tokens: the system prompt, the tool descriptions
and the context on the first message, from the first request of ``keel -p`` in a small git
repository, recorded by a loopback server; with ``--claude PATH``, Claude Code's beside it (same
server, same prompt). ``--system-prompt`` and ``--append`` pass those flags to both.

    .venv/bin/python bench/brief_size.py [--claude ~/.cache/keel-peers/node_modules/.bin/claude]

Tokens are characters / 4 (no tokenizer here; read the figures as ratios). docs/brief.md has
the measured table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

KEEL = str(Path(sys.executable).parent / "keel")  # the virtualenv's own


class Recorder(BaseHTTPRequestHandler):
    """Answers every Messages request with one short text (streamed when asked) and keeps its body."""

    bodies: ClassVar[list[dict[str, Any]]] = []

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        body = json.loads(raw or b"{}")
        if "count_tokens" in self.path:
            return self._send({"input_tokens": len(raw) // 4})
        Recorder.bodies.append(body)
        message = {
            "id": "msg_bench",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "m"),
            "content": [{"type": "text", "text": "Hi."}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": len(raw) // 4, "output_tokens": 2},
        }
        if not body.get("stream"):
            return self._send(message)
        events = [
            ("message_start", {"type": "message_start", "message": {**message, "content": [], "stop_reason": None}}),
            (
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            ),
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi."}},
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}},
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        for name, data in events:
            self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
        self.wfile.flush()
        self.close_connection = True

    def do_GET(self) -> None:
        self._send({"data": []})

    def _send(self, obj: Any) -> None:
        data = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def project(root: Path) -> Path:
    p = root / "project"
    p.mkdir()
    ident = ["-c", "user.email=bench@example.invalid", "-c", "user.name=bench"]
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=p, check=True)
    (p / "app.py").write_text("print('hi')\n")
    subprocess.run(["git", *ident, "add", "."], cwd=p, check=True)
    subprocess.run(["git", *ident, "commit", "-qm", "first"], cwd=p, check=True)
    (p / "app.py").write_text("print('hello')\n")
    return p


def sizes(body: dict[str, Any]) -> dict[str, int]:
    system = body.get("system") or ""
    text = system if isinstance(system, str) else "".join(b.get("text", "") for b in system)
    content = body["messages"][0]["content"]
    blocks = [content] if isinstance(content, str) else [b.get("text", "") for b in content if b.get("type") == "text"]
    context = sum(len(b) for b in blocks if b.lstrip().startswith("<"))
    tools = body.get("tools") or []
    return {
        "system_chars": len(text),
        "tool_description_chars": sum(len(t.get("description", "")) for t in tools),
        "tools_json_chars": sum(len(json.dumps(t)) for t in tools),
        "tools": len(tools),
        "first_message_context_chars": context,
    }


def run(argv: list[str], cwd: Path, env: dict[str, str]) -> dict[str, int]:
    before = len(Recorder.bodies)
    subprocess.run(argv, cwd=cwd, env=env, capture_output=True, timeout=180, stdin=subprocess.DEVNULL)
    if len(Recorder.bodies) == before:
        raise SystemExit(f"no request recorded from {argv[0]}")
    return sizes(Recorder.bodies[before])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--claude", help="Claude Code's binary, to measure it beside keel")
    ap.add_argument("--keel", default=KEEL, help="keel's binary (default: the virtualenv's)")
    ap.add_argument("--model", default="claude-sonnet-4-5")
    ap.add_argument("--system-prompt", help="passed to both as --system-prompt")
    ap.add_argument("--append", help="passed to both as --append-system-prompt")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    extra = [*(["--system-prompt", args.system_prompt] if args.system_prompt is not None else [])]
    extra += ["--append-system-prompt", args.append] if args.append else []
    out: dict[str, dict[str, int]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        cwd = project(root)
        env = {
            **os.environ,
            "HOME": str(root / "home"),
            "KEEL_HOME": str(root / "keelhome"),
            "ANTHROPIC_BASE_URL": url,
            "ANTHROPIC_API_KEY": "sk-ant-bench-not-a-real-key",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }
        (root / "home").mkdir()
        out["keel"] = run([args.keel, "-p", "say hi", "--model", f"anthropic:{args.model}", *extra], cwd, env)
        if args.claude:
            out["claude"] = run([args.claude, "-p", "say hi", "--model", args.model, *extra], cwd, env)
    server.shutdown()
    print(f"{'':8} {'system':>16} {'tool descr.':>16} {'1st-msg context':>16} {'sys+descr.':>12}")
    for name, s in out.items():
        both = s["system_chars"] + s["tool_description_chars"]
        cells = [s["system_chars"], s["tool_description_chars"], s["first_message_context_chars"]]
        print(f"{name:8} " + " ".join(f"{c:>7} (~{c // 4:>5}t)" for c in cells) + f" ~{both // 4:>9}t")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
