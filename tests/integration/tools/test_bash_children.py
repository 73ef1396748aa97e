"""What a Bash command leaves running: it must not hold the call, and it dies with the call or with keel.

Each child is a ``sleep`` with a duration no other process uses, found by its command line
(psutil); a fixture kills any still there when a test ends, so a failing test leaves nothing.
In-process tests run under a hard SIGALRM timeout; keel's CLI runs under subprocess timeouts.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import psutil
import pytest

from agentkeel.core.tools import Services, ToolContext, ToolError, ToolOutput, ToolRegistry
from agentkeel.tools import builtin_tools
from agentkeel.tools.procs import TAG_VAR
from agentkeel.tools.shell import ShellState
from kit import KEEL, wait_until, wait_until_async

HARD_TIMEOUT_S = 60
REGISTRY = ToolRegistry(builtin_tools())


@pytest.fixture(autouse=True)
def _hard_timeout() -> Iterator[None]:
    def fire(signum: int, frame: FrameType | None) -> None:
        raise TimeoutError(f"test exceeded its hard timeout of {HARD_TIMEOUT_S}s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.alarm(HARD_TIMEOUT_S)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def _sleeping(duration: str) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["cmdline", "status"]):
        if p.info["cmdline"] == ["sleep", duration] and p.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(p)
    return found


class Sleeps:
    """Unique ``sleep`` durations, and which of them are running."""

    def __init__(self) -> None:
        self.base = secrets.randbelow(10**6)
        self.made: list[str] = []

    def __call__(self) -> str:
        duration = f"600.{self.base:06d}{len(self.made)}"
        self.made.append(duration)
        return duration

    def alive(self) -> list[str]:
        return [d for d in self.made if _sleeping(d)]

    def wait_all_gone(self, timeout: float) -> None:
        wait_until(lambda: not self.alive(), timeout, "every sleep to end", interval=0.1)

    def wait_running(self, durations: list[str], timeout: float = 60) -> None:
        wait_until(lambda: all(_sleeping(d) for d in durations), timeout, f"the sleeps {durations} to start")


@pytest.fixture
def sleeps() -> Iterator[Sleeps]:
    s = Sleeps()
    yield s
    for d in s.made:  # a failing test leaves nothing behind
        for p in _sleeping(d):
            p.kill()


class Harness:
    def __init__(self, cwd: Path) -> None:
        self.ctx = ToolContext(cwd=cwd, session_id="t", services=Services(), emit=lambda e: None)

    async def __call__(self, name: str, **tool_input: Any) -> ToolOutput:
        tool = REGISTRY.get(name)
        assert tool is not None
        try:
            return await tool.run(tool.parse(tool_input), self.ctx)
        except ToolError as e:
            return ToolOutput(str(e), is_error=True)

    async def aclose(self) -> None:
        await self.ctx.services.get(ShellState).aclose()


@pytest.fixture
async def t(tmp_path: Path) -> Any:
    h = Harness(tmp_path)
    yield h
    await h.aclose()


async def test_a_backgrounded_child_does_not_hold_the_call(t: Harness, sleeps: Sleeps) -> None:
    d = sleeps()
    out = await t("Bash", command=f"sleep {d} & echo started", timeout=8000)
    assert not out.metadata["timed_out"] and not out.is_error, out.text()  # the old call waited for the timeout
    assert out.text().startswith("started\n\n[The shell exited, but what it started in the background is still")
    assert f"sleep {d} (pid " in out.text() and "background shell bash_1" in out.text()
    assert out.metadata["background_id"] == "bash_1"
    assert sleeps.alive() == [d]  # moved, not killed
    assert "<status>running</status>" in (await t("BashOutput", bash_id="bash_1")).text()
    assert "Killed shell bash_1" in (await t("KillShell", shell_id="bash_1")).text()
    assert sleeps.alive() == []
    assert "<status>killed</status>" in (await t("BashOutput", bash_id="bash_1")).text()


async def test_output_after_the_shell_exits_goes_to_the_moved_shell(t: Harness, sleeps: Sleeps) -> None:
    d = sleeps()
    out = await t("Bash", command=f"(sleep 0.5; echo later; sleep {d}) & echo now", timeout=8000)
    assert out.text().startswith("now\n\n[The shell exited")
    nothing_yet = "<status>running</status>\n<output>\n\n</output>"

    async def printed() -> str | None:  # until the child has printed, however loaded the machine
        text = (await t("BashOutput", bash_id="bash_1")).text()
        return None if text == nothing_yet else text

    more = await wait_until_async(printed, 60, "the moved shell's output")
    assert more == "<status>running</status>\n<output>\nlater\n</output>"


async def test_a_child_that_ends_with_the_shell_gets_no_note(t: Harness) -> None:
    out = await t("Bash", command=": & echo quick")
    assert out.text() == "quick" and "background_id" not in out.metadata
    assert not t.ctx.services.get(ShellState).shells


async def test_nohup_and_setsid_children_stop_with_the_session(t: Harness, sleeps: Sleeps, tmp_path: Path) -> None:
    nohup, setsid, detached, background = sleeps(), sleeps(), sleeps(), sleeps()
    out = await t("Bash", command=f"nohup sleep {nohup} &", timeout=8000)
    assert "background shell bash_1" in out.text() and not out.metadata["timed_out"]
    out = await t("Bash", command=f"setsid sleep {setsid} & echo s", timeout=8000)  # its own group, our pipe
    assert "background shell bash_2" in out.text() and f"sleep {setsid}" in out.text()
    out = await t("Bash", command=f"setsid sleep {detached} >/dev/null 2>&1 & echo d", timeout=8000)
    assert out.text() == "d"  # left the group and the pipe: not seen now, but tagged
    await t("Bash", command=f"sleep {background}", run_in_background=True)
    sleeps.wait_running([nohup, setsid, detached, background])
    assert "Killed shell bash_2" in (await t("KillShell", shell_id="bash_2")).text()
    assert setsid not in sleeps.alive()  # KillShell reaches a process that left the group
    await t.aclose()  # kills the two moved shells and the background one; the watchdog, the detached one
    sleeps.wait_all_gone(timeout=60)


async def test_a_timeout_kills_what_the_shell_left_too(t: Harness, sleeps: Sleeps) -> None:
    child, fg = sleeps(), sleeps()
    out = await t("Bash", command=f"setsid sleep {child} & sleep {fg}", timeout=500)
    assert out.is_error and "timed out after 0.5s and was killed" in out.text()
    assert sleeps.alive() == []


async def test_an_interrupted_call_kills_its_children(t: Harness, sleeps: Sleeps) -> None:
    child, fg = sleeps(), sleeps()
    call = asyncio.ensure_future(t("Bash", command=f"setsid sleep {child} & sleep {fg}"))
    await asyncio.to_thread(sleeps.wait_running, [child, fg])
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert sleeps.alive() == []


# --- keel's CLI ----------------------------------------------------------------------------


def _script(tmp_path: Path, steps: list[Any]) -> Path:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"steps": steps}))
    return script


def _bash(command: str, **extra: Any) -> dict[str, Any]:
    return {"text": "running", "tool_calls": [{"name": "Bash", "input": {"command": command, **extra}}]}


def _keel(project: Path, script: Path) -> subprocess.Popen[str]:
    args = ["-p", "go", "--model", f"scripted:{script}", "--permission-mode", "bypassPermissions"]
    return subprocess.Popen(
        [KEEL, *args, "--output-format", "stream-json", "--verbose"],
        cwd=project,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _tagged_with(session: str) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter():
        try:
            tag = p.environ().get(TAG_VAR, "")
        except (psutil.Error, OSError):
            continue
        if any(t.startswith(f"{session}:") for t in tag.split()):
            found.append(p)
    return found


def _watchdog_of(keel: psutil.Process) -> psutil.Process:
    def found() -> psutil.Process | None:
        return next((c for c in keel.children() if any(a.endswith("procs.py") for a in c.cmdline())), None)

    watchdog: psutil.Process = wait_until(found, 30, "keel's watchdog")
    return watchdog


def test_keel_returns_and_exits_leaving_no_child_and_no_traceback(
    project: Path, tmp_path: Path, sleeps: Sleeps
) -> None:
    amp, bg, nohup, detached = sleeps(), sleeps(), sleeps(), sleeps()
    script = _script(
        tmp_path,
        [
            _bash(f"sleep {amp} & echo started", timeout=10000),
            _bash(f"sleep {bg}", run_in_background=True),
            _bash(f"nohup sleep {nohup} &", timeout=10000),
            _bash(f"setsid sleep {detached} >/dev/null 2>&1 &", timeout=10000),
            "done",
        ],
    )
    keel = _keel(project, script)
    try:
        out, err = keel.communicate(timeout=HARD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        keel.kill()
        pytest.fail("keel -p did not finish")
    assert keel.returncode == 0, err
    assert "Event loop is closed" not in err and "Traceback" not in err, err
    results = [m["message"]["content"][0] for m in map(json.loads, out.splitlines()) if m["type"] == "user"]
    first = str(results[0]["content"])
    assert first.startswith("started") and "still running" in first and not results[0]["is_error"]
    assert not {amp, bg, nohup} & set(sleeps.alive())  # stopped before keel exited
    sleeps.wait_all_gone(timeout=60)  # the detached one by the watchdog, once keel's pipe closed


def test_kill_9_of_keel_kills_every_child(project: Path, tmp_path: Path, sleeps: Sleeps) -> None:
    amp, bg, nohup, setsid, detached, fg = (sleeps() for _ in range(6))
    script = _script(
        tmp_path,
        [
            _bash(f"sleep {amp} & echo started"),
            _bash(f"sleep {bg}", run_in_background=True),
            _bash(f"nohup sleep {nohup} &"),
            _bash(f"setsid sleep {setsid} &"),
            _bash(f"setsid sleep {detached} >/dev/null 2>&1 &"),
            _bash(f"sleep {fg}"),  # keel is in this call when it is killed
            "done",
        ],
    )
    keel = _keel(project, script)
    try:
        sleeps.wait_running([amp, bg, nohup, setsid, detached, fg])
        watchdog = _watchdog_of(psutil.Process(keel.pid))
        session = watchdog.cmdline()[-1]
        assert len(_tagged_with(session)) >= 7  # the six sleeps and the foreground shell
        keel.kill()  # SIGKILL: none of keel's cleanup runs
        keel.communicate(timeout=HARD_TIMEOUT_S)
        sleeps.wait_all_gone(timeout=60)
        watchdog.wait(timeout=60)
        assert _tagged_with(session) == []
    finally:
        if keel.poll() is None:
            keel.kill()
            keel.wait()


def test_sigint_of_keel_in_a_bash_call_kills_its_children(project: Path, tmp_path: Path, sleeps: Sleeps) -> None:
    amp, fg = sleeps(), sleeps()
    keel = _keel(project, _script(tmp_path, [_bash(f"sleep {amp} & sleep {fg}"), "done"]))
    try:
        sleeps.wait_running([amp, fg])
        keel.send_signal(signal.SIGINT)
        _, err = keel.communicate(timeout=HARD_TIMEOUT_S)
    finally:
        if keel.poll() is None:
            keel.kill()
            keel.wait()
    assert keel.returncode == 130 and "Traceback" not in err, err
    assert sleeps.alive() == []
