"""What keel starts through its one runner (``agentkeel.internal.procs``) does not outlive it: a
ripgrep search of the Grep tool dies with a killed keel and with a cancelled call, and the SDK's
spawned keel dies with the program that started it, even when that program's stdin pipe to it is
still held open elsewhere (a forked worker), so that no end-of-file ever comes.

Every process is found by pid; a test kills whatever it started that is still there when it ends."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentkeel.models.fake.server import FakeLLMServer
from agentkeel.tools.search import GrepInput, ripgrep
from kit import KEEL, call, descendants, wait_until, wait_until_async, wire_env, write_script

RG = "/usr/bin/rg" if os.path.exists("/usr/bin/rg") else None
# linear in ripgrep's engine, but its lazy DFA thrashes: seconds of CPU a megabyte
SLOW_PATTERN = "(?:a|b)*a(?:a|b){30}$"

needs_rg = pytest.mark.skipif(RG is None, reason="ripgrep is not installed")


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


@pytest.fixture
def started() -> Iterator[list[int]]:
    """Pids a test saw; any still alive at its end is killed (a failing test leaves nothing)."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def slow_tree(root: Path, megabytes: int = 8) -> Path:
    """A directory with one file ripgrep takes a long time over with :data:`SLOW_PATTERN`."""
    root.mkdir(parents=True, exist_ok=True)
    raw = os.urandom(megabytes << 20)
    table = bytes((ord("a") if i % 2 else ord("b")) for i in range(256))
    text = raw.translate(table)
    lines = b"\n".join(text[i : i + 200] for i in range(0, len(text), 200))
    (root / "ab.txt").write_bytes(lines + b"\n")
    return root


def rg_below(pid: int) -> list[int]:
    return [p for p, argv in descendants(pid) if Path(argv[0]).name == "rg"]


@needs_rg
def test_a_ripgrep_search_dies_with_a_killed_keel(project: Path, tmp_path: Path, started: list[int]) -> None:
    slow_tree(project / "data")
    script = write_script(
        tmp_path / "scripts", [call("Grep", pattern=SLOW_PATTERN, path="data", output_mode="count"), "done"]
    )
    keel = subprocess.Popen(
        [KEEL, "-p", "search", "--model", f"scripted:{script}", "--output-format", "json"],
        cwd=project,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    started.append(keel.pid)
    try:
        (rg,) = wait_until(lambda: rg_below(keel.pid), 60, "ripgrep to start under keel")
        started.append(rg)
        keel.kill()  # SIGKILL: none of keel's own cleanup runs
        keel.wait(10)
        wait_until(lambda: not alive(rg), 10, "ripgrep to die with keel")
    finally:
        if keel.poll() is None:
            keel.kill()
            keel.wait()


@needs_rg
async def test_a_ripgrep_search_past_its_time_is_killed(tmp_path: Path, started: list[int]) -> None:
    """The tool's timeout cancels the call; the search's group is killed with it (as before the runner:
    the old code killed ripgrep itself, a single process, on a cancel)."""
    root = slow_tree(tmp_path / "data", megabytes=2)
    assert RG is not None
    search = asyncio.ensure_future(ripgrep(GrepInput(pattern=SLOW_PATTERN, output_mode="count"), root, RG))
    me = os.getpid()
    (rg,) = await wait_until_async(lambda: rg_below(me), 60, "ripgrep to start")
    started.append(rg)
    search.cancel()
    with pytest.raises(asyncio.CancelledError):
        await search
    await wait_until_async(lambda: not alive(rg), 10, "ripgrep to be killed with the cancelled call")


HOST = textwrap.dedent(
    """
    import asyncio, os, sys, time
    from agentkeel.ui.sdk import KeelAgentOptions, KeelSDKClient

    async def main() -> None:
        opts = KeelAgentOptions(cwd=sys.argv[1], env={"ANTHROPIC_API_KEY": sys.argv[2],
            "ANTHROPIC_BASE_URL": sys.argv[3]}, transport="subprocess", cli_path=sys.argv[4])
        client = KeelSDKClient(opts)
        await client.connect()
        await client.query("go")
        if os.fork() == 0:  # a worker forked now holds keel's stdin too: it sees no EOF when we die
            time.sleep(600)
            os._exit(0)
        print("ready", flush=True)
        await asyncio.sleep(600)

    asyncio.run(main())
    """
)


def test_the_sdks_keel_dies_with_the_program_that_started_it(
    fake_llm: Callable[[Any], FakeLLMServer], project: Path, started: list[int]
) -> None:
    server = fake_llm({"steps": [{"text": "slow", "delay_s": 120}]})
    env = wire_env(server, "anthropic")
    host = subprocess.Popen(
        [sys.executable, "-c", HOST, str(project), env["ANTHROPIC_API_KEY"], env["ANTHROPIC_BASE_URL"], KEEL],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    started.append(host.pid)
    try:
        assert host.stdout is not None
        assert host.stdout.readline().strip() == "ready"
        wait_until(lambda: server.cursor.requests, 60, "keel's request to the model")
        below = descendants(host.pid)
        keel = [p for p, argv in below if "--input-format" in argv]
        forked = [p for p, argv in below if argv[0] == sys.executable and p not in keel]
        assert len(keel) == 1, below
        started.extend(keel + forked)
        host.kill()
        host.wait(10)
        wait_until(lambda: not alive(keel[0]), 30, "the SDK's keel to end with the program that started it")
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()
