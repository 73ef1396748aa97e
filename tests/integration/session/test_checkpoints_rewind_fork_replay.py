"""Checkpoints, /rewind, fork, replay and the session index, through the real `keel` CLI.

Every session here is a real `keel` process talking to the fake model over loopback HTTP; the
files are real files in a temporary project, compared by hash.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkeel.models.fake.server import FakeLLMServer
from kit import KEEL, KeelRun, session, session_files, wait_until_async, wire_env

Start = Callable[[Any], FakeLLMServer]
Keel = Callable[..., KeelRun]
BYPASS = ("--permission-mode", "bypassPermissions")


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def tool(name: str, text: str = "ok", **inp: Any) -> dict[str, Any]:
    return {"text": text, "tool_calls": [{"name": name, "input": inp}]}


def prompt(keel: Keel, server: FakeLLMServer, text: str, *extra: str) -> dict[str, Any]:
    run = keel("-p", text, "--output-format", "json", *BYPASS, *extra, env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    result: dict[str, Any] = run.json()
    return result


def test_edit_session_rewound_restores_the_file(project: Path, fake_llm: Start, keel: Keel) -> None:
    src = project / "app.py"
    src.write_text("def f():\n    return 1\n")
    original = sha(src)
    server = fake_llm(
        {
            "steps": [
                tool("Read", file_path=str(src)),
                tool("Edit", file_path=str(src), old_string="return 1", new_string="return 2"),
                "edited",
                tool("Read", file_path=str(src)),
                tool("Write", file_path=str(src), content="rewritten\n"),
                tool("Write", file_path=str(project / "new.txt"), content="brand new\n"),
                "written",
            ]
        }
    )
    first = prompt(keel, server, "make it return 2")
    after_first = sha(src)
    assert after_first != original
    prompt(keel, server, "rewrite it", "-r", first["session_id"])
    assert src.read_text() == "rewritten\n" and (project / "new.txt").exists()

    # the turns, with the files each changed
    turns = keel("sessions", "turns", first["session_id"], "--json").json()
    assert [t["text"] for t in turns] == ["make it return 2", "rewrite it"]
    assert turns[0]["files_changed"] == [str(src)]
    assert set(turns[1]["files_changed"]) == {str(src), str(project / "new.txt")}

    # back to before turn 1: the file as after turn 0, the file turn 1 created is gone
    out = keel("-p", "/rewind 1 code", "-r", first["session_id"], *BYPASS, env=wire_env(server, "anthropic"))
    assert out.code == 0, out.stderr
    assert "2 file(s) restored (1 removed)" in out.stdout
    assert sha(src) == after_first and not (project / "new.txt").exists()
    # then to before turn 0: the original bytes
    out = keel("-p", "/rewind 0", "-r", first["session_id"], *BYPASS, env=wire_env(server, "anthropic"))
    assert out.code == 0, out.stderr
    assert sha(src) == original
    # the log was only appended to: the rewinds are events in it
    [log] = session_files(project.parent / "keelhome")
    types = [json.loads(line)["type"] for line in log.read_text().splitlines()]
    assert types.count("checkpoint") == 5 and types.count("rewind") == 1  # 3 tool calls + 2 rewinds


def test_bash_created_file_is_removed_on_code_rewind(project: Path, fake_llm: Start, keel: Keel) -> None:
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    (project / ".gitignore").write_text("build/\n")
    (project / "tracked.txt").write_text("keep me\n")
    before = sha(project / "tracked.txt")
    server = fake_llm(
        {
            "steps": [
                tool(
                    "Bash",
                    command="echo made > made.txt && echo changed > tracked.txt && mkdir -p build && echo x > build/o",
                ),
                "done",
            ]
        }
    )
    first = prompt(keel, server, "run the build")
    assert (project / "made.txt").exists() and (project / "tracked.txt").read_text() == "changed\n"
    [log] = session_files(project.parent / "keelhome")
    checkpoints = [json.loads(line) for line in log.read_text().splitlines() if '"checkpoint"' in line]
    assert checkpoints and set(checkpoints[0]["files"]) == {str(project / "made.txt"), str(project / "tracked.txt")}
    assert checkpoints[0]["files"][str(project / "made.txt")] is None  # it did not exist before

    out = keel("-p", "/rewind 0 code", "-r", first["session_id"], *BYPASS, env=wire_env(server, "anthropic"))
    assert out.code == 0, out.stderr
    assert not (project / "made.txt").exists()
    assert sha(project / "tracked.txt") == before
    assert (project / "build" / "o").exists()  # ignored files are not the checkpoints' business
    # code only: the conversation still has its turn
    assert len(keel("sessions", "turns", first["session_id"], "--json").json()) == 1


def test_a_clean_repository_costs_no_copies_until_bash_changes_a_file(
    project: Path, fake_llm: Start, keel: Keel
) -> None:
    """In a git work tree the first Bash call copies only what git cannot give back (untracked
    and modified files); a clean tracked file that Bash then changes or deletes is taken from
    git's object store (through the work-tree filters) and restored by a rewind."""
    git = ["git", "-C", str(project), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    old = time.time_ns() - 3600 * 10**9  # files last changed an hour ago, as in a real repository
    for i in range(40):
        (project / f"f{i:02}.txt").write_text(f"committed content {i}\n" * 50)
        os.utime(project / f"f{i:02}.txt", ns=(old, old))
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "base"], check=True)
    (project / "f01.txt").write_text("edited before the session\n")  # modified: must be copied
    (project / "notes.txt").write_text("untracked\n")  # untracked: must be copied
    before = {p.name: sha(p) for p in project.glob("*.txt")}
    command = "echo new > f00.txt && rm f02.txt && echo more >> f01.txt && echo late > notes.txt"
    server = fake_llm({"steps": [tool("Bash", command=command), "done"]})
    first = prompt(keel, server, "change things")
    [log] = session_files(project.parent / "keelhome")
    objects = list((log.with_suffix("") / "checkpoints" / "objects").iterdir())
    # before-contents: the modified and the untracked file (copied up front) and the two clean
    # files Bash touched (taken from git); after-contents of the three files it wrote. Not 40 copies.
    assert len(objects) == 7, sorted(o.name for o in objects)
    out = keel("-p", "/rewind 0 code", "-r", first["session_id"], *BYPASS, env=wire_env(server, "anthropic"))
    assert out.code == 0, out.stderr
    assert {p.name: sha(p) for p in project.glob("*.txt")} == before


