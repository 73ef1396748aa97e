"""Hook payloads and hook outputs compared with the real Claude Code 2.1.328 (issue #33, root
causes 11 and 15).

Every expectation below was recorded from ``claude -p`` (npm ``@anthropic-ai/claude-code@2.1.328``)
driven by the scripted model ``/work/shared/tools/fakellm.py`` (with ``FAKELLM_PLAN``, and a copy
that also wrote each request body), in a project whose ``.claude/settings.json`` registers command
hooks that append their stdin to a file::

    ANTHROPIC_BASE_URL=http://127.0.0.1:$PORT ANTHROPIC_API_KEY=sk-ant-fake-0000 HOME=$(mktemp -d) \\
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 claude -p "go" --allowedTools Read,Edit,Write

Paths of the recorded runs are replaced by this test's project. Each test names what Claude Code
did; keel runs the same fixture and plan and must send or do the same.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkeel.models.fake.server import FakeLLMServer
from conftest import KeelRun, wire_env
from kit import session

# a real command hook, as a Claude Code user writes one: it appends the JSON on its stdin to a file
LOGGER = "import os, sys; open(os.environ['HOOK_LOG'], 'a').write(sys.stdin.read().replace(chr(10), ' ') + chr(10))"
LOG_HOOK = {"type": "command", "command": f"{sys.executable} -c {json.dumps(LOGGER)}"}

Keel = Callable[..., KeelRun]
FakeLLM = Callable[[Any], FakeLLMServer]


def _settings(project: Path, hooks: dict[str, Any], keel: Keel) -> None:
    (project / ".claude").mkdir(exist_ok=True)
    (project / ".claude" / "settings.json").write_text(json.dumps({"hooks": hooks}))
    assert keel("trust", str(project)).code == 0


def _payloads(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def _call(name: str, **tool_input: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "input": tool_input}]}


def _texts(message: dict[str, Any]) -> str:
    content = message["content"]
    if isinstance(content, str):
        return content
    out = []
    for block in content:
        inner = block.get("content")
        if isinstance(inner, list):
            out += [b.get("text", "") for b in inner]
        elif isinstance(inner, str):
            out.append(inner)
        out.append(block.get("text", ""))
    return "\n".join(out)


CONTEXT_AFTER = [" line 11", " line 12", " line 13"]
BIG = "".join(f"line {i}\n" for i in range(1, 21))
AFTER_TEN = BIG.replace("line 10\n", "LINE TEN\nextra\n")


def test_write_and_edit_tool_responses_are_claude_codes(
    project: Path, tmp_path: Path, fake_llm: FakeLLM, keel: Keel
) -> None:
    """PostToolUse's ``tool_response`` for Write (create, update) and Edit, field by field.

    Claude Code 2.1.328, plan: Write new.txt; Edit existing.txt ``old line`` -> ``NEW line``; Write
    existing.txt; Edit big.txt (20 lines) ``line 10\\n`` -> ``LINE TEN\\nextra\\n``; Edit big.txt
    ``line 1`` -> ``L1`` replace_all. Its PostToolUse hook received the dicts asserted below
    (``type``/``filePath``/``content``/``structuredPatch``/``originalFile``/``userModified`` for
    Write; ``filePath``/``oldString``/``newString``/``originalFile``/``structuredPatch``/
    ``userModified``/``replaceAll`` for Edit; hunks with three lines of context). keel sent
    ``{**tool_input, "filePath", "success": true}`` for all three tools before.
    """
    (project / "existing.txt").write_text("hello old line\nsecond line\n")
    (project / "big.txt").write_text(BIG)
    _settings(project, {"PostToolUse": [{"matcher": "Write|Edit", "hooks": [LOG_HOOK]}]}, keel)
    new, existing, big = (str(project.resolve() / n) for n in ("new.txt", "existing.txt", "big.txt"))
    server = fake_llm(
        {
            "steps": [
                _call("Write", file_path=new, content="brand new\nfile\n"),
                _call("Read", file_path=existing),  # keel edits only what was read (Claude Code: not needed)
                _call("Edit", file_path=existing, old_string="old line", new_string="NEW line"),
                _call("Write", file_path=existing, content="overwritten\n"),
                _call("Read", file_path=big),
                _call("Edit", file_path=big, old_string="line 10\n", new_string="LINE TEN\nextra\n"),
                _call("Edit", file_path=big, old_string="line 1", new_string="L1", replace_all=True),
                "done",
            ]
        }
    )
    log = tmp_path / "hooks.log"
    env = {**wire_env(server, "anthropic"), "HOOK_LOG": str(log)}
    run = keel("-p", "go", "--allowedTools", "Read", "Write", "Edit", env=env)
    assert run.code == 0, run.stderr
    responses = [p["tool_response"] for p in _payloads(log)]
    assert responses == [
        {
            "type": "create",
            "filePath": new,
            "content": "brand new\nfile\n",
            "structuredPatch": [],
            "originalFile": None,
            "userModified": False,
        },
        {
            "filePath": existing,
            "oldString": "old line",
            "newString": "NEW line",
            "originalFile": "hello old line\nsecond line\n",
            "structuredPatch": [
                {
                    "oldStart": 1,
                    "oldLines": 2,
                    "newStart": 1,
                    "newLines": 2,
                    "lines": ["-hello old line", "+hello NEW line", " second line"],
                }
            ],
            "userModified": False,
            "replaceAll": False,
        },
        {
            "type": "update",
            "filePath": existing,
            "content": "overwritten\n",
            "structuredPatch": [
                {
                    "oldStart": 1,
                    "oldLines": 2,
                    "newStart": 1,
                    "newLines": 1,
                    "lines": ["-hello NEW line", "-second line", "+overwritten"],
                }
            ],
            "originalFile": "hello NEW line\nsecond line\n",
            "userModified": False,
        },
        {
            "filePath": big,
            "oldString": "line 10\n",
            "newString": "LINE TEN\nextra\n",
            "originalFile": BIG,
            "structuredPatch": [
                {
                    "oldStart": 7,
                    "oldLines": 7,
                    "newStart": 7,
                    "newLines": 8,
                    "lines": [" line 7", " line 8", " line 9", "-line 10", "+LINE TEN", "+extra", *CONTEXT_AFTER],
                }
            ],
            "userModified": False,
            "replaceAll": False,
        },
        {
            "filePath": big,
            "oldString": "line 1",
            "newString": "L1",
            "originalFile": AFTER_TEN,
            "structuredPatch": [
                {
                    "oldStart": 1,
                    "oldLines": 4,
                    "newStart": 1,
                    "newLines": 4,
                    "lines": ["-line 1", "+L1", " line 2", " line 3", " line 4"],
                },
                {
                    "oldStart": 9,
                    "oldLines": 13,
                    "newStart": 9,
                    "newLines": 13,
                    "lines": [" line 9", " LINE TEN", " extra"]
                    + [f"-line {i}" for i in range(11, 20)]
                    + [f"+L{i}" for i in range(11, 20)]
                    + [" line 20"],
                },
            ],
            "userModified": False,
            "replaceAll": True,
        },
    ]
    assert (project / "big.txt").read_text() == AFTER_TEN.replace("line 1", "L1")


def test_multi_edit_tool_response_names_the_file_before_and_the_diff(
    project: Path, tmp_path: Path, fake_llm: FakeLLM, keel: Keel
) -> None:
    """MultiEdit: Claude Code 2.1.328 no longer offers it (the recorded run's tool list has no
    MultiEdit); keel keeps the tool and sends the shape of the last Claude Code that had it
    (``filePath``, ``edits``, ``originalFileContents``, ``structuredPatch``, ``userModified``)."""
    (project / "existing.txt").write_text("hello old line\nsecond line\n")
    _settings(project, {"PostToolUse": [{"matcher": "MultiEdit", "hooks": [LOG_HOOK]}]}, keel)
    path = str(project.resolve() / "existing.txt")
    edits = [{"old_string": "second", "new_string": "2nd"}, {"old_string": "hello", "new_string": "hi"}]
    server = fake_llm({"steps": [_call("Read", file_path=path), _call("MultiEdit", file_path=path, edits=edits), "ok"]})
    log = tmp_path / "hooks.log"
    run = keel(
        "-p", "go", "--allowedTools", "Read", "MultiEdit", env={**wire_env(server, "anthropic"), "HOOK_LOG": str(log)}
    )
    assert run.code == 0, run.stderr
    [payload] = _payloads(log)
    response = payload["tool_response"]
    assert response["filePath"] == path and response["userModified"] is False
    assert [{k: e[k] for k in ("old_string", "new_string")} for e in response["edits"]] == edits
    assert response["originalFileContents"] == "hello old line\nsecond line\n"
    assert response["structuredPatch"] == [
        {
            "oldStart": 1,
            "oldLines": 2,
            "newStart": 1,
            "newLines": 2,
            "lines": ["-hello old line", "-second line", "+hi old line", "+2nd line"],
        }
    ]


def test_pre_tool_use_additional_context_reaches_the_model(
    project: Path, tmp_path: Path, fake_llm: FakeLLM, keel: Keel
) -> None:
    """Claude Code 2.1.328 with a PreToolUse hook (matcher Read) printing
    ``{"hookSpecificOutput":{"hookEventName":"PreToolUse","additionalContext":"PRECTX-MARK from hook"}}``
    sent, in the request after the Read's result, the text
    ``PreToolUse:Read hook additional context: PRECTX-MARK from hook`` (a message of its own after
    the tool_result). keel sent nothing of it before."""
    (project / "f.txt").write_text("some content\n")
    answer = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "additionalContext": "PRECTX-MARK from hook"}}
    hook = {"type": "command", "command": f"cat >/dev/null; echo {json.dumps(json.dumps(answer))}"}
    _settings(project, {"PreToolUse": [{"matcher": "Read", "hooks": [hook]}]}, keel)
    server = fake_llm({"steps": [_call("Read", file_path=str(project / "f.txt")), "final text"]})
    run = keel("-p", "read it", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    after = server.cursor.requests[1]["body"]["messages"][-1]
    text = _texts(after)
    assert "some content" in text and "PreToolUse:Read hook additional context: PRECTX-MARK from hook" in text, text


STOP_SCRIPT = """#!/bin/sh
cat > /dev/null
F="$(dirname "$0")/stopcount"; n=$(cat "$F" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$F"
if [ $n = 1 ]; then echo '{"decision":"block","reason":"STOPREASON1-MARK stdout json"}'; exit 2; fi
if [ $n = 2 ]; then echo '{"decision":"block","reason":"STOPREASON2-MARK stdout json"}'
  echo "STOPERR2-MARK stderr" >&2; exit 2; fi
if [ $n = 3 ]; then echo "plain stdout STOPPLAIN3-MARK"; exit 2; fi
exit 0
"""


def test_an_exit_2_stop_hooks_json_reason_reaches_the_model(
    project: Path, tmp_path: Path, fake_llm: FakeLLM, keel: Keel
) -> None:
    """Claude Code 2.1.328 with this Stop hook (exit 2 each time: a JSON reason on stdout; the same
    with stderr too; plain stdout; then exit 0) sent the model three more turns whose last user
    message was ``Stop hook feedback:\\nSTOPREASON1-MARK stdout json``, then
    ``Stop hook feedback:\\nSTOPREASON2-MARK stdout json`` (the JSON reason wins over stderr), then
    ``Stop hook feedback:\\n[<command>]: No stderr output``. keel sent "blocked by Stop hook ..."."""
    script = tmp_path / "stop.sh"
    script.write_text(STOP_SCRIPT)
    script.chmod(0o755)
    _settings(project, {"Stop": [{"hooks": [{"type": "command", "command": str(script)}]}]}, keel)
    server = fake_llm({"steps": ["first", "second", "third", "fourth"]})
    run = keel("-p", "answer", "--output-format", "json", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    assert run.json()["result"] == "fourth"
    sent = [_texts(r["body"]["messages"][-1]) for r in server.cursor.requests[1:]]
    assert sent == [
        "Stop hook feedback:\nSTOPREASON1-MARK stdout json",
        "Stop hook feedback:\nSTOPREASON2-MARK stdout json",
        f"Stop hook feedback:\n[{script}]: No stderr output",
    ]


ASYNC_HOOK = """#!/bin/sh
cat > /dev/null
echo '{"async": true, "asyncTimeout": 15000}'
i=0; while [ ! -e go ] && [ $i -lt 150 ]; do sleep 0.1; i=$((i+1)); done
[ -e go ] || exit 1
echo '{"hookSpecificOutput":{"hookEventName":"PostToolUse","additionalContext":"ASYNCCTX-MARK"}}'
"""


def test_an_async_hook_runs_on_without_holding_the_session(
    project: Path, tmp_path: Path, fake_llm: FakeLLM, keel: Keel
) -> None:
    """A PostToolUse hook that opens with ``{"async": true, "asyncTimeout": 15000}`` (Claude Code's
    async protocol), then waits for a file the *next* tool call creates. Claude Code 2.1.328 ran
    the session on without waiting and without a word about it (exit 0, answer ``final text``, no
    hook error). keel waited for the hook (so the next call never came: the hook gave up) and then
    said its output "is not valid JSON". What the hook says when it ends reaches the model with
    a later result."""
    (project / "f.txt").write_text("x\n")
    script = tmp_path / "async.sh"
    script.write_text(ASYNC_HOOK)
    script.chmod(0o755)
    _settings(
        project, {"PostToolUse": [{"matcher": "Read", "hooks": [{"type": "command", "command": str(script)}]}]}, keel
    )
    read = _call("Read", file_path=str(project / "f.txt"))
    wait = "touch go; i=0; while [ $i -lt 30 ]; do sleep 0.1; i=$((i+1)); done"  # time for the hook to end
    server = fake_llm({"steps": [read, _call("Bash", command=wait), read, "final text"]})
    run = keel(
        "-p", "read it", "--output-format", "json", "--allowedTools", "Read", "Bash", env=wire_env(server, "anthropic")
    )
    assert run.code == 0, run.stderr
    assert run.json()["result"] == "final text"
    assert (project / "go").exists()
    assert "not valid JSON" not in run.stderr and "PostToolUse hook" not in run.stderr, run.stderr
    later = "".join(_texts(r["body"]["messages"][-1]) for r in server.cursor.requests[2:])
    assert "PostToolUse hook additional context: ASYNCCTX-MARK" in later


def test_permission_suggestions_have_claude_codes_shape(
    project: Path, tmp_path: Path, fake_llm: FakeLLM, keel: Keel
) -> None:
    """PermissionRequest's ``permission_suggestions``. Claude Code 2.1.328 (``--allowedTools
    Read,Edit``, headless), for ``Bash touch .../made-by-bash && npm test``:
    ``[{"type":"addRules","rules":[{"toolName":"Bash","ruleContent":"touch ..."},{"toolName":"Bash",
    "ruleContent":"npm test *"}],"behavior":"allow","destination":"localSettings"}]``; for a Write:
    ``[{"type":"setMode","mode":"acceptEdits","destination":"session"}]``. keel sent
    ``[{"type":"addRules","rules":["Bash(...)"]}]``: rule strings, no behaviour, no destination."""
    _settings(project, {"PermissionRequest": [{"matcher": "*", "hooks": [LOG_HOOK]}]}, keel)
    server = fake_llm(
        {
            "steps": [
                _call("Bash", command="touch made-by-bash && npm test"),
                _call("Write", file_path=str(project / "nonl.txt"), content="a\nb"),
                "done",
            ]
        }
    )
    log = tmp_path / "hooks.log"
    run = keel("-p", "go", "--allowedTools", "Read", env={**wire_env(server, "anthropic"), "HOOK_LOG": str(log)})
    assert run.code == 0, run.stderr
    payloads = _payloads(log)
    # Claude Code's PermissionRequest fields (keel adds tool_use_id)
    cc_fields = {"session_id", "transcript_path", "cwd", "prompt_id", "permission_mode", "effort", "hook_event_name"}
    assert all(set(p) >= cc_fields | {"tool_name", "tool_input", "permission_suggestions"} for p in payloads)
    by_tool = {p["tool_name"]: p["permission_suggestions"] for p in payloads}
    assert by_tool["Write"] == [{"type": "setMode", "mode": "acceptEdits", "destination": "session"}]
    [bash] = by_tool["Bash"]
    assert {k: bash[k] for k in ("type", "behavior", "destination")} == {
        "type": "addRules",
        "behavior": "allow",
        "destination": "localSettings",
    }
    assert bash["rules"] and all(r["toolName"] == "Bash" and r["ruleContent"] for r in bash["rules"]), bash
    assert not (project / "made-by-bash").exists() and not (project / "nonl.txt").exists()


SUBAGENT_STOP_FIELDS = {  # Claude Code 2.1.328's SubagentStop payload (an Agent call, general-purpose)
    "session_id",
    "transcript_path",
    "cwd",
    "prompt_id",
    "permission_mode",
    "agent_id",
    "agent_type",
    "effort",
    "hook_event_name",
    "stop_hook_active",
    "agent_transcript_path",
    "last_assistant_message",
    "background_tasks",
    "session_crons",
}


def test_subagent_stop_carries_claude_codes_fields(
    project: Path, tmp_path: Path, fake_llm: FakeLLM, keel: Keel
) -> None:
    """Claude Code 2.1.328's SubagentStop (an ``Agent`` call to general-purpose whose child read a
    file and answered ``subagent done SUBRESULT``) carried :data:`SUBAGENT_STOP_FIELDS`, with
    ``last_assistant_message`` the child's answer and ``stop_hook_active`` false. keel lacked
    ``permission_mode``, ``effort``, ``background_tasks`` and ``session_crons``."""
    _settings(project, {"SubagentStop": [{"hooks": [LOG_HOOK]}]}, keel)
    task = {"description": "sub", "prompt": "SUBAGENTPROMPT do it", "subagent_type": "general-purpose"}
    server = fake_llm({"steps": [_call("Task", **task), "subagent done SUBRESULT", "all done"]})
    log = tmp_path / "hooks.log"
    run = keel("-p", "go", "--allowedTools", "Task", env={**wire_env(server, "anthropic"), "HOOK_LOG": str(log)})
    assert run.code == 0, run.stderr
    [stop] = _payloads(log)
    assert set(stop) >= SUBAGENT_STOP_FIELDS, SUBAGENT_STOP_FIELDS - set(stop)
    assert stop["agent_type"] == "general-purpose" and stop["last_assistant_message"] == "subagent done SUBRESULT"
    assert stop["stop_hook_active"] is False and stop["permission_mode"] == "default"
    assert stop["background_tasks"] == [] and stop["session_crons"] == []
    assert stop["effort"] == {"level": "medium"}


COMMAND = """---
description: A command with its own hooks
argument-hint: [what]
hooks:
  PreToolUse:
    - matcher: "Read"
      hooks:
        - type: command
          command: "HOOK_TAG=cmdhook LOGGER"
