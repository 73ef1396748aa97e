"""The SQLite library the memory store runs on: pysqlite3's bundled SQLite when installed
(the ``memory`` extra installs ``pysqlite3-binary`` on Linux x86-64), else the standard library's.

The word search is FTS5's BM25 over every entry its terms match, and a current SQLite does that
about a third faster than the one this Python was built with (3.51 against 3.40 here:
``bench/sqlite_lib_bench.py``). Every module that opens or inspects a memory file (the store,
the capture outbox, the health check, the repair) imports ``sqlite3`` from here, and so must any
code that opens one in a keel process: two copies of SQLite in one process do not see each
other's POSIX locks, so a file open in both is not safely locked (sqlite.org/howtocorrupt.html,
2.2.1; another process may use any SQLite). ``KEEL_MEMORY_SQLITE=stdlib`` keeps the standard
library's for the whole process.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from agentkeel.internal.env import KeelEnv

if TYPE_CHECKING:
    import sqlite3
else:
    sqlite3 = None
    if KeelEnv.of().choice("KEEL_MEMORY_SQLITE") != "stdlib":
        try:
            from pysqlite3 import dbapi2 as sqlite3
        except ImportError:  # not installed, or no wheel for this platform
            sqlite3 = None
    if sqlite3 is None:
        import sqlite3

# SQLite's unix VFS can deadlock when one thread opens a database file while another closes one
# in WAL mode (seen: findReusableFd under unixOpen waiting on an inode mutex while the closing
# thread, in unixIsSharingShmNode, waits on the other; a session's background store check against
# its start-up store open, under load). Every open and close of a memory file in a keel process
# takes this lock; what happens between (queries, transactions) does not.
OPEN_CLOSE = threading.RLock()  # reentrant: a close inside an open (a collected store) never waits on itself


def connect(database: str, **options: Any) -> sqlite3.Connection:
    """``sqlite3.connect`` under :data:`OPEN_CLOSE`."""
    with OPEN_CLOSE:
        db: sqlite3.Connection = sqlite3.connect(database, **options)
    return db


def close(db: sqlite3.Connection) -> None:
    """``db.close()`` under :data:`OPEN_CLOSE`."""
    with OPEN_CLOSE:
        db.close()


__all__ = ["OPEN_CLOSE", "close", "connect", "sqlite3"]
