"""An adversarial review of the #31 fixes: other members of each defect family than the ones the
first tests cover. Real files, the real ``keel`` CLI, the scripted model (``--model scripted:FILE``)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from kit import KEEL


def _run(cwd: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [KEEL, *args], cwd=cwd, env=dict(os.environ), capture_output=True, text=True, timeout=timeout,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


def _script(path: Path, steps: list[Any]) -> Path:
    path.write_text(json.dumps({"steps": steps}))
    return path


# --- batch: an OUT file keel batch did not make is never cut or written into -------------------


def _batch_tasks(project: Path, ids: list[str], newline_at_end: bool = True) -> Path:
    script = _script(project / "s.json", ["ok"])
    lines = [json.dumps({"id": t, "prompt": f"task {t}", "model": f"scripted:{script}"}) for t in ids]
    tasks = project / "tasks.jsonl"
    tasks.write_text("\n".join(lines) + ("\n" if newline_at_end else ""))
    return tasks


def test_batch_refuses_an_out_file_that_is_not_its_own(project: Path) -> None:
    """A user's file given as -o: its last line (no newline) was cut and results appended to it."""
    tasks = _batch_tasks(project, ["t1"])
    notes = project / "notes.txt"
    notes.write_bytes(b"my important notes\nsecond line without a newline")
    run = _run(project, "batch", str(tasks), "-o", str(notes))
    assert run.returncode == 2, run.stderr
    assert "not a keel batch results file" in run.stderr and len(run.stderr.strip().splitlines()) == 1
    assert notes.read_bytes() == b"my important notes\nsecond line without a newline"


def test_batch_refuses_the_tasks_file_as_out(project: Path) -> None:
    """``-o tasks.jsonl``: the last task (no newline) was deleted and results mixed into the tasks."""
    tasks = _batch_tasks(project, ["t1", "t2"], newline_at_end=False)
    before = tasks.read_bytes()
    run = _run(project, "batch", str(tasks), "-o", str(tasks))
    assert run.returncode == 2, run.stderr
    assert "is the tasks file" in run.stderr
    assert tasks.read_bytes() == before


def test_batch_resume_keeps_a_whole_last_result_without_a_newline(project: Path) -> None:
    """The last line is a whole result lacking only its newline: --resume counted it as done (not
    run again) and then cut it off: the task's result was gone for good."""
    tasks = _batch_tasks(project, ["t1", "t2"])
    out = project / "out.jsonl"
    first = _run(project, "batch", str(tasks), "-o", str(out))
    assert first.returncode == 0, first.stderr
    lines = out.read_bytes().splitlines()
    t2 = next(line for line in lines if b'"id":"t2"' in line)
    out.write_bytes(t2)  # t1 not recorded; t2's line whole but unterminated
    again = _run(project, "batch", str(tasks), "-o", str(out), "--resume")
    assert again.returncode == 0, again.stderr
    ids = [json.loads(line)["id"] for line in out.read_text().splitlines()]
    assert sorted(ids) == ["t1", "t2"], out.read_text()
    assert t2 + b"\n" in out.read_bytes()


# --- rewind: a file it brings back is made as any editor would make it -------------------------


def test_rewind_brings_back_a_deleted_file_readable_and_a_long_named_one(project: Path) -> None:
    """A Bash ``rm`` then a code rewind: the files came back 0600 (mkstemp's mode), whatever the
    umask, and a file with a 250-byte name could not be restored at all (its temporary file's name
    was over 255 bytes)."""
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    keep = project / "keep.txt"
    keep.write_text("data\n")
    keep.chmod(0o644)
    long = project / ("n" * 250)
    long.write_text("long\n")
    long.chmod(0o644)
    _script(
        project / "s.json",
        [{"tool_calls": [{"name": "Bash", "input": {"command": f"rm keep.txt {long.name}"}}]}, "done"],
    )
    script = f"scripted:{project / 's.json'}"
    ran = _run(project, "-p", "go", "--model", script, "--permission-mode", "bypassPermissions")
    assert ran.returncode == 0, ran.stderr
    assert not keep.exists() and not long.exists()
    umask = os.umask(0o022)
    try:
        back = _run(project, "-p", "/rewind 0 code", "--model", script, "-c")
    finally:
        os.umask(umask)
    assert back.returncode == 0, back.stdout + back.stderr
    assert "2 file(s) restored" in back.stdout, back.stdout
    assert keep.read_text() == "data\n" and long.read_text() == "long\n"
    assert keep.stat().st_mode & 0o777 == 0o644
    assert not list(project.glob("*.keel-rewind-tmp"))