---
EXPANDEDBODY-MARK run with $ARGUMENTS
"""


def _command_project(project: Path, keel: Keel) -> None:
    tagged = "import os, sys, json; d = json.load(sys.stdin); d['_tag'] = os.environ.get('HOOK_TAG', 'settings'); "
    tagged += "open(os.environ['HOOK_LOG'], 'a').write(json.dumps(d) + chr(10))"
    logger = f"{sys.executable} -c {json.dumps(tagged)}"
    (project / ".claude" / "commands").mkdir(parents=True)
    (project / ".claude" / "commands" / "mycmd.md").write_text(COMMAND.replace("LOGGER", logger.replace('"', '\\"')))
    (project / "f.txt").write_text("some content\n")
    hook = {"type": "command", "command": logger}
    _settings(project, {"UserPromptSubmit": [{"hooks": [hook]}]}, keel)


def test_user_prompt_submit_gets_the_typed_command_and_command_hooks_run(
    project: Path, tmp_path: Path, fake_llm: FakeLLM, keel: Keel
) -> None:
    """Claude Code 2.1.328, ``claude -p "/mycmd ARGX" --allowedTools Read`` with this command
    (``hooks:`` in its frontmatter: a PreToolUse logger for Read) and a UserPromptSubmit logger in
    settings: the UserPromptSubmit hook got ``"prompt": "/mycmd ARGX"`` (what was typed; the model
    got the expanded body), and the command's PreToolUse hook ran for both Read calls of the turn.
    keel sent the expanded command text to UserPromptSubmit and never read the command's hooks."""
    _command_project(project, keel)
    read = _call("Read", file_path=str(project / "f.txt"))
    server = fake_llm({"steps": [read, read, "final text"]})
    log = tmp_path / "hooks.log"
    run = keel("-p", "/mycmd ARGX", env={**wire_env(server, "anthropic"), "HOOK_LOG": str(log)})
    assert run.code == 0, run.stderr
    seen = [(p["_tag"], p["hook_event_name"], p.get("prompt") or p.get("tool_name")) for p in _payloads(log)]
    assert seen == [
        ("settings", "UserPromptSubmit", "/mycmd ARGX"),
        ("cmdhook", "PreToolUse", "Read"),
        ("cmdhook", "PreToolUse", "Read"),
    ]
    first = _texts(server.cursor.requests[0]["body"]["messages"][0])
    assert "EXPANDEDBODY-MARK run with ARGX" in first


