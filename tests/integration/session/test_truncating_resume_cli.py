"""``--resume-session-at`` / ``--resume-drops-turn`` (the Agent SDK's ``resume_session_at`` and
``resume_drops_turn``), as keel runs them: with ``-r`` and ``--fork-session`` (keel's log is
append-only: without a fork keel refuses in one line).

Oracle (2026-11-28, Claude Code 2.1.328): two turns with ``claude -p``, then ``claude -p -r SID
--fork-session --resume-session-at <turn 1's answer> --resume-drops-turn <a uuid that is not turn 2's
prompt> "Reply three" --output-format stream-json --verbose`` printed one result line
``{"subtype": "error_during_execution", "is_error": true, "errors": ["Resume rejected by
--resume-drops-turn: resuming at A would discard entries not attributable to turn B: range does not
start with the declared turn prompt; first discarded entry 1 [type=user, uuid=C]"]}``, the same
sentence on stderr, exit 1; with turn 2's prompt uuid the fork held turn 1 and the new turn only.
The SDK-level checks are the vendored tests/integration/sdk_e2e/vendored/test_truncating_resume.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentkeel.session.load import load_session
from kit import session_files, wire_env


def test_a_truncating_fork_keeps_turn_one_and_a_wrong_turn_is_refused(
    keel: Any, fake_llm: Any, project: Path, tmp_path: Path
) -> None:
    env = wire_env(fake_llm({"steps": ["one", "two", "three"], "loop": True}), "anthropic")
    first = keel("-p", "Reply one", "--output-format", "json", env=env)
    sid = first.json()["session_id"]
    assert keel("-p", "-r", sid, "Reply two", env=env).code == 0
    [log] = session_files(tmp_path / "keelhome")
    events = [e for e in load_session(log).events if e.type in ("user", "assistant")]
    keep, turn_two = events[1].uuid, events[2].uuid

    line = {"type": "user", "message": {"role": "user", "content": "Reply three"}, "parent_tool_use_id": None}
    stdin = json.dumps(line) + "\n"
    common = ["-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose", "-r", sid]
    wrong = keel(
        *common,
        "--fork-session",
        f"--resume-session-at={keep}",
        "--resume-drops-turn=" + "0" * 8 + "-0000-4000-8000-" + "0" * 12,
        env=env,
        stdin=stdin,
    )
    assert wrong.code != 0
    [result] = wrong.lines()
    assert result["type"] == "result" and result["is_error"] is True
    assert result["errors"][0].startswith("Resume rejected by --resume-drops-turn: ")
    assert f"first discarded entry 1 [type=user, uuid={turn_two}]" in result["errors"][0]
    assert "Resume rejected" in wrong.stderr
    assert len(session_files(tmp_path / "keelhome")) == 1  # nothing forked

    right = keel(
        *common,
        "--fork-session",
        f"--resume-session-at={keep}",
        f"--resume-drops-turn={turn_two}",
        env=env,
        stdin=stdin,
    )
    assert right.code == 0, right.stderr
    new_id = right.lines()[-1]["session_id"]
    assert new_id != sid
    forked = next(p for p in session_files(tmp_path / "keelhome") if p.stem == new_id)
    prompts = [e.message.text() for e in load_session(forked).events if e.type == "user"]
    assert prompts[0] == "Reply one" and prompts[1].startswith("Reply three") and len(prompts) == 2
    original = [e.message.text() for e in load_session(log).events if e.type == "user"]
    assert [p.split("<")[0].strip() for p in original] == ["Reply one", "Reply two"]  # untouched

    plain = keel(*common, f"--resume-session-at={keep}", env=env, stdin=stdin)
    assert plain.code == 2 and "need -r SESSION_ID and --fork-session" in plain.stderr
