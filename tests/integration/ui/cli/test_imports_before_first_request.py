"""What ``keel -p`` imports before its first request, seen from outside: a real run of the CLI against
the fake model server over loopback, with the process's modules listed at the moment it first
connects to the server (an audit hook on ``socket.connect``; keel is not touched)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from agentkeel.internal import lazy as _lazy
from kit import wire_env

# Runs keel's CLI in a fresh interpreter; prints the modules loaded at the first connect to the fake
# server, then (after the run) those loaded once the warm-up thread is done, then the exit code.
_RUN = """
import os, sys, threading
port = int(sys.argv[1])
seen = []
def hook(event, args):
    if event == "socket.connect" and not seen and isinstance(args[1], tuple) and args[1][1] == port:
        seen.append(sorted(m for m, v in list(sys.modules.items()) if v is not None))
sys.addaudithook(hook)
from agentkeel.ui.cli.main import main
code = main(sys.argv[2:])
for t in threading.enumerate():
    if t.name == "keel-warm-imports":
        t.join(30)
print(seen[0] if seen else None)
print(sorted(sys.modules))
print(code)
"""

# Needed at the first tool call, never by the first request.
FIRST_CALL_ONLY = (
    "agentkeel.policy.permissions.shellpolicy",
    "agentkeel.policy.permissions.bash",
    "agentkeel.policy.permissions.targets",
    "agentkeel.policy.permissions.trees",
    "agentkeel.policy.permissions.sed",
    "agentkeel.policy.permissions.actions",
    "tree_sitter",
    "tree_sitter_bash",
    "agentkeel.core.inputs",
    "agentkeel.tools.shell",
    "agentkeel.tools.files",
    "pydantic",
)
# Needed only when asked for: --mcp-config / --json-schema (protocol/, sdk/structured), a skill (the
# Skill tool and its expansion), a prompt hook.
UNASKED = (
    "agentkeel.protocol.control",
    "agentkeel.ui.sdk.structured",
    "agentkeel.skills.run",
    "agentkeel.skills.expand",
    "agentkeel.hooks.prompt",
    "agentkeel.session.load",  # resuming (-r, -c)
    "agentkeel.models._errors",  # a provider failure
    "agentkeel.agents.background",  # a background agent
)


def _run(project: Path, server: Any, *args: str) -> tuple[set[str], set[str], str]:
    env = {**os.environ, **wire_env(server, "anthropic")}
    port = str(server.server_address[1])
    run = subprocess.run(
        [sys.executable, "-c", _RUN, port, "-p", "go", "--model", "anthropic:claude-sonnet-4-5", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    first, after, code = run.stdout.splitlines()[-3:]
    return set(ast.literal_eval(first)), set(ast.literal_eval(after)), code


def test_the_first_request_goes_out_without_what_only_a_tool_call_needs(project: Path, fake_llm: Any) -> None:
    """The permission engine's shell analysis, tree-sitter, the tool modules and their input models
    load after the first request is sent; the Bash call that follows still works."""
    server = fake_llm({"steps": [{"tool_calls": [{"name": "Bash", "input": {"command": "echo hi"}}]}, "done"]})
    first, after, code = _run(project, server, "--allowedTools", "Bash", "--output-format", "json")
    assert code == "0"
    assert not first & set(FIRST_CALL_ONLY), sorted(first & set(FIRST_CALL_ONLY))
    assert not first & set(UNASKED), sorted(first & set(UNASKED))
    assert "agentkeel.policy.permissions.engine" in first  # the engine itself: it hides denied tools from the request
    assert {"agentkeel.policy.permissions.shellpolicy", "agentkeel.tools.shell", "tree_sitter_bash"} <= after


def test_what_the_first_tool_call_needs_is_imported_while_the_first_request_waits(project: Path, fake_llm: Any) -> None:
    """A session whose model answers without any tool call still has the shell analysis loaded by the
    end: it was imported on a thread once the first request was sent, not at a tool call."""
    server = fake_llm({"steps": ["just text"]})
    first, after, code = _run(project, server)
    assert code == "0"
    assert "agentkeel.policy.permissions.shellpolicy" not in first
    assert {
        "agentkeel.policy.permissions.shellpolicy",
        "agentkeel.policy.permissions.trees",
        "agentkeel.tools.shell",
    } <= after


def _module(tmp_path: Path, monkeypatch: Any, name: str) -> None:
    (tmp_path / f"{name}.py").write_text("VALUE = 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))


def test_a_lazy_module_takes_its_place_in_the_importing_namespace_at_first_use(
    tmp_path: Path, monkeypatch: Any
) -> None:
    _module(tmp_path, monkeypatch, "keel_lazy_probe")
    namespace: dict[str, Any] = {}
    namespace["probe"] = stand_in = _lazy.lazy_module("keel_lazy_probe", namespace, "probe")
    assert isinstance(stand_in, _lazy.LazyModule) and "keel_lazy_probe" not in sys.modules
    assert stand_in.VALUE == 42
    assert namespace["probe"] is sys.modules["keel_lazy_probe"]  # later reads are plain global reads
    assert _lazy.lazy_module("json", namespace, "j") is sys.modules["json"]  # loaded already: the module


def test_warming_imports_once_on_a_thread_and_a_missing_module_is_left_to_fail_where_used(
    tmp_path: Path, monkeypatch: Any
) -> None:
    _module(tmp_path, monkeypatch, "keel_warm_probe")
    before = {t.ident for t in threading.enumerate()}
    _lazy.warm_later("keel_warm_probe", "keel_no_such_module")
    assert "keel_warm_probe" not in sys.modules
    _lazy.warm_now()
    started = [t for t in threading.enumerate() if t.ident not in before and t.name == "keel-warm-imports"]
    for t in started:
        t.join(30)
    assert "keel_warm_probe" in sys.modules
    assert "keel_no_such_module" not in sys.modules
    _lazy.warm_now()  # nothing left to warm: no second thread
    assert not [t for t in threading.enumerate() if t.name == "keel-warm-imports" and t.ident not in before]


async def _client_calls_per_request(session: Any, target: Any, rounds: int = 3) -> int:
    """Calls into httpx's client layer (``httpx/_client.py``) made by ``rounds`` requests and their
    answers, after a first one that sets up. A count of where the work goes, not of how much: an
    answer arriving in more TCP pieces on a loaded machine changes neither side."""
    body = b'{"model":"claude-sonnet-4-5","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}'
    headers = {"x-api-key": "sk-ant-test-not-a-real-key", "anthropic-version": "2023-06-01"}
    counted = [0]

    def count(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_filename.replace("\\", "/").endswith("httpx/_client.py"):
            counted[0] += 1

    async for _ in session.post_sse(target, headers, body):  # the first sets up
        pass
    sys.setprofile(count)
    try:
        for _ in range(rounds):
            async for _ in session.post_sse(target, headers, body):
                pass
    finally:
        sys.setprofile(None)
    return counted[0]


async def test_a_request_skips_httpx_client_layer_unless_a_proxy_or_url_credentials_need_it(fake_llm: Any) -> None:
    """The default path hands the request to httpx's transport with headers, URL and timeouts built
    once; the bytes sent are what httpx's client sends (its default headers included). With
    credentials in the URL the client is used (it adds the basic auth). Judged by where the calls
    go (never into httpx/_client.py on the default path), not by a count of them."""
    from agentkeel.models._http import HttpSession, Target

    server = fake_llm({"steps": ["a"] * 20})
    host = server.url.split("://", 1)[1]
    plain, with_auth = f"http://{host}", f"http://user:pw@{host}"
    costs, sent = [], []
    for base in (plain, with_auth):
        session = HttpSession(base)
        target = Target(url=f"{base}/v1/messages", endpoint=base, model="m", key_hint="ANTHROPIC_API_KEY", timeout_s=30)
        try:
            costs.append(await _client_calls_per_request(session, target))
        finally:
            await session.aclose()
        sent.append(dict(server.cursor.requests[-1]["headers"]))
    assert "authorization" in {k.lower() for k in sent[1]} and "authorization" not in {k.lower() for k in sent[0]}
    assert {k.lower(): v for k, v in sent[0].items()} == {
        k.lower(): v for k, v in sent[1].items() if k.lower() != "authorization"
    }
    assert costs[0] == 0 and costs[1] > 0, costs  # the default path never enters httpx's client layer