async def test_a_commands_hooks_end_with_its_prompt(project: Path, tmp_path: Path, keel: Keel) -> None:
    """The command's hooks belong to the prompt it started (Claude Code: "while that command
    runs"): the next prompt of the same session, typed without the command, runs no cmdhook."""
    from agentkeel.commands.run import run_prompt

    _command_project(project, keel)
    read = _call("Read", file_path=str(project / "f.txt"))
    log = tmp_path / "hooks.log"
    rt = session(project, [read, "final one", read, "final two"], env={"HOOK_LOG": str(log)})
    try:
        assert (await run_prompt(rt, "/mycmd ARGX")).result == "final one"
        assert (await run_prompt(rt, "plain again")).result == "final two"
    finally:
        await rt.aclose()
    seen = [(p["_tag"], p["hook_event_name"], p.get("prompt") or p.get("tool_name")) for p in _payloads(log)]
    assert seen == [
        ("settings", "UserPromptSubmit", "/mycmd ARGX"),
        ("cmdhook", "PreToolUse", "Read"),
        ("settings", "UserPromptSubmit", "plain again"),
    ]


def test_a_blocking_user_prompt_submit_hook_stops_a_commands_bang_lines(
    project: Path, fake_llm: FakeLLM, keel: Keel
) -> None:
    """Claude Code 2.1.328, ``claude -p "/bang" --allowedTools Bash`` with a UserPromptSubmit hook
    that exits 2 and a command whose body has ``!`touch bang-ran```: it printed "UserPromptSubmit
    operation blocked by hook" and bang-ran was never created (without the hook it is). keel ran
    the command's ``!`` line while expanding it, before the hook could refuse the prompt."""
    commands = project / ".claude" / "commands"
    commands.mkdir(parents=True)
    (commands / "bang.md").write_text(
        "---\ndescription: x\nallowed-tools: Bash(touch:*)\n---\nMarker: !`touch bang-ran`\n"
    )
    hook = {"type": "command", "command": "cat >/dev/null; echo blocked-by-ups >&2; exit 2"}
    _settings(project, {"UserPromptSubmit": [{"hooks": [hook]}]}, keel)
    server = fake_llm({"steps": ["answered"]})
    run = keel("-p", "/bang", "--allowedTools", "Bash(touch:*)", env=wire_env(server, "anthropic"))
    assert run.code != 0 and "blocked-by-ups" in run.stderr, run.stderr
    assert not (project / "bang-ran").exists()
    assert server.cursor.requests == []
    # the same command without the hook runs its line (and UserPromptSubmit fires once, not twice)
    log = project.parent / "ups.log"
    _settings(project, {"UserPromptSubmit": [{"hooks": [LOG_HOOK]}]}, keel)
    run = keel(
        "-p", "/bang", "--allowedTools", "Bash(touch:*)", env={**wire_env(server, "anthropic"), "HOOK_LOG": str(log)}
    )
    assert run.code == 0, run.stderr
    assert (project / "bang-ran").exists()
    assert [p["prompt"] for p in _payloads(log)] == ["/bang"]
