"""Adding a provider wire format is one module and one line in ``agentkeel.models.WIRES``.

The demo (issue #32): a throwaway third wire format, ``plain`` (POST a JSON list of messages, get
server-sent ``{"text": ...}`` events and a closing ``{"done": ...}`` with the usage), written as a
module outside keel, registered with one line, and run through the real ``keel -p`` against a
loopback server that speaks it: the answer is printed, the request carried the prompt and the
model, a refused key ends in keel's own one-line error, and the session log holds the turn.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from agentkeel.models import WIRES
from agentkeel.models.catalog import ModelConfigError, resolve_model
from agentkeel.models.factory import make_provider
from conftest import session_files

# The whole wire format: what a new provider module in src/agentkeel/models/ would hold.
PLAIN_WIRE = """
from collections.abc import AsyncIterator, Mapping
from contextlib import aclosing

from agentkeel.core.provider import ModelRequest, ModelResponse, StreamChunk, TextChunk
from agentkeel.core.types import Message, TextBlock, Usage
from agentkeel.models._body import encode_json
from agentkeel.models._http import HttpSession, Target, parse_data
from agentkeel.models.catalog import ModelConfigError, ModelInfo


class PlainProvider:
    name = "plain"

    def __init__(self, base_url: str, key: str) -> None:
        self.base_url = base_url
        self._headers = {"authorization": f"Bearer {key}"}
        self._http = HttpSession(base_url)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        body = {
            "model": request.model,
            "system": request.system,
            "messages": [{"role": m.role, "text": m.text()} for m in request.messages],
        }
        target = Target(f"{self.base_url}/complete", self.base_url, request.model, "PLAIN_API_KEY", 30.0)
        text, usage = [], Usage()
        async with aclosing(self._http.post_sse(target, self._headers, encode_json(body))) as events:
            async for event in events:
                data = parse_data(event, self.base_url)
                if "text" in data:
                    text.append(data["text"])
                    yield TextChunk(data["text"])
                elif data.get("done"):
                    usage = Usage(input_tokens=data["input_tokens"], output_tokens=data["output_tokens"])
        message = Message(role="assistant", content=[TextBlock(text="".join(text))])
        yield ModelResponse(message=message, stop_reason="end_turn", usage=usage, model=request.model)

    async def aclose(self) -> None:
        await self._http.aclose()


def make(info: ModelInfo, env: Mapping[str, str], transport: str | None) -> PlainProvider:
    base, key = env.get("PLAIN_BASE_URL"), env.get("PLAIN_API_KEY")
    if not base or not key:
        raise ModelConfigError("PLAIN_BASE_URL and PLAIN_API_KEY must be set for plain:<model>")
    return PlainProvider(base.rstrip("/"), key)
"""

# The one line that registers it (in keel itself: one entry of WIRES in models/__init__.py).
REGISTER = "import agentkeel.models as p; p.WIRES['plain'] = 'plainwire'\n"

RUN = REGISTER + "import sys\nfrom agentkeel.ui.cli.main import main\nsys.exit(main(sys.argv[1:]))\n"


class PlainServer(ThreadingHTTPServer):
    requests: list[dict[str, Any]]


class PlainHandler(BaseHTTPRequestHandler):
    server: PlainServer

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        self.server.requests.append({"path": self.path, "auth": self.headers["authorization"], "body": body})
        if self.headers["authorization"] != "Bearer plain-test-not-a-real-key":
            payload = b'{"error": {"type": "authentication_error", "message": "bad key"}}'
            self.send_response(401)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        prompt = body["messages"][-1]["text"].split("<environment>")[0]  # the prompt, without keel's note
        for data in ({"text": "plain says: "}, {"text": prompt}, {"done": True, "input_tokens": 7, "output_tokens": 3}):
            self.wfile.write(f"data: {json.dumps(data)}\n\n".encode())
            self.wfile.flush()
        self.close_connection = True

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def plain_server() -> Iterator[PlainServer]:
    server = PlainServer(("127.0.0.1", 0), PlainHandler)
    server.requests = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def run_keel(tmp_path: Path, project: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "stubs").mkdir(exist_ok=True)
    (tmp_path / "stubs" / "plainwire.py").write_text(PLAIN_WIRE)
    path = os.pathsep.join(p for p in (str(tmp_path / "stubs"), os.environ.get("PYTHONPATH", "")) if p)
    return subprocess.run(
        [sys.executable, "-c", RUN, *args],
        cwd=project,
        env={**os.environ, **env, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_third_wire_format_is_one_module_and_one_line(
    plain_server: PlainServer, tmp_path: Path, project: Path
) -> None:
    base = f"http://127.0.0.1:{plain_server.server_address[1]}"
    env = {"PLAIN_BASE_URL": base, "PLAIN_API_KEY": "plain-test-not-a-real-key"}
    run = run_keel(tmp_path, project, env, "-p", "hello there", "--model", "plain:tiny-1")
    assert (run.returncode, run.stdout, run.stderr) == (0, "plain says: hello there\n", "")
    [request] = plain_server.requests
    assert request["path"] == "/complete" and request["body"]["model"] == "tiny-1"
    sent = request["body"]["messages"][-1]
    assert sent["role"] == "user" and sent["text"].startswith("hello there<environment>\nWorking directory: ")
    [log] = session_files(tmp_path / "keelhome")
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    [answer] = [e for e in entries if e["type"] == "assistant"]
    assert answer["message"]["content"] == [{"type": "text", "text": "plain says: hello there"}]

    # its failures are keel's: an HTTP status through the shared HTTP side is one clear line
    refused = run_keel(
        tmp_path, project, {**env, "PLAIN_API_KEY": "plain-wrong-key", "KEEL_MAX_RETRIES": "0"}, "-p", "hi",
        "--model", "plain:tiny-1",
    )  # fmt: skip
    assert refused.returncode == 1 and refused.stdout == ""
    [line] = refused.stderr.splitlines()
    assert "bad key" in line and "PLAIN_API_KEY" in line, line
    assert "plain-wrong-key" not in refused.stderr

    # its own configuration errors are one line too, exit 2
    missing = run_keel(tmp_path, project, {"PLAIN_BASE_URL": base}, "-p", "hi", "--model", "plain:tiny-1")
    assert (missing.returncode, missing.stderr.strip()) == (
        2,
        "keel: PLAIN_BASE_URL and PLAIN_API_KEY must be set for plain:<model>",
    ), missing.stderr


def test_the_table_is_the_one_list_of_providers() -> None:
    """Every provider prefix a model name may carry is a key of WIRES, and each resolves to a module
    with ``make``; a prefix that is not a key is refused with the list, a key without a default model
    asks for one."""
    env = {"ANTHROPIC_API_KEY": "sk-ant-test-not-a-real-key", "OLLAMA_BASE_URL": "http://127.0.0.1:9/v1"}
    assert type(make_provider(resolve_model("anthropic:claude-sonnet-4-5", env), env)).__name__ == (
        "AnthropicWireProvider"
    )
    assert type(make_provider(resolve_model("ollama:qwen3", env), env)).__name__ == "OpenAIWireProvider"
    with pytest.raises(ModelConfigError, match="unknown provider 'nope' in model 'nope:x': use one of anthropic,"):
        resolve_model("nope:x", env)
    WIRES["plain"] = "plainwire"
    try:
        with pytest.raises(ModelConfigError, match=r"no default model for 'plain': name one, as plain:<model>"):
            resolve_model("plain:", env)
        assert resolve_model("plain:tiny-1", env).qualified == "plain:tiny-1"
    finally:
        del WIRES["plain"]
