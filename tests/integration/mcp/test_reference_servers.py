"""keel against the reference MCP servers from npm (#34: "every MCP check that works under Claude
Code works under keel"): @modelcontextprotocol/server-everything, -filesystem and -memory 2026.8.31
(scripts/setup installs them in .venv/node), each started by keel over stdio from ``--mcp-config``,
driven by a scripted model through ``keel -p --output-format stream-json``. The FastMCP-style
server (the ``mcp`` package's MCPServer) over stdio, streamable HTTP and SSE is
test_client_end_to_end.py; roots/progress/elicitation with it, test_client_features.py; large and
binary results, test_large_and_binary_results.py.

Oracle, 2026-11-28: the same runs with Claude Code 2.1.328 as the CLI (``MCP_ORACLE_CLI=~/.cache/
keel-peers/node_modules/.bin/claude pytest tests/integration/mcp/test_reference_servers.py``, which
runs ``claude -p go --output-format stream-json --verbose --mcp-config CONFIG --allowedTools ...``
with ``HOME=$(mktemp -d) CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1``). Each check names what
Claude Code's tool result held; every check below passed under Claude Code as written."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agentkeel.models.fake.server import FakeLLMServer
from kit import KEEL, node_modules, wire_env

ORACLE = os.environ.get("MCP_ORACLE_CLI")  # run the same checks on Claude Code


def server_entry(package: str) -> str:
    folder = node_modules(f"@modelcontextprotocol/{package}") / "@modelcontextprotocol" / package / "dist" / "index.js"
    return str(folder)


def run_cli(
    server: FakeLLMServer, project: Path, tmp_path: Path, config: dict[str, Any], allowed: str, prompt: str = "go"
) -> list[dict[str, Any]]:
    """One ``-p`` run; the stream-json lines."""
    cfg = tmp_path / "mcp.json"
    cfg.write_text(json.dumps({"mcpServers": config}))
    env = {**os.environ, **wire_env(server, "anthropic"), "KEEL_MAX_RETRIES": "0"}
    if ORACLE:
        home = tmp_path / "oracle-home"
        home.mkdir(exist_ok=True)
        env.update({"HOME": str(home), "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"})
    cmd = [ORACLE or KEEL, "-p", prompt, "--output-format", "stream-json", "--verbose"]
    cmd += ["--mcp-config", str(cfg), "--allowedTools", allowed]
    proc = subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True, timeout=180)
    lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    assert lines and lines[-1]["type"] == "result", proc.stderr[-3000:]
    return lines


def tool_results(lines: list[dict[str, Any]]) -> list[str]:
    """Each tool result's content as text (image blocks as ``<image mime>``), in call order."""
    out = []
    for line in lines:
        if line["type"] != "user" or line.get("parent_tool_use_id"):
            continue
        for block in line["message"]["content"]:
            if block.get("type") != "tool_result":
                continue
            content = block.get("content")
            if isinstance(content, list):
                parts = []
                for c in content:
                    if c.get("type") == "image":
                        source = c.get("source") or {}
                        # Claude Code: {"source": {"media_type"}}; keel's stream-json today: a flat "media_type"
                        parts.append(f"<image {source.get('media_type') or c.get('media_type') or ''}>")
                    else:
                        parts.append(str(c.get("text", "")))
                content = "\n".join(parts)
            out.append(("ERROR: " if block.get("is_error") else "") + str(content))
    return out


def calls(*steps: tuple[str, dict[str, Any]]) -> list[Any]:
    return [{"tool_calls": [{"name": name, "input": args}]} for name, args in steps] + ["checked"]


# (check, tool, input, what the result must contain: Claude Code's result held it)
EVERYTHING = [
    ("tool", "mcp__ev__echo", {"message": "hello mcp"}, "Echo: hello mcp"),
    ("tool with numbers", "mcp__ev__get-sum", {"a": 2, "b": 3}, "5"),
    ("roots", "mcp__ev__get-roots-list", {}, "file://"),
    ("progress", "mcp__ev__trigger-long-running-operation", {"duration": 1, "steps": 2}, "completed"),
    ("image content", "mcp__ev__get-tiny-image", {}, "<image image/png>"),
    ("structured content", "mcp__ev__get-structured-content", {"location": "New York"}, "temperature"),
    ("resource list", "ListMcpResourcesTool", {"server": "ev"}, "demo://resource/static/document/"),
    ("text resource", "ReadMcpResourceTool", {"server": "ev", "uri": "demo://resource/dynamic/text/1"}, "Resource 1"),
    ("embedded resource", "mcp__ev__get-resource-reference", {"resourceType": "Text", "resourceId": 3}, "Resource 3"),
    ("annotated message", "mcp__ev__get-annotated-message", {"messageType": "success"}, "Operation completed"),
]


