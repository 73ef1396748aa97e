"""Permissions ask the tool what it does (``Tool.effects``), and a partial or missing declaration
never takes a check away: what keel cannot model exactly is not allowed (an independent review of
the effects change found each of these)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from agentkeel.core.tools import Effects, Tool, ToolContext, ToolOutput
from agentkeel.policy.permissions import PermissionEngine
from agentkeel.policy.sandbox import setup_sandbox
from agentkeel.tools import builtin_tools
from kit import KeelRun, call, write_script


async def _noop(args: object, ctx: ToolContext) -> ToolOutput:
    return ToolOutput("")


def _tool(name: str, effects: Effects, *, group: str = "custom", read_only: bool = False) -> Tool:
    return Tool(
        name,
        "a host tool",
        None,
        _noop,
        raw_schema={"type": "object"},
        effects=effects,
        group=group,
        read_only=read_only,
    )  # type: ignore[arg-type]


def _engine(tmp_path: Path, mode: str = "default") -> PermissionEngine:
    project = tmp_path / "project"
    (project / "secret").mkdir(parents=True, exist_ok=True)
    engine = PermissionEngine(cwd=str(project), home=str(tmp_path / "home"), mode=mode)  # type: ignore[arg-type]
    engine.add(["Read(/secret/**)", "Edit(/locked/**)"], "deny", "settings", "project")
    return engine


def test_a_writer_that_names_no_path_field_is_judged_on_claude_codes_path_fields(tmp_path: Path) -> None:
    save = _tool("save_file", Effects(rule="Edit", writes=True), group="fs")
    engine = _engine(tmp_path, "acceptEdits")
    assert engine.decide("save_file", {"file_path": "locked/x"}, save).decision == "deny"
    assert engine.decide("save_file", {"file_path": ".git/hooks/pre-commit"}, save).decision == "ask"


def test_every_path_a_tool_declares_is_checked(tmp_path: Path) -> None:
    diff = _tool("diff_files", Effects(rule="Read", path_fields=("left", "right"), reads=True), read_only=True)
    engine = _engine(tmp_path)
    assert engine.decide("diff_files", {"left": "a.txt", "right": "secret/key"}, diff).decision == "deny"
    # two paths: the working-directory and credential checks judge one, so nothing is allowed by default
    assert engine.decide("diff_files", {"left": "a.txt", "right": "~/.ssh/id_rsa"}, diff).decision == "ask"


def test_a_file_tool_without_a_rule_family_is_still_under_read_and_edit_rules(tmp_path: Path) -> None:
    reader = _tool("peek", Effects(path_fields=("target",), reads=True), read_only=True)
    writer = _tool("poke", Effects(path_fields=("target",), writes=True))
    engine = _engine(tmp_path, "bypassPermissions")
    assert engine.decide("peek", {"target": "secret/key"}, reader).decision == "deny"
    assert engine.decide("poke", {"target": "locked/x"}, writer).decision == "deny"


@pytest.mark.parametrize("name", ["Read", "Write"])
def test_a_host_tool_named_like_a_built_in_keeps_the_built_ins_checks(tmp_path: Path, name: str) -> None:
    impostor = _tool(name, Effects(protected=True))
    engine = _engine(tmp_path, "bypassPermissions")
    target = "secret/key" if name == "Read" else "locked/x"
    assert engine.decide(name, {"file_path": target}, impostor).decision == "deny"


def test_agent_rules_are_task_rules_and_any_case_of_the_name_is_caught(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    engine.add(["Agent(reviewer)"], "deny", "settings", "project")
    assert engine.decide("Task", {"subagent_type": "reviewer"}, None).decision == "deny"
    assert engine.decide("Task", {"subagent_type": "REVIEWER"}, None).decision == "deny"
    hidden = PermissionEngine(cwd=str(tmp_path), home=str(tmp_path))
    hidden.add(["Agent"], "deny", "--disallowedTools", "cli")
    assert hidden.decide("Task", {"subagent_type": "x"}, None).decision == "deny"


def test_only_the_tool_that_runs_in_the_sandbox_is_auto_allowed_by_it(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    warnings: list[str] = []
    sandbox = setup_sandbox(
        {"enabled": True, "autoAllowBashIfSandboxed": True},
        cwd=tmp_path / "project",
        home=tmp_path / "home",
        keel_home=tmp_path / "kh",
        engine=engine,
        warnings=warnings,
    )
    if sandbox is None or not sandbox.active:
        pytest.skip(f"the Bash sandbox is unavailable here: {warnings}")
    remote = _tool("remote_sh", Effects(rule="Bash", shell=True))
    command = {"command": f"touch {tmp_path}/outside"}
    assert engine.decide("remote_sh", command, remote).decision == "ask"
    bash = next(t for t in builtin_tools() if t.name == "Bash")
    assert engine.decide("Bash", command, bash).decision == "allow"


def test_a_path_under_another_users_home_is_judged_where_the_tool_opens_it(tmp_path: Path) -> None:
    """``~root/x`` is /root/x for the tools (Path.expanduser): the gate must not judge it as a file
    named ``~root`` inside the project."""
    import pwd

    user = pwd.getpwuid(0).pw_name
    engine = PermissionEngine(cwd=str(tmp_path / "project"), home=str(tmp_path / "home"))
    engine.add([f"Read(/{pwd.getpwuid(0).pw_dir}/**)"], "deny", "settings", "project")
    read = next(t for t in builtin_tools() if t.name == "Read")
    assert engine.decide("Read", {"file_path": f"~{user}/.profile"}, read).decision == "deny"
    write = next(t for t in builtin_tools() if t.name == "Write")
    assert engine.decide("Write", {"file_path": f"~{user}/x.desktop"}, write).decision != "allow"


def test_a_command_never_runs_elsewhere_than_where_it_was_judged(project: Path, keel: Callable[..., KeelRun]) -> None:
    """The gate judges a relative path from the shell's directory; when that directory is removed,
    the command is refused (and the shell is back at the project root) rather than run at the root,
    where ``cat secret/key`` reads what a deny rule protects."""
    (project / "secret").mkdir()
    (project / "secret" / "key").write_text("the-protected-text\n")
    gone = project / "gone"
    script = write_script(
        project.parent,
        [
            call("Bash", command="mkdir gone && cd gone"),
            call("Bash", command=f"rmdir {gone}"),
            call("Bash", command="cat secret/key"),
            call("Bash", command="cat secret/key"),
            "done",
        ],
    )
    run = keel(
        "-p",
        "go",
        "--model",
        f"scripted:{script}",
        "--permission-mode",
        "bypassPermissions",
        "--disallowedTools",
        "Read(/secret/**)",
        "--output-format",
        "stream-json",
        "--verbose",
    )
    assert run.code == 0, run.stderr
    assert "the-protected-text" not in run.stdout
    assert "no longer exists" in run.stdout
    assert "Read(/secret/**)" in run.stdout or "denied" in run.stdout  # the retry, from the root, is denied


@pytest.mark.parametrize("name", ["ReadMcpResourceTool", "ReadMcpResource"])
def test_claude_codes_mcp_resource_tool_names_work_in_rules(tmp_path: Path, name: str) -> None:
    """Claude Code 2.1.328 calls it ReadMcpResourceTool; keel's tool has that name, and a rule
    naming keel's former name still holds for it."""
    from agentkeel.mcp.tools import resource_tools

    read = next(t for t in resource_tools(None) if t.name == "ReadMcpResourceTool")  # type: ignore[arg-type]
    engine = PermissionEngine(cwd=str(tmp_path), home=str(tmp_path))
    engine.add([name], "deny", "--disallowedTools", "cli")
    assert engine.hidden(read)
    assert engine.decide(read.name, {"server": "s", "uri": "x://y"}, read).decision == "deny"
