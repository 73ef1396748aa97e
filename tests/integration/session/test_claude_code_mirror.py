"""The Claude Code-format mirror of a session (agentkeel.session.mirror): the Agent SDK's own
session readers find keel's sessions (#34 item 13).

Oracle (2026-11-28): ``claude -p "run two steps" --output-format stream-json --verbose
--allowedTools Bash`` (Claude Code 2.1.328) over a scripted model wrote
``~/.claude/projects/<cwd with every non-alphanumeric as ->/<session>.jsonl``; its user and
assistant entries are /work/shared/reference/claude-code-2.1.328-session.jsonl, whose fields the
mirror's entries carry (the ones the readers use and the ones a user sees). With ``--session-mirror``
Claude Code also prints ``{"type": "transcript_mirror", "filePath", "entries"}`` lines, which the
Python SDK's SessionStore batcher takes off stdout. Before: keel wrote no such file and refused
``--session-mirror``."""

from __future__ import annotations

import json
import re
import stat
from pathlib import Path
from typing import Any

from claude_agent_sdk import get_session_messages, list_sessions

from agentkeel.models.fake.server import FakeLLMServer
from kit import KeelRun, wire_env

REFERENCE = Path("/work/shared/reference/claude-code-2.1.328-session.jsonl")
SECRET = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"  # a fake GitHub token
STEPS = [{"tool_calls": [{"name": "Bash", "input": {"command": "echo step-0"}}]}, "two steps done"]


def stream_run(keel: Any, server: FakeLLMServer, prompt: str, *flags: str) -> KeelRun:
    line = {"type": "user", "message": {"role": "user", "content": prompt}, "parent_tool_use_id": None}
    return keel(
        "-p",
        "--input-format",
        "stream-json",
        "--output-format",
        "stream-json",
        "--verbose",
        "--allowedTools",
        "Bash",
        *flags,
        env=wire_env(server, "anthropic"),
        stdin=json.dumps(line) + "\n",
    )


def mirror_files(home: Path) -> list[Path]:
    return sorted((home / ".claude" / "projects").rglob("*.jsonl"))


def test_the_sdks_session_readers_find_a_keel_session(keel: Any, fake_llm: Any, project: Path, tmp_path: Path) -> None:
    run = stream_run(keel, fake_llm(STEPS), "run two steps")
    assert run.code == 0, run.stderr
    lines = run.lines()
    session_id = lines[-1]["session_id"]
    home = tmp_path / "userhome"
    [path] = mirror_files(home)
    assert path == home / ".claude" / "projects" / re.sub(r"[^A-Za-z0-9]", "-", str(project)) / f"{session_id}.jsonl"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600

    # the SDK's own readers, as an integrator calls them
    messages = get_session_messages(session_id, directory=str(project))
    streamed = [m["uuid"] for m in lines if m["type"] in ("assistant", "user")]
    assert [m.type for m in messages] == ["user", "assistant", "user", "assistant"]
    assert messages[0].message["content"] == "run two steps"
    assert [m.uuid for m in messages][1:] == streamed  # the stream's uuids: a host can match them
    assert messages[-1].message["content"][0]["text"] == "two steps done"
    assert session_id in [s.session_id for s in list_sessions(directory=str(project))]

    # field by field against Claude Code 2.1.328's transcript
    reference = [json.loads(x) for x in REFERENCE.read_text().splitlines()]
    ours = [json.loads(x) for x in path.read_text().splitlines()]
    shared = {
        "parentUuid",
        "isSidechain",
        "type",
        "message",
        "uuid",
        "timestamp",
        "userType",
        "entrypoint",
        "cwd",
        "sessionId",
        "version",
    }
    for kind in ("user", "assistant"):
        ref = next(e for e in reference if e["type"] == kind)
        mine = next(e for e in ours if e["type"] == kind)
        assert shared <= set(ref) and shared <= set(mine)
        assert set(mine["message"]) >= set(ref["message"]) - {"stop_details"}  # Claude Code's newest field
    assert [e["parentUuid"] for e in ours] == [None] + [e["uuid"] for e in ours[:-1]]
    assert all(e["sessionId"] == session_id and e["cwd"] == str(project) and not e["isSidechain"] for e in ours)
    results = [e for e in ours if e["type"] == "user" and isinstance(e["message"]["content"], list)]
    assert results[0]["sourceToolAssistantUUID"] == ours[1]["uuid"]


def test_the_mirror_is_redacted_as_keels_log_is(keel: Any, fake_llm: Any, project: Path, tmp_path: Path) -> None:
    """A fake token in the prompt, in the model's own words (which stream-json shows as said), in a
    tool result and inside a subagent: keel's log masks each, and so do the mirror's files and the
    ``transcript_mirror`` frames (storage, both). Before: the mirror took the events as readers get
    them, with the model's words unmasked."""
    agent = {"description": "d", "prompt": f"say {SECRET}", "subagent_type": "general-purpose"}
    steps = [
        {"text": f"the token is {SECRET}", "tool_calls": [{"name": "Bash", "input": {"command": f"echo {SECRET}"}}]},
        {"tool_calls": [{"name": "Agent", "input": {**agent, "run_in_background": False}}]},
        {"tool_calls": [{"name": "Bash", "input": {"command": f"echo {SECRET}"}}]},
        f"sub done {SECRET}",
        "noted",
    ]
    run = stream_run(keel, fake_llm(steps), f"my token is {SECRET}", "--session-mirror")
    assert run.code == 0, run.stderr
    home = tmp_path / "userhome" / ".claude" / "projects"
    mirrored = sorted(home.rglob("*.jsonl")) + sorted(home.rglob("*.meta.json"))
    assert len(mirrored) == 3  # the session, its subagent and the subagent's meta
    for path in mirrored:
        assert SECRET not in path.read_text(), path
    [main] = [p for p in mirrored if p.parent.parent == home]
    assert "my token is" in main.read_text()
    frames = [line for line in run.lines() if line["type"] == "transcript_mirror"]
    assert frames and SECRET not in json.dumps(frames)
    for log in (tmp_path / "keelhome" / "projects").rglob("*.jsonl"):
        assert SECRET not in log.read_text()


def test_session_mirror_prints_transcript_mirror_frames(
    keel: Any, fake_llm: Any, project: Path, tmp_path: Path
) -> None:
    """``--session-mirror`` (the SDKs pass it with a SessionStore): the same entries as the file,
    as ``transcript_mirror`` lines naming the file. Before: keel refused the flag (exit 2)."""
    run = stream_run(keel, fake_llm(STEPS), "run two steps", "--session-mirror")
    assert run.code == 0, run.stderr
    frames = [m for m in run.lines() if m["type"] == "transcript_mirror"]
    [path] = mirror_files(tmp_path / "userhome")
    assert frames and {f["filePath"] for f in frames} == {str(path)}
    assert [e for f in frames for e in f["entries"]] == [json.loads(x) for x in path.read_text().splitlines()]
