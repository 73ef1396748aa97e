"""Files the hooks watch: ``watchPaths`` a hook returned (FileChanged) and the settings files
(ConfigChange). Checked at turn boundaries by comparing a stat (mtime, size): a handful of
``stat`` calls per request, no watcher thread, nothing to clean up."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Literal

Change = Literal["add", "change", "unlink"]
MAX_WATCHED = 1000  # a hook that asks to watch a whole tree gets the first thousand paths


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


class Watcher:
    def __init__(self, paths: Iterable[Path] = ()) -> None:
        self.paths: dict[Path, tuple[int, int] | None] = {}
        self.add(paths)

    def add(self, paths: Iterable[Path]) -> None:
        for path in paths:
            if path not in self.paths and len(self.paths) < MAX_WATCHED:
                self.paths[path] = _stamp(path)

    def changes(self) -> list[tuple[Path, Change]]:
        out: list[tuple[Path, Change]] = []
        for path, old in self.paths.items():
            new = _stamp(path)
            if new == old:
                continue
            self.paths[path] = new
            out.append((path, "add" if old is None else "unlink" if new is None else "change"))
        return out
