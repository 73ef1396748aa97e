"""The per-turn shortcuts say what the long way says: events redacted in place agree with the
stored-form walk, the session writer's fast encoder writes what ``json.dumps`` wrote, and the
secret scanner compiles only what a text needs. (How much they save is bench/long_session_bench.py's.)"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from agentkeel.core.events import (
    AssistantMessage,
    Event,
    Notice,
    OpaqueEvent,
    RequestStarted,
    ToolFinished,
    ToolResults,
    UserMessage,
    event_data,
)
from agentkeel.core.types import ImageBlock, Message, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from agentkeel.core.view import Compaction
from agentkeel.policy.redact import redact_obj
from agentkeel.policy.redaction import _masked, redact_event
from agentkeel.policy.secret_rules import DATA, RuleSet
from agentkeel.session.store import SessionWriter

KEY = "sk-ant-api03-" + "FAKEfake0000" * 3  # an obviously fake Anthropic-shaped key
CURL = "curl -u admin:FAKEpass0000word https://example.invalid/"


def _events() -> list[Event]:
    clean = TextBlock(text="nothing to hide in this text")
    return [
        UserMessage(message=Message.user(f"use {KEY} please")),
        UserMessage(message=Message.user("a plain prompt")),
        AssistantMessage(  # thinking and its signature travel unchanged, secret or not
            message=Message(role="assistant", content=[ThinkingBlock(thinking=KEY, signature=KEY), clean])
        ),
        AssistantMessage(
            message=Message(
                role="assistant",
                content=[ToolUseBlock(id=KEY, name="Bash", input={"command": CURL, "n": 3, "ok": True, "x": None})],
            )
        ),
        ToolResults(
            message=Message(
                role="user",
                content=[
                    ToolResultBlock(
                        tool_use_id="t1", content=[TextBlock(text=f"found {KEY}"), ImageBlock(media_type=KEY, data=KEY)]
                    )
                ],
            )
        ),
        ToolResults(message=Message(role="user", content=[ToolResultBlock(tool_use_id=KEY, content="clean output")])),
        ToolFinished(
            tool_use_id="t2",
            name="Bash",
            is_error=False,
            duration_ms=5,
            summary="ok",
            input={"command": "ls"},
            metadata={"img": {"type": "image", "data": KEY}, "deep": [{"type": "text", "data": KEY}], "f": 1.5},
        ),
        ToolFinished(tool_use_id="t3", name="Read", is_error=False, duration_ms=1, metadata={"tags": ("a", KEY)}),
        Compaction(
            messages=[Message(role="user", content=[clean, ToolResultBlock(tool_use_id="t4", content=CURL)])],
            summary="a summary",
            state={"files": ["/a", "/b"], "task": "fix it"},
        ),
        Compaction(messages=[Message(role="user", content=[clean])], state={"facts": [KEY]}),
        Notice(level="warning", message=f"leaked {KEY}"),
        RequestStarted(turn=1, model="m", message_count=2),
        OpaqueEvent(data={"type": "plugin_thing", "payload": {"token": KEY}}),
    ]


@pytest.mark.parametrize("index", range(len(_events())))
def test_an_event_redacted_in_place_is_what_the_stored_form_walk_makes_it(index: int) -> None:
    event = _events()[index]
    fast, exact = redact_event(event), _masked(event)
    assert fast == exact
    assert (fast is event) == (exact is event)
    assert KEY not in json.dumps(fast_data := _stored(fast)) or _only_kept(fast_data)


def _stored(event: Event) -> dict[str, Any]:
    return event_data(event)


def _only_kept(data: dict[str, Any]) -> bool:
    """The key survives only where it must travel unchanged (thinking, image data, ids)."""
    text = json.dumps(data)
    for kept in ('"thinking": "' + KEY, '"signature": "' + KEY, '"data": "' + KEY, '"id": "' + KEY):
        text = text.replace(kept, "")
    text = text.replace('"media_type": "' + KEY, "").replace('"tool_use_id": "' + KEY, "")
    return KEY not in text


def test_a_compaction_does_not_read_the_blocks_it_carries_again() -> None:
    """The kept messages' blocks were checked when they were first logged: a compaction carrying
    them costs a lookup per block (counted in function calls), and a block that differs (a secret
    added) is still read and masked."""
    blocks = [ToolResultBlock(tool_use_id=f"t{i}", content=f"output {i}\n" * 50) for i in range(60)]
    for block in blocks:
        redact_event(ToolResults(message=Message(role="user", content=[block])))
    carried = Compaction(messages=[Message(role="user", content=[b]) for b in blocks])
    fresh = Compaction(
        messages=[
            Message(role="user", content=[ToolResultBlock(tool_use_id=f"n{i}", content=f"new {i}\n" * 50)])
            for i in range(60)
        ]
    )
    assert redact_event(carried) is carried
    assert _calls(lambda: redact_event(carried)) * 3 < _calls(lambda: redact_event(fresh))
    leaked = Compaction(messages=[Message(role="user", content=[*blocks[:3], TextBlock(text=KEY)])])
    masked = redact_event(leaked)
    assert isinstance(masked, Compaction) and KEY not in json.dumps(_stored(masked))


def _calls(fn: Any) -> int:
    count = [0]

    def profile(frame: FrameType, what: str, arg: Any) -> None:
        if what in ("call", "c_call"):
            count[0] += 1

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return count[0]


def test_the_session_writer_writes_what_json_dumps_wrote(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    writer = SessionWriter(path, "sid")
    events: list[Event] = [
        UserMessage(message=Message.user('quotes " and \\ backslash, é, 😀, \u2028, \x00 \x1f \x7f, tab\there')),
        ToolFinished(
            tool_use_id="t", name="X", is_error=False, duration_ms=1, metadata={"n": 10**30, "f": 0.1, "k": [1, 2]}
        ),
        AssistantMessage(message=Message(role="assistant", content=[TextBlock(text="x")]), cost_usd=1e-7),
        AssistantMessage(message=Message(role="assistant", content=[TextBlock(text="y")]), cost_usd=math.nan),
    ]
    for event in events:
        writer(event)
    writer.close()
    lines = path.read_bytes().splitlines()
    assert len(lines) == len(events)
    parent = None
    for line, event in zip(lines[:3], events[:3], strict=True):
        entry = {"uuid": event.uuid, "parentUuid": parent, "sessionId": "sid", **event_data(event)}
        assert json.loads(line) == entry
        if event is not events[2]:  # 1e-07 is written 1e-7: the same number
            assert line == json.dumps(entry, ensure_ascii=False, separators=(",", ":")).encode()
        parent = event.uuid
    assert json.loads(lines[3])["cost_usd"] is None  # NaN, which JSON has not: null, and the line stays JSON


def test_the_secret_scanner_compiles_only_what_a_text_needs() -> None:
    """All 28 keyword scans compiled at once cost 20-35 ms on the way to the first request; each
    is compiled on the first text that may hold one of its words."""
    rules = RuleSet(json.loads(DATA.read_text(encoding="utf-8")))
    assert rules._scans == {}
    assert rules.findings("go") == [] and len(rules._scans) <= 1
    token = "ghp_" + "FAKEfake0000" * 3
    assert [f[2] for f in rules.findings(f"token: {token}")] == ["github-pat"]
    before = len(rules._scans)
    rules.findings("".join(chr(c) for c in range(32, 127)) * 3)  # every first character, no word
    assert len(rules._scans) == before  # no word's first two characters: nothing more compiled


def test_a_secret_in_a_tuple_is_masked_too() -> None:
    """A tool's metadata may hold a tuple: the stored form keeps it one, and it is written as a
    JSON array like a list. Its strings are masked as a list's are (they were not)."""
    event = ToolFinished(tool_use_id="t", name="X", is_error=False, duration_ms=1, metadata={"tags": ("a", KEY)})
    masked = redact_event(event)
    assert isinstance(masked, ToolFinished) and KEY not in json.dumps(_stored(masked))
    assert KEY not in json.dumps(redact_obj({"facts": ("a", (KEY,))}))


