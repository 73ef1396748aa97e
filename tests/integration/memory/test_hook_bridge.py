"""Memory beside the hooks: memory attaches to a session one way, the ``memory`` extension on keel's
own events (memory/plugin.py: start, on_prompt, bus subscribers, close, tools); a user's hooks and
their switches are separate from it, and a session with memory and no hook builds no dispatcher."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from agentkeel.app.runtime import Runtime
from agentkeel.core.extensions import Extension, LifecyclePoint
from agentkeel.core.provider import ModelRequest
from agentkeel.memory import open_store
from kit import run_session, session


def _settings(project: Path, data: dict[str, Any]) -> None:
    folder = project / ".keel"
    folder.mkdir(exist_ok=True)
    (folder / "settings.json").write_text(json.dumps({"memory": {"embedder": "none"}, **data}))


async def _session(project: Path, steps: list[Any], prompt: str, **opts: Any) -> tuple[list[ModelRequest], Runtime]:
    sent: list[ModelRequest] = []

    async def record(request: ModelRequest) -> ModelRequest:
        sent.append(request)
        return request

    rt = session(
        project,
        steps,
        extensions=[Extension("recorder", before_request=record)],
        allowed_tools=["Bash"],
        trust_project=True,
        **opts,
    )
    await run_session(rt, prompt)
    return sent, rt


def _memories(tmp_path: Path) -> list[dict[str, Any]]:
    store = open_store(tmp_path / "keelhome" / "memory" / "memory.db", embedder="none")
    try:
        return [{"type": e.type, "text": e.text, "metadata": e.metadata} for e in store.export()]
    finally:
        store.close()


async def test_memory_attaches_as_one_extension_on_keels_own_events(project: Path, tmp_path: Path) -> None:
    _settings(project, {})
    steps = [{"tool_calls": [{"name": "Bash", "input": {"command": "echo 'Exit code 7'; exit 3"}}]}, "all done"]
    _, rt = await _session(project, steps, "check the exit code please")
    life = rt.agent.services.get(LifecyclePoint)
    assert not life.listens("UserPromptSubmit")  # no user hook: no dispatcher, memory needs none
    memory = rt.agent.ext.get("memory")
    assert memory is not None and memory.on_prompt is not None and memory.close is not None and memory.subscribers
    kinds = {(m["type"], m["text"].splitlines()[0]) for m in _memories(tmp_path)}
    assert ("user_prompt", "check the exit code please") in kinds
    assert ("assistant_response", "all done") in kinds
    bash = next(m for m in _memories(tmp_path) if m["type"] == "tool_observation")
    # ToolFinished's metadata: the tool's own exit code, not the "Exit code 7" it printed
    assert bash["metadata"]["exit_code"] == 3 and bash["metadata"]["success"] is False
    assert any(m["type"] == "session_summary" for m in _memories(tmp_path))  # SessionEnd
    # keel's own handlers do not fill the session log with a HookRan per tool call
    assert '"type":"hook"' not in rt.session_path.read_text().replace(" ", "")


async def test_user_hook_switches_leave_memory_running(project: Path, tmp_path: Path) -> None:
    """disableAllHooks and disabled_hooks: ["hooks"] turn off the user's hooks, not keel's memory."""
    marker = project.parent / "user-hook-ran"
    user_hook = {"UserPromptSubmit": [{"hooks": [{"type": "command", "command": f"touch {marker}"}]}]}
    _settings(project, {"hooks": user_hook, "disableAllHooks": True})
    await _session(project, ["The staging database listens on port 6543."], "which port does staging use?")
    assert not marker.exists()
    assert any("6543" in m["text"] for m in _memories(tmp_path))

    _settings(project, {"hooks": user_hook, "disabled_hooks": ["hooks"]})
    sent, _ = await _session(project, ["From memory: 6543."], "staging database port again?")
    assert not marker.exists()
    first = json.dumps([str(m.content) for m in sent[0].messages])
    assert "<memory-context" in first and "6543" in first  # the memory extension's on_prompt context


async def test_memory_context_and_a_user_hooks_context_both_reach_the_request(project: Path, tmp_path: Path) -> None:
    _settings(project, {})
    await _session(project, ["Deploys go out on Thursdays."], "when do deploys go out?")
    extra = {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": "USER-HOOK-CONTEXT"}}
    hooks = {"UserPromptSubmit": [{"hooks": [{"type": "python", "callable": lambda payload: extra}]}]}
    sent, _ = await _session(project, ["Thursdays."], "deploys: which day?", hooks=hooks)
    body = json.dumps([str(m.content) for m in sent[0].messages])
    assert "USER-HOOK-CONTEXT" in body and "<memory-context" in body and "Thursdays" in body


async def test_secrets_a_tool_printed_never_reach_memory(project: Path, tmp_path: Path) -> None:
    _settings(project, {})
    secret = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"  # a fake GitHub token
    steps = [{"tool_calls": [{"name": "Bash", "input": {"command": f"echo token={secret}"}}]}, "ok"]
    await _session(project, steps, "print the token")
    stored = json.dumps(_memories(tmp_path))
    assert "tool_observation" in stored and secret not in stored


def test_no_hooks_and_no_memory_no_dispatcher_and_memory_loads_nothing_heavy(project: Path) -> None:
    code = (
        "import sys; from pathlib import Path; from agentkeel.app.runtime import Runtime, RuntimeOptions\n"
        "rt = Runtime.create(RuntimeOptions(cwd=Path('.'), trust_project=True))\n"
        "import json; print(json.dumps(sorted(sys.modules)))\n"
        "rt.lock.release()\n"
    )
    env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-test-not-a-real-key", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}

    def modules(memory: bool) -> set[str]:
        (project / ".keel").mkdir(exist_ok=True)
        (project / ".keel" / "settings.json").write_text(json.dumps({"memory": {"enabled": memory}}))
        run = subprocess.run([sys.executable, "-c", code], cwd=project, env=env, capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        return set(json.loads(run.stdout.strip().splitlines()[-1]))

    off, on = modules(False), modules(True)
    assert "agentkeel.hooks.dispatcher" not in off  # no hook, no memory: no dispatcher
    assert "agentkeel.hooks.dispatcher" not in on  # memory is an extension: no dispatcher either
    assert "agentkeel.memory.plugin" in on and "agentkeel.hooks.agent" not in on
    extra = {m.split(".")[0] for m in on - off} - {"agentkeel"}
    assert extra <= set(sys.stdlib_module_names), extra  # no third-party package for memory at start
