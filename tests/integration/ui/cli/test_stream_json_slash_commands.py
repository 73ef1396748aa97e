"""Slash commands arriving as stream-json input, the only mode the Agent SDKs use (issue #34 item 3).

Recorded with Claude Code 2.1.328 in a project with ``.claude/commands/greet.md``, against
/work/shared/tools/fakellm.py, writing user lines to stdin one at a time (each after the last result)::

    ANTHROPIC_BASE_URL=http://127.0.0.1:PORT ANTHROPIC_API_KEY=sk-ant-fake-0000 HOME=$(mktemp -d) \\
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 claude -p --input-format stream-json \\
      --output-format stream-json --verbose --allowedTools Bash

- ``first prompt ALPHA``, ``/clear``, ``second prompt BETA``: after ``/clear`` it writes
  ``{"type": "conversation_reset", "new_conversation_id", "uuid", "trigger": "clear",
  "user_message_uuid", "timestamp", "session_id"}`` and a ``success`` result with ``num_turns 0``
  and no model request; the request for BETA does not hold ALPHA.
- ``/greet bob``: the model receives the command's body with ``$ARGUMENTS`` expanded, not the text
  ``/greet bob``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkeel.models.fake.server import FakeLLMServer
from kit import KeelRun, wire_env

Start = Callable[[Any], FakeLLMServer]
Keel = Callable[..., KeelRun]
STREAM = ["--input-format", "stream-json", "--output-format", "stream-json", "--verbose"]


def user(text: str) -> str:
    return json.dumps({"type": "user", "session_id": "", "message": {"role": "user", "content": text}}) + "\n"


def _bodies(server: FakeLLMServer) -> list[str]:
    return [json.dumps(r["body"]) for r in server.cursor.requests]


def test_clear_resets_the_conversation_and_says_so(fake_llm: Start, keel: Keel) -> None:
    server = fake_llm({"steps": ["first answer", "second answer"]})
    stdin = user("first prompt ALPHA-7") + user("/clear") + user("second prompt BETA-7")
    run = keel(*STREAM, stdin=stdin, env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    lines = run.lines()
    results = [line for line in lines if line["type"] == "result"]
    assert [r["subtype"] for r in results] == ["success"] * 3, results
    assert results[1]["num_turns"] == 0  # /clear asked the model nothing
    (reset,) = [line for line in lines if line["type"] == "conversation_reset"]
    assert reset["trigger"] == "clear" and reset["new_conversation_id"] and reset["session_id"]
    assert lines.index(reset) < lines.index(results[1])
    bodies = _bodies(server)
    assert len(bodies) == 2, "/clear reached the model"
    assert "ALPHA-7" in bodies[0]
    assert "BETA-7" in bodies[1] and "ALPHA-7" not in bodies[1], "the conversation was not reset"
    assert "/clear" not in bodies[1]


def test_a_custom_command_expands_instead_of_reaching_the_model_as_text(
    fake_llm: Start, keel: Keel, project: Path
) -> None:
    commands = project / ".claude" / "commands"
    commands.mkdir(parents=True)
    (commands / "greet.md").write_text("---\ndescription: greet\n---\nSay hello to $ARGUMENTS please, MARKER-CMD\n")
    server = fake_llm({"steps": ["hello bob"]})
    run = keel(*STREAM, stdin=user("/greet bob"), env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    (body,) = _bodies(server)
    assert "Say hello to bob please, MARKER-CMD" in body
    assert "/greet bob" not in json.dumps(json.loads(body)["messages"])
    (result,) = [line for line in run.lines() if line["type"] == "result"]
    assert result["subtype"] == "success" and result["result"] == "hello bob"


def test_a_plain_message_and_a_path_still_reach_the_model_as_typed(fake_llm: Start, keel: Keel) -> None:
    """Benign input is untouched: a message that is not a command line (``/usr/bin`` is a path)."""
    server = fake_llm({"steps": ["ok", "ok"]})
    stdin = user("what is in /usr/bin/env?") + user("/usr/bin/env is a path")
    run = keel(*STREAM, stdin=stdin, env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    bodies = _bodies(server)
    assert len(bodies) == 2
    assert "what is in /usr/bin/env?" in bodies[0] and "/usr/bin/env is a path" in bodies[1]
    assert not [line for line in run.lines() if line["type"] == "conversation_reset"]


def test_memory_edit_cannot_eat_the_hosts_next_message(fake_llm: Start, project: Path, tmp_path: Path) -> None:
    """Without a terminal, ``/memory edit`` runs $EDITOR with no input and its output on stderr.
    It used to inherit both: what it printed broke the stream-json output (the SDK drops the
    session on a line that is not JSON), and an editor that reads its input (here ``cat``) raced
    keel for the SDK's next message and held the command until the host closed its end."""
    import os
    import subprocess
    import threading

    from kit import KEEL

    editor = tmp_path / "editor.sh"
    editor.write_text(f"#!/bin/sh\necho EDITOR-SAYS-HI\ncat > {tmp_path / 'stolen.txt'}\n")
    editor.chmod(0o755)
    server = fake_llm({"steps": ["answered GAMMA"]})
    env = {**os.environ, **wire_env(server, "anthropic"), "EDITOR": str(editor)}
    env.pop("VISUAL", None)
    proc = subprocess.Popen(
        [KEEL, *STREAM], cwd=project, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdin is not None and proc.stdout is not None
    out: list[str] = []
    first = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            out.append(raw.decode())
            if '"type": "result"' in out[-1] or '"type":"result"' in out[-1]:
                first.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        proc.stdin.write(user("/memory edit KEEL.md").encode())
        proc.stdin.flush()
        early = first.wait(20)  # the host sends its next message once the command's result is in
        proc.stdin.write(user("next prompt GAMMA-9").encode())
        proc.stdin.close()
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
    reader.join(10)
    assert early, "the command's result waited for the host to close its input"
    stolen = tmp_path / "stolen.txt"
    assert stolen.exists() and stolen.read_text() == "", "the editor read the host's next message"
    assert "EDITOR-SAYS-HI" not in "".join(out), "the editor wrote into the stream-json output"
    results = [json.loads(line) for line in out if line.strip() and json.loads(line)["type"] == "result"]
    assert len(results) == 2 and results[1]["result"] == "answered GAMMA", results
    assert "GAMMA-9" in _bodies(server)[0]
