"""The sandbox's way out: a proxy keel runs outside lets allowed domains through (sandbox settings
and WebFetch domain allow rules) and refuses the rest; without any, the network is off."""

from __future__ import annotations

import asyncio
import http.server
import json
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentkeel.core.extensions import ToolCall
from agentkeel.models.fake.server import FakeLLMServer
from agentkeel.policy.permissions import Answer, PermissionGate
from agentkeel.policy.permissions.verdicts import Decision
from agentkeel.tools.shell import ShellState
from kit import KEEL, wire_env
from sandbox_harness import SandboxedBash, bwrap_works
from tests.integration.policy.sandbox.test_cli import _results

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


def _asking(
    bash: SandboxedBash, answers: list[Answer], project: Path | None = None
) -> list[tuple[str, dict[str, object], tuple[str, ...]]]:
    """The real permission gate as the sandbox's asker, its host callback answering from ``answers``."""
    asked: list[tuple[str, dict[str, object], tuple[str, ...]]] = []

    async def ask(call: ToolCall, decision: Decision) -> Answer:
        asked.append((call.name, dict(call.input), decision.suggestions))
        return answers.pop(0)

    settings = project / ".keel" / "settings.local.json" if project is not None else None
    bash.sandbox.asker = PermissionGate(bash.engine, lambda e: None, ask=ask, project_settings=settings)
    return asked


def test_a_new_domain_is_asked_about_once_and_the_answer_holds_for_the_session(tmp_path: Path, port: int) -> None:
    bash = SandboxedBash(tmp_path, tmp_path)
    asked = _asking(bash, ["allow"])
    first, second = _run(bash, *[f"curl -sS -m 10 http://localhost:{port}/"] * 2)
    assert getattr(first, "content", "") == getattr(second, "content", "") == "hello-from-the-host"
    assert asked == [("SandboxNetworkAccess", {"host": "localhost"}, ("WebFetch(domain:localhost)",))]


def test_a_refused_domain_is_not_asked_about_again(tmp_path: Path, port: int) -> None:
    bash = SandboxedBash(tmp_path, tmp_path)
    asked = _asking(bash, ["deny"])
    outs = _run(bash, *[f"curl -sS -m 10 -f http://localhost:{port}/"] * 2)
    for out in outs:
        text = getattr(out, "content", "")
        assert "hello-from-the-host" not in text and "blocked: localhost" in text
    assert len(asked) == 1


def test_always_saves_a_webfetch_domain_rule_for_the_project(tmp_path: Path, port: int) -> None:
    project = tmp_path / "p"
    project.mkdir()
    bash = SandboxedBash(project, tmp_path)
    asked = _asking(bash, ["allow_project"], project)
    (ok,) = _run(bash, f"curl -sS -m 10 http://localhost:{port}/")
    assert getattr(ok, "content", "") == "hello-from-the-host" and len(asked) == 1
    saved = json.loads((project / ".keel" / "settings.local.json").read_text())
    assert saved["permissions"]["allow"] == ["WebFetch(domain:localhost)"]
    assert bash.sandbox.domain_allowed("localhost") is True  # a rule now, not only a remembered answer


def test_with_nobody_to_ask_a_new_domain_is_refused_without_asking(tmp_path: Path, port: int) -> None:
    bash = SandboxedBash(tmp_path, tmp_path, settings={"network": {"allowedDomains": ["other.example"]}})
    bash.sandbox.asker = PermissionGate(bash.engine, lambda e: None)  # -p: no prompt, no can_use_tool, no hook
    (refused,) = _run(bash, f"curl -sS -m 10 -f http://localhost:{port}/")
    assert "hello-from-the-host" not in getattr(refused, "content", "")
    assert "blocked: localhost" in getattr(refused, "content", "")
    quiet = SandboxedBash(tmp_path, tmp_path)
    quiet.sandbox.asker = PermissionGate(quiet.engine, lambda e: None)
    (off,) = _run(quiet, f"curl -sS -m 5 http://localhost:{port}/")
    assert "network access is off" in getattr(off, "content", "") and quiet.sandbox.proxy is None


def test_the_relay_starts_only_for_a_command_that_may_use_the_network(tmp_path: Path) -> None:
    bash = SandboxedBash(tmp_path, tmp_path, settings={"network": {"allowedDomains": ["localhost"]}})
    local, other = _run(bash, "cat /proc/[0-9]*/comm", "id >/dev/null; cat /proc/[0-9]*/comm")
    assert "socat" not in getattr(local, "content", "").split()
    assert "socat" in getattr(other, "content", "").split()


@pytest.mark.parametrize("transport", ["in-process", "subprocess"])
def test_the_sdk_host_is_asked_once_through_can_use_tool(
    transport: str, tmp_path: Path, port: int, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    """End to end: keel's SDK, a sandboxed session, the model's Bash reaching a new host twice."""
    from agentkeel.ui.sdk import (
        KeelAgentOptions,
        PermissionResultAllow,
        PermissionResultDeny,
        ToolPermissionContext,
        query,
    )

    project = tmp_path / "project"
    project.mkdir()
    curl = f"curl -sS -m 10 http://localhost:{port}/"
    server = fake_llm({"steps": [{"tool_calls": [{"name": "Bash", "input": {"command": curl}}]}] * 2 + ["Done."]})
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"sandbox": {"enabled": True}}))
    asked: list[tuple[str, dict[str, Any]]] = []

    async def can_use_tool(
        name: str, data: dict[str, Any], ctx: ToolPermissionContext
    ) -> PermissionResultAllow | PermissionResultDeny:
        asked.append((name, data))
        return PermissionResultAllow()

    opts = KeelAgentOptions(
        cwd=project,
        env=wire_env(server, "anthropic"),
        transport=transport,  # type: ignore[arg-type]
        cli_path=KEEL,
        can_use_tool=can_use_tool,
        settings=str(settings),
    )

    async def run() -> None:
        async for _ in query(prompt="fetch it twice", options=opts):
            pass

    asyncio.run(asyncio.wait_for(run(), 120))
    assert asked == [("SandboxNetworkAccess", {"host": "localhost"})]  # Bash itself ran sandboxed, unasked
    results = _results(server)
    assert results == ["hello-from-the-host", "hello-from-the-host"], results
