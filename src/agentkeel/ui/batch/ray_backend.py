"""The ``ray`` backend: each task a Ray task, on a local cluster or the one at ``--address``.

Ray runs :func:`agentkeel.ui.batch.worker.run_task` in its workers; a worker that dies mid-task
is retried by Ray (``max_retries``), and the keel session it ran dies with it (the child is set
to be killed when its parent dies), so no orphan session keeps writing. Results stream back as
tasks finish (``ray.wait``), into the same writer as the local backend.

For a multi-machine cluster, every node needs keel installed and the task repositories at the
same paths (or ``git`` tasks, which each node clones), and the limiter proxy must be reachable
from the nodes (``--limiter-host``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from agentkeel.ui.batch.results import Result
from agentkeel.ui.batch.tasks import Task, TaskFileError
from agentkeel.ui.batch.worker import KeepGoing, RunSpec, run_task


def _ray_run(task: Task, spec: RunSpec) -> Result:  # runs inside a Ray worker
    return run_task(task, spec)


class RayBackend:
    def __init__(self, concurrency: int, retries: int, address: str | None) -> None:
        self.concurrency = max(1, concurrency)
        self.retries = retries
        self.address = address
        self._refs: dict[Any, Task] = {}
        self._cancelled = False

    def _init(self) -> Any:
        try:
            import ray
        except ImportError:
            raise TaskFileError("the ray backend needs Ray: pip install 'agentkeel[ray]'") from None
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "logging_level": "ERROR"}
            if self.address:
                kwargs["address"] = self.address
            else:
                kwargs["num_cpus"] = max(self.concurrency, os.cpu_count() or 1)
            ray.init(**kwargs)
        return ray

    def run(self, tasks: list[Task], spec: RunSpec, keep_going: KeepGoing) -> Iterator[Result]:
        ray = self._init()
        remote = ray.remote(max_retries=self.retries, num_cpus=1)(_ray_run)
        queue = list(reversed(tasks))
        while queue or self._refs:
            while queue and len(self._refs) < self.concurrency and keep_going() and not self._cancelled:
                task = queue.pop()
                self._refs[remote.remote(task, spec)] = task
            if not self._refs:
                return
            try:
                ready, _ = ray.wait(list(self._refs), num_returns=1, timeout=0.5)
            except KeyboardInterrupt:  # Ctrl-C: cancel the running tasks; their results still come back
                self.cancel()
                continue
            for ref in ready:
                task = self._refs.pop(ref)
                try:
                    yield ray.get(ref)
                except ray.exceptions.TaskCancelledError:
                    yield Result(task.id, "cancelled", error="interrupted")
                except ray.exceptions.RayError as e:
                    first = (str(e).strip().splitlines() or [type(e).__name__])[0]
                    yield Result(task.id, "error", error=f"ray: {first[:300]}")

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def cancel(self) -> None:
        self._cancelled = True
        try:
            import ray
        except ImportError:
            return
        for ref in list(self._refs):
            ray.cancel(ref, force=False)  # KeyboardInterrupt in the task: keel gets SIGINT
