"""Compaction keeps what matters, through the real CLI against the scripted model server (#35):

- the fact that lives only in an early Bash result reaches the summary request keel sends, with our
  structured instruction after the conversation (read from the prompt cache); the summary the
  model returned rides in every later request; the carry-over names the transcript file;
- CLAUDE.md and the open todos survive two compactions; the second summary request carries the
  first summary (the earlier note is fed forward, not lost);
- the next request after each compaction is at most 60 % of the window;
- a failing summariser falls back to clear-tool-results, and the session goes on;
- `keel -c` resumes from the last compaction;
- no churn over a 400-turn session: at most one compaction per 12 steps.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkeel.models.fake.server import FakeLLMServer
from integration.context.compacting import COMPACT
from kit import KeelRun, session_files, wire_env

CARRY = "<keel-context-carryover"
WINDOW = 40_000
FAILING = "tests/test_parser.py::test_quoted_comma_kiwi"  # only in ci.log, read by an early Bash call
CLAUDE_FACT = "CLAUDE-FACT-tabs-otter-42"
TODO_FACT = "TODO-FACT-ship-the-kiwi"
SUMMARY_1 = f"SUMMARY-ONE: the parser work; failing test {FAILING}; data files being read."
SUMMARY_2 = f"SUMMARY-TWO: still reading data files; failing test {FAILING} still open."


def plant(project: Path, files: int = 40, lines: int = 60) -> None:
    (project / ".git").mkdir()
    (project / "CLAUDE.md").write_text(f"# Project rules\n\nIndent with tabs: {CLAUDE_FACT}.\n")
    (project / "ci.log").write_text(f"collected 12 items\n\nFAILED {FAILING} - AssertionError\n1 failed, 11 passed\n")
    data = project / "data"
    data.mkdir()
    for i in range(files):
        (data / f"f{i:02d}.txt").write_text("\n".join(f"row {i}-{n} " + "lorem ipsum " * 8 for n in range(lines)))


def settings(tmp_path: Path, **context: Any) -> None:
    home = tmp_path / "keelhome"
    home.mkdir(exist_ok=True)
    data = {
        "maxTokens": 2000,
        "context": {"window": WINDOW, **context},
        "disabled_hooks": ["todo-continuation-enforcer"],  # the todo stays open on purpose
    }
    (home / "settings.json").write_text(json.dumps(data))


def script(project: Path, reads: int, summaries: list[Any], files: int = 40) -> dict[str, Any]:
    todos = [{"content": TODO_FACT, "status": "pending", "activeForm": "shipping"}]
    steps: list[Any] = [
        {"text": "Planning.", "tool_calls": [{"name": "TodoWrite", "input": {"todos": todos}}]},
        {"text": "Checking CI.", "tool_calls": [{"name": "Bash", "input": {"command": "cat ci.log"}}]},
    ]
    for i in range(reads):
        path = str(project / "data" / f"f{i % files:02d}.txt")
        steps.append({"text": f"Reading {i}.", "tool_calls": [{"name": "Read", "input": {"file_path": path}}]})
    steps.append("All done.")
    return {"steps": steps, "context_window": WINDOW, "match": [{"contains": COMPACT, "steps": summaries}]}


def run(
    keel: Callable[..., KeelRun], server: FakeLLMServer, turns: int, *extra: str, home: Path | None = None
) -> KeelRun:
    """``home``: another KEEL_HOME than the test's."""
    env = wire_env(server, "anthropic") | ({"KEEL_HOME": str(home)} if home is not None else {})
    out = keel(
        "-p",
        "fix the parser; read every data file first",
        "--output-format",
        "json",
        "--permission-mode",
        "bypassPermissions",
        "--max-turns",
        str(turns),
        *extra,
        env=env,
        timeout=900,
    )
    assert out.code == 0, out.stderr
    return out


def events(tmp_path: Path, kind: str) -> list[dict[str, Any]]:
    [log] = session_files(tmp_path / "keelhome")
    return [e for line in log.read_text().splitlines() if (e := json.loads(line))["type"] == kind]


def text(request: dict[str, Any]) -> str:
    return json.dumps(request["body"])


