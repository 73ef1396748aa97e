"""``keel hooks list`` and ``keel hooks test`` through the real command."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

from kit import KeelRun

GUARD = (
    f"{sys.executable} -c \"import json,sys; c=json.load(sys.stdin)['tool_input']['command']; "
    "sys.exit(2 if 'rm ' in c and sys.stderr.write('no rm here') else 0)\""
)


def _setup(project: Path, keel: Callable[..., KeelRun]) -> None:
    (project / ".claude").mkdir()
    hooks = {
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": GUARD, "timeout": 5}]}],
        "Stop": [{"hooks": [{"command": 'echo \'{"decision": "block", "reason": "write the tests"}\''}]}],
        "PreCompact": [{"matcher": "auto", "hooks": [{"command": "true"}]}],
    }
    (project / ".claude" / "settings.json").write_text(json.dumps({"hooks": hooks}))


def test_list_shows_sources_and_untrusted_projects_have_none(project: Path, keel: Callable[..., KeelRun]) -> None:
    _setup(project, keel)
    untrusted = keel("hooks", "list")
    assert untrusted.code == 0 and "No hooks." in untrusted.stdout and "trust" in untrusted.stdout
    assert keel("trust", str(project)).code == 0
    listed = keel("hooks", "list")
    assert listed.code == 0
    assert f"from {project.resolve()}/.claude/settings.json (project)" in listed.stdout
    assert "PreCompact" in listed.stdout and "does not fire this event yet" not in listed.stdout
    rows = json.loads(keel("hooks", "list", "--json").stdout)["hooks"]
    assert [(r["event"], r["matcher"], r["fired"]) for r in rows if r["scope"] != "builtin"] == [
        ("PreToolUse", "Bash", True),
        ("Stop", "", True),
        ("PreCompact", "auto", True),
    ]
    # memory is an extension on keel's own events, not a hook: the list is the user's hooks only
    assert all(r["scope"] != "builtin" for r in rows) and "memory" not in listed.stdout


def test_test_runs_the_matching_handlers_and_says_what_keel_would_do(
    project: Path, keel: Callable[..., KeelRun]
) -> None:
    _setup(project, keel)
    assert keel("trust", str(project)).code == 0
    rm = keel("hooks", "test", "PreToolUse", "--input", '{"tool_name": "Bash", "tool_input": {"command": "rm -rf x"}}')
    assert rm.code == 0, rm.stderr
    assert "exit 2" in rm.stdout and "stderr: no rm here" in rm.stdout
    assert rm.stdout.splitlines()[-1] == "keel would: deny the call: no rm here"
    ls = keel("hooks", "test", "PreToolUse", "--input", '{"tool_name": "Bash", "tool_input": {"command": "ls"}}')
    assert ls.stdout.splitlines()[-1] == "keel would: let the permission rules decide"
    other = keel("hooks", "test", "PreToolUse", "--input", '{"tool_name": "Read", "tool_input": {}}')
    assert "No PreToolUse hook matches" in other.stdout
    stop = json.loads(keel("hooks", "test", "Stop", "--json").stdout)
    assert stop["keel_would"] == "continue the conversation with: write the tests"
    assert stop["hooks"][0]["exit_code"] == 0
    bad = keel("hooks", "test", "Stopp")
    assert bad.code == 2 and bad.stderr.startswith("keel: unknown hook event 'Stopp'")
    assert len(bad.stderr.splitlines()) == 1
    bad = keel("hooks", "test", "Stop", "--input", "[1,")
    assert bad.code == 2 and "--input is not valid JSON" in bad.stderr and "Traceback" not in bad.stderr
