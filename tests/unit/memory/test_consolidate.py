"""Reflexion lessons from a session's own evidence, and task types; no model call anywhere."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from agentkeel.memory.consolidate import reflect, task_type
from agentkeel.memory.model import Entry


def _e(kind: str, text: str, **meta: Any) -> Entry:
    return Entry(
        id=text[:8], type=kind, project="p", session="s", timestamp="2026-01-01T00:00:00Z", text=text, metadata=meta
    )


def _bash(command: str, code: int | None = None) -> Entry:
    ok = code in (None, 0)
    return _e(
        "tool_observation",
        f"$ {command}\n...",
        tool="Bash",
        command=command,
        success=ok,
        **({"exit_code": code} if code is not None else {}),
    )


def test_a_session_without_tools_teaches_nothing() -> None:
    assert reflect([_e("user_prompt", "what is a monad?"), _e("assistant_response", "a monoid in ...")]) is None
    assert reflect([_bash("ls")]) is None  # no task to name


def test_edits_never_checked_are_a_weakness_and_a_lesson() -> None:
    lesson = reflect(
        [
            _e("user_prompt", "add a --verbose flag to the cli"),
            _e("tool_observation", "Edit cli.py: ok", tool="Edit", file_path="cli.py", success=True),
        ]
    )
    assert lesson is not None
    assert lesson.task_type == "feature" and lesson.success
    assert lesson.weaknesses == ["changed 1 file(s) without running a test or build"]
    assert "never checked" in lesson.lessons[0]


def test_a_check_still_failing_at_the_end_is_a_failure() -> None:
    lesson = reflect(
        [
            _e("user_prompt", "fix the flaky login test"),
            _bash("pytest tests/test_login.py", 0),
            _e("tool_observation", "Edit a.py: ok", tool="Edit", file_path="a.py", success=True),
            _bash("pytest tests/test_login.py", 1),
        ]
    )
    assert lesson is not None
    assert not lesson.success and lesson.score < 0.5
    assert "still failing" in lesson.weaknesses[0]
    assert lesson.text().startswith("Failed at bugfix")


def test_a_clean_success_records_the_approach() -> None:
    lesson = reflect(
        [
            _e("user_prompt", "rename Foo to Bar"),
            _e("tool_observation", "Grep 'Foo': 3 matches", tool="Grep", success=True),
            _e("tool_observation", "Edit x.py: ok", tool="Edit", file_path="src/x.py", success=True),
            _bash("ruff check .", 0),
        ]
    )
    assert lesson is not None and lesson.success and lesson.score == 1.0
    assert lesson.task_type == "refactor"
    assert lesson.lessons == ["an approach that worked: Grep -> Edit x.py -> Bash `ruff check .`"]


def test_task_types() -> None:
    assert task_type("Why does the build crash on ARM?") == "bugfix"
    assert task_type("write tests for the parser") == "testing"
    assert task_type("explain the event bus") == "question"
    assert task_type("hello there") == "general"


_entries = st.lists(
    st.builds(
        _e,
        st.sampled_from(["user_prompt", "assistant_response", "tool_observation"]),
        st.text(max_size=40),
        tool=st.sampled_from(["Bash", "Edit", "Read", "Grep"]),
        success=st.booleans(),
        command=st.sampled_from(["pytest", "make", "ls", ""]),
        exit_code=st.one_of(st.none(), st.integers(-1, 3)),
        file_path=st.text(max_size=10),
    ),
    max_size=12,
)


@given(_entries)
def test_reflect_is_total_and_bounded(entries: list[Entry]) -> None:
    lesson = reflect(entries)
    if lesson is None:
        return
    assert 0.0 <= lesson.score <= 1.0
    assert len(lesson.lessons) <= 4
    assert lesson.lessons or not lesson.success  # a success always says what worked
    assert lesson.text().startswith(("Succeeded", "Failed"))
