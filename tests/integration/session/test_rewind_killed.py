"""kill -9 during a code rewind, then the next start: the rewind's journal is completed or rolled
back, so the files end fully at the rewind's target or fully as they were, and the log says which.

A sweep over kill points: each point is a fresh session whose one Bash call rewrote N files, a
real `keel -p "/rewind 0 code"` killed with SIGKILL once the journal's intent is in the log and
k files are back, then a real `keel` start on the session (which finishes the journal). The
suite runs a few points; ``KEEL_KILL_SWEEP=N`` runs N (spread over 0..all files).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentkeel.models.fake.server import FakeLLMServer
from kit import KEEL, KeelRun, session_files, wait_until, wire_env

Start = Callable[[Any], FakeLLMServer]
Keel = Callable[..., KeelRun]
BYPASS = ("--permission-mode", "bypassPermissions")
FILES = 150
ORIGINAL_SIZE = 48 * 1024
BASH_SIZE = 16 * 1024


def original(i: int) -> bytes:
    head = f"file {i:04d}, as it was before the session\n".encode()
    return head + b"o" * (ORIGINAL_SIZE - len(head))


def _entries(log: Path) -> list[dict[str, Any]]:
    out = []
    for line in log.read_bytes().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue  # a torn last line (the kill): the loader skips it too
    return out


def _sweep_points() -> list[int]:
    n = int(os.environ.get("KEEL_KILL_SWEEP", "0") or 0)
    if n <= 0:
        return [FILES // 2, 0]
    return sorted({round(j * FILES / max(n - 1, 1)) for j in range(n)})


@dataclass
class Rewritten:
    """A fresh project whose one session's Bash call rewrote its FILES files (the rewind's subject)."""

    project: Path
    home: Path
    env: dict[str, str]
    sid: str
    log: Path
    names: list[Path]

    def keel(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [KEEL, *args],
            cwd=self.project,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )

    def start_rewind(self, mode: str = "code") -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [KEEL, "-p", f"/rewind 0 {mode}", "-r", self.sid, *BYPASS],
            cwd=self.project,
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
        )

    def back(self) -> int:
        """How many files are back at their original content."""
        return sum(1 for p in self.names if p.exists() and p.stat().st_size == ORIGINAL_SIZE)


def rewritten(tmp: Path, tag: str, fake_llm: Start) -> Rewritten:
    project, home = tmp / f"p{tag}", tmp / f"home{tag}"
    project.mkdir()
    for i in range(FILES):
        (project / f"f{i:04d}.txt").write_bytes(original(i))
    command = f"for f in f*.txt; do head -c {BASH_SIZE} /dev/zero | tr '\\0' b > $f; done"
    server = fake_llm(
        {"steps": [{"text": "ok", "tool_calls": [{"name": "Bash", "input": {"command": command}}]}, "done"]}
    )
    env = {**os.environ, **wire_env(server, "anthropic"), "KEEL_HOME": str(home)}
    first = subprocess.run(
        [KEEL, "-p", "rewrite them", "--output-format", "json", *BYPASS],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert first.returncode == 0, first.stderr
    sid = json.loads(first.stdout)["session_id"]
    names = [project / f"f{i:04d}.txt" for i in range(FILES)]
    assert all(p.stat().st_size == BASH_SIZE for p in names)
    [log] = session_files(home)
    return Rewritten(project, home, env, sid, log, names)


def signal_mid_rewind(r: Rewritten, proc: subprocess.Popen[bytes], k: int, sig: signal.Signals) -> int | None:
    """Send ``sig`` to the rewinding ``proc`` once its intent is in the log and ``k`` files are back
    (k = 0: just after the intent); returns how many were back then (None: it ended first)."""

    def moment() -> tuple[int | None] | None:
        if proc.poll() is not None:
            return (None,)
        back = r.back()
        if back >= k and (k > 0 or b'"rewind_intent"' in r.log.read_bytes()):
            proc.send_signal(sig)
            return (back,)
        return None

    at: tuple[int | None] = wait_until(moment, 120, f"the rewind to bring {k} file(s) back", interval=0.001)
    return at[0]


def _one_point(tmp: Path, k: int, fake_llm: Start, *, drop_object: bool, mode: str = "code") -> dict[str, Any]:
    r = rewritten(tmp, f"{k}{'d' if drop_object else ''}{mode}", fake_llm)
    project, sid, log, names, keel = r.project, r.sid, r.log, r.names, r.keel
    proc = r.start_rewind(mode)
    killed_at = signal_mid_rewind(r, proc, k, signal.SIGKILL)
    proc.wait()
    back_at_kill = r.back()
    if drop_object and 0 < back_at_kill < FILES:  # a target that cannot be reached: the journal rolls back
        intent = next(e for e in _entries(log) if e["type"] == "rewind_intent")
        missing = next(p for p in names if p.stat().st_size != ORIGINAL_SIZE)
        (log.with_suffix("") / "checkpoints" / "objects" / intent["targets"][str(missing)]).unlink()

    restart = keel("-p", "/rewind", "-r", sid, *BYPASS)  # the next start of the session
    assert restart.returncode == 0, restart.stderr
    at_target = [p.read_bytes() == original(i) for i, p in enumerate(names)]
    at_prior = [p.read_bytes() == b"b" * BASH_SIZE for p in names]
    entries = _entries(log)
    intents = [e for e in entries if e["type"] == "rewind_intent"]
    dones = [e for e in entries if e["type"] == "rewind_done"]
    assert all(at_target) or all(at_prior), f"half-restored: {sum(at_target)} at the target, {sum(at_prior)} as before"
    assert not list(project.glob(".*keel*tmp")), "a temporary file was left in the project"
    if intents:
        [intent] = intents
        [done] = [d for d in dones if d["rewind_id"] == intent["rewind_id"]]
        assert done["outcome"] == ("completed" if all(at_target) else "rolled_back"), done
        if done["recovered"]:
            assert "interrupted" in restart.stderr + restart.stdout, restart.stderr
    else:
        assert all(at_prior)  # killed before the intent was logged: nothing was touched
    if mode == "both":  # the conversation goes with the files: rewound exactly when they are
        turns = json.loads(keel("sessions", "turns", sid, "--json").stdout)
        assert len(turns) == (0 if all(at_target) else 1), turns
    return {
        "k": k,
        "killed_at": killed_at,
        "back_at_kill": back_at_kill,
        "outcome": dones[-1]["outcome"] if dones else None,
    }


def test_kill_9_during_rewind_then_restart_completes_or_rolls_back(tmp_path: Path, fake_llm: Start) -> None:
    seen = [_one_point(tmp_path, k, fake_llm, drop_object=False) for k in _sweep_points()]
    seen.append(_one_point(tmp_path, FILES // 3, fake_llm, drop_object=True))
    seen.append(_one_point(tmp_path, FILES // 4, fake_llm, drop_object=False, mode="both"))
    print(seen)
    # the sweep is worth something only if some kills landed in the middle of the restore
    assert any(s["killed_at"] is not None and 0 < s["back_at_kill"] < FILES for s in seen), seen
