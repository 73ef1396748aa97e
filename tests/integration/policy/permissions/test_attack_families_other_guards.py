"""Safety III review (issue #30), the guards beyond the Bash permission decision: keel serve's
guard in front of a WebSocket (item 4), committed instruction files that link out of the
project (family 10), the sandbox keeping the directory core.hooksPath names read-only (item 9),
and family 14: passwords on a command line redacted, MCP deny rules in the server's configured
spelling."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from agentkeel.policy.permissions import PermissionEngine

# --- item 4: keel serve's guard in front of every kind of connection --------------------------


def _websocket_scope(headers: dict[str, str]) -> dict[str, object]:
    return {
        "type": "websocket",
        "path": "/api/sessions",
        "query_string": b"",
        "server": ("127.0.0.1", 7378),
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
    }


@pytest.mark.parametrize(
    "headers",
    [
        {"host": "127.0.0.1:7378"},  # no token
        {"host": "127.0.0.1:7378", "cookie": "keel_token_9999=" + "t" * 32},  # another port's cookie
        {"host": "evil.example:7378", "authorization": "Bearer " + "t" * 32},  # DNS rebinding
        {"host": "127.0.0.1:7378", "cookie": "keel_token_7378=" + "t" * 32, "origin": "http://evil.example"},
    ],
)
def test_a_websocket_without_the_token_never_reaches_the_app(headers: dict[str, str]) -> None:
    """The guard used to pass every connection that was not plain HTTP straight to the app."""
    import asyncio

    from agentkeel.ui.serve.guard import Guard

    reached: list[str] = []
    sent: list[dict[str, object]] = []

    async def app(scope: object, receive: object, send: object) -> None:
        reached.append("app")

    async def receive() -> dict[str, object]:
        return {"type": "websocket.connect"}

    async def send(message: dict[str, object]) -> None:
        sent.append(dict(message))

    guard = Guard(app, token="t" * 32, loopback_only=True)  # type: ignore[arg-type]
    asyncio.run(guard(_websocket_scope(headers), receive, send))  # type: ignore[arg-type]
    assert reached == []
    assert sent == [{"type": "websocket.close", "code": 1008}]


def test_a_websocket_with_the_token_reaches_the_app() -> None:
    import asyncio

    from agentkeel.ui.serve.guard import Guard

    reached: list[str] = []

    async def app(scope: object, receive: object, send: object) -> None:
        reached.append("app")

    async def receive() -> dict[str, object]:
        return {"type": "websocket.connect"}

    async def send(message: dict[str, object]) -> None:
        pass

    guard = Guard(app, token="t" * 32, loopback_only=True)  # type: ignore[arg-type]
    scope = _websocket_scope({"host": "127.0.0.1:7378", "cookie": "keel_token_7378=" + "t" * 32})
    asyncio.run(guard(scope, receive, send))  # type: ignore[arg-type]
    assert reached == ["app"]


# --- family 10: a committed symlink is an import by another name -------------------------------

FAKE_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nFAKE-not-a-real-key-0123456789\n-----END OPENSSH PRIVATE KEY-----"


def _instructions(tmp_path: Path, *, trusted: bool, deny: tuple[str, ...] = ()) -> tuple[Path, Path]:
    home, repo = tmp_path / "home", tmp_path / "repo"
    for d in (home / ".ssh", home / ".claude", repo / ".git", repo / ".claude" / "rules"):
        d.mkdir(parents=True, exist_ok=True)
    (home / ".ssh" / "id_rsa").write_text(FAKE_KEY)
    (home / "notes.md").write_text("user notes outside the project\n")
    (repo / ".env").write_text("API_KEY=obviously-fake-env-value\n")
    (repo / "AGENTS.md").write_text("agents guide inside the project\n")
    return home, repo


def _load(home: Path, repo: Path, *, trusted: bool, deny: tuple[str, ...] = ()) -> str:
    from agentkeel.app.runtime import _import_refusal
    from agentkeel.context.instructions import ImportPolicy, Instructions

    engine = PermissionEngine(cwd=str(repo), home=str(home), keel_home=str(home / ".keel"))
    engine.add(deny, "deny", "test")
    policy = ImportPolicy(trusted=trusted, refuse=_import_refusal(engine))
    loaded = Instructions.load(repo, home, home / ".keel", env={}, policy=policy)
    return "\n".join(f.text for f in loaded.files)


@pytest.mark.parametrize(
    ("link", "target", "trusted", "deny", "secret"),
    [
        ("CLAUDE.md", "home/.ssh/id_rsa", False, (), "FAKE-not-a-real-key"),
        ("CLAUDE.md", "home/.ssh/id_rsa", True, (), "FAKE-not-a-real-key"),  # a credential store
        ("CLAUDE.local.md", "home/.ssh/id_rsa", True, (), "FAKE-not-a-real-key"),
        (".claude/CLAUDE.md", "home/notes.md", False, (), "user notes outside"),
        (".claude/rules/style.md", "home/.ssh/id_rsa", True, (), "FAKE-not-a-real-key"),
        (".claude/rules/style.md", "home/notes.md", False, (), "user notes outside"),
        ("CLAUDE.md", "repo/.env", True, ("Read(./.env)",), "obviously-fake-env-value"),
    ],
)
def test_a_committed_instruction_file_that_links_out_is_not_read(
    tmp_path: Path, link: str, target: str, trusted: bool, deny: tuple[str, ...], secret: str
) -> None:
    home, repo = _instructions(tmp_path, trusted=trusted)
    (repo / link).symlink_to(tmp_path / target)
    assert secret not in _load(home, repo, trusted=trusted, deny=deny)


def test_an_instruction_file_linked_inside_the_project_is_read(tmp_path: Path) -> None:
    home, repo = _instructions(tmp_path, trusted=False)
    (repo / "CLAUDE.md").symlink_to("AGENTS.md")  # the usual CLAUDE.md -> AGENTS.md
    (repo / ".claude" / "rules" / "a.md").symlink_to(repo / "AGENTS.md")
    text = _load(home, repo, trusted=False)
    assert text.count("agents guide inside the project") >= 1
    home.joinpath(".claude", "CLAUDE.md").symlink_to(home / "notes.md")  # the user's own: free
    assert "user notes outside" in _load(home, repo, trusted=False)


# --- item 9: core.hooksPath naming a directory of the project ----------------------------------


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args], cwd=cwd, check=True, capture_output=True
    )


@pytest.mark.parametrize(
    ("hooks_path", "attack"),
    [
        (
            "tools/hooks",
            "printf '#!/bin/sh\\ntouch {M}\\n' > tools/hooks/pre-commit && chmod +x tools/hooks/pre-commit",
        ),
        (
            "./tools/hooks",
            "rm -rf tools/hooks && mkdir tools/hooks && printf '#!/bin/sh\\ntouch {M}\\n' > tools/hooks/x",
        ),
        ("tools", "mv tools tools2 && mkdir tools"),
        (".githooks", "mkdir -p .githooks && printf '#!/bin/sh\\ntouch {M}\\n' > .githooks/pre-commit"),  # missing
    ],
)
def test_the_directory_core_hookspath_names_is_read_only_in_the_sandbox(
    tmp_path: Path, hooks_path: str, attack: str
) -> None:
    import os

    from sandbox_harness import SandboxedBash, bwrap_works

    if not bwrap_works() or shutil.which("git") is None:
        pytest.skip("needs bubblewrap and git")
    repo = tmp_path / "repo"
    repo.mkdir()
    _git("init", "-q", cwd=repo)
    _git("config", "core.hooksPath", hooks_path, cwd=repo)
    if hooks_path != ".githooks":
        (repo / "tools" / "hooks").mkdir(parents=True)
    (repo / "a.txt").write_text("a\n")
    marker = tmp_path / "hook-ran"
    bash = SandboxedBash(repo, Path(os.environ["HOME"]))
    try:
        out = bash(attack.replace("{M}", str(marker)))
        assert "[Sandbox denial:" in out.content, out.content
        # ordinary work still passes inside the sandbox
        ok = bash("echo b >> a.txt && git add a.txt && git -c user.name=t -c user.email=t@example.com commit -qm b")
        assert "[Sandbox denial:" not in ok.content, ok.content
    finally:
        bash.close()
    (repo / "a.txt").write_text("c\n")
    _git("commit", "-qam", "c", cwd=repo)  # the user's next commit, on the host
    assert not marker.exists()


# --- family 14: redaction of further command-line forms ----------------------------------------

FAKE_PW = "Zq8vR2xLm4Tn7Wp-fake"


@pytest.mark.parametrize(
    "line",
    [
        "docker login -p{S} -u me registry.example.com",  # pflag: the shorthand's value attached
        "podman login -u me -p{S} quay.io",
        "vercel deploy --token {S}",
        "tool --api-key {S} run",
        "tool --api-key '{S}' run",
        "cli --client-secret {S}",
        "keytool -importkeystore -srcstorepass {S} -deststorepass {S}",
        "keytool -list -storepass {S}",
        "ldapsearch -x -D cn=admin -w {S} -b dc=example",
    ],
)
def test_a_password_on_a_command_line_is_redacted(line: str) -> None:
    from agentkeel.policy.redact import redact

    assert FAKE_PW not in redact(line.replace("{S}", FAKE_PW))


@pytest.mark.parametrize(
    "line",
    [
        "docker login --password-stdin -u me",
        "docker run -p 8080:80 nginx",
        "see the --token option",
        "tool --token $TOKEN",
        "tool --token-file token.txt",
        "ldapsearch -W -D cn=admin",
    ],
)
def test_command_lines_without_a_password_are_kept(line: str) -> None:
    from agentkeel.policy.redact import redact

    assert redact(line) == line


# --- family 14: MCP deny rules with the server's configured spelling ---------------------------


def _exposed(server: str, tool: str) -> str:
    """The name keel exposes for an MCP tool, built by the code that builds MCP tools."""
    from types import SimpleNamespace
    from typing import Any

    import mcp_types

    from agentkeel.mcp.tools import mcp_tool

    conn: Any = SimpleNamespace(name=server, connect_timeout_s=1, tool_timeout_s=1)
    return mcp_tool(None, conn, mcp_types.Tool(name=tool, input_schema={"type": "object"})).name


@pytest.mark.parametrize(
    ("server", "tool", "rule"),
    [
        ("my.server", "run", "mcp__my.server"),  # the server as .mcp.json names it
        ("my.server", "run", "mcp__my.server__run"),
        ("GitHub", "delete_repo", "mcp__github"),  # another case
        ("github", "Delete_Repo", "mcp__github__delete_repo"),
        ("corp.api", "drop_table", "mcp__corp.api__drop_*"),
    ],
)
def test_an_mcp_deny_rule_in_the_configured_spelling_holds(tmp_path: Path, server: str, tool: str, rule: str) -> None:
    name = _exposed(server, tool)
    engine = PermissionEngine(cwd=str(tmp_path), home=str(tmp_path), mode="bypassPermissions")
    engine.add([rule], "deny", "test")
    assert engine.decide(name, {}, None).decision == "deny", name


def test_an_mcp_allow_rule_stays_exact(tmp_path: Path) -> None:
    engine = PermissionEngine(cwd=str(tmp_path), home=str(tmp_path))
    engine.add(["mcp__github"], "allow", "test")
    assert engine.decide(_exposed("github", "get_issue"), {}, None).decision == "allow"
    assert engine.decide(_exposed("GitHub2", "get_issue"), {}, None).decision != "allow"
    engine = PermissionEngine(cwd=str(tmp_path), home=str(tmp_path), mode="bypassPermissions")
    engine.add(["mcp__github"], "deny", "test")
    assert engine.decide(_exposed("gitlab", "get_issue"), {}, None).decision == "allow"
