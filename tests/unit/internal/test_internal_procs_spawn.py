"""The runner's primitives for callers that own a child's life (:func:`procs.spawn` / :func:`procs.stop`),
the stop steps of :func:`procs.run_sync`, the parent-death signal, and that no other module starts a
process (the editor of ``/memory edit`` is the one documented exception)."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from agentkeel.internal import procs

SRC = Path(__file__).resolve().parents[3] / "src" / "agentkeel"
SPAWNS = re.compile(
    r"create_subprocess_(exec|shell)|subprocess\.(Popen|run|call|check_call|check_output)\(|os\.(fork|spawn\w*|posix_spawn\w*|exec\w*)\("
)
# the interactive editor keeps keel's process group, the terminal's foreground one (see internal/procs.py)
EXCEPTIONS = {"internal/procs.py", "context/commands.py"}


def _running(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmdline and state != b"Z":
            found.append(int(entry))
    return found


def _gone(marker: str, within: float = 30.0) -> bool:  # a bound on a hang under load, not a speed
    deadline = time.monotonic() + within
    while _running(marker):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _sleep_arg() -> str:
    return f"{100 + uuid.uuid4().int % 10_000}.{uuid.uuid4().int % 1000:03d}"


def test_no_module_starts_a_process_but_the_runner() -> None:
    found = []
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC).as_posix()
        if rel in EXCEPTIONS:
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if SPAWNS.search(line):
                found.append(f"{rel}:{n}: {line.strip()}")
    assert found == [], "start processes with agentkeel.internal.procs:\n" + "\n".join(found)
    editor = (SRC / "context" / "commands.py").read_text(encoding="utf-8")
    assert len(SPAWNS.findall(editor)) == 1, "the editor is the one exception, not a second runner"


async def test_stop_kills_the_group_of_a_child_that_ignores_sigterm(tmp_path: Path) -> None:
    n = _sleep_arg()
    proc = await procs.spawn(
        ["/bin/sh", "-c", f"trap '' TERM; sleep {n} & sleep {n}; wait"], cwd=tmp_path, env=None, stdout=None
    )
    try:
        deadline = time.monotonic() + 10
        while len(_running(f"sleep\0{n}")) < 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert os.getpgid(proc.pid) == proc.pid, "the child leads a group of its own"
        await asyncio.wait_for(procs.stop(proc, grace=0.3), 20)
        assert proc.returncode == -signal.SIGKILL
        assert _gone(f"sleep\0{n}")
    finally:
        procs.kill_group(proc.pid)


async def test_stop_ends_a_child_that_closes_on_sigterm_with_that_signal(tmp_path: Path) -> None:
    proc = await procs.spawn(["sleep", _sleep_arg()], cwd=tmp_path, env=None, stdout=None)
    await asyncio.wait_for(procs.stop(proc, grace=10), 20)
    assert proc.returncode == -signal.SIGTERM


def test_run_sync_stops_a_command_past_its_time_with_the_steps_and_keeps_its_output(tmp_path: Path) -> None:
    n = _sleep_arg()
    ran = procs.run_sync(
        ["/bin/sh", "-c", f"trap 'echo term; exit 7' TERM; echo started; sleep {n} & wait"],
        cwd=tmp_path,
        env=None,
        timeout=1,
        stop_steps=((signal.SIGTERM, 5.0),),
    )
    assert ran.timed_out and ran.exit_code is None and ran.status == 7
    assert ran.stdout == b"started\nterm\n"
    assert _gone(f"sleep\0{n}"), "what it left in its group is killed"


def test_a_child_started_with_die_with_gets_the_signal_when_its_parent_dies(tmp_path: Path) -> None:
    """The parent is a Python process that starts ``sleep`` through the runner and is then SIGKILLed."""
    n = _sleep_arg()
    code = (
        "import asyncio, signal, sys; from agentkeel.internal import procs\n"
        "async def main():\n"
        f"    await procs.spawn(['sleep', '{n}'], cwd=None, env=None, stdout=None, die_with=signal.SIGKILL)\n"
        "    print('up', flush=True); await asyncio.sleep(600)\n"
        "asyncio.run(main())\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None and parent.stdout.readline().strip() == "up"
        assert _running(f"sleep\0{n}")
        parent.kill()
        parent.wait(10)
        assert _gone(f"sleep\0{n}")
    finally:
        parent.kill()
        parent.wait()
        for pid in _running(f"sleep\0{n}"):
            os.kill(pid, signal.SIGKILL)


async def test_a_program_that_cannot_be_found_is_one_line_also_with_a_death_signal(tmp_path: Path) -> None:
    ran = await procs.run([str(tmp_path / "missing")], cwd=tmp_path, env=None, timeout=5, die_with=signal.SIGKILL)
    assert ran.exit_code is None and ran.error.startswith("cannot run ")


def test_run_sync_interrupted_gives_the_group_its_interrupt_steps_then_kills_it(tmp_path: Path) -> None:
    """A batch task cancelled by Ray: keel gets SIGINT and time to close; what is left is killed."""
    n = _sleep_arg()
    seen = tmp_path / "seen"
    leader: list[int] = []

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 1.0)
    try:
        try:
            procs.run_sync(
                ["/bin/sh", "-c", f"trap 'touch {seen}; exit 5' INT; sleep {n} & wait"],
                cwd=tmp_path,
                env=None,
                timeout=60,
                on_start=leader.append,
                interrupt_steps=((signal.SIGINT, 5.0),),
            )
        except KeyboardInterrupt:
            pass
        else:
            raise AssertionError("the interrupt was not re-raised")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert seen.exists(), "the command got SIGINT first"
    assert _gone(f"sleep\0{n}"), "what it left in its group is killed"
    assert len(leader) == 1 and not Path(f"/proc/{leader[0]}").exists(), "the leader ended and was reaped"
