"""Rewind touches only what keel changed (issue #31 items 1 and 5, #30 item 14's checkpoint git).

Real files, the real Bash/Write/Edit tools, the real `keel` CLI or an in-process Runtime talking
to the scripted model over loopback; the disk-full case mounts a tiny tmpfs over the checkpoint
store in a private mount namespace (``unshare -rm``), so nothing leaks out of the test.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

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


def log_entries(project: Path) -> list[dict[str, Any]]:
    [log] = session_files(project.parent / "keelhome")
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


# --- #31 item 1: an interrupted Bash call is measured when it ends, not at the next call ---------


async def test_hand_edits_after_an_interrupted_bash_call_are_never_charged_to_it(
    project: Path, fake_llm: Start
) -> None:
    """The Bash call is interrupted; the user then fixes a file by hand and creates a new one; the
    next turn only Reads. Rewinding that turn changes nothing; rewinding the Bash turn removes only
    the file Bash made. (Before: the changes were measured at the Read, charged to the Read's turn,
    and its rewind reverted the user's fix and deleted their new file.)"""
    from agentkeel.session.history import rewind, user_turns

    made, fixed, mine = project / "made.txt", project / "fixed.py", project / "mine.py"
    fixed.write_text("def f():\n    return 'bug'\n")
    server = fake_llm(
        {
            "steps": [
                tool("Bash", command="echo half > made.txt && sleep 30"),
                tool("Read", file_path=str(fixed)),
                "looks right",
            ]
        }
    )
    rt = session(project, server=server, retries=None, permission_mode="bypassPermissions")
    try:
        run = asyncio.ensure_future(rt.run("start the long job"))
        await wait_until_async(made.exists, 60, "the command to write its file")
        rt.agent.interrupt()
        assert (await run).subtype == "interrupted"
        # the user's own work, between the interrupt and the next tool call
        fixed.write_text("def f():\n    return 'fixed by hand'\n")
        mine.write_text("print('mine')\n")
        hand_fixed, hand_new = sha(fixed), sha(mine)
        assert (await rt.run("is fixed.py right now?")).subtype == "success"

        turns = user_turns(rt.session_path)
        assert [t.files_changed for t in turns] == [(str(made),), ()]
        result = await rewind(rt, 1, "code")
        assert result.restored_files == () and result.removed_files == ()
        assert sha(fixed) == hand_fixed and sha(mine) == hand_new and made.exists()
        result = await rewind(rt, 0, "code")
        assert result.removed_files == (str(made),) and result.restored_files == ()
        assert not made.exists() and sha(fixed) == hand_fixed and sha(mine) == hand_new
    finally:
        await rt.aclose()


# --- a file changed outside keel since is not overwritten without the user's yes ------------


def test_rewind_refuses_to_overwrite_a_hand_edit_unless_forced(project: Path, fake_llm: Start, keel: Keel) -> None:
    target, other = project / "f.txt", project / "g.txt"
    target.write_text("v0\n")
    other.write_text("g0\n")
    steps = [
        tool("Read", file_path=str(target)),
        tool("Write", file_path=str(target), content="v1\n"),
        tool("Read", file_path=str(other)),
        tool("Write", file_path=str(other), content="g1\n"),
        "ok",
    ]
    server = fake_llm({"steps": steps})
    sid = prompt(keel, server, "change them")["session_id"]
    assert target.read_text() == "v1\n" and other.read_text() == "g1\n"
    target.write_text("v1 and the user's own line\n")  # a hand edit after keel's change
    env = wire_env(server, "anthropic")

    out = keel("-p", "/rewind 0 code", "-r", sid, *BYPASS, env=env)
    both = out.stdout + out.stderr
    assert out.code != 0 and "Traceback" not in both
    assert "not rewound: 1 file(s) changed since keel last changed them" in both and str(target) in both
    assert "--force" in both
    assert target.read_text() == "v1 and the user's own line\n" and other.read_text() == "g1\n"  # nothing changed
    assert not [e for e in log_entries(project) if e["type"] in ("rewind_intent", "rewind_done")]

    out = keel("-p", "/rewind 0 code --force", "-r", sid, *BYPASS, env=env)
    assert out.code == 0, out.stdout + out.stderr
    assert target.read_text() == "v0\n" and other.read_text() == "g0\n"
    # the rewind is journaled: its intent (with what the files held, stored) and its end
    entries = log_entries(project)
    [intent] = [e for e in entries if e["type"] == "rewind_intent"]
    [done] = [e for e in entries if e["type"] == "rewind_done"]
    assert done["rewind_id"] == intent["rewind_id"] and done["outcome"] == "completed" and not done["recovered"]
    assert set(intent["targets"]) == {str(target), str(other)}
    # the force is undoable: what the user had is in the rewind's own checkpoint
    [undo] = [e for e in entries if e["type"] == "checkpoint" and e["source"] == "rewind"]
    objects = next((project.parent / "keelhome").glob("projects/*/*/checkpoints/objects"))
    assert (objects / undo["files"][str(target)]).read_bytes() == b"v1 and the user's own line\n"


async def test_sdk_rewind_files_names_the_conflicts_and_force_overwrites(project: Path, fake_llm: Start) -> None:
    from agentkeel.session.history import rewind_files, user_turns

    target, made = project / "f.txt", project / "made.txt"
    target.write_text("before\n")
    steps = [
        tool("Read", file_path=str(target)),
        tool("Edit", file_path=str(target), old_string="before", new_string="after"),
        tool("Bash", command="echo made > made.txt"),
        "done",
    ]
    server = fake_llm({"steps": steps})
    rt = session(project, server=server, retries=None, permission_mode="bypassPermissions")
    try:
        assert (await rt.run("edit it")).subtype == "success"
        made.write_text("the user rewrote it\n")
        [turn] = user_turns(rt.session_path)
        dry = await rewind_files(rt, turn.event_uuid, dry_run=True)
        assert dry["canRewind"] is False and dry["conflicts"] == [str(made)] and str(made) in dry["error"]
        real = await rewind_files(rt, turn.event_uuid)
        assert real["canRewind"] is False and real["conflicts"] == [str(made)]
        assert target.read_text() == "after\n" and made.read_text() == "the user rewrote it\n"
        forced = await rewind_files(rt, turn.event_uuid, force=True)
        assert forced == {"canRewind": True, "filesChanged": sorted([str(target), str(made)])}
        assert target.read_text() == "before\n" and not made.exists()
    finally:
        await rt.aclose()


# --- symbolic links are recorded and restored as links ----------------------------------------


def test_a_link_replaced_by_a_file_comes_back_as_a_link(
    tmp_path: Path, project: Path, fake_llm: Start, keel: Keel
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("outside, not the project's\n")
    (project / "target.txt").write_text("the target\n")
    (project / "ln").symlink_to("target.txt")
    (project / "out_ln").symlink_to(outside)
    (project / "plain.txt").write_text("plain\n")
    server = fake_llm(
        {
            "steps": [
                tool("Bash", command="rm ln && echo replaced > ln"),
                tool("Write", file_path=str(project / "out_ln"), content="written at the link\n"),
                tool("Bash", command="rm plain.txt && ln -s ../outside.txt plain.txt"),
                "done",
            ]
        }
    )
    sid = prompt(keel, server, "change the links")["session_id"]
    assert not (project / "ln").is_symlink() and (project / "plain.txt").is_symlink()
    outside_after_write = outside.read_bytes()  # Write replaced the link, or wrote through it: either way
    out = keel("-p", "/rewind 0 code", "-r", sid, *BYPASS, env=wire_env(server, "anthropic"))
    assert out.code == 0, out.stdout + out.stderr
    assert (project / "ln").is_symlink() and os.readlink(project / "ln") == "target.txt"
    assert (project / "target.txt").read_text() == "the target\n"
    assert (project / "out_ln").is_symlink() and os.readlink(project / "out_ln") == str(outside)
    assert outside.read_text() == "outside, not the project's\n"  # keel's write undone, if it went there
    # a file that Bash turned into a link to a file outside: the file comes back, the link is not followed
    assert not (project / "plain.txt").is_symlink() and (project / "plain.txt").read_text() == "plain\n"
    assert outside_after_write in (b"outside, not the project's\n", b"written at the link\n")
    assert not list(project.glob(".*keel*tmp"))


# --- a checkpoint that cannot be stored: the Edit is not made ---------------------------------


def _can_unshare() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=16k tmpfs /mnt"], capture_output=True, check=False
    )
    return probe.returncode == 0


@pytest.mark.skipif(not _can_unshare(), reason="needs unshare -rm and a tmpfs mount (user namespaces)")
def test_an_edit_whose_checkpoint_cannot_be_stored_is_refused(project: Path, fake_llm: Start, keel: Keel) -> None:
    big = project / "big.txt"
    big.write_text("line of text\n" * 10_000)  # 130 KB: its checkpoint cannot fit in a 16 KB store
    server = fake_llm(
        {
            "steps": [
                "hello",
                tool("Read", file_path=str(big)),
                tool("Edit", file_path=str(big), old_string="line of text", new_string="LINE", replace_all=True),
                tool("Bash", command="echo more >> big.txt"),
                "tried",
            ]
        }
    )
    sid = prompt(keel, server, "hello")["session_id"]
    [log] = session_files(project.parent / "keelhome")
    objects = log.with_suffix("") / "checkpoints" / "objects"
    objects.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **wire_env(server, "anthropic")}
    script = 'mount -t tmpfs -o size=16k tmpfs "$1" && shift && exec "$@"'
    run = subprocess.run(
        ["unshare", "-rm", "sh", "-c", script, "sh", str(objects), KEEL, "-p", "edit it", "-r", sid, *BYPASS],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert big.read_text() == "line of text\n" * 10_000 + "more\n"  # the Edit did not go ahead; Bash did
    results = [
        block
        for e in log_entries(project)
        if e["type"] == "tool_results"
        for block in e["message"]["content"]
        if block.get("type") == "tool_result" and block.get("is_error")
    ]
    text = json.dumps(results)
    assert "Edit not made" in text and "could not save" in text and "No space left on device" in text
    # Bash runs (it may be how the user frees space), and says its changes cannot all be undone
    entries = log_entries(project)
    notices = [e["message"] for e in entries if e["type"] == "notice" and "cannot all be undone" in e["message"]]
    assert len(notices) == 1 and "No space left on device" in notices[0]
    [checkpoint] = [e for e in entries if e["type"] == "checkpoint"]
    assert checkpoint["tool"] == "Bash" and checkpoint["files"] == {str(big): ""}  # not recorded, and said so
    out = keel("-p", "/rewind 0 code", "-r", sid, *BYPASS, env=wire_env(server, "anthropic"))
    assert "not recorded" in out.stdout + out.stderr and "checkpoint store could not keep it" in out.stdout + out.stderr


# --- #30 item 14: keel's own git calls do not run the repository's code -----------------------


def _plant(root: Path, marker: Path) -> None:
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "a.txt").write_text("a\n")
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "base"], check=True)
    hook = root.parent / "planted.sh"
    hook.write_text(f"#!/bin/sh\necho ran >> {marker}\n")
    hook.chmod(0o755)
    subprocess.run(["git", "-C", str(root), "config", "core.fsmonitor", str(hook)], check=True)
    subprocess.run(["git", "-C", str(root), "config", "core.hooksPath", str(root.parent / "hooks")], check=True)
    (root.parent / "hooks").mkdir()
    for name in ("post-commit", "post-checkout", "pre-commit", "reference-transaction"):
        (root.parent / "hooks" / name).write_bytes(hook.read_bytes())
        (root.parent / "hooks" / name).chmod(0o755)
    # a sanity check that the plant works: plain git runs it
    subprocess.run(["git", "-C", str(root), "status", "--short"], capture_output=True, check=True)
    assert marker.exists()
    marker.unlink()


