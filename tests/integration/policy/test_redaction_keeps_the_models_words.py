"""#34 item 4 end to end: ``keel -p`` against the scripted model. What the model said reaches the
user and comes back to the model as it was written; a secret a tool read never reaches the model;
a secret the model repeats is masked in the transcript on disk.

Claude Code 2.1.328, the oracle, redacts none of it. Recorded with the same script as the first
test (``{"steps": [{"text": "Counting: 69 70 71 72 73 74 75 76 77", "tool_calls": [{"name": "Bash",
"input": {"command": "echo hi"}}]}, {"text": "Counting: 69 70 71 72 73 74 75 76 77. Done."}]}``)::

    keel dev fake-llm --script script.json --port 48734 &
    ANTHROPIC_BASE_URL=http://127.0.0.1:48734 ANTHROPIC_API_KEY=sk-ant-fake-0000 HOME=$(mktemp -d) \
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 claude -p count --output-format stream-json --verbose \
    --allowedTools Bash

Both assistant messages and the result carry the digits as written, and the second request's
history (``GET /_keel/requests``) resends ``Counting: 69 70 71 72 73 74 75 76 77`` unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkeel.models.fake.server import FakeLLMServer
from kit import KeelRun, session_files, wire_env

SAID = "Counting: 69 70 71 72 73 74 75 76 77"  # passes the Luhn check: was masked as a card number
FAKE_KEY = "sk-ant-api03-" + "FAKE" * 10  # obviously fake, shaped like a key


def test_the_models_words_reach_the_user_and_the_next_request_unchanged(
    project: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun], tmp_path: Path
) -> None:
    (project / "config.txt").write_text(f"api_key = {FAKE_KEY}\n")
    read = {"name": "Read", "input": {"file_path": str(project / "config.txt")}}
    server = fake_llm({"steps": [{"text": SAID, "tool_calls": [read]}, {"text": f"{SAID}. Done."}]})
    run = keel("-p", "count", "--output-format", "stream-json", "--verbose", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    lines = run.lines()
    said = [
        b["text"] for m in lines if m.get("type") == "assistant" for b in m["message"]["content"] if b["type"] == "text"
    ]
    assert said == [SAID, f"{SAID}. Done."]
    assert [m["result"] for m in lines if m.get("type") == "result"] == [f"{SAID}. Done."]
    history = server.cursor.requests[-1]["body"]["messages"]
    resent = [b["text"] for m in history if m["role"] == "assistant" for b in m["content"] if b["type"] == "text"]
    assert resent == [SAID]
    sent = json.dumps([r["body"] for r in server.cursor.requests])
    assert FAKE_KEY not in sent and "[REDACTED" in sent  # the key the tool read was masked for the model
    transcript = "".join(p.read_text() for p in session_files(tmp_path / "keelhome"))
    assert FAKE_KEY not in transcript and "69 70 71 72 73 74 75 76 77" in transcript


def test_a_secret_the_model_writes_is_shown_but_masked_on_disk(
    project: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun], tmp_path: Path
) -> None:
    server = fake_llm({"steps": [f"Set ANTHROPIC_API_KEY={FAKE_KEY} in your shell."]})
    run = keel(
        "-p", "how do I set my key?", "--output-format", "stream-json", "--verbose", env=wire_env(server, "anthropic")
    )
    assert run.code == 0, run.stderr
    said = [m["message"]["content"][0]["text"] for m in run.lines() if m.get("type") == "assistant"]
    assert said == [f"Set ANTHROPIC_API_KEY={FAKE_KEY} in your shell."]  # as the model wrote it
    transcript = "".join(p.read_text() for p in session_files(tmp_path / "keelhome"))
    assert transcript and FAKE_KEY not in transcript