def test_server_everything_tools_resources_roots_progress(fake_llm: Any, project: Path, tmp_path: Path) -> None:
    """Claude Code 2.1.328 (the same script, recorded): "Echo: hello mcp"; "The sum of 2 and 3 is 5.";
    "Current MCP Roots (1 total): 1. Unnamed Root URI: file://<cwd>"; "Long running operation
    completed. Duration: 1 seconds, Steps: 2."; the text, an image/png block and "[Image: source:
    <file it saved>]"; the structured content's JSON (temperature, conditions, humidity); the
    resource list as JSON naming demo://resource/static/document/*; the text resource's contents
    JSON ("Resource 1: This is a plaintext resource created at ..."); "Returning resource
    reference for Resource 3: [Resource from ev at demo://resource/dynamic/text/3] Resource 3: ...";
    "Operation completed successfully". keel gives the same content (its resource list and read
    are shaped as keel's tools, the image's text after it is the server's own)."""
    config = {"ev": {"type": "stdio", "command": "node", "args": [server_entry("server-everything"), "stdio"]}}
    steps = calls(*((tool, args) for _, tool, args, _ in EVERYTHING))
    lines = run_cli(fake_llm(steps), project, tmp_path, config, "mcp__ev,ListMcpResourcesTool,ReadMcpResourceTool")
    results = tool_results(lines)
    assert len(results) == len(EVERYTHING), results
    failed = [
        (check, got[:300])
        for (check, _, _, want), got in zip(EVERYTHING, results, strict=True)
        if want not in got or got.startswith("ERROR")
    ]
    assert not failed, failed
    assert project.as_uri() in results[2]  # the root is the working directory


def test_server_everything_prompt_as_a_slash_command(fake_llm: Any, project: Path, tmp_path: Path) -> None:
    """An MCP prompt run as ``/mcp__ev__args-prompt Paris France`` (multi-word arguments, one per
    word as Claude Code splits them). Claude Code: the model received "What's weather in Paris,
    France?"."""
    config = {"ev": {"type": "stdio", "command": "node", "args": [server_entry("server-everything"), "stdio"]}}
    server = fake_llm(["ok"])
    lines = run_cli(server, project, tmp_path, config, "mcp__ev", prompt="/mcp__ev__args-prompt Paris France")
    assert lines[-1]["subtype"] == "success"
    import urllib.request

    with urllib.request.urlopen(server.url + "/_keel/requests") as r:
        sent = json.dumps(json.loads(r.read())[-1]["body"]["messages"])
    assert "weather in Paris, France" in sent


def test_server_filesystem(fake_llm: Any, project: Path, tmp_path: Path) -> None:
    """@modelcontextprotocol/server-filesystem with the project as its one allowed directory (it also
    asks the client for roots). Claude Code: the allowed directories listed the project; the write
    said "Successfully wrote to ..."; the read gave the text back; the listing "[FILE] note.txt";
    a path outside was refused ("Access denied - path outside allowed directories")."""
    config = {"fs": {"type": "stdio", "command": "node", "args": [server_entry("server-filesystem"), str(project)]}}
    target = str(project / "note.txt")
    steps = calls(
        ("mcp__fs__list_allowed_directories", {}),
        ("mcp__fs__write_file", {"path": target, "content": "written by the fs server\n"}),
        ("mcp__fs__read_text_file", {"path": target}),
        ("mcp__fs__list_directory", {"path": str(project)}),
        ("mcp__fs__read_text_file", {"path": str(tmp_path / "outside.txt")}),
    )
    (tmp_path / "outside.txt").write_text("not yours\n")
    results = tool_results(run_cli(fake_llm(steps), project, tmp_path, config, "mcp__fs"))
    assert len(results) == 5, results
    assert str(project.resolve()) in results[0]
    assert "Successfully wrote" in results[1]
    assert (project / "note.txt").read_text() == "written by the fs server\n"
    assert "written by the fs server" in results[2]
    assert "[FILE] note.txt" in results[3]
    assert results[4].startswith("ERROR") and "denied" in results[4].lower()


