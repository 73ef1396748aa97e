"""Two sessions of one project send the same stable prefix (the tools and the system prompt up to
its cache breakpoint), byte for byte, through the CLI: also when a skill and an agent definition
were edited in between and the second runs on another date (another time zone: 26 hours apart,
the local dates differ). What changes (the date, the skills and agents listings) comes after that
prefix, and the scripted server, which caches as the real API does, serves the second session's
first request from the first's cache."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkeel.models.fake.server import FakeLLMServer
from kit import KeelRun, wire_env

SKILL = "---\nname: release\ndescription: {desc}\n---\nRelease the project.\n"
AGENT = "---\nname: reviewer\ndescription: {desc}\ntools: Read, Grep\n---\nReview the change.\n"


def _stable(body: dict[str, Any]) -> str:
    """The request's prefix up to and including its system-prompt breakpoint, as sent."""
    system = body["system"]
    assert "cache_control" in system[0], system
    return json.dumps({"tools": body["tools"], "system": system[:1]}, sort_keys=True)


def _session(keel: Callable[..., KeelRun], server: FakeLLMServer, tz: str) -> dict[str, Any]:
    before = len(server.cursor.requests)
    run = keel("-p", "hello", env={**wire_env(server, "anthropic"), "TZ": tz})
    assert run.code == 0, run.stderr
    return dict(server.cursor.requests[before])


def test_prefix_is_byte_identical_across_sessions_skill_edits_and_dates(
    project: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    (project / ".git").mkdir()
    (project / "CLAUDE.md").write_text("Run the tests with `make test`.\n")
    skill = project / ".claude" / "skills" / "release" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text(SKILL.format(desc="Cut a release of the project"))
    agent = project / ".claude" / "agents" / "reviewer.md"
    agent.parent.mkdir(parents=True)
    agent.write_text(AGENT.format(desc="Reviews code"))
    server = fake_llm({"steps": ["zero", "one", "two", "three"]})
    # a project's very first session has an empty memory and so no memory tools (memory/plugin.py):
    # the sessions compared come after one that gave memory its first entries
    _session(keel, server, "UTC")
    first = _session(keel, server, "Etc/GMT-14")  # UTC+14
    skill.write_text(SKILL.format(desc="Cut and tag a release"))
    agent.write_text(AGENT.format(desc="Reviews code for bugs"))
    second = _session(keel, server, "Etc/GMT+12")  # UTC-12: always another local date
    third = _session(keel, server, "Etc/GMT+12")

    a, b = first["body"], second["body"]
    assert _stable(a) == _stable(b)
    # what changed is sent, after the prefix: the edited listings and the other date
    tail_a, tail_b = a["system"][-1]["text"], b["system"][-1]["text"]
    assert "- release: Cut a release of the project" in tail_a
    assert "- release: Cut and tag a release" in tail_b
    assert "- reviewer: Reviews code for bugs" in tail_b and "- reviewer: Reviews code (" in tail_a
    # the date rides in the environment note on the first user message (context/builder.py)
    note_a, note_b = (json.dumps(body["messages"][0]["content"]) for body in (a, b))
    date_a = [part for part in note_a.split("\\n") if part.startswith("Today's date:")]
    date_b = [part for part in note_b.split("\\n") if part.startswith("Today's date:")]
    assert date_a and date_b and date_a != date_b
    assert "Cut a release" not in _stable(a) and "Today's date" not in _stable(a)
    # the second session reads the whole stable prefix the first one wrote
    prefix_tokens = len(_stable(a)) // 4
    assert second["cache_read_input_tokens"] >= prefix_tokens * 0.8, (second, prefix_tokens)
    # and an unchanged third session reads the second's up to its tail (the session block too)
    assert third["cache_read_input_tokens"] >= second["cache_read_input_tokens"]
