"""One task: prepare its directory, run it as an ordinary ``keel -p`` session, read its result.

A task is a child process in its own process group that dies with its parent (so a killed
worker, local or Ray, leaves no keel session running behind it), with a wall-clock limit. The
function is synchronous and self-contained so that a Ray worker can run it as well as a thread
of the local backend; :class:`RunSpec` is plain data that pickles.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from agentkeel.config.localfiles import ignore_local_files
from agentkeel.internal import procs
from agentkeel.internal.git import run_git
from agentkeel.ui.batch.results import Result
from agentkeel.ui.batch.tasks import Task

#: a backend asks before starting each task (the runner says no once the budget is spent)
KeepGoing = Callable[[], bool]


@dataclass(frozen=True)
class RunSpec:
    """What every task of a batch shares."""

    keel: tuple[str, ...]  # the command that starts keel
    tasks_dir: Path  # a task's relative ``repo`` is relative to this
    work_dir: Path  # clones and per-task settings files
    default_cwd: Path
    env: dict[str, str] = field(default_factory=dict)  # on top of the worker's environment
    timeout_s: float | None = None
    extra_args: tuple[str, ...] = ()


def keel_command() -> tuple[str, ...]:
    exe = Path(sys.executable).parent / "keel"
    if exe.is_file():
        return (str(exe),)
    found = shutil.which("keel")
    return (found,) if found else (sys.executable, "-c", "from agentkeel.ui.cli.main import entry; entry()")


class TaskSetupError(Exception):
    pass


def _git(*args: str, cwd: Path | None = None) -> None:
    proc = run_git(cwd, *args, timeout=None, transport=True)
    if proc is None or proc.returncode != 0:
        last = ((proc.stderr.decode(errors="replace") if proc else "").strip().splitlines() or ["failed"])[-1]
        raise TaskSetupError(f"git {args[0]}: {last}")


def prepare(task: Task, spec: RunSpec) -> Path:
    """The directory the task runs in (cloned or worktree'd as the task asks)."""
    if task.git is not None:
        dest = spec.work_dir / "repos" / task.id
        if not (dest / ".git").exists():
            shutil.rmtree(dest, ignore_errors=True)
            dest.parent.mkdir(parents=True, exist_ok=True)
            _git("clone", "--quiet", task.git, str(dest))
            if task.ref:
                _git("checkout", "--quiet", task.ref, cwd=dest)
        base = dest
    elif task.repo is not None:
        base = (spec.tasks_dir / task.repo).resolve()
        if not base.is_dir():
            raise TaskSetupError(f"repo {task.repo!r} is not a directory ({base})")
    else:
        base = spec.default_cwd
    if not task.worktree:
        return base
    tree = base / ".keel" / "worktrees" / f"batch-{task.id}"
    ignore_local_files(tree)
    if not tree.exists():  # an earlier attempt's worktree is reused: its work is never thrown away
        _git("worktree", "add", "--quiet", "-b", f"keel-batch/{task.id}", str(tree), cwd=base)
    return tree


def command(task: Task, spec: RunSpec) -> list[str]:
    cmd = [*spec.keel, "-p", task.prompt, "--output-format", "json", *spec.extra_args]
    if task.model:
        cmd += ["--model", task.model]
    if task.permission_mode:
        cmd += ["--permission-mode", task.permission_mode]
    if task.max_turns:
        cmd += ["--max-turns", str(task.max_turns)]
    if task.max_budget_usd:
        cmd += ["--max-budget-usd", str(task.max_budget_usd)]
    if task.settings:
        path = spec.work_dir / "settings" / f"{task.id}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(task.settings), encoding="utf-8")
        cmd += ["--settings", str(path)]
    if task.allowed_tools:
        cmd += ["--allowedTools", *task.allowed_tools]
    return cmd


# a task past its time: SIGTERM (keel closes its session), SIGKILL after 5 s; on an interrupt, SIGINT first
_STOP = ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0))
_INTERRUPT = ((signal.SIGINT, 15.0), *_STOP)


