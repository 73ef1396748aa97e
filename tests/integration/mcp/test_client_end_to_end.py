"""The MCP client end to end: real `keel -p`, the scripted model over loopback HTTP, real MCP servers
(written with the `mcp` package's own server API in tests/mcp_fixtures, and the published
`mcp-server-time` from PyPI) over stdio, streamable HTTP and SSE."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentkeel.models.fake.server import FakeLLMServer
from kit import KEEL, KeelRun, wait_until, wire_env

FIXTURE = str(Path(__file__).parents[2] / "mcp_fixtures" / "server.py")
PY = sys.executable
TIME_SERVER = str(Path(sys.executable).parent / "mcp-server-time")


def _stdio(mode: str, **extra: Any) -> dict[str, Any]:
    return {"command": PY, "args": [FIXTURE, mode], **extra}


def _config(servers: dict[str, Any]) -> str:
    return json.dumps({"mcpServers": servers})


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def served() -> Iterator[Callable[[str], str]]:
    """Start the fixture server over HTTP ("http") or SSE ("sse"); returns its URL."""
    procs: list[subprocess.Popen[bytes]] = []

    def start(mode: str) -> str:
        port = _free_port()
        procs.append(subprocess.Popen([PY, FIXTURE, mode, str(port)], stderr=subprocess.DEVNULL))
        wait_until(lambda: _listening(port), 90, f"the fixture {mode} server to listen", interval=0.2)
        return f"http://127.0.0.1:{port}/" + ("mcp" if mode == "http" else "sse")

    yield start
    for p in procs:
        p.kill()
        p.wait()


def _results(messages: list[dict[str, Any]]) -> dict[str, tuple[str, bool]]:
    """tool_use_id -> (text, is_error) of every tool result in an Anthropic request body."""
    out = {}
    for m in messages:
        if m["role"] != "user" or isinstance(m["content"], str):
            continue
        for block in m["content"]:
            if block.get("type") == "tool_result":
                content = block["content"]
                text = content if isinstance(content, str) else "".join(c.get("text", "") for c in content)
                out[block["tool_use_id"]] = (text, bool(block.get("is_error")))
    return out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead; only its parent has not reaped it yet
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _pids(path: Path) -> list[int]:
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _wait_dead(pids: list[int], within: float = 60) -> None:
    wait_until(lambda: not any(_alive(p) for p in pids), within, f"the processes {pids} to end", interval=0.1)


def test_stdio_http_sse_and_published_servers_through_keel(
    fake_llm: Callable[[Any], FakeLLMServer],
    keel: Callable[..., KeelRun],
    served: Callable[[str], str],
    tmp_path: Path,
) -> None:
    http_url, sse_url = served("http"), served("sse")
    server = fake_llm(
        {
            "steps": [
                {
                    "tool_calls": [
                        {"name": "mcp__fx__add", "input": {"a": 2, "b": 40}},
                        {"name": "mcp__fx__echo_env", "input": {"name": "FX_GREETING"}},
                        {"name": "mcp__web__add", "input": {"a": 1, "b": 1}},
                        {"name": "mcp__old__add", "input": {"a": 3, "b": 4}},
                        {"name": "mcp__time__get_current_time", "input": {"timezone": "UTC"}},
                        {"name": "ReadMcpResourceTool", "input": {"server": "web", "uri": "notes://today"}},
                        {"name": "mcp__fx__add", "input": {"a": "not a number", "b": 1}},
                        {"name": "ListMcpResourcesTool", "input": {}},
                    ]
                },
                {"tool_calls": [{"name": "mcp__fx__grow", "input": {}}]},
                {"tool_calls": [{"name": "mcp__fx__late", "input": {}}]},
                "all done",
            ]
        }
    )
    config = {
        # ${VAR} and ${VAR:-default} in args and env
        "fx": {"command": PY, "args": [FIXTURE, "${FX_MODE:-stdio}"], "env": {"FX_GREETING": "${FX_VALUE}"}},
        "web": {"type": "http", "url": http_url, "headers": {"X-Test": "${FX_VALUE}"}},
        "old": {"type": "sse", "url": sse_url},
        "time": {"command": TIME_SERVER, "args": ["--local-timezone", "UTC"]},
    }
    run = keel(
        "-p",
        "what is in @fx:notes://today ?",
        "--allowedTools",
        "mcp__fx",
        "mcp__web__*",
        "mcp__old__add",
        "mcp__time",
        "--mcp-config",
        _config(config),
        env={**wire_env(server, "anthropic"), "FX_VALUE": "hello-from-env", "MCP_TIMEOUT": "180000"},
        timeout=300,
    )
    assert run.code == 0, run.stderr
    assert run.stdout.strip() == "all done"
    requests = server.cursor.requests
    first = requests[0]["body"]
    names = {t["name"] for t in first["tools"]}
    assert {"mcp__fx__add", "mcp__web__add", "mcp__old__add", "mcp__time__get_current_time"} <= names
    assert "mcp__fx__late" not in names
    add = next(t for t in first["tools"] if t["name"] == "mcp__fx__add")
    assert add["input_schema"]["required"] == ["a", "b"]  # the server's own JSON Schema
    # the @server:uri mention was read and added to the prompt
    assert "buy milk; ship keel" in json.dumps(first["messages"][0])

    after_first = _results(requests[1]["body"]["messages"])
    texts = [after_first[f"toolu_000_{i}"] for i in range(8)]
    assert texts[0] == ("sum=42", False)
    assert texts[1] == ("FX_GREETING=hello-from-env", False)
    assert texts[2] == ("sum=2", False)
    assert texts[3] == ("sum=7", False)
    time_result = json.loads(texts[4][0])
    assert time_result["timezone"] == "UTC" and not texts[4][1]
    assert texts[5] == ("buy milk; ship keel", False)
    assert texts[6][1] and "Invalid input for mcp__fx__add" in texts[6][0]
    listed = json.loads(texts[7][0])
    assert {(r["server"], r["uri"]) for r in listed} >= {("fx", "notes://today"), ("web", "notes://today")}

    # notifications/tools/list_changed: the new tool is in the next request, and runs
    assert "mcp__fx__late" in {t["name"] for t in requests[2]["body"]["tools"]}
    last = _results(requests[3]["body"]["messages"])
    assert last["toolu_002_0"] == ("late tool ran", False)


@pytest.mark.timeout(600)
def test_hang_crash_and_huge_output_are_contained(
    fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun], tmp_path: Path
) -> None:
    pids = tmp_path / "pids"
    server = fake_llm(
        {
            "steps": [
                {"tool_calls": [{"name": "mcp__crash__boom", "input": {}}]},
                {"tool_calls": [{"name": "mcp__crash__add", "input": {"a": 1, "b": 2}}]},
                {"tool_calls": [{"name": "mcp__big__dump", "input": {}}]},
                {"tool_calls": [{"name": "mcp__crash__slow", "input": {}}]},
                "survived",
            ]
        }
    )
    config = {"hang": _stdio("hang"), "crash": _stdio("crash", timeout=2000), "big": _stdio("big")}
    run = keel(
        "-p",
        "go",
        "--permission-mode",
        "bypassPermissions",
        "--mcp-config",
        _config(config),
        env={
            **wire_env(server, "anthropic"),
            "MCP_FIXTURE_PIDS": str(pids),
            "MCP_TIMEOUT": "60000",
            "MAX_MCP_OUTPUT_TOKENS": "5000",
        },
        timeout=300,
    )
    assert run.code == 0, run.stderr
    assert run.stdout.strip() == "survived"
    # the hanging server: one line, and the session went on without it
    hang_lines = [line for line in run.stderr.splitlines() if "'hang'" in line]
    assert hang_lines == ["keel: MCP server 'hang' failed: did not start within 60s"]
    requests = server.cursor.requests
    assert not any(t["name"].startswith("mcp__hang__") for t in requests[0]["body"]["tools"])
    # the crash mid-call is an error result naming the server; the next call reconnects
    crashed = _results(requests[1]["body"]["messages"])["toolu_000_0"]
    assert crashed[1] and "MCP server 'crash'" in crashed[0]
    assert _results(requests[2]["body"]["messages"])["toolu_001_0"] == ("sum=3", False)
    # 10 MB over MAX_MCP_OUTPUT_TOKENS: saved whole to a file, the model told where (as Claude Code)
    big = _results(requests[3]["body"]["messages"])["toolu_002_0"]
    assert "exceeds maximum allowed tokens. Output has been saved to " in big[0]
    assert len(big[0]) < 5000 * 4 + 1000
    # the server's own tool-call timeout ("timeout": 2000 ms) ends a call that does not answer
    slow = _results(requests[4]["body"]["messages"])["toolu_003_0"]
    assert slow == ("MCP server 'crash': slow did not answer within 2s (MCP_TOOL_TIMEOUT)", True)
    # no server outlives keel: hang, crash (twice: it was restarted) and big
    started = _pids(pids)
    assert len(started) == 4
    _wait_dead(started)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_no_server_survives_a_signal(
    sig: int, fake_llm: Callable[[Any], FakeLLMServer], project: Path, tmp_path: Path
) -> None:
    pids = tmp_path / "pids"
    server = fake_llm({"steps": [{"text": "slow", "delay_s": 60}]})
    env = {
        **os.environ,
        **wire_env(server, "anthropic"),
        "MCP_FIXTURE_PIDS": str(pids),
        "MCP_TIMEOUT": "90000",
    }
    config = _config({"a": _stdio("stdio"), "b": _stdio("stdio")})
    proc = subprocess.Popen(
        [KEEL, "-p", "hello", "--mcp-config", config],
        cwd=project,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        # servers up, request in flight
        wait_until(lambda: server.cursor.requests, 120, "keel's first request", interval=0.1)
        started = _pids(pids)
        assert len(started) == 2 and all(_alive(p) for p in started)
        proc.send_signal(sig)
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert code == (130 if sig == signal.SIGINT else 143)
    _wait_dead(started)


def test_no_server_survives_keel_being_killed(
    fake_llm: Callable[[Any], FakeLLMServer], project: Path, tmp_path: Path
) -> None:
    """SIGKILL leaves keel no chance to clean up: the kernel ends the servers (parent-death signal),
    even one that does not exit when its stdin closes."""
    pids = tmp_path / "pids"
    server = fake_llm({"steps": [{"text": "slow", "delay_s": 60}]})
    env = {**os.environ, **wire_env(server, "anthropic"), "MCP_FIXTURE_PIDS": str(pids), "MCP_TIMEOUT": "90000"}
    proc = subprocess.Popen(
        [KEEL, "-p", "hello", "--mcp-config", _config({"stubborn": _stdio("linger")})],
        cwd=project,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: server.cursor.requests, 120, "keel's first request", interval=0.1)
        [pid] = _pids(pids)
        assert _alive(pid)
        proc.kill()
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    _wait_dead([pid])
