"""keel headless on a folder of plugins shaped as real ones, against Claude Code 2.1.328's recording
(issue #33, acceptance items 2 and 3; fixture: ``build_plugin`` in fixture.py, sources in
tests/data/compat/SOURCES.md).

The plugin ``toolkit`` holds obra/superpowers' `brainstorming` skill unchanged, a `commit` command
shaped as anthropics/claude-code's commit-commands (`allowed-tools: Bash(git add:*), Bash(git
status:*), Bash(git commit:*)` and `` !`git status` `` lines), an agent with no `name:` and a
PostToolUse hook on Bash. The user types `/toolkit:commit`; the model stages and commits.

Claude Code's side, recorded once (tests/data/compat/record_claude_plugin.py)::

    ANTHROPIC_BASE_URL=http://127.0.0.1:PORT ANTHROPIC_API_KEY=sk-ant-fake-0000 HOME=$(mktemp -d) \\
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 claude -p /toolkit:commit --allowedTools Read \\
    --plugin-dir PLUGINS

It loaded the child plugin of the folder, ran the three `!` lines into the prompt, ran `git add` and
`git commit` under the command's grant though only Read was allowed, logged two PostToolUse payloads
and printed "Committed.". keel ran `keel -p /toolkit:commit --allowedTools Read --plugin-dir PLUGINS`.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentkeel.models.fake.server import FakeLLMServer
from integration.compat.fixture import PLUGIN_PROMPT, build_plugin, plugin_plan
from kit import KeelRun, wire_env

Start = Callable[[Any], FakeLLMServer]
Keel = Callable[..., KeelRun]
RECORDING = Path(__file__).resolve().parents[2] / "data" / "compat" / "claude-code-2.1.328-plugin.json"


def _claude() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(RECORDING.read_text())
    return data


@pytest.fixture
def keel_run(project: Path, tmp_path: Path, fake_llm: Start, keel: Keel) -> dict[str, Any]:
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    build_plugin(project, plugins, {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    server = fake_llm({"steps": plugin_plan()})
    run = keel(
        "-p", PLUGIN_PROMPT, "--allowedTools", "Read", "--plugin-dir", str(plugins), env=wire_env(server, "anthropic")
    )
    log = project / "hooks.jsonl"
    git_log = subprocess.run(["git", "log", "--format=%s", "--name-only"], cwd=project, capture_output=True, text=True)
    record = {
        "exit": run.code,
        "stdout": run.stdout,
        "stderr": run.stderr,
        "requests": [r["body"] for r in server.cursor.requests],
        "hooks": [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else [],
        "git_log": git_log.stdout,
    }
    text = json.dumps(record).replace(str(project), "$PROJECT").replace(str(plugins), "$PLUGINS")
    data: dict[str, Any] = json.loads(text)
    return data


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _lines(body: dict[str, Any], prefix: str) -> list[str]:
    return [line for text in _strings(body) for line in text.splitlines() if line.startswith(prefix)]


def _expanded(body: dict[str, Any]) -> str:
    """The command's expanded text as sent in the first request."""
    found = [s for s in _strings(body["messages"]) if "## Context" in s]
    assert len(found) == 1, found
    return found[0][found[0].index("## Context") :].rstrip()


def _sha_free(text: str) -> str:
    return re.sub(r"\b[0-9a-f]{7}\b", "SHA", text)


def test_matches(keel_run: dict[str, Any]) -> None:
    """What keel does as Claude Code 2.1.328 did."""
    cc, k = _claude(), keel_run
    assert k["exit"] == cc["exit"] == 0, k["stderr"]
    assert k["stdout"].strip() == cc["stdout"].strip() == "Committed."
    assert len(k["requests"]) == len(cc["requests"]) == 3
    # --plugin-dir on a folder of plugins loads the child; its skill (named by folder) and its command
    # are listed with the same lines
    for entry in ("- toolkit:brainstorming: ", "- toolkit:commit: "):
        assert _lines(k["requests"][0], entry) == _lines(cc["requests"][0], entry), entry
        assert len(_lines(cc["requests"][0], entry)) == 1
    # the nameless plugin agent is offered as toolkit:code-simplifier
    agent = "- toolkit:code-simplifier: "
    assert [line.split('"')[0] for line in _lines(k["requests"][0], agent)] == _lines(cc["requests"][0], agent)
    # the !`git ...` lines ran and their output replaced them, the same text (the commit's hash is
    # the same too: the fixture's commit has fixed dates)
    assert _expanded(k["requests"][0]) == _expanded(cc["requests"][0])
    # the grant: git add and git commit ran under --allowedTools Read, the commit holds notes.txt
    assert k["git_log"] == cc["git_log"] == "add notes\n\nnotes.txt\ninitial\n\nREADME.md\n"
    # the plugin's PostToolUse hook on Bash: two payloads, same fields, same inputs
    assert [h["tool_input"] for h in k["hooks"]] == [h["tool_input"] for h in cc["hooks"]]
    assert [sorted(set(h) - {"tool_metadata"}) for h in k["hooks"]] == [sorted(h) for h in cc["hooks"]]
    for ours, theirs in zip(k["hooks"], cc["hooks"], strict=True):
        assert _sha_free(ours["tool_response"]["stdout"]) == _sha_free(theirs["tool_response"]["stdout"])
        for field in ("stderr", "interrupted", "isImage", "noOutputExpected"):
            assert ours["tool_response"].get(field) == theirs["tool_response"][field], field


def test_harmless_differences(keel_run: dict[str, Any]) -> None:
    """PostToolUse carries keel's `tool_metadata` besides every Claude Code field (docs/hooks.md)."""
    cc, k = _claude(), keel_run
    for ours, theirs in zip(k["hooks"], cc["hooks"], strict=True):
        assert set(ours) - set(theirs) == {"tool_metadata"}


def test_bash_tool_response_reports_the_commit(keel_run: dict[str, Any]) -> None:
    """After `git commit`, Claude Code 2.1.328's Bash `tool_response` adds `gitOperation: {"commit":
    {"sha": "ab162ae", "kind": "committed", "branch": "master"}}`; keel's has no such field."""
    ours = keel_run["hooks"][1]["tool_response"]
    assert ours.get("gitOperation", {}).get("commit", {}).get("kind") == "committed"
