"""The sandbox's way out: a proxy keel runs outside lets allowed domains through (sandbox settings
and WebFetch domain allow rules) and refuses the rest; without any, the network is off."""

from __future__ import annotations

import asyncio
import http.server
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentkeel.tools.shell import ShellState
from sandbox_harness import SandboxedBash, bwrap_works

pytestmark = pytest.mark.skipif(
    not bwrap_works() or not shutil.which("socat") or not shutil.which("curl"),
    reason="needs a working bubblewrap, socat and curl",
)


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"hello-from-the-host\n")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def port() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def _run(bash: SandboxedBash, *commands: str) -> list[object]:
    async def go() -> list[object]:
        try:
            return [await bash.run(c) for c in commands]
        finally:
            await bash.services.get(ShellState).aclose()
            await bash.sandbox.aclose()

    return asyncio.run(go())


def test_an_allowed_domain_goes_through_the_proxy_and_others_are_refused(tmp_path: Path, port: int) -> None:
    bash = SandboxedBash(tmp_path, tmp_path, settings={"network": {"allowedDomains": ["localhost"]}})
    ok, by_ip, other = _run(
        bash,
        f"curl -sS -m 10 http://localhost:{port}/",
        f"curl -sS -m 10 -f http://127.0.0.1:{port}/",
        "curl -sS -m 10 https://example.com/",
    )
    assert getattr(ok, "content", "") == "hello-from-the-host"
    for refused, host in ((by_ip, "127.0.0.1"), (other, "example.com")):
        text = getattr(refused, "content", "")
        assert "hello-from-the-host" not in text
        assert "[Sandbox denial:" in text and f"blocked: {host}" in text


def test_webfetch_domain_allow_rules_count_and_wildcards_match_exactly(tmp_path: Path, port: int) -> None:
    bash = SandboxedBash(tmp_path, tmp_path, allow=("Bash(*)", "WebFetch(domain:localhost)"))
    (ok,) = _run(bash, f"curl -sS -m 10 http://localhost:{port}/")
    assert getattr(ok, "content", "") == "hello-from-the-host"
    bash = SandboxedBash(tmp_path, tmp_path, settings={"network": {"allowedDomains": ["*.localhost"]}})
    (refused,) = _run(bash, f"curl -sS -m 10 -f http://localhost:{port}/")  # *.x is subdomains only
    assert "hello-from-the-host" not in getattr(refused, "content", "")


def test_without_allowed_domains_there_is_no_proxy_and_no_network(tmp_path: Path, port: int) -> None:
    bash = SandboxedBash(tmp_path, tmp_path)
    (out,) = _run(bash, f"curl -sS -m 5 http://localhost:{port}/")
    text = getattr(out, "content", "")
    assert "hello-from-the-host" not in text
    assert "network access is off" in text
    assert bash.sandbox.proxy is None


def test_a_webfetch_deny_rule_refuses_a_domain_the_sandbox_settings_allow(tmp_path: Path, port: int) -> None:
    bash = SandboxedBash(
        tmp_path,
        tmp_path,
        deny=("WebFetch(domain:localhost)",),
        settings={"network": {"allowedDomains": ["localhost"]}},
    )
    (refused,) = _run(bash, f"curl -sS -m 10 -f http://localhost:{port}/")
    assert "hello-from-the-host" not in getattr(refused, "content", "")
    assert "blocked: localhost" in getattr(refused, "content", "")