def test_conversation_rewind_then_resume_sees_the_first_k_turns(project: Path, fake_llm: Start, keel: Keel) -> None:
    server = fake_llm({"steps": ["one", "two", "three", "after"]})
    sid = prompt(keel, server, "turn zero")["session_id"]
    prompt(keel, server, "turn one", "-r", sid)
    prompt(keel, server, "turn two", "-r", sid)
    out = keel("-p", "/rewind 1 conversation", "-r", sid, *BYPASS, env=wire_env(server, "anthropic"))
    assert out.code == 0 and "1 turn(s) kept" in out.stdout, out.stdout + out.stderr
    assert [t["text"] for t in keel("sessions", "turns", sid, "--json").json()] == ["turn zero"]
    prompt(keel, server, "a new turn one", "-r", sid)
    sent = server.cursor.requests[-1]["body"]["messages"]
    texts = [b["text"] for m in sent for b in m["content"] if b.get("type") == "text"]
    assert texts[0] == "turn zero" and "one" in texts and "a new turn one" in texts
    assert not any(t in ("turn one", "turn two", "two", "three") for t in texts)
    turns = [t["text"] for t in keel("sessions", "turns", sid, "--json").json()]
    assert turns == ["turn zero", "a new turn one"]


def test_rewind_errors_are_one_line(project: Path, fake_llm: Start, keel: Keel) -> None:
    target = project / "f.txt"
    target.write_text("v0\n")
    steps = [tool("Read", file_path=str(target)), tool("Write", file_path=str(target), content="v1\n"), "ok"]
    server = fake_llm({"steps": steps})
    sid = prompt(keel, server, "change it")["session_id"]
    assert target.read_text() == "v1\n"
    env = wire_env(server, "anthropic")
    out = keel("-p", "/rewind 7", "-r", sid, *BYPASS, env=env)
    assert "cannot rewind to turn 7: the session has turns 0 to 0" in out.stdout + out.stderr
    assert "Traceback" not in out.stdout + out.stderr
    # the object the checkpoint names is damaged: one clear line, the file left as it is
    [objects] = list((project.parent / "keelhome").glob("projects/*/*/checkpoints/objects"))
    [obj] = list(objects.iterdir())
    obj.write_bytes(b"not what it was")
    out = keel("-p", "/rewind 0 code", "-r", sid, *BYPASS, env=env)
    both = out.stdout + out.stderr
    assert "Traceback" not in both and "is corrupt" in both and str(target) in both
    assert target.read_text() == "v1\n"
    obj.unlink()
    out = keel("-p", "/rewind 0 code", "-r", sid, *BYPASS, env=env)
    assert "is missing" in out.stdout + out.stderr and "Traceback" not in out.stdout + out.stderr
    assert target.read_text() == "v1\n"


