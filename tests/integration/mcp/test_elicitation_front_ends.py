"""An MCP server's elicitation through the front ends that can ask a person (#34 item 10): ``keel
serve`` (an ``elicitation_request`` frame any client answers with ``POST
/api/sessions/ID/elicitations/EID {action, content}``). The SDK path (the ``elicitation`` control
request) is tests/integration/ui/sdk_ts/test_sdk_ts.py::test_mcp_elicitation_reaches_the_hosts_on_elicitation;
headless refusal is tests/integration/mcp/test_client_features.py.

The server is @modelcontextprotocol/server-everything 2026.8.31 (scripts/setup), its
trigger-elicitation-request tool. Oracle (2026-11-28, Claude Code 2.1.328 through the TypeScript SDK's
``onElicitation``, see test_sdk_ts.py): the host is asked once with the server's form, and an
``accept`` with ``{name, check, integer}`` makes the tool answer "✅ User provided the requested
information!" listing them. Before: keel serve cancelled every elicitation, as headless."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kit import node_modules
from serve_fixtures import Served, kind
from serve_fixtures import serve as serve  # the fixture

Serve = Callable[..., Served]
CALL = {"tool_calls": [{"name": "mcp__ev__trigger-elicitation-request", "input": {}}]}


def everything_user_server(home: Path) -> None:
    entry = (
        node_modules("@modelcontextprotocol/server-everything")
        / "@modelcontextprotocol/server-everything/dist/index.js"
    )
    config = {"mcpServers": {"ev": {"type": "stdio", "command": "node", "args": [str(entry), "stdio"]}}}
    (home / ".claude.json").write_text(json.dumps(config))


def tool_result_text(frames: list[dict[str, Any]]) -> str:
    results = [f["event"] for f in frames if f.get("event", {}).get("type") == "tool_results"]
    return json.dumps(results[-1]["message"]["content"], ensure_ascii=False)


def open_and_allow(s: Served) -> tuple[str, dict[str, Any]]:
    res = s.post("api/sessions", {"prompt": "elicit"})
    assert res.status_code == 201, res.text
    sid: str = res.json()["session_id"]
    ask = s.frames(sid, kind("permission_request"), timeout=60)[-1]
    assert ask["tool"] == "mcp__ev__trigger-elicitation-request"
    assert s.post(f"api/sessions/{sid}/permissions/{ask['ask_id']}", {"answer": "allow"}).status_code == 200
    return sid, s.frames(sid, kind("elicitation_request"), timeout=60)[-1]


def test_serve_asks_its_clients_and_their_answer_reaches_the_server(serve: Serve, tmp_path: Path) -> None:
    everything_user_server(tmp_path / "userhome")
    s = serve({"steps": [CALL, "done"]})
    sid, asked = open_and_allow(s)
    assert asked["server"] == "ev" and asked["message"] == "Please provide inputs for the following fields:"
    assert list(asked["requestedSchema"]["properties"])[:2] == ["name", "check"]
    state = s.get(f"api/sessions/{sid}").json()
    assert [e["elicitation_id"] for e in state["pending_elicitations"]] == [asked["elicitation_id"]]
    url = f"api/sessions/{sid}/elicitations/{asked['elicitation_id']}"
    bad = s.post(url, {"action": "accept"})
    assert bad.status_code == 400 and "content" in bad.json()["error"]
    answer = {"action": "accept", "content": {"name": "Ada Lovelace", "check": True, "integer": 7}}
    assert s.post(url, answer).status_code == 200
    assert s.post(url, answer).status_code == 409  # answered once
    frames = s.frames(sid, kind("idle"), after=asked["seq"])
    assert frames[0]["kind"] == "elicitation_answered"
    text = tool_result_text(frames)
    assert "User provided the requested information" in text and "Ada Lovelace" in text


def test_serve_decline_reaches_the_server(serve: Serve, tmp_path: Path) -> None:
    everything_user_server(tmp_path / "userhome")
    s = serve({"steps": [CALL, "done"]})
    sid, asked = open_and_allow(s)
    assert (
        s.post(f"api/sessions/{sid}/elicitations/{asked['elicitation_id']}", {"action": "decline"}).status_code == 200
    )
    assert "User declined" in tool_result_text(s.frames(sid, kind("idle"), after=asked["seq"]))