# --- plugins: a manifest that is not a file is one warning, not silently skipped ---------------


def test_a_plugin_manifest_that_is_a_folder_or_a_link_loop_is_one_warning(project: Path) -> None:
    """plugin.json a folder or a symlink loop: the plugin loaded under its folder's name, its
    manifest ignored without a word."""
    script = f"scripted:{_script(project / 's.json', ['ok'])}"
    folder = project / "pa" / ".claude-plugin"
    (folder / "plugin.json").mkdir(parents=True)
    loop = project / "pb" / ".claude-plugin"
    loop.mkdir(parents=True)
    (loop / "plugin.json").symlink_to("other.json")
    (loop / "other.json").symlink_to("plugin.json")
    for root in (project / "pa", project / "pb"):
        run = _run(project, "-p", "hi", "--model", script, "--plugin-dir", str(root))
        assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr
        assert f"{root}/.claude-plugin/plugin.json: not a readable file" in run.stderr, run.stderr


def test_a_plugins_mcp_or_hooks_file_that_is_a_link_loop_or_a_folder_is_one_warning(project: Path) -> None:
    """A plugin's .mcp.json that is a link loop, its hooks/hooks.json a folder: both ignored silently."""
    script = f"scripted:{_script(project / 's.json', ['ok'])}"
    root = project / "pc"
    (root / ".claude-plugin").mkdir(parents=True)
    (root / ".claude-plugin" / "plugin.json").write_text('{"name": "pc"}')
    (root / ".mcp.json").symlink_to(".mcp.json")
    (root / "hooks" / "hooks.json").mkdir(parents=True)
    run = _run(project, "-p", "hi", "--model", script, "--plugin-dir", str(root))
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr
    assert f"{root}/.mcp.json: not a readable file" in run.stderr, run.stderr
    assert f"{root}/hooks/hooks.json: not a readable file" in run.stderr, run.stderr


# --- keel mem sync: the mirror is the user's file ------------------------------------------------


def test_mem_sync_keeps_the_mirrors_mode_link_and_the_users_own_lines(project: Path) -> None:
    """A 0600 mirror became 0644 after a sync; a mirror that is a symlink was replaced by a regular
    file (the link's target left stale); a line of the user's that is no entry was deleted."""
    assert _run(project, "mem", "mirror").returncode == 0
    mirror = project / ".keel" / "memory" / "MEMORY.md"
    real = project / "notes" / "memory.md"
    real.parent.mkdir()
    mirror.replace(real)
    mirror.symlink_to(real)
    real.chmod(0o600)
    with real.open("a") as f:
        f.write("- a new fact\nmy own note, not a fact\n")
    run = _run(project, "mem", "sync")
    assert run.returncode == 0, run.stderr
    assert mirror.is_symlink() and os.readlink(mirror) == str(real)
    assert real.stat().st_mode & 0o777 == 0o600
    text = real.read_text()
    assert "] a new fact" in text and "my own note, not a fact" in text
    again = _run(project, "mem", "sync")  # the kept line stays kept, and is no fact
    assert again.returncode == 0 and "0 added" in again.stdout, again.stdout
    assert real.read_text().count("my own note, not a fact") == 1


def test_mem_sync_of_a_mirror_that_is_not_utf8_is_one_line(project: Path) -> None:
    """A mirror saved as Latin-1 by an editor: an internal error and a traceback."""
    assert _run(project, "mem", "mirror").returncode == 0
    mirror = project / ".keel" / "memory" / "MEMORY.md"
    with mirror.open("ab") as f:
        f.write(b"- caf\xe9 au lait\n")
    before = mirror.read_bytes()
    run = _run(project, "mem", "sync")
    assert run.returncode == 1
    assert "not UTF-8" in run.stderr and "Traceback" not in run.stderr, run.stderr
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert mirror.read_bytes() == before


def test_the_memory_mirror_is_git_ignored(project: Path) -> None:
    """``keel mem mirror`` wrote .keel/memory/MEMORY.md into the repository: ``git status`` showed it."""
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    assert _run(project, "mem", "mirror").returncode == 0
    status = subprocess.run(
        ["git", "status", "--short", "-uall"], cwd=project, capture_output=True, text=True, check=True
    )
    assert status.stdout == "", status.stdout