def test_fork_copies_up_to_a_turn_with_a_parent_link(project: Path, fake_llm: Start, keel: Keel) -> None:
    server = fake_llm({"steps": ["a", "b", "c", "forked answer", "elsewhere"]})
    sid = prompt(keel, server, "first")["session_id"]
    prompt(keel, server, "second", "-r", sid)
    [log] = session_files(project.parent / "keelhome")
    original = log.read_bytes()

    fork = keel("sessions", "fork", sid[:8], "--at-turn", "1")
    assert fork.code == 0, fork.stderr
    new_id = fork.stdout.strip()
    assert new_id != sid and log.read_bytes() == original
    assert [t["text"] for t in keel("sessions", "turns", new_id, "--json").json()] == ["first"]
    prompt(keel, server, "in the fork", "-r", new_id)
    sent = server.cursor.requests[-1]["body"]["messages"]
    texts = [b["text"] for m in sent for b in m["content"] if b.get("type") == "text"]
    assert "second" not in texts and texts[0] == "first"

    rows = {r["session_id"]: r for r in keel("sessions", "list", "--json").json()}
    assert rows[new_id]["parent_id"] == sid and rows[sid]["parent_id"] is None
    assert rows[new_id]["turns"] == 2 and rows[sid]["turns"] == 2

    # /fork from inside a session
    out = keel("-p", "/fork", "-r", sid, *BYPASS, env=wire_env(server, "anthropic"))
    assert out.code == 0 and "Forked this session" in out.stdout, out.stderr
    assert len(keel("sessions", "list", "--json").json()) == 3
    # --fork-session goes on in a fork with the same parent link
    forked = prompt(keel, server, "go on elsewhere", "-r", sid, "--fork-session")
    rows = {r["session_id"]: r for r in keel("sessions", "list", "--json").json()}
    assert forked["session_id"] != sid and rows[forked["session_id"]]["parent_id"] == sid
    assert rows[forked["session_id"]]["turns"] == 3 and rows[sid]["turns"] == 2
    bad = keel("sessions", "fork", sid, "--at-turn", "9")
    assert bad.code == 2 and bad.stderr.count("\n") == 1 and "turns 0 to 1" in bad.stderr


def test_replay_reemits_the_events(project: Path, fake_llm: Start, keel: Keel) -> None:
    server = fake_llm({"steps": [tool("Write", file_path=str(project / "x.txt"), content="x\n"), "wrote it"]})
    sid = prompt(keel, server, "write x")["session_id"]
    lines = keel("sessions", "replay", sid, "--output-format", "stream-json").lines()
    kinds = [(line["type"], line.get("subtype")) for line in lines]
    assert kinds[0] == ("system", "init")
    user = next(line for line in lines if line["type"] == "user")
    assert user["message"]["content"][0]["text"] == "write x"
    assistant = [line for line in lines if line["type"] == "assistant"]
    assert assistant[-1]["message"]["content"][0]["text"] == "wrote it"
    events = [line["event"]["type"] for line in lines if line.get("subtype") == "keel_event"]
    assert "checkpoint" in events
    assert lines[-1]["type"] in ("result", "system")
    text = keel("sessions", "replay", sid[:6], "--speed", "50")
    assert text.code == 0 and "> write x" in text.stdout and "wrote it" in text.stdout
    assert keel("sessions", "replay", "nosuch").code == 2