def test_the_session_index_folds_a_log_as_parsing_every_entry_did(tmp_path: Path) -> None:
    """The index reads only type and timestamp of the entries it does not fold (tool results,
    compactions): the row it makes is the one parsing every entry made, damage included."""
    from agentkeel.core.events import RunFinished, SessionStarted
    from agentkeel.core.types import Usage
    from agentkeel.session.events import RewindMarker, SessionForked
    from agentkeel.session.index import _Fold, _fold_lines
    from agentkeel.session.load import LoadReport, parse_lines

    path = tmp_path / "s.jsonl"
    writer = SessionWriter(path, "sid")
    first = UserMessage(message=Message.user("first prompt\nwith a second line"))
    for event in [
        SessionStarted(session_id="sid", cwd="/work/p", model="m", timestamp="2026-01-01T00:00:00.000Z"),
        SessionForked(parent_id="parent-1"),
        first,
        AssistantMessage(message=Message(role="assistant", content=[TextBlock(text="a")]), cost_usd=0.25),
        ToolResults(message=Message(role="user", content=[ToolResultBlock(tool_use_id="t", content="x" * 5000)])),
        Compaction(messages=[Message.user("kept")], timestamp="2027-06-01T00:00:00.000Z"),
        RunFinished(
            subtype="success",
            is_error=False,
            result="a",
            num_turns=1,
            duration_ms=1,
            usage=Usage(),
            total_cost_usd=0.25,
        ),
        UserMessage(message=Message.user("second")),
        RewindMarker(messages=[], turn_index=1, target_uuid="nope"),
        OpaqueEvent(data={"type": "custom-title", "customTitle": "  My title  "}),
        OpaqueEvent(data={"type": "someone-elses", "timestamp": "2028-01-01T00:00:00.000Z"}),
    ]:
        writer(event)
    writer.close()
    damage = [
        b'{"type": "tool_results", "timestamp": 5}',  # a timestamp that is not text
        b'{"timestamp": "2029-01-01T00:00:00.000Z"}',  # no type
        b"[1, 2]",
        b"not json at all",
        b'{"type": "notice", "timestamp": "2026-02-01T00:00:00.000Z", "message": "\x00x"}',
        b'{"type": "summary", "summary": "A summary title", "timestamp": "2026-03-01T00:00:00.000Z"}',
    ]
    data = path.read_bytes() + b"\n".join(damage) + b"\n"
    parsed = _Fold()
    for event in parse_lines(data, LoadReport(path)):
        parsed.add(event)
    read = _Fold()
    _fold_lines(read, data, LoadReport(path))
    assert read.data() == parsed.data()
    assert read.title == "A summary title" and read.parent == "parent-1" and read.cost == 0.25
    assert read.last == "2028-01-01T00:00:00.000Z"