# --- Edit and rewind keep a file's owner (keel run as root in a container, on a user's files) ---


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a file to another user")
def test_edit_and_rewind_keep_the_files_owner(project: Path) -> None:
    """An Edit (a temporary file renamed over the target) left a user's file owned by root, so
    the user could no longer write it; a rewind did the same."""
    target = project / "f.txt"
    target.write_text("a\nb\n")
    os.chown(target, 12345, 23456)
    target.chmod(0o664)
    steps = [
        {"tool_calls": [{"name": "Read", "input": {"file_path": str(target)}}]},
        {"tool_calls": [{"name": "Edit", "input": {"file_path": str(target), "old_string": "b", "new_string": "B"}}]},
        "done",
    ]
    script = f"scripted:{_script(project / 's.json', steps)}"
    ran = _run(project, "-p", "go", "--model", script, "--permission-mode", "bypassPermissions")
    assert ran.returncode == 0, ran.stderr
    st = target.stat()
    assert target.read_text() == "a\nB\n"
    assert (st.st_uid, st.st_gid, st.st_mode & 0o777) == (12345, 23456, 0o664)
    back = _run(project, "-p", "/rewind 0 code", "--model", script, "-c")
    assert back.returncode == 0, back.stdout + back.stderr
    st = target.stat()
    assert target.read_text() == "a\nb\n"
    assert (st.st_uid, st.st_gid, st.st_mode & 0o777) == (12345, 23456, 0o664)


# --- hooks: a resumed session's long hook output never overwrites an earlier one -------------


def test_a_resumed_sessions_hook_output_file_is_a_new_one(project: Path) -> None:
    """Hook output over 10,000 characters is kept in hook-output/<Event>-<n>.txt, n counted from 1
    in each process: a resumed session overwrote the file the first turn's context names."""
    (project / ".claude").mkdir()
    command = "python3 -c \"print(open('word').read().strip() * 3000)\""
    hook = {"hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command", "command": command}]}]}}
    (project / ".claude" / "settings.json").write_text(json.dumps(hook))
    assert _run(project, "trust", str(project)).returncode == 0
    script = f"scripted:{_script(project / 's.json', ['ok'])}"
    (project / "word").write_text("first")
    assert _run(project, "-p", "hi", "--model", script).returncode == 0
    (project / "word").write_text("second")
    assert _run(project, "-p", "again", "--model", script, "-c").returncode == 0
    kept = sorted(Path(os.environ["KEEL_HOME"]).glob("projects/*/*/hook-output/*.txt"))
    assert sorted(f.read_text()[:6] for f in kept) == ["firstf", "second"], kept


def test_mem_sync_leaves_a_running_writers_temporary_file_alone(project: Path) -> None:
    """Two ``keel mem sync`` at once: the second deleted the first's temporary mirror mid-write
    (the first then failed with an internal error). Only a dead writer's file is removed."""
    assert _run(project, "mem", "mirror").returncode == 0
    folder = project / ".keel" / "memory"
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        live = folder / f".MEMORY.md.{sleeper.pid}.tmp"
        live.write_text("being written")
        dead_pid = 2**22 + 17  # above the highest pid_max Linux allows: never a live process
        dead = folder / f".MEMORY.md.{dead_pid}.tmp"
        dead.write_text("left by a kill")
        assert _run(project, "mem", "sync").returncode == 0
        assert live.exists() and not dead.exists()
    finally:
        sleeper.kill()
        sleeper.wait()


# --- keel -p: a stdout that cannot be written is one line and exit 1 ----------------------------