def test_index_is_kept_in_step_and_rebuilt(project: Path, fake_llm: Start, keel: Keel) -> None:
    server = fake_llm({"steps": ["a", "b", "c"]})
    home = project.parent / "keelhome"
    sid = prompt(keel, server, "the first prompt")["session_id"]
    db = home / "sessions.db"
    # the run's end wrote the row, before anyone listed
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT first_prompt, turns FROM sessions WHERE session_id=?", (sid,)).fetchone() == (
            "the first prompt",
            1,
        )
    other = prompt(keel, server, "another session")["session_id"]
    listed = keel("sessions", "list", "--json").json()
    assert [r["session_id"] for r in listed] == [other, sid]
    assert listed[1]["cwd"] == str(project) and listed[1]["title"] == "the first prompt"

    db.unlink()  # missing: rebuilt from the JSONL files
    assert keel("sessions", "list", "--json").json() == listed and db.exists()
    db.write_bytes(b"garbage, not a database" * 100)  # damaged: rebuilt too
    assert keel("sessions", "list", "--json").json() == listed
    # a session file that is gone leaves the listing; one that grew is read again
    next(p for p in session_files(home) if p.stem == other).unlink()
    prompt(keel, server, "second turn", "-r", sid)
    again = keel("sessions", "list", "--json").json()
    assert [r["session_id"] for r in again] == [sid] and again[0]["turns"] == 2
    plain = keel("sessions", "list")
    assert plain.code == 0 and sid in plain.stdout and "the first prompt" in plain.stdout


def test_rewind_files_control_request_and_the_turn_listing(project: Path, fake_llm: Start, keel: Keel) -> None:
    target = project / "f.txt"
    target.write_text("before\n")
    steps = [tool("Read", file_path=str(target)), tool("Write", file_path=str(target), content="after\n"), "ok"]
    server = fake_llm({"steps": steps})
    sid = prompt(keel, server, "change f")["session_id"]
    assert target.read_text() == "after\n"
    listing = keel("-p", "/rewind", "-r", sid, *BYPASS, env=wire_env(server, "anthropic"))
    assert "0. " in listing.stdout and "change f" in listing.stdout and "[1 file(s) changed]" in listing.stdout
    [turn] = keel("sessions", "turns", sid, "--json").json()

    def control(rid: str, **body: Any) -> str:
        request = {"subtype": "rewind_files", **body}
        return json.dumps({"type": "control_request", "request_id": rid, "request": request})

    stream = ["--input-format", "stream-json", "--output-format", "stream-json", "--verbose", "-r", sid, *BYPASS]
    env = {**os.environ, **wire_env(server, "anthropic")}
    with subprocess.Popen(
        [KEEL, *stream], cwd=project, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        answers: dict[str, Any] = {}
        for rid, body in (("dry", {"dry_run": True}), ("real", {})):
            proc.stdin.write(control(rid, user_message_id=turn["uuid"], **body) + "\n")
            proc.stdin.flush()
            for raw in proc.stdout:  # the answer comes before the next request is sent
                line = json.loads(raw)
                if line["type"] == "control_response":
                    answers[line["response"]["request_id"]] = line["response"]
                    break
            if rid == "dry":
                assert target.read_text() == "after\n"  # a dry run changes nothing
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0
    assert answers["dry"]["response"] == {"canRewind": True, "filesChanged": [str(target)]}
    assert answers["real"]["response"] == {"canRewind": True, "filesChanged": [str(target)]}
    assert target.read_text() == "before\n"


def test_a_tree_too_big_to_snapshot_is_said_once_and_edits_still_checkpoint(
    project: Path, fake_llm: Start, keel: Keel
) -> None:
    with (project / "huge.bin").open("wb") as f:  # sparse: 300 MiB on paper, nothing on disk
        f.truncate(300 * 1024 * 1024)
    server = fake_llm(
        {
            "steps": [
                tool("Bash", command="echo one > one.txt"),
                tool("Bash", command="echo two > two.txt"),
                tool("Write", file_path=str(project / "w.txt"), content="w\n"),
                "done",
            ]
        }
    )
    prompt(keel, server, "go")
    [log] = session_files(project.parent / "keelhome")
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    notices = [e["message"] for e in entries if e["type"] == "notice" and "not checkpointed" in e["message"]]
    assert len(notices) == 1 and "256 MiB" in notices[0]
    assert [e["tool"] for e in entries if e["type"] == "checkpoint"] == ["Write"]
    assert not list((project.parent / "keelhome").glob("projects/*/*/checkpoints/objects/*"))  # nothing copied


async def test_an_interrupted_bash_call_is_still_checkpointed(project: Path, fake_llm: Start) -> None:
    import asyncio

    from agentkeel.session.history import rewind

    made = project / "made.txt"
    server = fake_llm({"steps": [tool("Bash", command="echo half > made.txt && sleep 30"), "never"]})
    rt = session(project, server=server, retries=None, permission_mode="bypassPermissions")
    try:
        run = asyncio.ensure_future(rt.run("start the long job"))
        await wait_until_async(made.exists, 60, "the command to write its file")
        rt.agent.interrupt()
        assert (await run).subtype == "interrupted"
        assert made.exists()  # the call never reached after_tool
        result = await rewind(rt, 0, "code")
        assert result.removed_files == (str(made),) and not made.exists()
    finally:
        await rt.aclose()


def test_a_file_created_within_the_folder_mtime_tick_is_still_seen(tmp_path: Path) -> None:
    """A folder's mtime moves in clock ticks: a file created in the same tick as the last look
    leaves it unchanged. Found by the property test (a rewind deleted sub/c.txt, the next Bash
    call created it again, and the second rewind left it behind); here the coarse tick is made
    certain by putting the folder's mtime back."""
    from agentkeel.session.objects import ObjectStore
    from agentkeel.session.tree import TreeState

    root = tmp_path / "p"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "a.txt").write_text("x\n")
    tree = TreeState(root, ObjectStore(tmp_path / "checkpoints"))
    tree.sync()
    (root / "sub" / "a.txt").unlink()  # a rewind, between two Bash calls
    tree.sync()  # before the next Bash call
    seen = (root / "sub").stat().st_mtime_ns
    (root / "sub" / "b.txt").write_text("")  # the Bash call, within the same tick
    os.utime(root / "sub", ns=(seen, seen))
    assert tree.diff() == {str(root / "sub" / "b.txt"): None}


