"""A store being created is not damaged: a fresh KEEL_HOME never reports memory.db as damaged.

The first process (or thread) to open a store creates ``memory.db``. Whatever looks at the file
while that creation is under way (the session's start check, a second store of the same session,
another keel process) must see either no file or a complete one, never a 0-byte file or half a
schema. The race window is made certain rather than hoped for: the creator is frozen at each step
of its work (a profile hook in its own thread, which changes nothing it does), and the file is
checked and opened at that moment.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from agentkeel.memory.health import EMPTY, MemoryDamaged, check_store
from agentkeel.memory.sqlite import SQLiteStore

SRC = str(Path(__file__).resolve().parents[3] / "src")
STORE_CODE = (os.path.join("agentkeel", "memory", "sqlite.py"), os.path.join("agentkeel", "memory", "sqlite_file.py"))


class Frozen:
    """Runs ``SQLiteStore(path)`` in a thread frozen at its ``step``-th step: a call in or from the
    store's own module (not inside the lock module, whose in-process guard a frozen thread would
    hold against the checker; a real second process has no such guard)."""

    def __init__(self, path: Path, step: int) -> None:
        self.path = path
        self.step = step
        self.steps = 0
        self.reached = threading.Event()
        self.go_on = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if event not in ("call", "c_call") or not frame.f_code.co_filename.endswith(STORE_CODE):
            return
        self.steps += 1
        if self.steps == self.step:
            self.reached.set()
            self.go_on.wait(30)

    def _run(self) -> None:
        sys.setprofile(self._profile)
        try:
            SQLiteStore(self.path).close()
        except BaseException as exc:
            self.error = exc
        finally:
            sys.setprofile(None)
            self.reached.set()


def _creation_steps(tmp_path: Path) -> int:
    frozen = Frozen(tmp_path / "count" / "memory.db", step=0)
    frozen.thread.start()
    frozen.thread.join(30)
    assert frozen.error is None
    return frozen.steps


def _look(path: Path) -> tuple[list[str], str | None]:
    """What the start check says of ``path`` now, and what opening a second store there raises."""
    problems = check_store(path)
    try:
        SQLiteStore(path).close()
        opened = None
    except MemoryDamaged as exc:
        opened = str(exc)
    return problems, opened


def test_a_store_being_created_is_never_seen_damaged(tmp_path: Path) -> None:
    steps = _creation_steps(tmp_path)
    assert steps > 5
    seen: list[tuple[int, list[str], str | None]] = []
    for step in range(1, steps + 1):
        path = tmp_path / f"s{step}" / "memory.db"
        frozen = Frozen(path, step)
        frozen.thread.start()
        assert frozen.reached.wait(30)
        result: dict[str, tuple[list[str], str | None]] = {}
        looker = threading.Thread(target=lambda: result.setdefault("r", _look(path)), daemon=True)
        looker.start()
        looker.join(10)
        frozen.go_on.set()
        frozen.thread.join(30)
        assert not looker.is_alive(), f"a check at step {step} of the creation waited for the creator"
        assert frozen.error is None, f"step {step}: the creator failed: {frozen.error}"
        problems, opened = result["r"]
        if problems or opened:
            seen.append((step, problems, opened))
        assert check_store(path) == []  # and what both made is one healthy store
    assert seen == [], f"a store being created was reported damaged: {seen[:3]}"


def test_a_truly_empty_store_is_still_reported(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    path.write_bytes(b"")
    assert check_store(path) == [EMPTY]
    with pytest.raises(MemoryDamaged, match="empty"):
        SQLiteStore(path)
    assert path.read_bytes() == b""  # kept as it was, for the user's say


def test_creation_leaves_only_the_store_and_its_lock(tmp_path: Path) -> None:
    path = tmp_path / "memory" / "memory.db"
    store = SQLiteStore(path)
    store.close()
    names = sorted(p.name for p in path.parent.iterdir())
    assert names == ["memory.db", "memory.db.lock"]
    assert path.stat().st_mode & 0o777 == 0o600


# -- across processes: a keel run beside a creator frozen mid-creation ---------------------------------

CREATOR = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from agentkeel.memory.sqlite import SQLiteStore

    path = Path(sys.argv[1])
    frozen = False

    def profile(frame, event, arg):
        # freeze at the first call after memory.db appears (before the fix: with 0 bytes)
        global frozen
        if frozen or event not in ("call", "c_call") or not path.exists():
            return
        frozen = True
        print("frozen", path.stat().st_size, flush=True)
        sys.stdin.readline()

    sys.setprofile(profile)
    SQLiteStore(path).close()
    sys.setprofile(None)
    if not frozen:
        print("frozen", path.stat().st_size, flush=True)
        sys.stdin.readline()
    print("done", flush=True)
    """
)


@pytest.fixture
def creator(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[str], str]]:
    home = tmp_path / "home"
    path = home / "memory" / "memory.db"
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen(
        [sys.executable, "-c", CREATOR, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None and proc.stdin is not None
    line = proc.stdout.readline()
    try:
        yield home, proc, line
    finally:
        if proc.poll() is None:
            proc.stdin.write("\n")
            proc.stdin.flush()
        proc.wait(30)


def test_a_first_keel_run_beside_a_store_being_created_reports_no_damage(
    creator: tuple[Path, subprocess.Popen[str], str], tmp_path: Path
) -> None:
    home, proc, line = creator
    assert line.startswith("frozen")
    project = tmp_path / "project"
    project.mkdir()
    script = project / "script.json"
    script.write_text(json.dumps({"steps": ["Nothing to do."]}), encoding="utf-8")
    env = {
        **os.environ,
        "KEEL_HOME": str(home),
        "HOME": str(tmp_path),
        "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }
    keel = Path(sys.executable).with_name("keel")
    run = subprocess.run(
        [str(keel), "-p", "hello", "--model", f"scripted:{script}"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("\n")
    proc.stdin.flush()
    assert proc.stdout.readline().strip() == "done"
    assert run.returncode == 0, run.stderr
    assert "damaged" not in run.stderr + run.stdout
    assert check_store(home / "memory" / "memory.db") == []


def test_what_a_killed_creator_left_is_removed_and_a_live_ones_is_not(tmp_path: Path) -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = int(gone.stdout)
    folder = tmp_path / "memory"
    folder.mkdir()
    left = folder / f"memory.db.creating-{dead}-1"
    left.write_bytes(b"half a store")
    live = folder / f"memory.db.creating-{os.getppid()}-1"
    live.write_bytes(b"another process's store in the making")
    young = folder / f"memory.db.creating-{dead}-2"  # a creator on another machine sharing the folder
    young.write_bytes(b"just begun")
    for file in (left, live):
        os.utime(file, (0, 0))
    SQLiteStore(folder / "memory.db").close()
    assert not left.exists()
    assert live.exists()
    assert young.exists()
    assert check_store(folder / "memory.db") == []
