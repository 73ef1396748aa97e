"""Tools describe themselves (issue #32, item 1): each built-in declares its ``Effects`` and its
Claude Code ``tool_response``; the shipped stand-ins carry them; permissions ask the tool, not its
name; relative paths resolve once, against the session's working directory. Through the public
API and the real CLI against the scripted model."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentkeel.core.tools import NO_EFFECTS, Effects, Tool, ToolContext, ToolOutput
from agentkeel.policy.permissions import PermissionEngine
from agentkeel.tools import EDIT, builtin_tools, effects_of, real_builtin_tools
from conftest import KeelRun


def _script(tmp: Path, steps: list[Any]) -> str:
    path = tmp / "script.json"
    path.write_text(json.dumps({"steps": steps}))
    return f"scripted:{path}"


def _results(run: KeelRun) -> list[dict[str, Any]]:
    """The tool results of a stream-json run, in order."""
    out = []
    for line in run.lines():
        if line.get("type") != "user":
            continue
        for block in line["message"]["content"]:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                out.append(block)
    return out


def _text(result: dict[str, Any]) -> str:
    content = result["content"]
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content)


# --- declarations -----------------------------------------------------------------------------


def test_the_stand_ins_and_effects_of_carry_what_each_tool_declares() -> None:
    real = {t.name: t for t in real_builtin_tools()}
    shipped = {t.name: t for t in builtin_tools()}
    assert set(real) == set(shipped)
    for name, tool in real.items():
        assert shipped[name].input_model is None, name  # a stand-in: its module is not loaded
        assert shipped[name].effects == tool.effects == effects_of(name), name
    writers = {n for n, t in real.items() if t.effects.writes}
    assert writers == {"Write", "Edit", "MultiEdit", "NotebookEdit"}
    assert all(real[n].effects.rule == EDIT for n in writers)
    assert real["Bash"].effects.shell and real["WebFetch"].effects.fetches and real["TodoWrite"].effects.protected
    assert effects_of("NotebookRead") == effects_of("WebSearch") == NO_EFFECTS  # no such tools


def test_effects_of_imports_no_tool_module() -> None:
    code = (
        "import sys; from agentkeel.tools import effects_of; e = effects_of('MultiEdit');"
        "print(e.writes, e.rule, sorted(m for m in sys.modules if m.startswith('agentkeel.tools.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "True Edit ['agentkeel.tools.schemas']", out


def test_each_tool_gives_claude_codes_tool_response_shape() -> None:
    tools = {t.name: t for t in builtin_tools()}
    bash = tools["Bash"].response({"command": "ls"}, ToolOutput("a\nb", metadata={"exit_code": 0}))
    assert bash == {"stdout": "a\nb", "stderr": "", "interrupted": False, "isImage": False, "noOutputExpected": False}
    assert tools["Bash"].response({"command": "true"}, ToolOutput("(no output)"))["stdout"] == ""
    read = tools["Read"].response({"file_path": "/p/a.txt"}, ToolOutput("     1\tx"))
    assert read == {"type": "text", "file": {"filePath": "/p/a.txt", "content": "     1\tx"}}
    # Write/Edit/MultiEdit: compared with Claude Code's in tests/integration/hooks/test_cc_hook_payloads.py
    write = tools["Write"].response(
        {"file_path": "/p/a.txt", "content": "x"}, ToolOutput("ok", metadata={"created": True})
    )
    assert write == {
        "type": "create",
        "filePath": "/p/a.txt",
        "content": "x",
        "structuredPatch": [],
        "originalFile": None,
        "userModified": False,
    }
    edit_input = {"file_path": "/p/a.txt", "old_string": "a", "new_string": "b"}
    assert {"filePath", "oldString", "newString", "originalFile", "structuredPatch"} <= tools["Edit"].response(
        edit_input, ToolOutput("ok")
    ).keys()
    multi = tools["MultiEdit"].response({"file_path": "/p/a.txt", "edits": []}, ToolOutput("ok"))
    assert {"filePath", "edits", "originalFileContents", "structuredPatch"} <= multi.keys()
    glob = tools["Glob"].response({"pattern": "*"}, ToolOutput("x.py", metadata={"match_count": 1, "x": [1]}))
    assert glob == {"output": "x.py", "match_count": 1}


# --- permissions ask the tool ------------------------------------------------------------------


async def _noop(args: Any, ctx: ToolContext) -> ToolOutput:
    return ToolOutput("")


def test_a_tool_that_declares_edit_effects_is_governed_by_edit_rules(tmp_path: Path) -> None:
    """A plugin or SDK tool that says it writes files under the Edit family: ``Edit`` rules hold for it."""
    project = tmp_path / "project"
    (project / "docs").mkdir(parents=True)
    patcher = Tool(
        "Patcher",
        "patch a file",
        None,
        _noop,
        raw_schema={"type": "object"},
        effects=Effects(rule=EDIT, path_fields=("target",), writes=True),
    )
    denied = PermissionEngine(cwd=str(project), home=str(tmp_path))
    denied.add(["Write", "Edit"], "deny", "--disallowedTools", "cli")
    assert denied.hidden(patcher)
    assert denied.decide("Patcher", {"target": "docs/a.md"}, patcher).decision == "deny"
    allowed = PermissionEngine(cwd=str(project), home=str(tmp_path))
    allowed.add(["Edit(/docs/**)"], "allow", "settings", "project")
    assert allowed.decide("Patcher", {"target": "docs/a.md"}, patcher).decision == "allow"
    assert allowed.decide("Patcher", {"target": "src/a.py"}, patcher).decision == "ask"
    assert allowed.decide("Patcher", {"target": ".git/hooks/pre-commit"}, patcher).decision == "ask"


@pytest.mark.parametrize("how", ["flag", "settings"])
def test_disallowing_write_and_edit_leaves_no_tool_that_writes_files(
    how: str, project: Path, keel: Callable[..., KeelRun]
) -> None:
    (project / "a.txt").write_text("one\n")
    edits = [{"old_string": "one", "new_string": "two"}]
    model = _script(
        project.parent,
        [
            {"tool_calls": [{"name": "Read", "input": {"file_path": "a.txt"}}]},
            {"tool_calls": [{"name": "MultiEdit", "input": {"file_path": "a.txt", "edits": edits}}]},
            "done",
        ],
    )
    args = ["-p", "edit it", "--model", model, "--output-format", "stream-json", "--verbose"]
    if how == "flag":
        args += ["--disallowedTools", "Write,Edit", "--permission-mode", "acceptEdits"]
    else:
        (project / ".keel").mkdir()
        settings = {"permissions": {"deny": ["Write", "Edit"], "defaultMode": "acceptEdits"}}
        (project / ".keel" / "settings.json").write_text(json.dumps(settings))
    run = keel(*args)
    assert run.code == 0, run.stderr
    offered = run.lines()[0]["tools"]
    assert "Read" in offered and "Bash" in offered
    assert not [name for name in offered if effects_of(name).writes], offered
    read, multi = _results(run)
    assert not read.get("is_error"), read
    assert multi.get("is_error") and "denied" in _text(multi).lower(), multi
    assert (project / "a.txt").read_text() == "one\n"  # the file keel was told not to change


# --- one base for relative paths ----------------------------------------------------------------


def test_after_cd_a_relative_read_and_its_permission_check_name_the_same_file(
    project: Path, keel: Callable[..., KeelRun]
) -> None:
    sub = project / "sub"
    sub.mkdir()
    (project / "notes.txt").write_text("outer notes\n")
    (sub / "notes.txt").write_text("inner notes\n")
    (project / "secret.txt").write_text("outer public\n")
    (sub / "secret.txt").write_text("inner secret\n")
    model = _script(
        project.parent,
        [
            {"tool_calls": [{"name": "Bash", "input": {"command": "cd sub"}}]},
            {"tool_calls": [{"name": "Read", "input": {"file_path": "notes.txt"}}]},
            {"tool_calls": [{"name": "Read", "input": {"file_path": "secret.txt"}}]},
            "done",
        ],
    )
    rules = ["--allowedTools", "Bash(cd *)", "--disallowedTools", "Read(/sub/secret.txt)"]
    run = keel("-p", "look", "--model", model, "--output-format", "stream-json", "--verbose", *rules)
    assert run.code == 0, run.stderr
    cd, notes, secret = _results(run)
    assert not cd.get("is_error"), cd
    assert "inner notes" in _text(notes), notes  # the tool read sub/notes.txt
    # the gate checked sub/secret.txt, the file the tool would have read, and the rule caught it
    assert secret.get("is_error") and "denied" in _text(secret).lower(), secret
    assert "sub/secret.txt" in _text(secret) and "inner secret" not in _text(secret), secret


def test_task_rules_govern_its_alias_agent_and_skill_rules_name_the_skill(tmp_path: Path) -> None:
    """Claude Code's ``Agent`` tool is ``Task`` renamed: ``Task`` rules hold for both (a name alone,
    no tool at hand, as ``keel permissions check`` decides)."""
    engine = PermissionEngine(cwd=str(tmp_path), home=str(tmp_path))
    engine.add(["Task(deployer)"], "deny", "settings", "user")
    engine.add(["Task(reviewer)", "Skill(lint)"], "allow", "settings", "user")
    for name in ("Task", "Agent"):
        assert engine.decide(name, {"subagent_type": "deployer", "prompt": "x"}).decision == "deny", name
        assert engine.decide(name, {"subagent_type": "reviewer", "prompt": "x"}).decision == "allow", name
    assert engine.decide("Skill", {"skill": "lint"}).decision == "allow"
    assert engine.decide("Skill", {"skill": "deploy"}).decision != "allow"
