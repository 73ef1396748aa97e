"""Capture: the durable outbox (kill -9, retries, dead letters) and memory through real `keel` sessions."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkeel.memory import open_store, resolve_embedder
from agentkeel.memory.capture import MAX_ATTEMPTS, Outbox, observe, outbox_path
from agentkeel.memory.project import project_id
from agentkeel.models.fake.server import FakeLLMServer
from conftest import KeelRun, session_files, wire_env

WRITER = r"""
import sys, time
from pathlib import Path
from agentkeel.memory import open_store, resolve_embedder
from agentkeel.memory.capture import Outbox
root = Path(sys.argv[1])
store = open_store(root / "mem.db", embedder="none")
outbox = Outbox(root / "outbox.db", store)
i = 0
while True:
    batch = [{"id": f"r{i + j}", "type": "tool_observation", "project": "p", "session": "s",
              "text": f"observation number {i + j} " + "x" * 200} for j in range(5)]
    for rid in outbox.put_durable(batch):
        print(rid, flush=True)          # acknowledged: on disk
    outbox.drain()                       # indexing, which the kill may cut short
    i += 5
"""


def test_kill_9_during_capture_loses_nothing_acknowledged(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    acked: list[str] = []
    assert proc.stdout is not None
    while len(acked) < 400:
        line = proc.stdout.readline()
        assert line, "writer died early"
        acked.append(line.strip())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    acked += [line.strip() for line in proc.stdout.read().splitlines() if line.strip()]

    store = open_store(tmp_path / "mem.db", embedder="none")
    outbox = Outbox(tmp_path / "outbox.db", store)
    outbox.drain()  # the outbox resumes where the killed process stopped
    found = {e.id for e in store.export()}
    assert set(acked) <= found
    assert outbox.counts() == {"pending": 0, "dead": 0}
    assert len(found) == len({e.id for e in store.export()})  # no duplicates
    outbox.close()
    store.close()


def test_unreachable_store_retries_then_dead_letters_then_recovers(tmp_path: Path) -> None:
    down = "postgresql://keel:fake-password@127.0.0.1:9/nowhere?connect_timeout=1"
    outbox = Outbox(tmp_path / "outbox.db", lambda: open_store(down, embedder="none"), retry_base_s=0.0)
    outbox.put_durable([{"id": "keep-me", "type": "fact", "text": "never silently dropped"}])
    for _ in range(MAX_ATTEMPTS):
        assert outbox.drain() == 0
    assert outbox.counts() == {"pending": 0, "dead": 1}
    assert outbox.dead_letters()[0]["id"] == "keep-me"
    assert "fake-password" not in json.dumps(outbox.dead_letters())
    outbox.close()

    store = open_store(tmp_path / "mem.db", embedder="none")
    again = Outbox(tmp_path / "outbox.db", store)
    assert again.retry_dead() == 1 and again.drain() == 1
    assert [e.id for e in store.export()] == ["keep-me"]
    again.close()
    store.close()


def test_observations_are_compressed_per_tool() -> None:
    content = {"pattern": "TODO", "output_mode": "content"}
    text, meta = observe("Grep", content, "a.py:1:x\na.py:9:y\nb.py:2:z", False, {"match_count": 3})
    assert meta["match_count"] == 3 and meta["files"] == ["a.py", "b.py"] and "3 matches in 2 files" in text
    text, meta = observe("Grep", {"pattern": "TODO"}, "Found 2 files\nsrc/a.py\nsrc/b.py", False, {"match_count": 2})
    assert meta["match_count"] == 2 and meta["files"] == ["src/a.py", "src/b.py"] and "2 files" in text
    text, meta = observe("Bash", {"command": "pytest"}, "line\n" * 5000 + "exit code 1", True)
    assert meta["success"] is False and meta["command"] == "pytest" and "chars omitted" in text and len(text) < 1500
    text, meta = observe("Read", {"file_path": "/p/app.py"}, "1\n2\n3", False)
    assert meta == {"tool": "Read", "success": True, "file_path": "/p/app.py", "file_type": "py", "line_count": 3}


def test_an_empty_search_is_recorded_as_no_matches() -> None:
    for mode, body in ((None, "No files found"), ("content", "No matches found"), ("count", "No matches found")):
        tool_input = {"pattern": "nowhere", **({"output_mode": mode} if mode else {})}
        text, meta = observe("Grep", tool_input, body, False, {"pattern": "nowhere", "match_count": 0})
        assert meta["match_count"] == 0 and meta["files"] == [], (mode, meta)
        assert "no matches" in text and "No matches found" not in text and "No files found" not in text
    text, meta = observe("Glob", {"pattern": "*.zz"}, "No files found", False, {"match_count": 0})
    assert meta["match_count"] == 0 and meta["files"] == [] and "no files" in text


def test_facts_come_from_the_tools_metadata_not_its_output() -> None:
    # the output says "Exit code 1" (the command printed it); the tool's metadata says 0
    _, meta = observe("Bash", {"command": "cat log"}, "Exit code 1", False, {"command": "cat log", "exit_code": 0})
    assert meta["exit_code"] == 0
    _, meta = observe("Bash", {"command": "sleep 9"}, "", True, {"exit_code": -9, "timed_out": True})
    assert meta["exit_code"] == -9 and meta["timed_out"] is True
    # a Grep whose output was cut by head_limit: the count is the tool's, not the lines shown
    text, meta = observe("Grep", {"pattern": "x", "head_limit": 1}, "Found 40 files\na.py", False, {"match_count": 40})
    assert meta["match_count"] == 40 and meta["files"] == ["a.py"] and "40 files" in text
    _, meta = observe("Read", {"file_path": "/p/a.py"}, "     1\tx\n", False, {"file_path": "/p/a.py", "lines": 120})
    assert meta["line_count"] == 120
    _, meta = observe(
        "WebFetch", {"url": "http://127.0.0.1/x"}, "gone", True, {"url": "http://127.0.0.1/x", "status": 404}
    )
    assert meta["status"] == 404


def test_a_session_records_what_its_tools_reported(
    project: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    (project / "a.py").write_text("print('hello')\n")
    server = fake_llm(
        {
            "steps": [
                {
                    "tool_calls": [
                        {"name": "Grep", "input": {"pattern": "zebra_never_here"}},
                        {"name": "Grep", "input": {"pattern": "zebra_never_here", "output_mode": "content"}},
                        {"name": "Bash", "input": {"command": "echo 'Exit code 7'; exit 3"}},
                    ]
                },
                "done",
            ]
        }
    )
    run = keel("-p", "look around", "--permission-mode", "bypassPermissions", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    exported = [json.loads(x) for x in keel("mem", "export").stdout.splitlines() if x.strip()]
    observed = [e for e in exported if e["type"] == "tool_observation"]
    greps = [e for e in observed if e["metadata"]["tool"] == "Grep"]
    assert len(greps) == 2
    for grep in greps:
        assert grep["metadata"]["match_count"] == 0 and grep["metadata"]["files"] == [], grep
        assert "no matches" in grep["text"] and "1 matches" not in grep["text"]
    bash = next(e for e in observed if e["metadata"]["tool"] == "Bash")
    assert bash["metadata"]["exit_code"] == 3 and bash["metadata"]["success"] is False


def test_project_identity_is_stable_across_worktrees(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-c", "user.email=t@example.invalid", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q", str(repo)], check=True)
    (repo / "f").write_text("x")
    subprocess.run([*git, "-C", str(repo), "add", "f"], check=True)
    subprocess.run([*git, "-C", str(repo), "commit", "-qm", "init"], check=True)
    subprocess.run([*git, "-C", str(repo), "worktree", "add", "-q", str(tmp_path / "wt"), "-b", "feature"], check=True)
    (repo / "sub").mkdir()
    assert project_id(repo) == project_id(tmp_path / "wt") == project_id(repo / "sub")
    assert project_id(repo).startswith("repo-")
    assert project_id(repo, override="shared-name") == "shared-name"
    assert project_id(tmp_path / "wt") != project_id(tmp_path)


def _requests(server: FakeLLMServer) -> list[dict[str, Any]]:
    return [r["body"] for r in server.cursor.requests]


def test_sessions_remember_through_keel(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    (project / "notes.txt").write_text("The staging database runs on port 6543.\napi_key = sk-FAKEFAKEFAKEFAKEFAKE00\n")
    first = fake_llm(
        {
            "steps": [
                {
                    "text": "Reading.",
                    "tool_calls": [{"name": "Read", "input": {"file_path": str(project / "notes.txt")}}],
                },
                "The staging database port is 6543.",
            ]
        }
    )
    run = keel(
        "-p",
        "which port does the staging database use?",
        "--permission-mode",
        "bypassPermissions",
        env=wire_env(first, "anthropic"),
    )
    assert run.code == 0, run.stderr

    found = keel("mem", "search", "staging database port", "--json")
    assert found.code == 0, found.stderr
    hits = found.json()
    kinds = {h["type"] for h in hits}
    assert {"tool_observation", "user_prompt"} <= kinds
    exported = keel("mem", "export")
    assert "6543" in exported.stdout and "sk-FAKEFAKEFAKEFAKEFAKE00" not in exported.stdout
    summaries = [json.loads(x) for x in exported.stdout.splitlines() if '"session_summary"' in x]
    assert summaries and "staging database" in summaries[0]["text"]

    second = fake_llm({"steps": ["Port 6543, from memory."]})
    run = keel("-p", "remind me: staging database port?", env=wire_env(second, "anthropic"))
    assert run.code == 0, run.stderr
    body = json.dumps(_requests(second)[0])
    assert "<memory-context" in body and "6543" in body and "sk-FAKEFAKEFAKEFAKEFAKE00" not in body
    stats = keel("mem", "stats", "--json").json()
    assert stats["outbox"] == {"pending": 0, "dead": 0} and stats["by_type"]["user_prompt"] == 2


def test_memory_tools_are_offered_and_work(
    project: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    seed = project / "seed.jsonl"
    fact = {"id": "fact-1", "type": "fact", "project": project_id(project), "text": "Deploys go through Argo CD."}
    seed.write_text(json.dumps(fact) + "\n")
    assert keel("mem", "import", "jsonl", str(seed)).code == 0
    server = fake_llm(
        {
            "steps": [
                {"tool_calls": [{"name": "MemorySearch", "input": {"query": "how do deploys work"}}]},
                {"tool_calls": [{"name": "MemoryGet", "input": {"ids": ["fact-1"]}}]},
                "Argo CD.",
            ]
        }
    )
    run = keel("-p", "how do we deploy?", "--output-format", "json", env=wire_env(server, "openai"))
    assert run.code == 0, run.stderr
    requests = _requests(server)
    assert any(t.get("function", {}).get("name") == "MemorySearch" for t in requests[0]["tools"])
    later = json.dumps(requests[2])
    assert "[fact-1]" in json.dumps(requests[1]) and "Deploys go through Argo CD." in later


def test_memory_can_be_switched_off(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    (project / ".keel").mkdir()
    (project / ".keel" / "settings.json").write_text(json.dumps({"memory": {"enabled": False}}))
    assert keel("trust").code == 0
    server = fake_llm({"steps": ["ok"]})
    assert keel("-p", "hello", env=wire_env(server, "anthropic")).code == 0
    assert not (tmp_path / "keelhome" / "memory" / "outbox.db").exists()
    assert "MemorySearch" not in json.dumps(_requests(server)[0]["tools"])


def test_capture_never_slows_or_breaks_the_session_when_memory_is_broken(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    home = tmp_path / "keelhome" / "memory"
    home.mkdir(parents=True)
    (home / "memory.db").write_bytes(b"this is not a database" * 100)
    server = fake_llm({"steps": ["still answering"]})
    started = time.monotonic()
    run = keel("-p", "hello", env=wire_env(server, "anthropic"))
    assert run.code == 0 and "still answering" in run.stdout, run.stderr
    assert "Traceback" not in run.stderr
    assert time.monotonic() - started < 60
    bad = keel("mem", "stats")
    assert bad.code == 1 and bad.stderr.startswith("keel mem:") and "Traceback" not in bad.stderr


def test_a_session_leaves_a_lesson_that_comes_back_for_a_similar_task(
    project: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    calc = project / "calc.py"
    calc.write_text("def add(a, b):\n    return a - b\n")
    (project / "test_calc.py").write_text("from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n")
    check = f"{sys.executable} -m pytest -q -p no:cacheprovider test_calc.py"
    first = fake_llm(
        {
            "steps": [
                {"tool_calls": [{"name": "Bash", "input": {"command": check}}]},
                {"tool_calls": [{"name": "Read", "input": {"file_path": str(calc)}}]},
                {
                    "tool_calls": [
                        {
                            "name": "Edit",
                            "input": {"file_path": str(calc), "old_string": "a - b", "new_string": "a + b"},
                        }
                    ]
                },
                {"tool_calls": [{"name": "Bash", "input": {"command": check}}]},
                "Fixed: add subtracted instead of adding.",
            ]
        }
    )
    run = keel(
        "-p", "fix the failing test in calc", "--permission-mode", "bypassPermissions", env=wire_env(first, "anthropic")
    )
    assert run.code == 0, run.stderr
    assert calc.read_text() == "def add(a, b):\n    return a + b\n"

    lessons = [json.loads(x) for x in keel("mem", "export").stdout.splitlines() if '"lesson"' in x]
    assert len(lessons) == 1, lessons
    lesson = lessons[0]
    meta = lesson["metadata"]
    assert meta["task_type"] == "bugfix" and meta["success"] is True and 0.5 <= meta["score"] <= 1.0
    assert any("verified with" in s and "pytest" in s for s in meta["strengths"])
    assert any(w.startswith("1 tool call(s) failed") for w in meta["weaknesses"])
    assert any("Bash failed" in item and "exit 1" in item for item in meta["lessons"])

    second = fake_llm({"steps": ["On it."]})
    run = keel("-p", "fix the failing test in the parser", env=wire_env(second, "anthropic"))
    assert run.code == 0, run.stderr
    body = json.dumps(_requests(second)[0])
    assert "Lessons from similar tasks" in body and f"[{lesson['id']}]" in body


def test_agent_memory_files_are_injected_at_session_start(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    user = tmp_path / "keelhome" / "agents" / "main" / "MEMORY.md"
    shared = project / ".keel" / "agents" / "main" / "MEMORY.md"
    local = project / ".keel" / "agents" / "main" / "MEMORY.local.md"
    for path, text in ((user, "Prefer small commits."), (shared, "Docs live in docs/."), (local, "My DB is on 5433.")):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")
    server = fake_llm({"steps": ["noted", "still noted"]})
    run = keel("-p", "hello", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    body = json.dumps(_requests(server)[0])
    order = [body.index(s) for s in ("Prefer small commits.", "Docs live in docs/.", "My DB is on 5433.")]
    assert order == sorted(order) and "MEMORY.md (main)" in body


def test_sessions_index_lexically_and_searches_embed_only_their_query(
    project: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    (project / ".keel").mkdir()
    (project / ".keel" / "settings.json").write_text(json.dumps({"memory": {"embedder": "openai:fake-embed"}}))
    assert keel("trust").code == 0
    server = fake_llm({"steps": ["They went to the lake and did some fishing there."]})
    env = wire_env(server, "openai")
    assert keel("-p", "tell me about the trip", env=env).code == 0
    assert server.embedding_requests == []  # the session itself never embedded anything
    before = keel("mem", "--embedder", "none", "stats", "--json").json()
    assert before["vectors"] == 0 and before["entries"] >= 2

    query = ("mem", "--embedder", "openai:fake-embed", "search", "what did they do there", "--json")
    found = keel(*query, env=env)
    assert found.code == 0, found.stderr
    assert found.json() == []  # stopwords only, and no vectors yet: nothing, at once
    assert [r["input"] for r in server.embedding_requests] == [["what did they do there"]]
    assert keel("mem", "--embedder", "openai:fake-embed", "embed", env=env).code == 0
    found = keel(*query, env=env)
    assert "assistant_response" in {h["type"] for h in found.json()}  # the vectors found it
    after = keel("mem", "--embedder", "openai:fake-embed", "stats", "--json", env=env).json()
    assert after["vectors"] == after["entries"]


def test_a_model_written_summary_is_opt_in_budgeted_and_announced(
    project: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    (project / ".keel").mkdir()
    settings = {"memory": {"summary": "model", "summaryMaxTokens": 120}}
    (project / ".keel" / "settings.json").write_text(json.dumps(settings))
    assert keel("trust").code == 0
    server = fake_llm({"steps": ["The flag is --verbose.", "Asked which flag prints more; answered --verbose."]})
    run = keel(
        "-p",
        "which flag prints more?",
        "--output-format",
        "stream-json",
        "--verbose",
        env=wire_env(server, "anthropic"),
    )
    assert run.code == 0, run.stderr
    notices = [x["message"] for x in run.lines() if x.get("subtype") == "notice"]
    assert any("session summary written by" in n and "output tokens" in n for n in notices)  # never a hidden cost
    logged = "".join(f.read_text() for f in session_files(project.parent / "keelhome"))
    assert "session summary written by" in logged
    again = fake_llm({"steps": ["Yes.", "Asked again; answered yes."]})
    text = keel("-p", "still --verbose?", "--verbose", env=wire_env(again, "anthropic"))
    assert text.code == 0 and "keel: memory: session summary written by" in text.stderr  # text mode, --verbose

    last = _requests(server)[-1]
    assert last["max_tokens"] == 120 and not last.get("tools") and "long-term memory" in json.dumps(last["system"])
    assert "which flag prints more?" in json.dumps(last["messages"])
    summaries = [json.loads(x) for x in keel("mem", "export").stdout.splitlines() if '"session_summary"' in x]
    assert summaries[0]["text"] == "Asked which flag prints more; answered --verbose."
    meta = summaries[0]["metadata"]
    assert meta["by"] == "model" and meta["output_tokens"] > 0 and meta["extractive"].startswith("Asked:")


def test_a_failing_model_summary_keeps_the_extractive_one(
    project: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    (project / ".keel").mkdir()
    (project / ".keel" / "settings.json").write_text(json.dumps({"memory": {"summary": "model"}}))
    assert keel("trust").code == 0
    server = fake_llm({"steps": ["Fine.", {"error": {"status": 400, "message": "summaries not welcome"}}]})
    run = keel("-p", "hello there", env=wire_env(server, "openai"))
    assert run.code == 0 and "Fine." in run.stdout, run.stderr
    assert "Traceback" not in run.stderr
    summaries = [json.loads(x) for x in keel("mem", "export").stdout.splitlines() if '"session_summary"' in x]
    assert summaries and summaries[0]["metadata"]["by"] == "extractive"
    assert summaries[0]["text"].startswith("Asked: hello there")


def test_keel_mem_uses_the_store_the_project_settings_name(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    team = tmp_path / "team-memory.db"
    (project / ".keel").mkdir()
    (project / ".keel" / "settings.json").write_text(json.dumps({"memory": {"store": str(team), "embedder": "none"}}))
    assert keel("trust").code == 0
    server = fake_llm({"steps": ["Noted: releases are cut on Thursdays."]})
    assert keel("-p", "when are releases cut?", env=wire_env(server, "anthropic")).code == 0
    assert team.exists() and not (tmp_path / "keelhome" / "memory" / "memory.db").exists()

    found = keel("mem", "search", "releases Thursdays", "--json")  # no --store: the project's settings say where
    assert found.code == 0, found.stderr
    assert "assistant_response" in {h["type"] for h in found.json()}
    assert keel("mem", "stats", "--json").json()["location"] == str(team)


def test_each_store_has_its_own_outbox(tmp_path: Path, monkeypatch: Any) -> None:
    home = tmp_path / "keelhome"
    default = outbox_path(home, str(home / "memory" / "memory.db"))
    assert default == home / "memory" / "outbox.db"
    monkeypatch.chdir(tmp_path)
    other = outbox_path(home, "team.db")
    assert other != default and other == outbox_path(home, str(tmp_path / "team.db"))  # one file, however spelt
    assert outbox_path(home, "postgresql://u@h/db") not in (default, other)


def test_the_environment_refines_only_the_default_embedder(monkeypatch: Any) -> None:
    monkeypatch.setenv("KEEL_MEMORY_EMBEDDER", "none")
    assert resolve_embedder("auto") is None and resolve_embedder(None) is None
    monkeypatch.setenv("KEEL_MEMORY_EMBEDDER", "openai:from-env")
    chosen = resolve_embedder("auto")
    assert chosen is not None and chosen.name == "openai:from-env"
    assert resolve_embedder("none") is None  # an explicit choice wins