def test_print_mode_to_a_full_disk_or_a_closed_stdout_is_one_line(project: Path) -> None:
    """``keel -p ... > /dev/full`` was an internal error; ``keel -p ... >&-`` an internal error and a
    traceback (sys.stdout is None)."""
    script = f"scripted:{_script(project / 's.json', ['hello'])}"
    for fmt, redirect, why in (
        ("text", "> /dev/full", "No space left on device"),
        ("stream-json", "> /dev/full", "No space left on device"),
        ("text", ">&-", "stdout is closed"),
    ):
        extra = "--verbose" if fmt == "stream-json" else ""
        run = subprocess.run(
            f"exec {KEEL} -p hi --model {script} --output-format {fmt} {extra} {redirect}",
            shell=True, cwd=project, stderr=subprocess.PIPE, text=True, timeout=120, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        assert run.returncode == 1, (fmt, redirect, run.stderr)
        assert run.stderr.strip() == f"keel: cannot write the output: {why}", (fmt, redirect, run.stderr)


def test_closed_standard_streams_never_become_the_session_log(project: Path) -> None:
    """``keel -p ... >&- 2>&-``: the session log was opened as fd 2 (and its lock as fd 1), so whatever
    keel's children or libraries wrote to stderr went into the transcript."""
    seen = project / "fds.txt"
    find_keel = (
        'p=$PPID; while [ "$(cat /proc/$p/comm)" != keel ] && [ $p -gt 1 ]; do '
        "p=$(awk '{print $4}' /proc/$p/stat); done; "
        f"readlink /proc/$p/fd/1 /proc/$p/fd/2 > {seen}"
    )
    steps = [{"tool_calls": [{"name": "Bash", "input": {"command": find_keel}}]}, "done"]
    script = f"scripted:{_script(project / 's.json', steps)}"
    subprocess.run(
        f"exec {KEEL} -p hi --model {script} --permission-mode bypassPermissions >&- 2>&-",
        shell=True, cwd=project, timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    fds = seen.read_text().split()
    assert len(fds) == 2 and not any(".jsonl" in fd for fd in fds), fds


def test_stream_json_input_to_a_full_disk_or_a_closed_stdout_is_one_line(project: Path) -> None:
    """The stream-json input mode (the SDK's) had the same internal errors as -p."""
    script = f"scripted:{_script(project / 's.json', ['hello'])}"
    line = json.dumps({"type": "user", "message": {"role": "user", "content": "hi"}}) + "\n"
    for redirect, why in (("> /dev/full", "No space left on device"), (">&-", "stdout is closed")):
        run = subprocess.run(
            f"exec {KEEL} -p --input-format stream-json --output-format stream-json --verbose "
            f"--model {script} {redirect}",
            shell=True, cwd=project, input=line, stderr=subprocess.PIPE, text=True, timeout=120,
        )  # fmt: skip
        assert run.returncode == 1, (redirect, run.stderr)
        assert run.stderr.strip() == f"keel: cannot write the output: {why}", (redirect, run.stderr)


# --- Write/Edit: a read-only file stays read-only --------------------------------------------


@pytest.mark.skipif(os.geteuid() != 0, reason="drops to another user in a child process")
def test_a_read_only_file_is_refused_not_renamed_over() -> None:
    """A write is a temporary file renamed over the target, which the target's own mode does not
    stop: a 0444 file of the user's was overwritten where an in-place write (Claude Code's) fails."""
    import tempfile

    from agentkeel.core.tools import ToolError
    from agentkeel.tools.writing import atomic_write

    folder = Path(tempfile.mkdtemp(prefix="keel-ro-", dir="/tmp"))
    try:
        folder.chmod(0o777)
        target = folder / "locked.txt"
        target.write_text("keep me\n")
        os.chown(target, 65534, 65534)
        target.chmod(0o444)
        pid = os.fork()
        if pid == 0:  # the child: an ordinary user, who owns the file and may write the folder
            code = 3
            try:
                os.setgid(65534)
                os.setuid(65534)
                os.environ["KEEL_HOME"] = str(folder / "home")
                try:
                    atomic_write(target, b"changed\n")
                    code = 1
                except ToolError as e:
                    code = 0 if "read-only" in str(e) else 2
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert target.read_text() == "keep me\n"
        assert target.stat().st_mode & 0o777 == 0o444
    finally:
        shutil.rmtree(folder)


def _log_texts(home: Path) -> list[str]:
    """Every text and tool result of the newest session log, in order."""
    log = max(home.glob("projects/*/*.jsonl"), key=lambda p: p.stat().st_mtime)
    texts = []
    for line in log.read_text().splitlines():
        message = json.loads(line).get("message")
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else []:
            value = block.get("content") if block.get("type") == "tool_result" else block.get("text")
            if value:
                texts.append(str(value))
    return texts


def test_a_long_block_reason_reaches_the_model_as_a_preview_and_a_file(project: Path) -> None:
    """A PreToolUse hook's exit-2 stderr and a Stop hook's ``reason`` reach the model; only a
    hook's added context was capped at 10,000 characters: 80,000 and 100,000 went in whole."""
    (project / ".claude").mkdir()
    pre = "python3 -c \"import sys; sys.stderr.write('why ' * 20000); sys.exit(2)\""
    stop = (
        "python3 -c \"import json, sys; d = json.load(sys.stdin); print(json.dumps({} if d.get('stop_hook_active') "
        "else {'decision': 'block', 'reason': 'more ' * 20000}))\""
    )
    hooks = {
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": pre}]}],
        "Stop": [{"hooks": [{"type": "command", "command": stop}]}],
    }
    (project / ".claude" / "settings.json").write_text(json.dumps({"hooks": hooks}))
    assert _run(project, "trust", str(project)).returncode == 0
    steps = [{"tool_calls": [{"name": "Bash", "input": {"command": "echo hi"}}]}, "done", "done again"]
    script = f"scripted:{_script(project / 's.json', steps)}"
    run = _run(project, "-p", "go", "--model", script, "--permission-mode", "bypassPermissions")
    assert run.returncode == 0, run.stderr
    texts = _log_texts(Path(os.environ["KEEL_HOME"]))
    blocked = [t for t in texts if "why why" in t]
    continued = [t for t in texts if "more more" in t]
    assert blocked and continued, texts
    for text in blocked + continued:
        assert len(text) < 12_000 and "The whole output is in" in text, len(text)


async def test_write_under_a_file_names_the_file_in_the_way(project: Path) -> None:
    """Write to ``f.txt/sub`` where f.txt is a file answered ``Cannot write ...: File exists``."""
    from agentkeel.core.tools import ToolError
    from agentkeel.tools.writing import atomic_write

    (project / "f.txt").write_text("x")
    with pytest.raises(ToolError) as caught:
        atomic_write(project / "f.txt" / "deeper" / "sub", b"b")
    assert str(caught.value) == f"Cannot write {project}/f.txt/deeper/sub: {project}/f.txt is a file, not a folder"
    assert (project / "f.txt").read_text() == "x"


# --- memory truth: an edit that failed changed nothing --------------------------------------------


def test_a_session_whose_edits_all_failed_is_no_success_and_changed_nothing() -> None:
    """Every Edit failed (old_string not found), the last call a Read that worked: the lesson said
    "Succeeded ... changed app.py" and was fed back as an approach that worked."""
    from agentkeel.memory.consolidate import reflect
    from agentkeel.memory.model import Entry

    def entry(kind: str, text: str, **meta: Any) -> Entry:
        return Entry(
            id=text[:8], type=kind, project="p", session="s", timestamp="2026-01-01T00:00:00Z", text=text,
            metadata=meta,
        )  # fmt: skip

    failed_edit = {"tool": "Edit", "file_path": "app.py", "success": False}
    lesson = reflect(
        [
            entry("user_prompt", "fix the crash in app.py"),
            entry("tool_observation", "Read app.py", tool="Read", file_path="app.py", success=True),
            entry("tool_observation", "String to replace not found in file", **failed_edit),
            entry("tool_observation", "String to replace not found in file (2)", **failed_edit),
            entry("tool_observation", "Read app.py again", tool="Read", file_path="app.py", success=True),
        ]
    )
    assert lesson is not None
    assert not lesson.success and lesson.score <= 0.25, lesson
    assert not any("changed app.py" in s for s in lesson.strengths), lesson.strengths


# --- KEEL_HOME's spilled outputs are as private as the transcript they belong to ---------------


def test_spilled_tool_and_hook_outputs_are_private(project: Path) -> None:
    """A long Bash output and a long hook context are kept in files beside the session; they were
    0644 in 0755 folders while the transcript holding the same text is 0600."""
    (project / ".claude").mkdir()
    command = "python3 -c \"print('ctx ' * 5000)\""
    hook = {"hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command", "command": command}]}]}}
    (project / ".claude" / "settings.json").write_text(json.dumps(hook))
    assert _run(project, "trust", str(project)).returncode == 0
    steps = [{"tool_calls": [{"name": "Bash", "input": {"command": "seq 1 20000"}}]}, "done"]
    script = f"scripted:{_script(project / 's.json', steps)}"
    run = _run(project, "-p", "go", "--model", script, "--permission-mode", "bypassPermissions")
    assert run.returncode == 0, run.stderr
    home = Path(os.environ["KEEL_HOME"])
    spilled = [*home.glob("projects/*/*/tool-results/*.txt"), *home.glob("projects/*/*/hook-output/*.txt")]
    assert {p.parent.name for p in spilled} == {"tool-results", "hook-output"}, spilled
    for path in spilled:
        assert path.stat().st_mode & 0o777 == 0o600, path
        assert path.parent.stat().st_mode & 0o777 == 0o700, path.parent


