"""Running a batch: which tasks are left, the shared limits, the backend, the result file.

The runner owns everything a backend does not: what ``--resume`` skips, the total budget (no
new task starts once the batch has spent it, counting what earlier runs of the same OUT file
spent), the limiter proxies, progress, Ctrl-C, and writing each result the moment it arrives.
A backend only turns tasks into results (:class:`Backend`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from agentkeel.ui.batch.limiter import LimiterProxy, Limits
from agentkeel.ui.batch.results import FINAL, Result, ResultWriteError, ResultWriter, foreign_line, recorded
from agentkeel.ui.batch.tasks import Task, TaskFileError, load_tasks
from agentkeel.ui.batch.worker import KeepGoing, RunSpec, keel_command, run_task


class Backend(Protocol):
    def run(self, tasks: list[Task], spec: RunSpec, keep_going: KeepGoing) -> Iterator[Result]: ...

    def cancel(self) -> None:
        """Ctrl-C: interrupt every running task (each ends as ``cancelled`` with a valid transcript)."""

    @property
    def cancelled(self) -> bool: ...


@dataclass
class BatchOptions:
    tasks_path: Path
    out_path: Path
    concurrency: int = 4
    backend: str = "local"
    address: str | None = None
    resume: bool = False
    max_budget_usd: float | None = None
    rpm: int | None = None
    tpm: int | None = None
    rate_window_s: float = 60.0
    timeout_s: float | None = None
    retries: int = 1
    cwd: Path = field(default_factory=Path.cwd)
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))


@dataclass
class Progress:
    total: int
    done: int = 0
    ok: int = 0
    failed: int = 0
    skipped: int = 0  # already recorded (--resume)
    cost_usd: float = 0.0
    last: Result | None = None
    started: float = field(default_factory=time.monotonic)


@dataclass
class BatchOutcome:
    progress: Progress
    interrupted: bool = False
    budget_stopped: bool = False
    not_started: list[str] = field(default_factory=list)
    limiter_429: int = 0
    limiter_admitted: int = 0
    write_error: str = ""  # why results could not be recorded (the batch stopped there)
    unrecorded: list[str] = field(default_factory=list)  # tasks that ended but are not in OUT


class LocalBackend:
    """Each task a ``keel -p`` child process; ``concurrency`` of them at a time, from a thread pool.

    A task whose keel was killed by a signal that keel batch did not send (a dead worker) runs
    again, up to ``retries`` more times; its result says how many attempts it took."""

    def __init__(self, concurrency: int, retries: int) -> None:
        self.concurrency = max(1, concurrency)
        self.retries = retries
        self._pids: set[int] = set()
        self._lock = threading.Lock()
        self._cancelled = threading.Event()

    def _track(self, pid: int) -> None:
        with self._lock:
            self._pids.add(pid)
        if self._cancelled.is_set():
            self._interrupt(pid)

    def _one(self, task: Task, spec: RunSpec) -> Result:
        attempts = 0
        while True:
            attempts += 1
            result = run_task(task, spec, on_start=self._track)
            died = result.exit_code is not None and result.exit_code < 0 and result.status == "error"
            if not died or attempts > self.retries or self._cancelled.is_set():
                result.attempts = attempts
                return result

    def run(self, tasks: list[Task], spec: RunSpec, keep_going: KeepGoing) -> Iterator[Result]:
        queue = list(reversed(tasks))
        with ThreadPoolExecutor(self.concurrency, thread_name_prefix="keel-batch") as pool:
            running: set[Future[Result]] = set()
            while queue or running:
                while queue and len(running) < self.concurrency and keep_going() and not self._cancelled.is_set():
                    running.add(pool.submit(self._one, queue.pop(), spec))
                if not running:
                    return
                try:
                    finished, running = _wait(running)
                except KeyboardInterrupt:  # Ctrl-C: the running sessions end as "cancelled", and are yielded
                    self.cancel()
                    continue
                for f in finished:
                    yield f.result()

    @staticmethod
    def _interrupt(pid: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGINT)

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def cancel(self) -> None:
        self._cancelled.set()
        with self._lock:
            for pid in self._pids:
                self._interrupt(pid)


def _wait(running: set[Future[Result]]) -> tuple[set[Future[Result]], set[Future[Result]]]:
    done, pending = wait(running, timeout=0.5, return_when=FIRST_COMPLETED)
    return set(done), set(pending)


def make_backend(opts: BatchOptions) -> Backend:
    if opts.backend == "local":
        return LocalBackend(opts.concurrency, opts.retries)
    if opts.backend == "ray":
        from agentkeel.ui.batch.ray_backend import RayBackend

        return RayBackend(opts.concurrency, opts.retries, opts.address)
    raise TaskFileError(f"unknown backend {opts.backend!r}: use local or ray")


def _limiters(opts: BatchOptions) -> tuple[list[LimiterProxy], dict[str, str]]:
    """One proxy per provider endpoint the workers would use, when a limit is set."""
    if opts.rpm is None and opts.tpm is None:
        return [], {}
    limits = Limits(rpm=opts.rpm, tpm=opts.tpm, window_s=opts.rate_window_s)
    env = opts.env
    upstreams = {
        "ANTHROPIC_BASE_URL": env.get("ANTHROPIC_BASE_URL") or "https://api.anthropic.com",
        "OPENAI_BASE_URL": env.get("OPENAI_BASE_URL") or "https://api.openai.com/v1",
    }
    proxies: list[LimiterProxy] = []
    overrides: dict[str, str] = {}
    for var, upstream in upstreams.items():
        proxy = LimiterProxy(upstream, Limits(limits.rpm, limits.tpm, limits.window_s)).start()
        proxies.append(proxy)
        overrides[var] = proxy.base_url
    return proxies, overrides


def _check_out(opts: BatchOptions) -> None:
    """The OUT file is never the tasks file (its lines would be cut and mixed with results)."""
    with contextlib.suppress(OSError):
        if opts.out_path.exists() and opts.out_path.samefile(opts.tasks_path):
            raise TaskFileError(f"{opts.out_path} is the tasks file: choose another -o file for the results")


def run_batch(
    opts: BatchOptions, on_progress: Callable[[Progress], None] | None = None, backend: Backend | None = None
) -> BatchOutcome:
    tasks = load_tasks(opts.tasks_path)
    _check_out(opts)
    writer = ResultWriter(opts.out_path, tidy=False)  # the OUT file's lock, held until the end (BatchLocked)
    try:
        line = foreign_line(opts.out_path.read_bytes())
        if line is not None:
            raise TaskFileError(
                f"{opts.out_path} is not a keel batch results file (line {line} is not a result): keel batch will "
                "not write into it; choose another -o file"
            )
        earlier = recorded(opts.out_path)
        if earlier and not opts.resume:
            raise TaskFileError(
                f"{opts.out_path} already holds {len(earlier)} result(s): add --resume to finish that batch, "
                "or choose another -o file"
            )
        writer.tidy()
        return _run(opts, tasks, earlier, writer, on_progress, backend)
    finally:
        writer.close()


def _run(
    opts: BatchOptions,
    tasks: list[Task],
    earlier: dict[str, Result],
    writer: ResultWriter,
    on_progress: Callable[[Progress], None] | None,
    backend: Backend | None,
) -> BatchOutcome:
    todo = [t for t in tasks if not (t.id in earlier and earlier[t.id].status in FINAL)]
    progress = Progress(total=len(tasks), skipped=len(tasks) - len(todo))
    progress.done = progress.skipped
    progress.ok = sum(1 for t in tasks if t.id in earlier and earlier[t.id].status == "success")
    progress.failed = progress.skipped - progress.ok
    progress.cost_usd = sum(r.cost_usd for r in earlier.values())
    outcome = BatchOutcome(progress)
    backend = backend or make_backend(opts)
    proxies, overrides = _limiters(opts)
    work_dir = opts.out_path.parent / f".{opts.out_path.name}.work"
    spec = RunSpec(
        keel=keel_command(), tasks_dir=opts.tasks_path.parent.resolve(), work_dir=work_dir.resolve(),
        default_cwd=opts.cwd.resolve(), env={**opts.env, **overrides}, timeout_s=opts.timeout_s,
    )  # fmt: skip
    started: set[str] = set()

    def keep_going() -> bool:
        if opts.max_budget_usd is not None and progress.cost_usd >= opts.max_budget_usd:
            outcome.budget_stopped = True
            return False
        return True

    def on_sigint(signum: int, frame: object) -> None:
        backend.cancel()  # no KeyboardInterrupt mid-write: the backend winds down and yields what ends

    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        for result in backend.run(todo, spec, keep_going):  # a backend turns Ctrl-C into cancelled results
            started.add(result.id)
            spent = result.cost_usd
            before = earlier.get(result.id)
            if before is not None:  # a run again (it was cancelled): its line counts every run
                result.attempts += before.attempts
                result.cost_usd = round(result.cost_usd + before.cost_usd, 10)
            if outcome.write_error:
                outcome.unrecorded.append(result.id)
                continue
            try:
                writer.write(result)
            except ResultWriteError as e:  # nothing more can be recorded: stop, and say which tasks are not
                outcome.write_error = str(e)
                outcome.unrecorded.append(result.id)
                backend.cancel()
                continue
            progress.done += 1
            progress.cost_usd += spent
            if result.status == "success":
                progress.ok += 1
            else:
                progress.failed += 1
            progress.last = result
            if on_progress is not None:
                on_progress(progress)
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
        if not outcome.write_error:
            writer.compact()
        outcome.limiter_429 = sum(p.limiter.stats.upstream_429 for p in proxies)
        outcome.limiter_admitted = sum(p.limiter.stats.admitted for p in proxies)
        for p in proxies:
            p.stop()
    outcome.interrupted = backend.cancelled
    outcome.not_started = [t.id for t in todo if t.id not in started]
    outcome.interrupted = outcome.interrupted and not outcome.write_error
    return outcome
