"""Faults over loopback, through the real ``keel -p`` on keel's own wire clients: each ends in one
clear line or a successful retry, and the session file never holds half a turn."""

from __future__ import annotations

import json
import os
import socket
import ssl
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentkeel.models.fake.script import Script
from agentkeel.models.fake.server import FakeLLMServer
from kit import KeelRun, session_files, wire_env

WIRES = ["anthropic", "openai"]


def transcript(tmp_path: Path) -> list[dict[str, Any]]:
    [log] = session_files(tmp_path / "keelhome")
    return [json.loads(line) for line in log.read_text().splitlines()]  # every line whole


def assistant_texts(entries: list[dict[str, Any]]) -> list[str]:
    return [
        "".join(b.get("text", "") for b in e["message"]["content"] if b["type"] == "text")
        for e in entries
        if e["type"] == "assistant"
    ]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


RECOVERED = [
    ("reset_mid_stream", {"text": "half of this is sent, then the connection is reset", "reset_after": 4}),
    ("closed_mid_stream", {"text": "half of this is sent, then the connection closes", "break_after": 4}),
    ("overloaded_event_mid_stream", {"text": "overloaded half-way", "stream_error": {"type": "overloaded_error"}}),
    ("empty_200_body", {"empty_body": True}),
    ("529_overloaded", {"error": {"status": 529}}),
    ("429_retry_after", {"error": {"status": 429, "retry_after": 0.05}}),
    ("stall_after_headers", {"text": "this stalls", "stall_after": 2, "stall_s": 10}),
]


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize(("name", "fault"), RECOVERED, ids=[n for n, _ in RECOVERED])
def test_a_fault_then_success_is_retried_whole(
    name: str,
    fault: dict[str, Any],
    wire: str,
    tmp_path: Path,
    fake_llm: Callable[[Any], FakeLLMServer],
    keel: Callable[..., KeelRun],
) -> None:
    server = fake_llm({"steps": [fault, "the whole answer"]})
    run = keel("-p", "go", env={**wire_env(server, wire), "API_TIMEOUT_MS": "1000"})
    assert (run.code, run.stdout, run.stderr) == (0, "the whole answer\n", "")
    assert len(server.cursor.requests) == 2
    entries = transcript(tmp_path)
    assert assistant_texts(entries) == ["the whole answer"]  # nothing of the failed attempt was applied
    assert [e["type"] for e in entries].count("stream_retry") == 1


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize(
    ("steps", "env", "needle", "requests"),
    [
        ([{"error": {"status": 401, "message": "invalid x-api-key"}}], {}, "check {KEY}", 1),
        (
            [{"text": "stalls", "stall_after": 1, "stall_s": 10}] * 2,
            {"API_TIMEOUT_MS": "400", "KEEL_MAX_RETRIES": "1"},
            "within 0.4 s: the server stalled (API_TIMEOUT_MS sets how long to wait",
            2,
        ),
        (
            [{"text": "reset", "reset_after": 3}] * 2,
            {"KEEL_MAX_RETRIES": "1"},
            "the response stream from http://127.0.0.1",
            2,
        ),
        (
            [{"error": {"status": 400, "message": "prompt is too long: 210000 tokens > 200000 maximum"}}],
            {},
            "context window",
            1,
        ),
    ],
    ids=["401", "stalled_twice", "reset_twice", "prompt_too_long"],
)
def test_a_fault_that_persists_ends_in_one_clear_line(
    steps: list[Any],
    env: dict[str, str],
    needle: str,
    requests: int,
    wire: str,
    tmp_path: Path,
    fake_llm: Callable[[Any], FakeLLMServer],
    keel: Callable[..., KeelRun],
) -> None:
    server = fake_llm({"steps": steps})
    run = keel("-p", "go", env={**wire_env(server, wire), **env})
    key = "ANTHROPIC_API_KEY" if wire == "anthropic" else "OPENAI_API_KEY"
    assert run.code == 1 and run.stdout == ""
    [line] = run.stderr.splitlines()
    assert line.startswith("keel: error_during_execution: ") and needle.format(KEY=key) in line, line
    assert len(server.cursor.requests) == requests
    entries = transcript(tmp_path)
    assert assistant_texts(entries) == [] and entries[-1]["type"] == "session_end"


@pytest.mark.parametrize("wire", WIRES)
def test_connection_refused(wire: str, tmp_path: Path, keel: Callable[..., KeelRun]) -> None:
    port = closed_port()
    if wire == "anthropic":
        env = {"ANTHROPIC_API_KEY": "sk-ant-test-not-a-real-key", "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}"}
    else:
        env = {"OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1"}
    run = keel("-p", "go", env={**env, "KEEL_MAX_RETRIES": "1"})
    assert run.code == 1
    [line] = run.stderr.splitlines()
    assert f"cannot reach http://127.0.0.1:{port}" in line and "check the base URL" in line
    assert assistant_texts(transcript(tmp_path)) == []


