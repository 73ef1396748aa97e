"""Record what Claude Code exports over OpenTelemetry: tests/data/otel/claude_code_2.1.328.json.

Run from the repository (the real Claude Code in ~/.cache/keel-peers, the scripted model of
/work/shared/tools/fakellm.py, the loopback receiver of tests/integration/telemetry):

    /work/main/.venv/bin/python tests/data/otel/record_claude_code.py > tests/data/otel/claude_code_2.1.328.json

Three sessions on the same script (a prompt; Bash, Read, Edit, Write; an answer):
``default`` (http/json, defaults), ``switches`` (http/protobuf, OTEL_LOG_USER_PROMPTS=1,
OTEL_METRICS_INCLUDE_SESSION_ID=false, OTEL_METRICS_INCLUDE_VERSION=true, OTEL_RESOURCE_ATTRIBUTES,
Write not allowed: a rejected decision) and ``api_error`` (the model answers 400). Values are
scrubbed to their kinds, except the keys of ``STABLE`` (no ids, no times)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent / "integration" / "telemetry"))
from receiver import Receiver, shape  # noqa: E402

CLAUDE = Path.home() / ".cache/keel-peers/node_modules/.bin/claude"
FAKELLM = "/work/shared/tools/fakellm.py"
PROMPT = "please tidy notes.txt"
SECRET = "sk-ant-api03-FAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKE0000-x"
STABLE = frozenset(
    {
        "type", "model", "tool_name", "decision", "source", "success", "language", "event.name",
        "start_type", "query_source", "tool_source", "permission_mode", "anthropic.provider",
        "prompt", "prompt_text", "prompt_length", "response", "response_length", "team", "dept",
        "status_code", "error", "attempt", "speed", "service.name",
    }
)  # fmt: skip


def _port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = int(s.getsockname()[1])
    s.close()
    return port


def _failing_model() -> tuple[ThreadingHTTPServer, int]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a: object) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            body = json.dumps(
                {"type": "error", "error": {"type": "invalid_request_error", "message": "scripted failure"}}
            ).encode()
            self.send_response(400)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, int(server.server_address[1])


def record(protocol: str, extra: dict[str, str], allowed: str, failing: bool = False) -> dict[str, Any]:
    receiver = Receiver("grpc" if protocol == "grpc" else "http").start()
    project = Path(tempfile.mkdtemp())
    home = tempfile.mkdtemp()
    (project / "notes.txt").write_text("alpha\nbeta\n")
    steps = [
        [{"name": "Bash", "input": {"command": f"echo hello-{SECRET}; echo done", "description": "say hello"}}],
        [{"name": "Read", "input": {"file_path": str(project / "notes.txt")}}],
        [
            {
                "name": "Edit",
                "input": {"file_path": str(project / "notes.txt"), "old_string": "beta", "new_string": "gamma\ndelta"},
            }
        ],
        [{"name": "Write", "input": {"file_path": str(project / "new.txt"), "content": "one\ntwo\nthree\n"}}],
    ]
    plan = {"scripts": [{"match": "", "steps": steps, "final": "All done."}]}
    fake: Any
    if failing:
        fake, port = _failing_model()
    else:
        port = _port()
        fake = subprocess.Popen(
            [sys.executable, FAKELLM, str(port)],
            env={**os.environ, "FAKELLM_PLAN": json.dumps(plan)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(1)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL", "ANTHROPIC", "CLAUDE"))}
    env.update(
        {
            "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}",
            "ANTHROPIC_API_KEY": "sk-ant-fake-0000",
            "HOME": home,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "CLAUDE_CODE_ENABLE_TELEMETRY": "1",
            "OTEL_METRICS_EXPORTER": "otlp",
            "OTEL_LOGS_EXPORTER": "otlp",
            "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
            "OTEL_METRIC_EXPORT_INTERVAL": "60000",
            "OTEL_LOGS_EXPORT_INTERVAL": "60000",
            "OTEL_EXPORTER_OTLP_HEADERS": "x-team=keel-test",
            **extra,
        }
    )
    run = subprocess.run(
        [str(CLAUDE), "-p", PROMPT, "--allowedTools", allowed, "--model", "claude-sonnet-4-5"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    time.sleep(1)
    receiver.stop()
    if failing:
        fake.shutdown()
    else:
        fake.kill()
    out = shape(receiver, STABLE)
    out["env"] = {k: v for k, v in env.items() if k.startswith(("OTEL", "CLAUDE_CODE"))}
    out["env"]["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://127.0.0.1:PORT"
    out["exit_code"] = run.returncode
    out["content_types"] = sorted(receiver.content_types())
    out["headers_sent"] = sorted({k for h in receiver.headers for k in h} & {"x-team"})
    out["secret_exported"] = SECRET in receiver.everything()
    out["prompt_exported"] = PROMPT in receiver.everything()
    out["scopes"] = sorted(
        {
            f"{sm['scope'].get('name')} {sm['scope'].get('version')}"
            for body in receiver.bodies("metrics") + receiver.bodies("logs")
            for r in body.get("resourceMetrics", body.get("resourceLogs", []))
            for sm in r.get("scopeMetrics", r.get("scopeLogs", []))
        }
    )
    return out


def main() -> None:
    version = subprocess.run([str(CLAUDE), "--version"], capture_output=True, text=True).stdout.strip()
    recording = {
        "claude_code": version,
        "how": "tests/data/otel/record_claude_code.py (see its docstring)",
        "sessions": {
            "default": record("http/json", {}, "Bash,Read,Edit,Write"),
            "switches": record(
                "http/protobuf",
                {
                    "OTEL_LOG_USER_PROMPTS": "1",
                    "OTEL_METRICS_INCLUDE_SESSION_ID": "false",
                    "OTEL_METRICS_INCLUDE_VERSION": "true",
                    "OTEL_RESOURCE_ATTRIBUTES": "team=platform,dept=eng",
                },
                "Bash,Read,Edit",
            ),
            "api_error": record("http/json", {"CLAUDE_CODE_MAX_RETRIES": "0"}, "Bash,Read,Edit,Write", failing=True),
        },
    }
    json.dump(recording, sys.stdout, indent=1, sort_keys=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
