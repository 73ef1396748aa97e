"""The rewind/fork property: for random scripted sessions with edits (Write, and Bash that creates,
rewrites and deletes files), rewinding to turn k restores exactly the files as they were before
turn k (hash compare) and the resumed conversation equals the first k turns.

Each example drives a real Runtime against the fake model over loopback HTTP (a fresh script per
example), in a fresh project; the files are compared by sha256 of every file in the project.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import shlex
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentkeel.app.runtime import Runtime, RuntimeOptions
from agentkeel.core.types import Message
from agentkeel.session.fork import fork_session
from agentkeel.session.history import rewind, user_turns
from agentkeel.session.load import load_session
from agentkeel.session.store import keel_home
from kit import fake_llm_server, stop, wire_env

FILES = ("a.txt", "b.txt", "sub/c.txt", "deep/er/d.txt")
content = st.text(alphabet="xyz\n", min_size=0, max_size=6)
op = st.one_of(
    st.tuples(st.just("write"), st.sampled_from(FILES), content),
    st.tuples(st.just("bash_write"), st.sampled_from(FILES), content),
    st.tuples(st.just("bash_rm"), st.sampled_from(FILES), st.just("")),
)
turn = st.lists(op, min_size=0, max_size=3)
initial = st.dictionaries(st.sampled_from(FILES), content, max_size=3)


def steps_for(ops: list[tuple[str, str, str]], root: Path, label: str) -> list[Any]:
    """One user turn's model replies: a tool call per op (Write after a Read), then a final text."""
    steps: list[Any] = []
    for kind, name, text in ops:
        path = root / name
        if kind == "write":
            steps.append({"text": "reading", "tool_calls": [{"name": "Read", "input": {"file_path": str(path)}}]})
            write = {"name": "Write", "input": {"file_path": str(path), "content": text}}
            steps.append({"text": "writing", "tool_calls": [write]})
        elif kind == "bash_write":
            command = f"mkdir -p {shlex.quote(str(path.parent))} && printf %s {shlex.quote(text)} > {shlex.quote(name)}"
            steps.append({"text": "shell", "tool_calls": [{"name": "Bash", "input": {"command": command}}]})
        else:
            steps.append({"text": "rm", "tool_calls": [{"name": "Bash", "input": {"command": f"rm -f {name}"}}]})
    steps.append(f"finished {label}")
    return steps


def tree(root: Path) -> dict[str, str]:
    out = {}
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        for f in files:
            p = Path(dirpath) / f
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


async def session(
    root: Path, env: dict[str, str], first: list[list[tuple[str, str, str]]], k: int, extra: list[Any], j: int
) -> None:
    script: list[Any] = []
    for i, ops in enumerate(first):
        script += steps_for(ops, root, f"turn {i}")
    script += steps_for(extra, root, "after the rewind")
    server = fake_llm_server(script)
    try:
        env = {**env, **wire_env(server, "anthropic")}
        opts = RuntimeOptions(cwd=root, env=env, permission_mode="bypassPermissions")
        rt = Runtime.create(opts)
        states: list[dict[str, str]] = []
        views: list[list[Message]] = []
        try:
            for i, _ops in enumerate(first):
                states.append(tree(root))
                views.append(rt.agent.messages)
                result = await rt.run(f"prompt {i}")
                assert result.subtype == "success", result
            result_k = await rewind(rt, k, "both")
            assert tree(root) == states[k]
            assert rt.agent.messages == views[k]
            assert [t.text for t in user_turns(rt.session_path)] == [f"prompt {i}" for i in range(k)]
            assert result_k.conversation_turns == k and result_k.warning is None
            # go on from there, then rewind again (to a turn before the first rewind, or the new one)
            states, views = states[:k], views[:k]
            states.append(tree(root))
            views.append(rt.agent.messages)
            assert (await rt.run("the new turn")).subtype == "success"
            await rewind(rt, j, "both")
            assert tree(root) == states[j]
            assert rt.agent.messages == views[j]
        finally:
            await rt.aclose()
        # the resumed conversation equals the first j turns
        assert load_session(rt.session_path).messages == views[j]
        resumed = Runtime.create(RuntimeOptions(cwd=root, env=opts.env, resume=rt.session_id))
        try:
            assert resumed.agent.messages == views[j]
        finally:
            await resumed.aclose()
        # a fork before turn j holds the same conversation
        if j > 0:
            fork_id = fork_session(keel_home(opts.env), root, rt.session_id, j - 1)
            forked = load_session(rt.session_path.with_name(f"{fork_id}.jsonl"))
            assert forked.messages == views[j - 1]
    finally:
        stop(server)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    start=initial,
    turns=st.lists(turn, min_size=1, max_size=4),
    extra=turn,
    git=st.booleans(),
    data=st.data(),
)
def test_rewind_restores_files_and_conversation(
    start: dict[str, str], turns: list[list[tuple[str, str, str]]], extra: list[Any], git: bool, data: st.DataObject
) -> None:
    k = data.draw(st.integers(0, len(turns) - 1), label="k")
    j = data.draw(st.integers(0, k), label="j")
    with tempfile.TemporaryDirectory(prefix="keel-rewind-prop-") as tmp:
        root = Path(tmp) / "project"
        root.mkdir()
        for name, text in start.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text)
        if git:  # Bash changes are then seen through `git ls-files`, else through a walk
            subprocess.run(["git", "init", "-q", str(root)], check=True)
        env = {**os.environ, "KEEL_HOME": str(Path(tmp) / "keelhome"), "HOME": str(Path(tmp) / "home")}
        asyncio.run(session(root, env, turns, k, extra, j))
