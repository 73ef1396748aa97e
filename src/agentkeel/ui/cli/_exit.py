"""Leaving the process once the command is done, without tearing the interpreter down.

A ``keel -p`` session ends with its work already complete and closed: the session file written and
closed, memory flushed, background shells killed, the result printed. What ``sys.exit`` does after
that, besides the ``atexit`` handlers (logging's flush, ``weakref.finalize`` callbacks), is
interpreter finalization: freeing every module and object one by one and closing what the garbage
collector finds (an idle SQLite reader, checkpointing its WAL on the way). That measured 100-500 ms
here, from the last answer to the exit, for nothing a user can see.

``leave`` flushes stdout and stderr, runs the ``atexit`` handlers, and ends the process with
``os._exit``. It falls back to ``sys.exit`` (and its full teardown) whenever a thread other than the
main one is still alive: a non-daemon thread may hold work that must finish (``sys.exit`` waits for
it), so only a process with nothing left running takes the short way. The full-screen UI takes it too:
Textual has restored the terminal when ``App.run`` returns.
"""

from __future__ import annotations

import atexit
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NoReturn


def _threads_left() -> bool:
    """Whether a non-daemon thread other than the main one is alive (no threading module: none)."""
    threading = sys.modules.get("threading")
    if threading is None:
        return False
    main = threading.main_thread()
    return any(t is not main and not t.daemon for t in threading.enumerate())


def leave(code: int) -> NoReturn:
    if _threads_left():
        sys.exit(code)
    try:
        sys.stdout.flush()
    except (OSError, ValueError, AttributeError):  # a closed or broken stdout (None: closed at start)
        pass
    atexit._run_exitfuncs()
    if _threads_left():  # an atexit handler started one
        sys.exit(code)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    os._exit(code)
