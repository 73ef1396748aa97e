"""The testing façade: what a test needs to drive keel for real, in one place.

    from kit import call, fake_llm_server, session, wait_until, wire_env

- **The scripted model.** A script is a list of steps, each one model reply (see
  :mod:`agentkeel.models.fake.script` for every fault a step can inject). :func:`write_script` puts
  one in a file; ``model=f"scripted:{path}"`` plays it in process, without HTTP. :func:`call`
  is the step that calls one tool.
- **The loopback fake server.** :func:`fake_llm_server` serves a script over the real Anthropic
  and OpenAI wire formats on 127.0.0.1 (the ``fake_llm`` fixture starts one and stops it after
  the test); :func:`wire_env` is the environment that points keel's clients at it.
- **A session.** :func:`session` builds a real keel session through the public API
  (``agentkeel.Runtime``) on a project directory, from steps (in process) or a server (over
  loopback); :func:`run_session` runs one prompt in it and closes it.
- **The CLI.** :func:`run_keel` runs the installed ``keel`` binary (the ``keel`` fixture binds it
  to the test's project); :func:`session_files` lists the transcripts under a ``KEEL_HOME``.
- **Waiting.** :func:`wait_until` (and :func:`wait_until_async` inside a coroutine) polls a
  condition with a bound on a hang, never an expectation of speed: no test hand-rolls a
  deadline loop.

Nothing here mocks keel: the only fake is the model.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from itertools import count
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentkeel.models.fake.script import Script
from agentkeel.models.fake.server import FakeLLMServer

if TYPE_CHECKING:
    from agentkeel import RunResult, Runtime

KEEL = str(Path(sys.executable).parent / "keel")

_scripts = count()


# -- the scripted model ----------------------------------------------------------------------------


def call(name: str, text: str | None = None, /, **tool_input: Any) -> dict[str, Any]:
    """The step in which the model calls one tool (``text`` before the call, if given)."""
    step: dict[str, Any] = {"tool_calls": [{"name": name, "input": tool_input}]}
    if text is not None:
        step["text"] = text
    return step


def write_script(folder: Path, steps: Iterable[Any], *, name: str | None = None, **options: Any) -> Path:
    """A script file of ``steps`` in ``folder`` (top-level ``options`` such as ``loop`` or
    ``context_window`` beside them); ``model=f"scripted:{path}"`` plays it."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (name or f"script-{next(_scripts)}.json")
    path.write_text(json.dumps({"steps": list(steps), **options}))
    return path


# -- the loopback fake server ------------------------------------------------------------------------


def fake_llm_server(script: Script | Mapping[str, Any] | list[Any]) -> FakeLLMServer:
    """A scripted model served on loopback, already listening; the caller shuts it down with
    :func:`stop` (the ``fake_llm`` fixture does it after the test). A bare list is the steps."""
    server = FakeLLMServer(script if isinstance(script, Script) else Script.from_data(script))
    server.start_background()
    return server


def stop(server: FakeLLMServer) -> None:
    server.shutdown()
    server.server_close()


def wire_env(server: FakeLLMServer, wire: str) -> dict[str, str]:
    """The environment that points keel at ``server`` over the ``anthropic`` or ``openai`` wire
    format (obviously fake keys)."""
    if wire == "anthropic":
        return {"ANTHROPIC_API_KEY": "sk-ant-test-not-a-real-key", "ANTHROPIC_BASE_URL": server.url}
    return {"OPENAI_API_KEY": "sk-test-not-a-real-key", "OPENAI_BASE_URL": server.url + "/v1"}


# -- a session -----------------------------------------------------------------------------------------