def test_a_planted_fsmonitor_is_not_run_by_keels_checkpoint_git(
    tmp_path: Path, project: Path, fake_llm: Start, keel: Keel
) -> None:
    marker = tmp_path / "MARKER"
    _plant(project, marker)
    server = fake_llm({"steps": [tool("Bash", command="echo x > b.txt && echo y >> a.txt"), "done"]})
    sid = prompt(keel, server, "change things")["session_id"]
    assert not marker.exists(), marker.read_text()
    out = keel("-p", "/rewind 0 code", "-r", sid, *BYPASS, env=wire_env(server, "anthropic"))
    assert out.code == 0, out.stdout + out.stderr
    assert not (project / "b.txt").exists() and (project / "a.txt").read_text() == "a\n"
    assert not marker.exists(), marker.read_text()


def test_every_internal_git_runner_is_safe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The checkpoint tree, the TUI's @-file list and the subagent worktree's git: none runs a
    planted fsmonitor or hook, nor takes config from a GIT_* variable of keel's environment."""
    from agentkeel.agents.worktree import Git
    from agentkeel.session.objects import ObjectStore
    from agentkeel.session.tree import TreeState
    from agentkeel.ui.tui.files import project_files

    root = tmp_path / "repo"
    root.mkdir()
    marker = tmp_path / "MARKER"
    _plant(root, marker)
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", f"'core.fsmonitor'='{tmp_path / 'planted.sh'}'")
    tree = TreeState(root, ObjectStore(tmp_path / "checkpoints"))
    tree.prime()
    tree.sync()
    (root / "a.txt").write_text("changed\n")
    assert str(root / "a.txt") in tree.diff()
    assert "a.txt" in project_files(root)

    async def worktree_git() -> None:
        git = Git(root)
        await git.run("status", "--porcelain")
        await git.run("commit", "-q", "--allow-empty", "-m", "by keel")
        await git.run("worktree", "add", "-q", str(tmp_path / "wt"), "-b", "side")

    asyncio.run(worktree_git())
    assert (tmp_path / "wt" / "a.txt").exists()
    assert not marker.exists(), marker.read_text()


