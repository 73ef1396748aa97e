"""Memory work a session does off its critical path: the store check and the embedding pass.

Both are daemon threads of the session's own process (never a sidecar process: they end with
it), and both fail open: what they cannot do is logged and named, never raised into the session.

- :class:`StoreCheck` runs ``health.check_store`` once, at session start, on its own connection
  (at normal priority: the first prompt waits a moment for it; SQLite runs it without the GIL).
- :class:`EmbeddingPass` gives vectors to the entries sessions captured lexically, at the
  lowest CPU priority Linux gives a thread (nice 19), while the session is idle: it starts
  ``idle_after_s`` after a turn ends, stops between two batches when the next turn starts, and
  loads the embedding model only if something is pending. Searches never embed anything but
  their query; until this pass (or `keel mem embed`) reaches an entry, it is found by its words.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from agentkeel.memory.health import MemoryDamaged, check_store
from agentkeel.memory.store import MemoryStore

log = logging.getLogger(__name__)

IDLE_AFTER_S = 5.0  # a turn ended this long ago with no new one: the user is reading or typing
BATCH = 16  # entries per transaction; the pass yields to a new turn between two batches


def lower_thread_priority() -> None:
    """Nice 19 for the calling thread only (Linux: a thread id is a task id; elsewhere a no-op,
    since there the same call would name a process)."""
    if sys.platform.startswith("linux"):
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        except OSError:
            pass


class StoreCheck:
    """``check_store`` on a SQLite memory file, in a background thread; ``result`` when done."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.problems: list[str] | None = None  # None until the check is done (or could not run)
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="keel-memory-check", daemon=True)
        self._thread.start()

    def _run(self) -> None:  # normal priority: the first prompt may wait for it
        try:
            self.problems = check_store(self.path)
        except Exception as exc:  # a locked or unreadable file is not damage; the stores will say
            log.warning("memory check of %s did not run: %s", self.path, exc)
        finally:
            self._done.set()

    def result(self, wait_s: float = 0.0) -> MemoryDamaged | None:
        """The damage found, if the check has finished (waiting up to ``wait_s`` for it)."""
        if wait_s > 0:
            self._done.wait(wait_s)
        if not self._done.is_set() or not self.problems:
            return None
        return MemoryDamaged(self.path, self.problems[0])


class EmbeddingPass:
    """Embeds pending entries while the session is idle (see the module docstring).

    ``lexical`` opens the store without an embedder (to count what is pending without loading
    a model), ``embedding`` opens it with the configured one. ``embedded`` counts the entries
    given vectors; ``damaged`` is set if the store turned out damaged (the pass then ends).
    """

    def __init__(
        self,
        lexical: Callable[[], MemoryStore],
        embedding: Callable[[], MemoryStore],
        idle_after_s: float = IDLE_AFTER_S,
        batch: int = BATCH,
    ) -> None:
        self._lexical = lexical
        self._embedding = embedding
        self.idle_after_s = idle_after_s
        self.batch = batch
        self.embedded = 0
        self.damaged: MemoryDamaged | None = None
        self._store: MemoryStore | None = None
        self._cond = threading.Condition()
        self._idle_since: float | None = None
        self._stopped = False
        self._thread: threading.Thread | None = None

    # -- what the session tells it ----------------------------------------------------------------
    def idle(self) -> None:
        """A turn ended: embed after ``idle_after_s`` unless another turn starts first."""
        with self._cond:
            if self._stopped:
                return
            self._idle_since = time.monotonic()
            self._cond.notify_all()
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="keel-memory-embed", daemon=True)
                self._thread.start()

    def busy(self) -> None:
        """A turn started: stop after the current batch."""
        with self._cond:
            self._idle_since = None

    def stop(self, wait_s: float = 0.0) -> None:
        """The session ends: stop after the current batch (the thread closes its store itself)."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        if wait_s and self._thread is not None:
            self._thread.join(wait_s)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # -- the thread ---------------------------------------------------------------------------------
    def _wait_for_idle(self) -> bool:
        """Block until the session has been idle long enough; False when the pass should end."""
        with self._cond:
            while not self._stopped:
                since = self._idle_since
                if since is not None and time.monotonic() - since >= self.idle_after_s:
                    return True
                self._cond.wait(None if since is None else self.idle_after_s - (time.monotonic() - since))
            return False

    def _still_idle(self) -> bool:
        with self._cond:
            return not self._stopped and self._idle_since is not None

    def _run(self) -> None:
        lower_thread_priority()
        try:
            while self._wait_for_idle():
                while self._still_idle() and self._one_batch():
                    pass
                with self._cond:  # nothing pending (or a turn started): wait for the next turn to end
                    if self._idle_since is not None:
                        self._idle_since = None
        except MemoryDamaged as exc:
            self.damaged = exc
            log.warning("memory embedding pass stopped: %s", exc)
        except Exception as exc:  # fail open: entries stay pending, found by their words
            log.warning("memory embedding pass stopped: %s", exc)
        finally:
            with self._cond:
                self._stopped = True
            if self._store is not None:
                self._store.close()

    def _one_batch(self) -> int:
        if self._store is None:
            lexical = self._lexical()
            try:
                if not lexical.pending_vectors():
                    return 0  # no model loaded for nothing
            finally:
                lexical.close()
            self._store = self._embedding()
        done = self._store.embed_pending(self.batch)
        self.embedded += done
        return done
