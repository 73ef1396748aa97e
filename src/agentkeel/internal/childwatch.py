"""Child processes watched through pidfds on Python 3.11, as Python 3.12 does by default.

Python 3.11's asyncio waits for each child process on a thread of its own (``ThreadedChildWatcher``):
one thread start per Bash call, 1-3 ms of a turn on a loaded machine, and a thread that holds the GIL
when it wakes. Linux (5.3+) tells the event loop instead through a pidfd. ``install`` puts a pidfd
watcher in place of the default one, loop-agnostic like 3.12's (it serves whichever loop spawned
the child, so ``asyncio.run`` twice or loops on other threads keep working). It changes nothing on
3.12+, off Linux, under another event loop policy (uvloop) or when the host chose its own watcher.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any


class PidfdChildWatcher(asyncio.AbstractChildWatcher):
    """The 3.12 pidfd watcher: each child's pidfd is read by the loop that is running when it starts."""

    def add_child_handler(self, pid: int, callback: Any, *args: Any) -> None:  # type: ignore[override]
        loop = asyncio.get_running_loop()
        pidfd = os.pidfd_open(pid)
        loop._add_reader(pidfd, self._do_wait, pid, pidfd, callback, args)  # type: ignore[attr-defined]

    def _do_wait(self, pid: int, pidfd: int, callback: Any, args: tuple[Any, ...]) -> None:
        asyncio.get_running_loop()._remove_reader(pidfd)  # type: ignore[attr-defined]
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:  # reaped elsewhere
            returncode = 255
        else:
            returncode = os.waitstatus_to_exitcode(status)
        os.close(pidfd)
        callback(pid, returncode, *args)

    def remove_child_handler(self, pid: int) -> bool:
        return True

    def attach_loop(self, loop: Any) -> None:
        pass

    def close(self) -> None:
        pass

    def is_active(self) -> bool:
        return True

    def __enter__(self) -> PidfdChildWatcher:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def install() -> bool:
    """Use pidfds for child processes where that is an improvement; True when they are in use."""
    if sys.version_info >= (3, 12) or not hasattr(os, "pidfd_open"):
        return False
    policy = asyncio.get_event_loop_policy()
    if type(policy) is not asyncio.DefaultEventLoopPolicy:
        return False
    current = getattr(policy, "_watcher", None)
    if isinstance(current, PidfdChildWatcher):
        return True
    if current is not None and type(current) is not asyncio.ThreadedChildWatcher:
        return False  # the host's choice
    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError:  # an old kernel, or a seccomp filter that forbids it
        return False
    policy.set_child_watcher(PidfdChildWatcher())
    return True
