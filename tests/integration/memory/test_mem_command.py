"""`keel mem` end to end: importers, the MCP server over stdio, the markdown mirror."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from agentkeel.memory.project import project_id
from agentkeel.models.fake.server import FakeLLMServer
from conftest import KEEL, KeelRun, wire_env
from memory_fixtures import postgres_dsn

FAKE_KEY = "sk-ant-api03-FAKEFAKEFAKEFAKEFAKEFAKE0000"


def _claude_code_transcript(path: Path, session: str) -> None:
    lines = [
        {
            "type": "user",
            "uuid": "u1",
            "sessionId": session,
            "timestamp": "2025-10-01T10:00:00Z",
            "message": {"role": "user", "content": "why does the flaky login test fail?"},
        },
        {
            "type": "assistant",
            "uuid": "a1",
            "sessionId": session,
            "timestamp": "2025-10-01T10:00:05Z",
            "message": {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Let me run it."},
                    {
                        "type": "tool_use",
                        "id": "tu1",
                        "name": "Bash",
                        "input": {"command": "pytest tests/test_login.py"},
                    },
                ],
            },
        },
        {
            "type": "user",
            "uuid": "u2",
            "sessionId": session,
            "timestamp": "2025-10-01T10:00:09Z",
            "message": {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "tu1", "content": f"FAILED: token {FAKE_KEY} expired"}
                ],
            },
        },
        "this line is torn {",
        {
            "type": "assistant",
            "uuid": "a2",
            "sessionId": session,
            "timestamp": "2025-10-01T10:01:00Z",
            "message": {
                "role": "assistant",
                "content": [{"type": "text", "text": "The session clock skews by 5 minutes."}],
            },
        },
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")


def _codex_rollout(path: Path) -> None:
    lines = [
        {"timestamp": "2025-09-01T08:00:00Z", "type": "session_meta", "payload": {"id": "codex-sess-1"}},
        {
            "timestamp": "2025-09-01T08:00:01Z",
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "bump the nginx image"}],
            },
        },
        {
            "timestamp": "2025-09-01T08:00:02Z",
            "type": "response_item",
            "payload": {
                "type": "function_call",
                "name": "shell",
                "call_id": "c1",
                "arguments": json.dumps({"command": ["bash", "-lc", "grep -rn nginx: deploy/"]}),
            },
        },
        {
            "timestamp": "2025-09-01T08:00:03Z",
            "type": "response_item",
            "payload": {
                "type": "function_call_output",
                "call_id": "c1",
                "output": "deploy/web.yaml:3: image: nginx:1.25",
            },
        },
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")


def test_import_claude_code_and_codex_histories(project: Path, tmp_path: Path, keel: Callable[..., KeelRun]) -> None:
    home = Path(os.environ["HOME"])
    _claude_code_transcript(home / ".claude" / "projects" / "-work-app" / "s-1.jsonl", "s-1")
    _codex_rollout(home / ".codex" / "sessions" / "2025" / "09" / "01" / "rollout-1.jsonl")

    run = keel("mem", "import", "claude-code")
    assert run.code == 0, run.stderr
    assert "imported 4 new records from 1 files; skipped 1 unreadable lines" in run.stdout
    assert keel("mem", "import", "claude-code").stdout.startswith("imported 0 new records")  # idempotent
    run = keel("mem", "import", "codex")
    assert run.code == 0 and "imported 2 new records" in run.stdout, run.stdout + run.stderr

    hits = keel("mem", "search", "flaky login test", "--json").json()
    assert hits[0]["session"] == "s-1"
    obs = keel("mem", "search", "pytest test_login", "--type", "tool_observation", "--json").json()
    entry = keel("mem", "get", obs[0]["id"], "--json").json()[0]
    assert entry["metadata"]["command"] == "pytest tests/test_login.py" and FAKE_KEY not in json.dumps(entry)
    nginx = keel("mem", "search", "nginx image", "--json").json()
    assert nginx[0]["session"] == "codex-sess-1"
    assert keel("mem", "timeline", obs[0]["id"]).stdout.count("\n") >= 2
    missing = keel("mem", "import", "jsonl", str(tmp_path / "nope.jsonl"))
    assert missing.code == 1 and "does not exist" in missing.stderr


def test_mcp_server_serves_the_three_layers_without_secrets(project: Path, keel: Callable[..., KeelRun]) -> None:
    pid = project_id(project)
    seed = project / "seed.jsonl"
    seed.write_text(
        "\n".join(
            json.dumps({"id": f"m{i}", "type": "fact", "project": pid, "session": "s", "text": text})
            for i, text in enumerate(
                ["The release train leaves on Thursdays.", f"Release signing uses key {FAKE_KEY}.", "Lunch is at noon."]
            )
        )
        + "\n"
    )
    assert keel("mem", "import", "jsonl", str(seed)).code == 0

    import anyio

    async def talk() -> list[str]:
        params = StdioServerParameters(command=KEEL, args=["mem", "mcp"], cwd=str(project), env=dict(os.environ))
        out: list[str] = []
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            tools = {t.name for t in (await session.list_tools()).tools}
            assert tools == {"search", "timeline", "get"}
            for name, args in [
                ("search", {"query": "release signing key"}),
                ("timeline", {"id": "m1"}),
                ("get", {"ids": ["m0", "m1"]}),
            ]:
                result: Any = await session.call_tool(name, args)
                out.append("".join(getattr(c, "text", "") for c in result.content))
        return out

    search, timeline, get = anyio.run(talk)
    assert json.loads(search)[0]["id"] in {"m1", "m0"}
    assert [h["id"] for h in json.loads(timeline)] == ["m0", "m1", "m2"]
    assert "Thursdays" in get and "[REDACTED" in get
    for payload in (search, timeline, get):
        assert FAKE_KEY not in payload


def test_markdown_mirror_round_trip(project: Path, keel: Callable[..., KeelRun]) -> None:
    pid = project_id(project)
    seed = project / "seed.jsonl"
    seed.write_text(json.dumps({"id": "f1", "type": "fact", "project": pid, "text": "CI runs on Node 18."}) + "\n")
    assert keel("mem", "import", "jsonl", str(seed)).code == 0
    assert keel("mem", "mirror").code == 0
    mirror = project / ".keel" / "memory" / "MEMORY.md"
    text = mirror.read_text()
    assert "- [f1] CI runs on Node 18." in text
    mirror.write_text(
        text.replace("Node 18", "Node 22").replace("## lesson", "- Deploys need a green CI.\n\n## lesson")
    )
    run = keel("mem", "sync")
    assert run.code == 0 and "1 entries superseded, 1 added" in run.stdout, run.stderr
    hits = keel("mem", "search", "CI Node", "--json").json()
    assert "Node 22" in hits[0]["summary"] and all("Node 18" not in h["summary"] for h in hits)
    assert keel("mem", "get", "f1", "--json").json()[0]["superseded_by"]
    assert shutil.which(KEEL) or Path(KEEL).exists()


def test_sync_of_an_edited_entry_rewrites_its_summary_and_lessons(project: Path, keel: Callable[..., KeelRun]) -> None:
    pid = project_id(project)
    lesson = {
        "id": "l1",
        "type": "lesson",
        "project": pid,
        "text": "Failed at bugfix (score 0.20): fix the login test\nLesson: restart redis before the suite",
        "metadata": {
            "task_type": "bugfix",
            "success": False,
            "score": 0.2,
            "lessons": ["restart redis before the suite"],
            "summary": "restart redis before the suite",
        },
    }
    summary = {
        "id": "s1",
        "type": "session_summary",
        "project": pid,
        "session": "sess-a",
        "text": "Worked on the payment webhook retries.",
        "metadata": {"summary": "Worked on the payment webhook retries."},
    }
    seed = project / "seed.jsonl"
    seed.write_text(json.dumps(lesson) + "\n" + json.dumps(summary) + "\n")
    assert keel("mem", "import", "jsonl", str(seed)).code == 0
    assert keel("mem", "mirror").code == 0
    mirror = project / ".keel" / "memory" / "MEMORY.md"
    text = mirror.read_text()
    mirror.write_text(text.replace("restart redis", "flush memcached").replace("payment webhook", "invoice webhook"))
    run = keel("mem", "sync")
    assert run.code == 0 and "2 entries superseded" in run.stdout, run.stderr

    hits = keel("mem", "search", "memcached suite", "--type", "lesson", "--json").json()
    assert hits and "flush memcached before the suite" in hits[0]["summary"], hits
    assert all("redis" not in h["summary"] for h in hits)
    new = keel("mem", "get", hits[0]["id"], "--json").json()[0]
    assert new["metadata"]["lessons"] == ["flush memcached before the suite"]
    assert new["metadata"]["success"] is False and new["metadata"]["task_type"] == "bugfix"
    assert new["text"].splitlines() == [
        "Failed at bugfix (score 0.20): fix the login test",
        "Lesson: flush memcached before the suite",
    ]
    hits = keel("mem", "search", "invoice webhook", "--type", "session_summary", "--json").json()
    assert hits and "invoice webhook" in hits[0]["summary"] and "payment" not in hits[0]["summary"]
    assert keel("mem", "get", hits[0]["id"], "--json").json()[0]["session"] == "sess-a"


def test_reindex_through_the_cli(
    project: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    seed = project / "seed.jsonl"
    rows = [
        {"id": "m1", "type": "fact", "project": project_id(project), "session": "s", "text": "what did they do there"},
        {"id": "m2", "type": "fact", "project": project_id(project), "session": "s", "text": "the build is green"},
    ]
    seed.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert keel("mem", "--embedder", "none", "import", "jsonl", str(seed)).code == 0

    none = keel("mem", "--embedder", "none", "reindex")
    assert none.code == 2 and "no embedder to reindex with" in none.stderr

    server = fake_llm({"steps": []})
    env = wire_env(server, "openai")
    mismatch = keel("mem", "--embedder", "openai:fake-embed", "stats", env=env)
    assert mismatch.code == 0, mismatch.stderr  # a store without vectors takes any embedder
    done = keel("mem", "--embedder", "openai:fake-embed", "reindex", env=env)
    assert done.code == 0, done.stderr
    assert done.stdout.strip() == "reindexed 2 entries with openai:fake-embed"
    other = keel("mem", "--embedder", "openai:other-model", "stats", env=env)
    assert other.code == 1 and "keel mem reindex" in other.stderr and "Traceback" not in other.stderr
    found = keel("mem", "--embedder", "openai:fake-embed", "search", "what did they do there", "--json", env=env)
    assert [h["id"] for h in found.json()][:1] == ["m1"]
    stats = keel("mem", "--embedder", "openai:fake-embed", "stats", "--json", env=env).json()
    assert stats["vectors"] == 2 and stats["embedder"] == "openai:fake-embed"


def test_web_dashboard_serves_live_search_and_sessions_without_secrets(
    project: Path, keel: Callable[..., KeelRun]
) -> None:
    pid = project_id(project)
    first = [
        {"id": "w1", "type": "user_prompt", "project": pid, "session": "s-web", "text": "deploy the billing service"},
        {
            "id": "w2",
            "type": "tool_observation",
            "project": pid,
            "session": "s-web",
            "text": f"$ ./deploy.sh\nusing token {FAKE_KEY}\ndeployed billing v2",
            "metadata": {"tool": "Bash", "command": "./deploy.sh"},
        },
    ]
    seed = project / "first.jsonl"
    seed.write_text("".join(json.dumps(r) + "\n" for r in first))
    assert keel("mem", "--embedder", "none", "import", "jsonl", str(seed)).code == 0

    proc = subprocess.Popen(
        [KEEL, "mem", "--embedder", "none", "web", "--port", "0"],
        cwd=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("keel memory dashboard on http://127.0.0.1:"), line
        url = line.split()[-1].rstrip("/")
        with httpx.Client(base_url=url, timeout=30) as http:
            deadline = time.monotonic() + 60
            while True:  # uvicorn is up a moment after the socket is bound
                try:
                    page = http.get("/")
                    break
                except httpx.ConnectError:
                    assert time.monotonic() < deadline, "the dashboard never answered"
                    time.sleep(0.1)
            assert page.status_code == 200 and "keel memory" in page.text
            hits = http.get("/api/search", params={"q": "billing deploy"}).json()
            assert {h["id"] for h in hits} == {"w1", "w2"}
            assert http.get("/api/search", params={"q": "x", "type": "nonsense"}).status_code == 400
            sessions = http.get("/api/sessions").json()
            assert sessions[0]["session"] == "s-web" and sessions[0]["entries"] == 2
            assert sessions[0]["prompt"] == "deploy the billing service"
            entries = http.get("/api/session", params={"id": "s-web"}).json()
            assert [e["id"] for e in entries] == ["w1", "w2"] and "deployed billing v2" in entries[1]["text"]
            got = http.get("/api/get", params={"ids": "w2"}).json()
            # DNS rebinding: a page on another origin resolving to 127.0.0.1 is refused
            assert http.get("/api/stats", headers={"Host": "attacker.example"}).status_code == 400

            with http.stream("GET", "/api/stream") as live:
                seen: list[dict[str, Any]] = []
                lines = live.iter_lines()
                for raw in lines:  # the backlog first, then a ": live" comment
                    if raw.startswith("data: "):
                        seen.append(json.loads(raw[6:]))
                    if raw == ": live":
                        break
                assert [e["id"] for e in seen] == ["w1", "w2"]
                later = project / "later.jsonl"
                later.write_text(
                    json.dumps({"id": "w3", "type": "fact", "project": pid, "session": "s-web", "text": "rolled back"})
                )
                assert keel("mem", "--embedder", "none", "import", "jsonl", str(later)).code == 0
                for raw in lines:
                    if raw.startswith("data: "):
                        assert json.loads(raw[6:])["id"] == "w3"
                        break
        everything = json.dumps([hits, sessions, entries, got, seen])
        assert FAKE_KEY not in everything and "deployed billing v2" in everything
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert "Traceback" not in (proc.stderr.read() if proc.stderr else "")


def test_a_search_with_1000_pending_entries_embeds_only_its_query(
    project: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    """A search never waits on an embedding model: entries without a vector are found by their
    words (it used to embed 32 of them first: 11-34 s on a loaded machine); `keel mem embed`
    gives them vectors."""
    seed = project / "many.jsonl"
    rows = [
        {"id": f"e{i}", "type": "fact", "project": project_id(project), "session": f"s{i // 10}", "text": f"note {i}"}
        for i in range(1000)
    ]
    seed.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert keel("mem", "--embedder", "none", "import", "jsonl", str(seed)).code == 0
    server = fake_llm({"steps": []})
    env = wire_env(server, "openai")
    mem = ("mem", "--embedder", "openai:fake-embed")
    down = keel(*mem, "embed", env={"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "sk-fake"})
    assert down.code == 1 and "1000 entries still wait for a vector" in down.stderr
    assert "Traceback" not in down.stderr

    found = keel(*mem, "search", "note 417", "--json", env=env)
    assert found.code == 0, found.stderr
    assert found.json()[0]["id"] == "e417"  # found by its words
    assert [r["input"] for r in server.embedding_requests] == [["note 417"]]  # the query, nothing else
    assert "1000 entries have no vector yet" in found.stderr and "keel mem embed" in found.stderr
    stats = keel(*mem, "stats", "--json", env=env).json()
    assert stats["vectors"] == 0 and stats["pending_vectors"] == 1000
    done = keel(*mem, "embed", env=env)
    assert done.code == 0, done.stderr
    assert done.stdout.strip() == "embedded 1000 pending entries with openai:fake-embed"
    stats = keel(*mem, "stats", "--json", env=env).json()
    assert stats["vectors"] == 1000 and stats["pending_vectors"] == 0
    again = keel(*mem, "search", "note 417", env=env)
    assert again.code == 0 and again.stderr == ""


def test_a_postgres_error_is_one_line(
    project: Path, request: pytest.FixtureRequest, keel: Callable[..., KeelRun]
) -> None:
    import psycopg

    dsn = postgres_dsn(request.getfixturevalue("pg_root"))
    with psycopg.connect(dsn, autocommit=True) as db:  # someone else's table under keel's name
        db.execute("CREATE TABLE keel_events (name TEXT)")
    run = keel("mem", "--store", dsn, "--embedder", "none", "stats")
    assert run.code == 1 and run.stderr.startswith("keel mem: ") and "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