def _last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:500] if lines else ""


def _tagged(env: dict[str, str], task: Task, spec: RunSpec) -> dict[str, str]:
    """The task's telemetry (CLAUDE_CODE_ENABLE_TELEMETRY) carries the batch's and the task's ids, as
    resource attributes: the batch is named by its results file (its work folder), so a --resume
    continues the same batch."""
    batch = hashlib.sha256(str(spec.work_dir).encode()).hexdigest()[:16]
    tags = f"keel.batch.id={batch},keel.task.id={quote(task.id, safe='')}"
    given = env.get("OTEL_RESOURCE_ATTRIBUTES", "").strip().strip(",")
    return {**env, "OTEL_RESOURCE_ATTRIBUTES": f"{given},{tags}" if given else tags}


def run_task(task: Task, spec: RunSpec, on_start: Callable[[int], None] | None = None) -> Result:
    """Run one task to its end; never raises for the task's own failures (they are its result)."""
    started = time.monotonic()
    try:
        cwd = prepare(task, spec)
    except (TaskSetupError, OSError) as e:
        return Result(task.id, "error", error=f"setup: {e}", duration_s=round(time.monotonic() - started, 3))
    env = _tagged({**os.environ, **spec.env}, task, spec)
    limit = task.timeout_s or spec.timeout_s
    ran = procs.run_sync(
        command(task, spec),
        cwd=cwd,
        env=env,
        timeout=limit,
        die_with=signal.SIGKILL,
        on_start=on_start,
        stop_steps=_STOP,
        interrupt_steps=_INTERRUPT,  # a Ray cancel: keel gets its SIGINT and ends its session cleanly
    )
    took = time.monotonic() - started
    if ran.status is None and not ran.timed_out:  # it did not start
        return Result(task.id, "error", error=ran.error, duration_s=round(took, 3), cwd=str(cwd))
    code = ran.status if ran.status is not None else -signal.SIGKILL
    out, err = (b.decode("utf-8", "replace") for b in (ran.stdout, ran.stderr))
    return interpret(task, code, out, err, took, str(cwd), timed_out=limit if ran.timed_out else None)


def interpret(
    task: Task, code: int, out: str, err: str, duration: float, cwd: str, *, timed_out: float | None = None
) -> Result:
    data: dict[str, Any] = {}
    with contextlib.suppress(ValueError):
        parsed = json.loads(out) if out.strip() else {}
        data = parsed if isinstance(parsed, dict) else {}
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    assert isinstance(usage, dict)
    common: dict[str, Any] = {
        "session_id": str(data.get("session_id") or ""),
        "cost_usd": float(data.get("total_cost_usd") or 0.0),
        "input_tokens": int(usage.get("input_tokens") or 0),
        "output_tokens": int(usage.get("output_tokens") or 0),
        "turns": int(data.get("num_turns") or 0),
        "duration_s": round(duration, 3),
        "exit_code": code,
        "cwd": cwd,
    }
    text = str(data.get("result") or "")
    if timed_out is not None:
        return Result(task.id, "timeout", result=text, error=f"timed out after {timed_out:g} s", **common)
    if code == 130 or code == -signal.SIGINT:
        return Result(task.id, "cancelled", result=text, error="interrupted", **common)
    if code == 0 and data and not data.get("is_error"):
        return Result(task.id, "success", result=text, **common)
    if code < 0:
        why = f"keel was killed by signal {signal.Signals(-code).name}"
    else:
        subtype = str(data.get("subtype") or "")
        if data.get("is_error") and (text or subtype.startswith("error_")):
            why = text or subtype.removeprefix("error_").replace("_", " ")  # e.g. "max turns"
        else:
            why = _last_line(err) or f"keel exited with {code}"
    return Result(task.id, "error", result=text, error=why, **common)