def test_a_filter_driver_is_not_run_by_checkpoints(tmp_path: Path) -> None:
    """A repository-defined clean/smudge filter is a command too: with one configured, checkpoints
    copy files themselves instead of asking git to compare or check out content."""
    from agentkeel.session.objects import ObjectStore
    from agentkeel.session.tree import TreeState

    root = tmp_path / "repo"
    marker = tmp_path / "MARKER"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "a.txt").write_text("a\n")
    old = 1_000_000_000 * 10**9  # committed long ago: clean, and not racy, so git would be asked for it
    os.utime(root / "a.txt", ns=(old, old))
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "base"], check=True)
    (root / ".gitattributes").write_text("*.txt filter=planted\n")
    for kind in ("clean", "smudge"):
        subprocess.run([*git, "config", f"filter.planted.{kind}", f"sh -c 'echo {kind} >> {marker}; cat'"], check=True)
    store = ObjectStore(tmp_path / "checkpoints")
    tree = TreeState(root, store)
    tree.prime()
    tree.sync()
    (root / "a.txt").write_text("changed\n")
    changed = tree.diff()
    assert store.get(changed[str(root / "a.txt")] or "") == b"a\n"
    assert not marker.exists(), marker.read_text()


def test_a_subagent_worktrees_diff_runs_no_external_diff_or_textconv(tmp_path: Path) -> None:
    """``diff.external`` and a textconv driver in the repository's config are commands: the diff keel
    reports of a worktree-isolated subagent runs neither (#30 item 14, internal git)."""
    from agentkeel.agents.worktree import Worktree

    root = tmp_path / "repo"
    marker = tmp_path / "MARKER"
    root.mkdir()
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "a.txt").write_text("a\n")
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "base"], check=True)
    (root / ".gitattributes").write_text("*.txt diff=planted\n")
    subprocess.run([*git, "config", "diff.external", f"sh -c 'echo external >> {marker}' --"], check=True)
    subprocess.run(
        [*git, "config", "diff.planted.textconv", f"sh -c 'echo textconv >> {marker}; cat \"$0\"'"], check=True
    )

    async def run() -> str:
        wt = await Worktree.create(root, "probe")
        (wt.path / "a.txt").write_text("b\n")
        subprocess.run(
            [
                "git",
                "-C",
                str(wt.path),
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@example.invalid",
                "commit",
                "-qam",
                "change",
            ],
            check=True,
        )
        return await wt.diff()

    diff = asyncio.run(run())
    assert "-a\n+b" in diff
    assert not marker.exists(), marker.read_text()
