"""The TUI's parts that need no screen: diffs of proposed edits, fuzzy file mentions, the shared
history file, the Shift-Tab mode cycle, the dispatch rule, and that Textual stays unloaded by
``keel --version`` and ``keel -p``."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentkeel.models.fake.server import FakeLLMServer
from agentkeel.ui.cli.tui import wants_tui
from agentkeel.ui.tui.diffs import diff_for_call, diff_stats
from agentkeel.ui.tui.files import History, fuzzy_rank, mention_at, project_files
from agentkeel.ui.tui.side import next_mode, todo_text
from kit import KEEL, wire_env


def test_edit_diff_reads_the_file_and_never_writes_it(tmp_path: Path) -> None:
    f = tmp_path / "a.py"
    f.write_text("one\ntwo\nthree\n")
    diff = diff_for_call("Edit", {"file_path": str(f), "old_string": "two", "new_string": "TWO"}, tmp_path)
    assert "--- a/a.py" in diff and "-two" in diff and "+TWO" in diff
    assert diff_stats(diff) == (1, 1)
    assert f.read_text() == "one\ntwo\nthree\n"
    multi = {
        "file_path": "a.py",
        "edits": [{"old_string": "one", "new_string": "1"}, {"old_string": "three", "new_string": "3"}],
    }
    assert diff_stats(diff_for_call("MultiEdit", multi, tmp_path)) == (2, 2)
    new_file = diff_for_call("Write", {"file_path": str(tmp_path / "new.txt"), "content": "hi\n"}, tmp_path)
    assert "+hi" in new_file and diff_stats(new_file) == (1, 0)
    assert diff_for_call("Bash", {"command": "ls"}, tmp_path) == ""


def test_fuzzy_mentions_prefer_file_names_and_word_starts(tmp_path: Path) -> None:
    paths = ["src/agentkeel/tui/app.py", "src/agentkeel/runtime.py", "docs/apple.md", "tests/test_tui_units.py"]
    assert fuzzy_rank("app", paths)[0] == "src/agentkeel/tui/app.py"
    assert fuzzy_rank("rt", paths)[0] == "src/agentkeel/runtime.py"
    assert fuzzy_rank("zzz", paths) == []
    assert mention_at("look at @src/ag", 15) == (8, "src/ag")
    assert mention_at("no mention here", 7) is None
    (tmp_path / "node_modules").mkdir()
    (tmp_path / "node_modules" / "dep.js").write_text("")
    (tmp_path / "main.py").write_text("")
    assert project_files(tmp_path) == ["main.py"]  # not a git repository: a walk that skips dependencies


def test_history_is_shared_with_the_line_mode_format(tmp_path: Path) -> None:
    path = tmp_path / "history"
    path.write_text("\n# 2026-01-01 10:00:00\n+first\n\n# 2026-01-01 10:01:00\n+two\n+lines\n")
    history = History(path)
    assert history.entries == ["first", "two\nlines"]
    history.add("third")
    history.add("third")  # a repeat is kept once
    assert History(path).entries == ["first", "two\nlines", "third"]
    assert history.previous() == "third"
    assert history.previous() == "two\nlines"
    assert history.next() == "third"
    assert history.next() == ""


def test_shift_tab_cycles_modes_as_claude_code() -> None:
    assert [next_mode(m) for m in ("default", "acceptEdits", "plan")] == ["acceptEdits", "plan", "default"]
    assert next_mode("bypassPermissions") == "default"
    assert next_mode("dontAsk") == "default"
    text = todo_text(
        [{"content": "a", "status": "completed"}, {"content": "b", "status": "in_progress", "activeForm": "Doing b"}]
    )
    assert text.plain == "☒ a\n◐ Doing b"


def test_the_tui_needs_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM", "xterm")
    assert wants_tui(no_tui=False) is False  # pytest's stdin is no terminal
    assert wants_tui(no_tui=True) is False
    monkeypatch.setenv("TERM", "dumb")
    assert wants_tui(no_tui=False) is False


def _imported(args: list[str], env: dict[str, str], cwd: Path) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-X", "importtime", KEEL, *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    return {line.split("|")[-1].strip().split(".")[0] for line in out.stderr.splitlines() if "|" in line}


def test_textual_is_not_imported_by_version_or_headless(
    project: Path, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    server = fake_llm({"steps": ["ok"]})
    env = {**os.environ, **wire_env(server, "anthropic")}
    assert "textual" not in _imported(["--version"], env, project)
    headless = _imported(["-p", "hi"], env, project)
    assert "agentkeel" in headless, headless
    assert "textual" not in headless


def test_without_textual_keel_says_so_and_uses_the_line_mode(project: Path, tmp_path: Path) -> None:
    """A terminal, and a Python where textual cannot be imported: one notice, then the line mode."""
    pytest.importorskip("pexpect")
    import pexpect

    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(
        "import importlib.abc, sys\n"
        "class B(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'textual' or name.startswith('textual.'):\n"
        "            raise ImportError('blocked')\n"
        "sys.meta_path.insert(0, B())\n"
    )
    pythonpath = os.pathsep.join(p for p in (str(blocker), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "TERM": "xterm", "PYTHONPATH": pythonpath, "ANTHROPIC_API_KEY": "sk-ant-test-not-a-real-key"}
    child = pexpect.spawn(KEEL, cwd=str(project), env=env, encoding="utf-8", timeout=60, dimensions=(30, 120))
    try:
        child.expect("needs textual")
        child.expect("/help for commands")
        child.sendline("/exit")
        child.expect(pexpect.EOF)
    finally:
        child.close()
