"""keel's home and its ``KEEL_*`` variables, each resolved one way (``agentkeel.internal.home``,
``agentkeel.internal.env``), from the environment given."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agentkeel.internal.env import SET_FOR_CHILDREN, VARIABLES, KeelEnv
from agentkeel.internal.home import keel_home
from agentkeel.memory import default_location

SRC = Path(__file__).resolve().parents[3] / "src" / "agentkeel"
NOT_VARIABLES = {"KEEL_HEREDOC_END", "KEEL_PRIVATE", "KEEL_STOP"}  # a heredoc word, a tuple, a sentinel


def test_every_keel_variable_in_the_source_is_declared_once() -> None:
    found = {m for f in SRC.rglob("*.py") for m in re.findall(r"KEEL_[A-Z0-9_]+", f.read_text(encoding="utf-8"))}
    assert found - NOT_VARIABLES - set(VARIABLES) - set(SET_FOR_CHILDREN) == set()
    assert not set(VARIABLES) & set(SET_FOR_CHILDREN)


def test_the_view_reads_the_environment_it_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KEEL_MODEL", "from-the-process")
    assert KeelEnv.of({}).model is None
    assert KeelEnv.of({"KEEL_MODEL": "given"}).model == "given"
    assert KeelEnv.of().model == "from-the-process"  # read when asked, not at import
    monkeypatch.setenv("KEEL_MODEL", "changed")
    assert KeelEnv.of().model == "changed"


def test_types_defaults_and_bad_numbers() -> None:
    env = KeelEnv.of({"KEEL_SUBAGENT_MAX_DEPTH": "0", "KEEL_BACKGROUND_WAIT_S": "soon", "KEEL_MAX_RETRIES": "7"})
    assert env.subagent_max_depth == 1 and env.subagent_concurrency == 4 and env.subagent_max_turns == 100
    assert env.background_wait_s == 600.0 and env.max_retries == 7
    assert env.effort == "medium" and env.memory_embedder == "auto" and env.grep_python is False
    assert env.managed_settings == Path("/etc/keel/managed-settings.json")
    assert KeelEnv.of({"KEEL_MODEL": ""}).model is None  # empty is unset
    with pytest.raises(KeyError, match="KEEL_NOPE is not a declared"):
        KeelEnv.of({}).text("KEEL_NOPE")


def test_keel_home_expands_the_tilde_everywhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("KEEL_HOME", "~/kh")
    assert keel_home() == tmp_path / "kh"
    assert keel_home({"KEEL_HOME": "/x"}) == Path("/x") and keel_home({}) == tmp_path / ".keel"
    assert KeelEnv.of().home == tmp_path / "kh"
    # the memory store's default file was under a folder literally named "~" (relative to the cwd)
    assert default_location() == tmp_path / "kh" / "memory" / "memory.db"
