"""``keel mcp add`` in Claude Code's documented argument order (#34 item 14): options after the URL."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from kit import KeelRun


def test_header_after_url_as_claude_code_documents(keel: Callable[..., KeelRun], project: Path) -> None:
    """Claude Code 2.1.328 accepts options after the URL (its docs' own example):
    ``HOME=$(mktemp -d) claude mcp add --transport http web http://127.0.0.1:9/mcp --header 'Authorization: Bearer x'``
    writes ``{"type": "http", "url": ..., "headers": {"Authorization": "Bearer x"}}``."""
    web = keel(
        "mcp", "add", "--transport", "http", "web", "http://127.0.0.1:9/mcp",
        "--header", "Authorization: Bearer ${TOKEN}", "-H", "X-Trace: 1", "--scope", "project",
    )  # fmt: skip
    assert web.code == 0, web.stderr
    assert json.loads((project / ".mcp.json").read_text())["mcpServers"]["web"] == {
        "type": "http",
        "url": "http://127.0.0.1:9/mcp",
        "headers": {"Authorization": "Bearer ${TOKEN}", "X-Trace": "1"},
    }
    sse = keel("mcp", "add", "-t", "sse", "far", "http://127.0.0.1:9/sse", "--header=X-Key: fake-0000")
    assert sse.code == 0, sse.stderr
    local = json.loads((project / ".keel" / "settings.local.json").read_text())
    assert local["mcpServers"]["far"]["headers"] == {"X-Key": "fake-0000"}
    # what is still wrong stays one clear line
    stray = keel("mcp", "add", "-t", "http", "x", "http://h/mcp", "extra")
    assert stray.code == 2 and stray.stderr.count("\n") == 1 and "takes a URL and no arguments" in stray.stderr
    dangling = keel("mcp", "add", "-t", "http", "y", "http://h/mcp", "--header")
    assert dangling.code == 2 and "--header needs a value" in dangling.stderr