def test_git_asked_ahead_is_right_about_files_changed_since(tmp_path: Path) -> None:
    """The first Bash call's git questions are asked ahead, while the first request waits
    (``TreeState.prime``). A clean file changed after that look is not taken from git: its
    before-content is what it held when the Bash call began; an untouched one still costs no copy."""
    from agentkeel.session.objects import ObjectStore
    from agentkeel.session.tree import GIT_REF, TreeState

    root = tmp_path / "p"
    root.mkdir()
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    old = time.time_ns() - 3600 * 10**9
    for name in ("kept.txt", "later.txt"):
        (root / name).write_text(f"committed {name}\n")
        os.utime(root / name, ns=(old, old))
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "base"], check=True)
    store = ObjectStore(tmp_path / "checkpoints")
    tree = TreeState(root, store)
    tree.prime()
    assert tree.primed is not None and set(tree.primed) == {"kept.txt", "later.txt"}
    (root / "later.txt").write_text("edited after the look\n")  # between the look and the Bash call
    tree.sync()  # before the Bash call
    assert (tree.files["kept.txt"][1] or "").startswith(GIT_REF)  # no copy
    assert not (tree.files["later.txt"][1] or "").startswith(GIT_REF)
    (root / "later.txt").write_text("written by Bash\n")
    (root / "kept.txt").write_text("written by Bash too\n")
    changed = tree.diff()
    assert store.get(changed[str(root / "later.txt")] or "") == b"edited after the look\n"
    assert store.get(changed[str(root / "kept.txt")] or "") == b"committed kept.txt\n"


def test_a_file_written_just_before_the_look_ahead_is_not_taken_from_git(tmp_path: Path) -> None:
    """git's answer about a file written within RACY_NS of the question is not used: the same
    mtime tick could hide a later write."""
    from agentkeel.session.objects import ObjectStore
    from agentkeel.session.tree import TreeState

    root = tmp_path / "p"
    root.mkdir()
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "fresh.txt").write_text("just committed\n")
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "base"], check=True)
    tree = TreeState(root, ObjectStore(tmp_path / "checkpoints"))
    tree.prime()
    assert tree.primed == {}