# --- rewind_files: a dry run says what the rewind would not restore ------------------------------


async def test_rewind_files_dry_run_names_what_cannot_be_restored(project: Path) -> None:
    """A checkpoint object is gone: the rewind answers an ``error`` naming it, but its dry run
    answered ``canRewind: true`` with no word of it."""
    from agentkeel.app.runtime import Runtime, RuntimeOptions
    from agentkeel.session.history import rewind_files, user_turns

    target, other = project / "f.txt", project / "g.txt"
    target.write_text("before\n")
    other.write_text("other before\n")
    steps = [
        {"tool_calls": [{"name": "Read", "input": {"file_path": str(target)}}]},
        {"tool_calls": [{"name": "Read", "input": {"file_path": str(other)}}]},
        {"tool_calls": [{"name": "Write", "input": {"file_path": str(target), "content": "after\n"}}]},
        {"tool_calls": [{"name": "Write", "input": {"file_path": str(other), "content": "other after\n"}}]},
        "done",
    ]
    script = _script(project / "s.json", steps)
    rt = Runtime.create(
        RuntimeOptions(
            cwd=project, env=dict(os.environ), permission_mode="bypassPermissions", model=f"scripted:{script}"
        )
    )
    try:
        assert (await rt.run("write them")).subtype == "success"
        objects = next(Path(os.environ["KEEL_HOME"]).glob("projects/*/*/checkpoints/objects"))
        (objects / hashlib.sha256(b"before\n").hexdigest()).unlink()
        [turn] = user_turns(rt.session_path)
        dry = await rewind_files(rt, turn.event_uuid, dry_run=True)
        assert "is missing" in dry.get("error", ""), dry
        real = await rewind_files(rt, turn.event_uuid)
        assert "is missing" in real.get("error", ""), real
        assert other.read_text() == "other before\n" and target.read_text() == "after\n"
    finally:
        await rt.aclose()


