"""The memory store's SQLite library: pysqlite3's bundled SQLite when installed (its FTS5 ranks
faster), the standard library's without it or with KEEL_MEMORY_SQLITE=stdlib; a file written by
one is read by the other, and either one's "damaged" errors are recognised."""

from __future__ import annotations

import os
import platform
import sqlite3 as stdlib_sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from agentkeel.memory.health import is_corruption

SRC = str(Path(__file__).resolve().parents[3] / "src")

BLOCK = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "pysqlite3":
            raise ImportError("blocked for the test: " + name)
        return None
sys.meta_path.insert(0, Block())
"""

STORE = """
import sys
from pathlib import Path
from agentkeel.memory import open_store
store = open_store(Path(sys.argv[1]), embedder="none")
if sys.argv[2] == "write":
    store.add_many([{"id": f"r{i}", "type": "fact", "project": "p", "session": "s",
                     "timestamp": "2024-05-08T10:00:00Z", "text": f"the parser failed on line {i}"} for i in range(20)])
hits = store.search("parser line 7", k=3, project="p")
print(type(store._db).__module__.split(".")[0], store._db.execute("select sqlite_version()").fetchone()[0], hits[0].id)
store.close()
"""


def _run(code: str, *args: str, stdlib: bool = False) -> str:
    env = {**os.environ, "PYTHONPATH": SRC}
    env.pop("KEEL_MEMORY_SQLITE", None)
    if stdlib:
        env["KEEL_MEMORY_SQLITE"] = "stdlib"
    done = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_store_runs_on_the_bundled_sqlite_and_falls_back_to_the_standard_librarys(tmp_path: Path) -> None:
    if (sys.platform, platform.machine()) != ("linux", "x86_64"):
        pytest.skip("pysqlite3-binary ships wheels for Linux x86-64 only; there the memory extra installs it")
    db = str(tmp_path / "memory.db")
    library, version, top = _run(STORE, db, "write").split()
    assert (library, top) == ("pysqlite3", "r7")
    assert tuple(map(int, version.split("."))) > tuple(map(int, stdlib_sqlite3.sqlite_version.split(".")))
    # the same file through the standard library: without pysqlite3, and when asked for
    assert _run(BLOCK + STORE, db, "read").split() == ["sqlite3", stdlib_sqlite3.sqlite_version, "r7"]
    assert _run(STORE, db, "read", stdlib=True).split() == ["sqlite3", stdlib_sqlite3.sqlite_version, "r7"]


def test_either_librarys_damaged_file_error_counts_as_corruption(tmp_path: Path) -> None:
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"this is not a database, just text " * 200)
    errors: list[BaseException] = []
    with pytest.raises(stdlib_sqlite3.DatabaseError) as std:
        stdlib_sqlite3.connect(bad).execute("select * from sqlite_master").fetchall()
    errors.append(std.value)
    try:
        from pysqlite3 import dbapi2
    except ImportError:
        pass
    else:
        with pytest.raises(dbapi2.DatabaseError) as bundled:
            dbapi2.connect(str(bad)).execute("select * from sqlite_master").fetchall()
        errors.append(bundled.value)
    assert all(is_corruption(e) for e in errors)
    assert not is_corruption(stdlib_sqlite3.OperationalError("no such table: x"))