def session(
    project: Path,
    steps: Iterable[Any] | None = None,
    *,
    server: FakeLLMServer | None = None,
    wire: str = "anthropic",
    env: Mapping[str, str] | None = None,
    settings: Mapping[str, Any] | None = None,
    retries: int | None = 0,
    **options: Any,
) -> Runtime:
    """A real keel session on ``project``, built through the public API.

    The model is ``steps`` played in process (``scripted:``), or ``server`` over ``wire``, or the
    ``model`` option as given. ``env`` is added to the process environment (which the autouse
    fixture has isolated: its own ``HOME`` and ``KEEL_HOME``); ``settings`` is one more settings
    file, beside the project; ``retries`` sets ``KEEL_MAX_RETRIES`` (0 by default: a scripted
    error is seen at once; ``None`` leaves keel's default). Every other keyword is a
    ``RuntimeOptions`` field. The caller closes it (``await rt.aclose()``) or uses
    :func:`run_session`."""
    from agentkeel import Runtime, RuntimeOptions

    full_env = dict(os.environ)
    if retries is not None:
        full_env["KEEL_MAX_RETRIES"] = str(retries)
    if server is not None:
        full_env.update(wire_env(server, wire))
    full_env.update(env or {})
    if steps is not None:
        options["model"] = f"scripted:{write_script(project.parent / 'scripts', steps)}"
    if settings is not None:
        extra = project.parent / f"settings-{next(_scripts)}.json"
        extra.write_text(json.dumps(dict(settings)))
        options["settings_files"] = [*options.get("settings_files", ()), extra]
    return Runtime.create(RuntimeOptions(cwd=project, env=full_env, **options))


async def run_session(rt: Runtime, prompt: str) -> RunResult:
    """Run one prompt in ``rt`` and close it, whatever happens."""
    try:
        return await rt.run(prompt)
    finally:
        await rt.aclose()


# -- the CLI ---------------------------------------------------------------------------------------------


@dataclass
class KeelRun:
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)

    def lines(self) -> list[Any]:
        return [json.loads(line) for line in self.stdout.splitlines() if line.strip()]


def run_keel(
    *args: str,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    timeout: float = 60,
    stdin: str | None = None,
) -> KeelRun:
    """The ``keel`` binary run to its end in ``cwd``; ``env`` is added to the process environment
    (``PYTHONPATH`` included, so a worktree's source is what runs)."""
    proc = subprocess.run(
        [KEEL, *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
    )
    return KeelRun(proc.returncode, proc.stdout, proc.stderr)


NODE_DIR = Path(sys.prefix) / "node"  # scripts/setup installs the npm packages tests use here (pinned)


def node_modules(package: str) -> Path:
    """The ``node_modules`` folder scripts/setup filled (the TypeScript Agent SDK and ACP client, the
    reference MCP servers), holding ``package``. Without it the test fails, saying how to get it:
    the README's setup command installs it, so its absence is a broken setup, not a reason to skip."""
    import shutil

    import pytest

    folder = NODE_DIR / "node_modules"
    if shutil.which("node") is None or not (folder / package).is_dir():
        pytest.fail(f"needs node and {package} in {folder}: run scripts/setup")
    return folder


def session_files(keel_home: Path) -> list[Path]:
    return sorted((keel_home / "projects").glob("*/*.jsonl"))


def descendants(pid: int) -> list[tuple[int, list[str]]]:
    """The live processes below ``pid`` (children, their children...), each with its argv; a zombie
    (empty argv) or a process that ends mid-scan is left out."""
    parents: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        parents[int(d.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    below: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {p for p, parent in parents.items() if parent in frontier} - below
        below |= frontier
    found = []
    for p in sorted(below):
        try:
            argv = Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")[:-1]
        except OSError:
            continue
        if argv:
            found.append((p, [a.decode(errors="replace") for a in argv]))
    return found


# -- waiting ---------------------------------------------------------------------------------------------


Described = str | Callable[[], str]


def wait_until(
    condition: Callable[[], Any], timeout: float = 60.0, what: Described = "the condition", interval: float = 0.05
) -> Any:
    """Poll ``condition`` until it is truthy and return its value; fail after ``timeout`` seconds
    (a bound on a hang, not an expectation of speed). ``what`` names what was awaited in the
    failure; a callable is asked then, to show the state it ended in."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(_timed_out(timeout, what))
        time.sleep(interval)
    return value


async def wait_until_async(
    condition: Callable[[], Awaitable[Any] | Any],
    timeout: float = 60.0,
    what: Described = "the condition",
    interval: float = 0.05,
) -> Any:
    """:func:`wait_until` inside a coroutine, without blocking the event loop; ``condition`` may be
    a coroutine function (awaited each time) or a plain one."""
    deadline = time.monotonic() + timeout
    while not (value := await _maybe_await(condition())):
        if time.monotonic() > deadline:
            raise AssertionError(_timed_out(timeout, what))
        await asyncio.sleep(interval)
    return value


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def _timed_out(timeout: float, what: Described) -> str:
    return f"timed out after {timeout:g} s waiting for {what() if callable(what) else what}"