@pytest.mark.parametrize("wire", WIRES)
def test_proxies_come_from_the_environment(
    wire: str, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    proxy = fake_llm({"steps": ["through the proxy"]})  # it answers the absolute-form request itself
    origin = "http://model.keel-test.invalid"
    env = {"HTTP_PROXY": proxy.url, "http_proxy": proxy.url, "NO_PROXY": "", "no_proxy": ""}
    if wire == "anthropic":
        env |= {"ANTHROPIC_API_KEY": "sk-ant-test-not-a-real-key", "ANTHROPIC_BASE_URL": origin}
    else:
        env |= {"OPENAI_BASE_URL": origin + "/v1"}
    run = keel("-p", "go", env=env)
    assert (run.code, run.stdout) == (0, "through the proxy\n"), run.stderr
    assert proxy.cursor.requests[0]["path"].startswith(origin + "/v1/")


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        ({"ANTHROPIC_CUSTOM_HEADERS": "oops"}, "ANTHROPIC_CUSTOM_HEADERS line 1 is not 'Name: Value'"),
        ({"API_TIMEOUT_MS": "10s"}, "API_TIMEOUT_MS must be a positive number of milliseconds"),
        ({"KEEL_PROVIDER_TRANSPORT": "grpc"}, "KEEL_PROVIDER_TRANSPORT must be 'wire' or 'sdk', got 'grpc'"),
    ],
)
def test_bad_provider_configuration_is_one_line(env: dict[str, str], needle: str, keel: Callable[..., KeelRun]) -> None:
    run = keel("-p", "hi", env={"ANTHROPIC_API_KEY": "sk-ant-test-not-a-real-key", **env})
    assert run.code == 2
    [line] = run.stderr.splitlines()
    assert needle in line


@pytest.mark.parametrize("transport", ["wire", "sdk"])
def test_the_transport_is_a_choice(
    transport: str, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    server = fake_llm({"steps": ["hello"]})
    run = keel("-p", "hi", env={**wire_env(server, "anthropic"), "KEEL_PROVIDER_TRANSPORT": transport})
    assert (run.code, run.stdout) == (0, "hello\n"), run.stderr
    agent = server.cursor.requests[0]["headers"]["user-agent"]
    assert agent.startswith("agentkeel/" if transport == "wire" else "AsyncAnthropic/")


def test_a_session_on_the_wire_path_imports_no_sdk(
    fake_llm: Callable[[Any], FakeLLMServer], project: Path, tmp_path: Path
) -> None:
    """The wire path imports no SDK: httpx only."""
    server = fake_llm(
        {"steps": [{"text": "listing", "tool_calls": [{"name": "LS", "input": {"path": "."}}]}, "done"], "loop": True}
    )
    probe = (
        "import sys\nfrom agentkeel.ui.cli.main import main\ncode = main(['-p', 'go'])\n"
        "sdks = sorted({m.split('.')[0] for m in sys.modules} & {'anthropic', 'openai', 'httpx2'})\n"
        "print(code, sdks, 'httpx' in sys.modules, file=sys.stderr)\n"
    )
    for wire in WIRES:
        out = subprocess.run(
            [sys.executable, "-c", probe],
            cwd=project,
            env={**os.environ, **wire_env(server, wire)},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.stderr.strip().splitlines()[-1] == "0 [] True", out.stderr


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[FakeLLMServer, Path]]:
    """fake-llm over HTTPS with a self-signed certificate for 127.0.0.1 (made by the openssl CLI)."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2"]
    names = ["-subj", "/CN=keel-test", "-addext", "subjectAltName=IP:127.0.0.1"]
    openssl = ["openssl", "req", "-x509", *curve, *names, "-keyout", str(key), "-out", str(cert)]
    subprocess.run(openssl, check=True, capture_output=True)
    server = FakeLLMServer(Script.from_data({"steps": ["over TLS"], "loop": True}))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    server.start_background()
    yield server, cert
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("wire", WIRES)
def test_tls_trusts_ssl_cert_file_and_nothing_else(
    wire: str, tls_server: tuple[FakeLLMServer, Path], keel: Callable[..., KeelRun]
) -> None:
    server, cert = tls_server
    url = server.url.replace("http://", "https://")
    if wire == "anthropic":
        env = {"ANTHROPIC_API_KEY": "sk-ant-test-not-a-real-key", "ANTHROPIC_BASE_URL": url}
    else:
        env = {"OPENAI_BASE_URL": url + "/v1"}
    trusted = keel("-p", "hi", env={**env, "SSL_CERT_FILE": str(cert)})
    assert (trusted.code, trusted.stdout) == (0, "over TLS\n"), trusted.stderr
    untrusted = keel("-p", "hi", env={**env, "SSL_CERT_FILE": "", "SSL_CERT_DIR": "", "KEEL_MAX_RETRIES": "0"})
    assert untrusted.code == 1
    [line] = untrusted.stderr.splitlines()
    assert f"cannot reach {url}" in line and "CERTIFICATE_VERIFY_FAILED" in line, line