def test_the_summary_keeps_the_early_fact_and_rides_in_every_later_request(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    plant(project)
    settings(tmp_path)
    server = fake_llm(script(project, 60, [SUMMARY_1, SUMMARY_2]))
    result = run(keel, server, 100).json()
    assert result["subtype"] == "success"
    found = events(tmp_path, "compaction")
    assert len(found) >= 2 and all(e["stage"] == "summary" for e in found), [e["stage"] for e in found]
    requests = server.cursor.requests
    asked = [i for i, r in enumerate(requests) if r.get("matched") == COMPACT]
    assert len(asked) == len(found)

    # the summary request: the conversation as the model last saw it (the early Bash result's fact
    # and the user's message in it), our instruction after it; read from the prompt cache, not
    # sent again as new text
    first = requests[asked[0]]
    instruction = json.dumps(first["body"]["messages"][-1])
    assert "hand-over note" in instruction and "Facts from tool output" in instruction
    assert FAILING in text(first) and "fix the parser; read every data file first" in text(first)
    assert first["body"]["system"] == requests[asked[0] - 1]["body"]["system"]
    assert first["cache_read_input_tokens"] >= 0.8 * first["input_tokens"], first["cache_read_input_tokens"]
    # the second summary request carries the first summary (the earlier note), not only what followed
    assert SUMMARY_1 in text(requests[asked[1]])

    [log] = session_files(tmp_path / "keelhome")
    main = [(i, r) for i, r in enumerate(requests) if "matched" not in r]
    after_first = [r for i, r in main if i > asked[0]]
    assert after_first
    for i, r in main:
        if i < asked[0]:
            continue
        latest = SUMMARY_1 if i < asked[1] else SUMMARY_2
        body = text(r)
        assert latest in body and FAILING in body, i  # the returned summary rides in every later request
        assert str(log) in body  # the carry-over points at the full transcript
        assert CLAUDE_FACT in json.dumps(r["body"]["system"]) and TODO_FACT in body  # survive both compactions
    # after each compaction the next request is at most 60 % of the window
    for n in asked:
        nxt = next(r for i, r in main if i > n)
        assert nxt["input_tokens"] <= 0.6 * WINDOW, (n, nxt["input_tokens"])
    # old tool-call stubs are not kept: no cleared stub in any request after the first compaction
    assert all("[tool result cleared" not in text(r) for r in after_first)

    # -c resumes from the last compaction: the carry-over with the last summary, CLAUDE.md, the todo
    resume = fake_llm({"steps": ["resumed fine"], "context_window": WINDOW})
    again = keel("-c", "-p", "go on", "--output-format", "json", env=wire_env(resume, "anthropic"), timeout=120)
    assert again.code == 0, again.stderr and again.json()["result"] == "resumed fine"
    [back] = [r for r in resume.cursor.requests if "matched" not in r]
    messages = back["body"]["messages"]
    assert CARRY in json.dumps(messages[0]) and len(messages) < 60
    assert (SUMMARY_2 in text(back) or "[fake-llm summary]" in text(back)) and TODO_FACT in text(back)
    assert CLAUDE_FACT in json.dumps(back["body"]["system"])


def test_a_failing_summariser_falls_back_to_clearing_tool_results(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    plant(project)
    settings(tmp_path, summaryTimeoutS=5)
    server = fake_llm(script(project, 30, [{"error": {"status": 400, "message": "summariser broke"}}]))
    result = run(keel, server, 60).json()
    assert result["subtype"] == "success" and result["num_turns"] == 33
    found = events(tmp_path, "compaction")
    assert found and found[0]["stage"] == "clear-tool-results", [e["stage"] for e in found]
    assert all(not r["over_window"] for r in server.cursor.requests)
    last = server.cursor.requests[-1]
    assert "no summary was written" in text(last) and TODO_FACT in text(last)
    assert FAILING in text(last)  # the short early result was not cleared


def test_no_compaction_churn_over_400_turns(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    """A 400-turn session of ~6 kB results: at most one compaction per 12 steps, and every
    compaction brings the next request to at most 60 % of the window."""
    plant(project, files=40, lines=55)
    settings(tmp_path)
    server = fake_llm(script(project, 398, ["SUMMARY: the data files are being read one by one."]))
    result = run(keel, server, 450).json()
    assert result["subtype"] == "success" and result["num_turns"] == 401
    found = events(tmp_path, "compaction")
    requests = server.cursor.requests
    steps = sum(1 for r in requests if "matched" not in r)
    sizes = [(e["tokens_before"], e["tokens_after"]) for e in found]
    print(f"{steps} steps, {len(found)} compactions, stages {sorted({e['stage'] for e in found})}, sizes {sizes[:4]}")
    assert found, "the scenario never compacted"
    assert len(found) * 12 <= steps, (len(found), steps)
    for n, r in enumerate(requests):
        if r.get("matched") == COMPACT:
            nxt = next(x for x in requests[n + 1 :] if "matched" not in x)
            assert nxt["input_tokens"] <= 0.6 * WINDOW, (n, nxt["input_tokens"])
    assert all(not r["over_window"] for r in requests)


def test_a_session_of_small_steps_compacts_at_half_the_window_and_not_sooner_than_12_requests_apart(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    """Every request re-reads the whole context: past ``earlyCompactThreshold`` (half the usable
    window) a session compacts once 12 requests have gone by, instead of growing to 90 %. Off
    (``0``), the old point: 90 %."""
    usable = WINDOW - 2000  # the answer's reserve is maxTokens
    plant(project, files=40, lines=20)  # ~2 kB a file
    settings(tmp_path)
    server = fake_llm(script(project, 70, ["SUMMARY: reading the data files."]))
    run(keel, server, 100)
    found = events(tmp_path, "compaction")
    assert found and all(e["trigger"] == "auto" for e in found)
    assert all(0.5 * usable <= e["tokens_before"] <= 0.6 * usable for e in found), [e["tokens_before"] for e in found]
    at = [n for n, r in enumerate(server.cursor.requests) if r.get("matched") == COMPACT]
    assert all(b - a > 12 for a, b in itertools.pairwise([0, *at])), at

    other = tmp_path / "off"
    other.mkdir()
    settings(other, earlyCompactThreshold=0)
    server = fake_llm(script(project, 70, ["SUMMARY: reading the data files."]))
    run(keel, server, 100, home=other / "keelhome")
    late = events(other, "compaction")
    assert late and all(e["tokens_before"] >= 0.85 * usable for e in late), [e["tokens_before"] for e in late]


def test_a_context_back_past_half_within_12_requests_waits_for_the_12th(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    """Much kept verbatim (``keepRecent``): after a compaction the context is back past the early
    point within 7 requests, and the next compaction waits for the 12th (past it, not at it)."""
    usable = WINDOW - 2000
    plant(project, files=40, lines=20)
    settings(tmp_path, keepRecent=0.6)
    server = fake_llm(script(project, 70, ["SUMMARY: reading the data files."]))
    run(keel, server, 100)
    found = events(tmp_path, "compaction")
    assert len(found) >= 3, [(e["tokens_before"], e["tokens_after"]) for e in found]
    assert all(e["tokens_after"] >= 0.35 * usable for e in found)  # 7 small steps from the early point
    assert all(e["tokens_before"] >= 0.55 * usable for e in found[1:]), [e["tokens_before"] for e in found]
    at = [n for n, r in enumerate(server.cursor.requests) if r.get("matched") == COMPACT]
    assert all(b - a > 12 for a, b in itertools.pairwise(at)), at


def test_an_early_compaction_a_precompact_hook_blocks_is_asked_again_12_requests_later_not_each(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    plant(project, files=40, lines=20)
    settings(tmp_path)
    fired = tmp_path / "fired.log"
    home = tmp_path / "keelhome" / "settings.json"
    data = json.loads(home.read_text())
    hook = {"type": "command", "command": f"echo fired >> {fired}; echo 'not now' >&2; exit 2"}
    data["hooks"] = {"PreCompact": [{"hooks": [hook]}]}
    home.write_text(json.dumps(data))
    server = fake_llm(script(project, 45, ["SUMMARY: never asked."]))
    result = run(keel, server, 100).json()
    assert result["subtype"] == "success" and not events(tmp_path, "compaction")
    runs = len(fired.read_text().splitlines())
    assert 1 <= runs <= 3, runs  # past half the window from about the 25th request of 48: at most every 12th


def test_no_early_compaction_when_the_prompt_and_tools_alone_fill_most_of_the_early_share(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    """A window so small that the system prompt and the tools are most of its first half: an early
    compaction could not bring the context far below the early point, so only the 90 % point runs."""
    window = 9000
    usable = window - 2000
    plant(project, files=40, lines=3)
    settings(tmp_path, window=window)
    server = fake_llm(script(project, 40, ["SUMMARY: reading."]))
    run(keel, server, 100)
    found = events(tmp_path, "compaction")
    assert found and all(e["tokens_before"] >= 0.85 * usable for e in found), [e["tokens_before"] for e in found]