# --- keel mem on a read-only KEEL_HOME: the file is not called damaged ---------------------------


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare for a private read-only mount")
def test_mem_on_a_read_only_home_does_not_call_the_store_unusable(project: Path) -> None:
    """A read-only KEEL_HOME: `keel mem search` said the healthy memory.db "is not a usable memory
    database ... move it aside", advice that hides the user's memory for nothing."""
    assert _run(project, "mem", "mirror").returncode == 0  # the store exists, healthy
    home = os.environ["KEEL_HOME"]
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("unprivileged mount namespaces are not available here")
    run = subprocess.run(
        ["unshare", "-rm", "sh", "-c", f'mount --bind -o ro "{home}" "{home}" && exec {KEEL} mem search anything'],
        cwd=project, env=dict(os.environ), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 1, run.stderr
    assert "read-only" in run.stderr and "move it aside" not in run.stderr, run.stderr
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr


def test_batch_tidy_keeps_a_whole_result_over_a_mib_that_lacks_its_newline(tmp_path: Path) -> None:
    """The same as a short one: a whole last result of 2 MiB (a long answer) without its newline is
    counted by ``recorded`` and so must not be cut; a torn one of that size still is."""
    from agentkeel.ui.batch.results import ResultWriter, recorded

    out = tmp_path / "out.jsonl"
    first = json.dumps({"id": "a", "status": "success", "result": "short"}) + "\n"
    big = json.dumps({"id": "b", "status": "success", "result": "x" * (2 << 20)})
    out.write_text(first + big)
    assert set(recorded(out)) == {"a", "b"}
    ResultWriter(out).close()
    assert out.read_text() == first + big + "\n"
    out.write_text(first + big[: len(big) - 10])  # torn
    ResultWriter(out).close()
    assert out.read_text() == first


def test_batch_out_that_is_a_symlink_stays_one_after_the_rewrite(tmp_path: Path) -> None:
    """The end-of-run rewrite (one line per task) renamed a new file over the OUT path: a symlinked
    OUT became a regular file and its target kept the old lines."""
    from agentkeel.ui.batch.results import Result, ResultWriter

    real = tmp_path / "data" / "results.jsonl"
    real.parent.mkdir()
    link = tmp_path / "out.jsonl"
    link.symlink_to(real)
    writer = ResultWriter(link)
    try:
        writer.write(Result(id="t1", status="cancelled"))
        writer.write(Result(id="t1", status="success", attempts=2))
        writer.compact()
    finally:
        writer.close()
    assert link.is_symlink()
    assert [json.loads(line)["status"] for line in real.read_text().splitlines()] == ["success"]
