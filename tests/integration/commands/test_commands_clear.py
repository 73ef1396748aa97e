"""``/clear`` is a logged event: a resumed session (``-c``, ``-r``) goes on from the cleared
conversation, not from what was there before the clear."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkeel.models.fake.server import FakeLLMServer
from conftest import KeelRun, session_files, wire_env

Start = Callable[[Any], FakeLLMServer]
Keel = Callable[..., KeelRun]


def _texts(request: dict[str, Any]) -> list[str]:
    """The text blocks of the conversation sent (memory's recall of earlier sessions and keel's
    environment note left out)."""
    out = []
    for message in request["body"]["messages"]:
        content = message["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        context = ("<memory-context", "<environment>")
        out += [b["text"] for b in blocks if b.get("type") == "text" and not b["text"].startswith(context)]
    return out


def test_clear_then_continue_resumes_the_cleared_conversation(
    fake_llm: Start, keel: Keel, project: Path, tmp_path: Path
) -> None:
    server = fake_llm({"steps": ["First answer.", "Second answer.", "Third answer."]})
    env = wire_env(server, "anthropic")
    first = keel("-p", "remember the word PELICAN", env=env)
    assert first.code == 0, first.stderr
    cleared = keel("-c", "-p", "/clear", env=env)
    assert cleared.code == 0, cleared.stderr
    assert "cleared" in cleared.stdout.lower()
    after = keel("-c", "-p", "what was the word?", env=env)
    assert after.code == 0, after.stderr
    sent = _texts(server.cursor.requests[-1])
    assert sent == ["what was the word?"], "the cleared conversation came back on -c"
    # the transcript keeps the history: the clear is an entry in it, not an edit of it
    [log] = session_files(tmp_path / "keelhome")
    text = log.read_text()
    assert "PELICAN" in text
    # -r by id resumes the same way (one session file, so the id is its stem)
    again = keel("-r", log.stem, "-p", "and now?", env=env)
    assert again.code == 0, again.stderr
    sent = _texts(server.cursor.requests[-1])
    assert sent == ["what was the word?", "Second answer.", "and now?"]