def test_server_memory(fake_llm: Any, project: Path, tmp_path: Path) -> None:
    """@modelcontextprotocol/server-memory with its file in the test's folder. Claude Code: the
    entity was created, read_graph returned it with its observation, search_nodes found it."""
    store = tmp_path / "memory.jsonl"
    config = {
        "mem": {
            "type": "stdio",
            "command": "node",
            "args": [server_entry("server-memory")],
            "env": {"MEMORY_FILE_PATH": str(store)},
        }
    }
    entity = {"name": "Ada", "entityType": "person", "observations": ["wrote the first program"]}
    steps = calls(
        ("mcp__mem__create_entities", {"entities": [entity]}),
        ("mcp__mem__read_graph", {}),
        ("mcp__mem__search_nodes", {"query": "first program"}),
    )
    results = tool_results(run_cli(fake_llm(steps), project, tmp_path, config, "mcp__mem"))
    assert len(results) == 3, results
    assert all("Ada" in r and not r.startswith("ERROR") for r in results), results
    assert "wrote the first program" in results[1]
    assert "Ada" in store.read_text()


@pytest.mark.skipif(ORACLE is not None, reason="keel's own large-result file, not Claude Code's")
def test_a_large_result_from_a_real_server_is_kept_whole(fake_llm: Any, project: Path, tmp_path: Path) -> None:
    """A 150,000-character echo. Claude Code: "Error: result (150,006 characters across 1 line)
    exceeds maximum allowed tokens. Output has been saved to ~/.claude/projects/<cwd>/<session>/
    tool-results/mcp-ev-echo-....txt", the whole text in it. keel: the same sentence and a file
    under its own KEEL_HOME holding all of it."""
    config = {"ev": {"type": "stdio", "command": "node", "args": [server_entry("server-everything"), "stdio"]}}
    message = "".join(f"{i:07d} " for i in range(18_750))  # 150,000 characters
    results = tool_results(
        run_cli(fake_llm(calls(("mcp__ev__echo", {"message": message}))), project, tmp_path, config, "mcp__ev")
    )
    assert len(results) == 1
    if message in results[0]:
        return
    saved = [w.strip("()[]'\".,:") for w in results[0].split() if "/" in w]
    whole = [p for p in saved if Path(p).is_file() and message in Path(p).read_text(errors="replace")]
    assert whole, results[0][:500]


def test_blob_resources_are_saved_as_bytes(fake_llm: Any, project: Path, tmp_path: Path) -> None:
    """A blob resource read and a blob embedded in a tool result. Claude Code: "[Resource from ev at
    demo://resource/dynamic/blob/1] Binary content (text/plain, 55 bytes) saved to <file>" (the read's
    result wraps it in ``{"contents": [{..., "blobSavedTo": <file>}]}``), the same for the embedded
    blob; the files hold the 55 decoded bytes."""
    config = {"ev": {"type": "stdio", "command": "node", "args": [server_entry("server-everything"), "stdio"]}}
    steps = calls(
        ("ReadMcpResourceTool", {"server": "ev", "uri": "demo://resource/dynamic/blob/1"}),
        ("mcp__ev__get-resource-reference", {"resourceType": "Blob", "resourceId": 2}),
    )
    results = tool_results(run_cli(fake_llm(steps), project, tmp_path, config, "mcp__ev,ReadMcpResourceTool"))
    assert len(results) == 2, results
    for n, result in enumerate(results, 1):
        assert (
            f"[Resource from ev at demo://resource/dynamic/blob/{n}] Binary content (text/plain, 55 bytes) saved to"
            in result
        )
        path = result.split("saved to ", 1)[1].split()[0].split('"')[0]
        assert len(Path(path).read_bytes()) == 55