def test_instructions_place_a_file_by_its_real_path(tmp_path: Path) -> None:
    """Folders' resolutions are remembered across reads; a file that is a symlink is still
    resolved whole, and a path through a symlinked folder lands where the folder points."""
    from agentkeel.context.instructions import Instructions

    repo, outside = tmp_path / "repo", tmp_path / "outside"
    (repo / ".git").mkdir(parents=True)
    (repo / "lib").mkdir()
    (repo / "lib" / "AGENTS.md").write_text("lib rules")
    outside.mkdir()
    (outside / "AGENTS.md").write_text("outside rules")
    (outside / "x.py").write_text("x")
    (repo / "link.py").symlink_to(outside / "x.py")
    (repo / "away").symlink_to(outside)
    (repo / "lib" / "a.py").write_text("a")
    got = Instructions.load(repo, tmp_path / "home", tmp_path / "keel", {"KEEL_MANAGED_INSTRUCTIONS": "/none"})
    assert got.relative(repo / "lib" / "a.py") == "lib/a.py"
    assert got.relative(repo / "lib" / "b.py") == "lib/b.py"  # the same folder, not there yet
    assert got.relative(repo / "link.py") is None  # a symlink out of the project
    assert got.relative(repo / "away" / "x.py") is None  # through a folder that points out
    assert got.relative(repo / "lib" / ".." / "lib" / "a.py") == "lib/a.py"
    assert [f.text for f in got.touched(repo / "away" / "x.py")] == []
    assert [f.text for f in got.touched(repo / "lib" / "a.py")] == ["lib rules"]


@pytest.mark.parametrize("start", [1, 7, 2047, 2048, 2049, 65_530, 70_000])
def test_numbered_lines_read_as_they_did(start: int) -> None:
    """Line numbers are made once and joined in one pass; a long line still goes the long way."""
    from agentkeel.tools.files import numbered

    lines = ["", "def f():", "\treturn 1", "é😀", "x" * 2000]
    assert numbered(lines, start) == "\n".join(f"{i}\t{line}" for i, line in enumerate(lines, start))
    long = [*lines, "y" * 2001]
    expected = [*lines, "y" * 2000 + "… [line truncated]"]
    assert numbered(long, start) == "\n".join(f"{i}\t{line}" for i, line in enumerate(expected, start))
    assert numbered([], start) == ""
