"""The project tree as last seen, for diffing around a Bash call.

Which files count: tracked and untracked files that are not ignored (``git ls-files -co
--exclude-standard`` in a git work tree; a walk that skips VCS folders, ``node_modules`` and
virtualenvs elsewhere). The first scan lists everything and stores every file's content once
(so that a later Bash call that rewrites or deletes a file can be undone). Later scans are
incremental: every known file and folder is ``lstat``'ed; only a folder whose mtime moved
(an entry was created, deleted or renamed in it) is listed again, and only a file whose size
or mtime moved is hashed.

In a git work tree the first scan copies only what git cannot give back: untracked files and
tracked files that differ from the index (``git diff-files``). A clean tracked file is
remembered by its index blob (``git:<oid>``) and copied into the store, through the
work-tree filters (``git cat-file --filters``), only if a Bash call changes it. So the first
Bash call of a session in a clean repository stores next to nothing. The two git commands behind
that answer run ahead, on a thread, while the session's first request waits (:meth:`prime`).
Every git call goes through :mod:`agentkeel.internal.git` (no fsmonitor, hooks, pager or
``GIT_*`` environment); with a filter driver configured, git is not asked about content at all
(a clean or smudge filter is a command) and files are copied as without git.

Symbolic links count as entries of their own (``link:<target>``), never followed.

Limit: a file created in a folder that holds no listed file (only ignored ones) is not seen
until a full listing; it is then not removed by a rewind (it is left, never lost).
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import msgspec

from agentkeel.internal.git import has_filter_drivers, run_git
from agentkeel.session.objects import UNKNOWN, ObjectStore, StoreError, current

MAX_TREE_FILES = 20_000  # a bigger tree is not diffed around Bash calls (a notice says so, once)
MAX_TREE_BYTES = 256 * 1024 * 1024  # nor one whose files (the first Bash call stores them all) weigh more
MAX_CHANGED_DIRS = 64  # more moved folders than this: list everything again
_SKIP_DIRS = frozenset({".git", ".hg", ".svn", "node_modules", ".venv", "venv", "__pycache__", ".mypy_cache", ".tox"})
_GLOB_CHARS = frozenset("*?[]\\")

Signature = tuple[int, int]  # (mtime_ns, size)
# A folder's mtime moves in coarse steps (the kernel's clock tick): an entry created in the same
# tick as the last look leaves the mtime as it was. A folder whose mtime is this close to the
# last scan (or later) is listed again at the next one, as git treats "racily clean" entries.
RACY_NS = 2_000_000_000


class TreeState(msgspec.Struct):
    root: Path
    store: ObjectStore
    files: dict[str, tuple[Signature, str | None]] = msgspec.field(default_factory=dict)  # rel path -> (sig, sha)
    dirs: dict[str, int] = msgspec.field(default_factory=dict)  # rel folder ("" the root) -> mtime_ns
    too_big: bool = False
    synced: bool = False
    git: bool = False
    scanned_ns: int = 0  # wall clock when the last scan began (see RACY_NS)
    primed: dict[str, tuple[Signature, str]] | None = None  # git's clean files, asked ahead (prime)
    after: dict[str, str | None] = msgspec.field(default_factory=dict)  # the last diff's paths -> state after
    store_error: str | None = None  # the store could not keep a content (disk full): said once, then None

    # --- listing ---------------------------------------------------------------------

    def _full(self) -> list[str] | None:
        self.git = (self.root / ".git").exists()
        names = _git_files(self.root, []) if self.git else None
        if names is None:
            self.git = False
            names = _walk_files(self.root, "")
        if names is None or len(names) > MAX_TREE_FILES:
            self.too_big = True
            return None
        self.dirs = {}
        self._watch("", names)
        return names

    def _watch(self, base: str, names: list[str]) -> None:
        """Remember the mtime of each folder that holds a listed file (and its parents)."""
        wanted = {base}
        for name in names:
            parent = name.rpartition("/")[0]
            while parent not in wanted and parent:
                wanted.add(parent)
                parent = parent.rpartition("/")[0]
        for d in wanted:
            if d not in self.dirs:
                m = _mtime(self.root, d)
                if m is not None:
                    self.dirs[d] = m

    def _names(self) -> list[str] | None:
        """The files that count now: the known ones, corrected in the folders that moved."""
        if not self.synced:
            return self._full()
        moved: list[str] = []
        racy = self.scanned_ns - RACY_NS  # a folder changed this close to the last look may change again unseen
        for d, m in list(self.dirs.items()):
            now = _mtime(self.root, d)
            if now != m or m >= racy:
                moved.append(d)
                if now is None:
                    del self.dirs[d]
                else:
                    self.dirs[d] = now
        names = set(self.files)
        if not moved:
            return list(names)
        if len(moved) > MAX_CHANGED_DIRS or any(_GLOB_CHARS & set(d) for d in moved):
            return self._full()
        fresh = self._relist([d for d in moved if d in self.dirs])
        if fresh is None:
            return self._full()
        gone = set(moved)
        names = {n for n in names if n.rpartition("/")[0] not in gone} | set(fresh)
        if len(names) > MAX_TREE_FILES:
            self.too_big = True
            return None
        return list(names)

    def _relist(self, moved: list[str]) -> list[str] | None:
        """The files directly in each moved folder, and everything under folders new in them."""
        new_dirs: list[str] = []
        for d in moved:
            try:
                entries = list(os.scandir(self.root / d if d else self.root))
            except OSError:
                continue
            for e in entries:
                rel = f"{d}/{e.name}" if d else e.name
                if e.name not in _SKIP_DIRS and rel not in self.dirs and e.is_dir(follow_symlinks=False):
                    if _GLOB_CHARS & set(rel):
                        return None
                    new_dirs.append(rel)
        if self.git:
            specs = [f":(glob){d}/*" if d else ":(glob)*" for d in moved] + [f":(glob){d}/**" for d in new_dirs]
            found = _git_files(self.root, specs) if specs else []
        else:
            found = []
            for d in moved:
                found += _walk_files(self.root, d, recurse=False) or []
            for d in new_dirs:
                found += _walk_files(self.root, d) or []
        if found is None:
            return None
        for d in new_dirs:
            m = _mtime(self.root, d)
            if m is not None:
                self.dirs[d] = m  # watched even when all it holds is ignored: it is not new next time
        self._watch("", found)
        return found

    def _scan(self) -> dict[str, Signature] | None:
        started = time.time_ns()
        names = self._names()
        self.scanned_ns = started
        if names is None:
            return None
        out: dict[str, Signature] = {}
        base = str(self.root) + "/"
        for rel in names:
            try:
                st = os.lstat(base + rel)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode):  # a link counts as a link
                out[rel] = (st.st_mtime_ns, st.st_size)
        return out

    # --- before and after a Bash call ------------------------------------------------

    def prime(self) -> None:
        """Ask git ahead of the first Bash call (keel calls this on a thread when the session
        starts) which tracked files it can give back: the two git commands of the first sync,
        off the session's path. Nothing is stored. An answer counts only for a file whose mtime
        is older than RACY_NS before the question, and whose size and mtime the first sync finds
        unchanged: anything written since, or close to it, is looked at again."""
        if self.synced or self.primed is not None or not (self.root / ".git").exists():
            return
        racy = time.time_ns() - RACY_NS
        clean = _git_clean_blobs(self.root)
        base = str(self.root) + "/"
        primed: dict[str, tuple[Signature, str]] = {}
        for rel, oid in clean.items():
            try:
                st = os.lstat(base + rel)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode) and st.st_mtime_ns < racy:
                primed[rel] = ((st.st_mtime_ns, st.st_size), oid)
        self.primed = primed

    def sync(self) -> None:
        """Before a Bash call: bring the stored picture up to date (hash and store only what moved)."""
        now = self._scan()
        if now is None:
            return
        files = self.files
        racy = self.scanned_ns - RACY_NS
        if not self.synced:
            if self.primed is not None and self.git:
                clean = {rel: oid for rel, (sig, oid) in self.primed.items() if now.get(rel) == sig}
            else:
                clean = _git_clean_blobs(self.root) if self.git else {}
            self.primed = None
            if sum(sig[1] for rel, sig in now.items() if rel not in clean) > MAX_TREE_BYTES:
                self.too_big = True
                return
            for rel, oid in clean.items():
                if rel in now:
                    files[rel] = (now[rel], GIT_REF + oid)
        for rel in [r for r in files if r not in now]:
            del files[rel]
        for rel, sig in now.items():
            known = files.get(rel)
            fresh = sig[0] >= racy and not (known is not None and (known[1] or "").startswith(GIT_REF))
            if known is None or known[0] != sig or fresh:  # git's own answer needs no second look
                files[rel] = (sig, self._snap(rel))
        self.synced = True

    def _stored(self, rel: str, before: str | None) -> str | None:
        """A before-content as the checkpoint records it: a git reference is copied into the store now."""
        if before is None or not before.startswith(GIT_REF):
            return before
        data = _git_blob(self.root, rel, before[len(GIT_REF) :])
        if data is None:
            return UNKNOWN
        try:
            return self.store.put(data)
        except StoreError as e:
            self.store_error = str(e)
            return UNKNOWN

    def _snap(self, rel: str) -> str | None:
        """Store a file's content now; UNKNOWN (and ``store_error`` set) when the store is full."""
        try:
            return self.store.snapshot(self.root / rel)
        except StoreError as e:
            self.store_error = str(e)
            return UNKNOWN

    def diff(self) -> dict[str, str | None]:
        """After a Bash call: the paths that changed since :meth:`sync`, with their content before."""
        if not self.synced:
            return {}
        racy = self.scanned_ns - RACY_NS  # a file written this close to the last look is hashed again
        now = self._scan()
        if now is None:
            return {}
        changed: dict[str, str | None] = {}
        after: dict[str, str | None] = {}
        files = self.files
        for rel in [r for r in files if r not in now]:
            path = str(self.root / rel)
            changed[path] = self._stored(rel, files.pop(rel)[1])
            after[path] = current(self.root / rel)  # gone (or no longer a file or link)
        for rel, sig in now.items():
            known = files.get(rel)
            if known is not None and known[0] == sig and sig[0] < racy:
                continue
            before = self._stored(rel, known[1]) if known is not None else None
            sha = self._snap(rel)
            if known is not None and before == sha and sha != UNKNOWN:
                files[rel] = (sig, sha)  # touched, not changed
                continue
            path = str(self.root / rel)
            changed[path] = before
            after[path] = sha if sha != UNKNOWN else current(self.root / rel)
            files[rel] = (sig, sha)
        self.after = after
        return changed


def _mtime(root: Path, d: str) -> int | None:
    try:
        st = os.lstat(f"{root}/{d}" if d else root)
    except OSError:
        return None
    return st.st_mtime_ns if stat.S_ISDIR(st.st_mode) else None


def _git_files(root: Path, specs: list[str]) -> list[str] | None:
    proc = run_git(root, "ls-files", "-co", "--exclude-standard", "-z", "--", *specs)
    if proc is None or proc.returncode != 0:
        return None
    return [n for n in proc.stdout.decode("utf-8", "surrogateescape").split("\0") if n]


GIT_REF = "git:"  # a before-content still in git's object store: "git:<blob oid>"


def _git(root: Path, *args: str, timeout: float = 30) -> bytes | None:
    proc = run_git(root, *args, timeout=timeout)
    return proc.stdout if proc is not None and proc.returncode == 0 else None


def _git_clean_blobs(root: Path) -> dict[str, str]:
    """Tracked regular files whose work-tree content git can give back: path -> index blob oid.
    A file that differs from the index (or may: git lists stat-dirty files too) is left out, and
    so copied like an untracked one. Any failure: {} (everything is copied, as without git); so
    too when a filter driver is configured (comparing or checking out content would run it)."""
    if has_filter_drivers(root):
        return {}
    staged = _git(root, "ls-files", "-s", "-z")
    dirty = _git(root, "diff-files", "--name-only", "-z")
    if staged is None or dirty is None:
        return {}
    modified = set(dirty.decode("utf-8", "surrogateescape").split("\0"))
    out: dict[str, str] = {}
    for entry in staged.decode("utf-8", "surrogateescape").split("\0"):
        meta, _, rel = entry.partition("\t")
        parts = meta.split()
        if len(parts) == 3 and parts[0] in ("100644", "100755") and parts[2] == "0" and rel not in modified:
            out[rel] = parts[1]
    return out


def _git_blob(root: Path, rel: str, oid: str) -> bytes | None:
    """A blob as it would be checked out at ``rel`` (eol conversion applied). None when a filter
    driver is configured now (a Bash call may have planted one since the first look): keel does
    not run the repository's commands."""
    if has_filter_drivers(root):
        return None
    return _git(root, "cat-file", "--filters", f"--path={rel}", oid)


def _walk_files(root: Path, start: str, *, recurse: bool = True) -> list[str] | None:
    out: list[str] = []
    top = root / start if start else root
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = [d for d in dirnames if d not in _SKIP_DIRS] if recurse else []
        rel = os.path.relpath(dirpath, root)
        out.extend(f if rel == "." else f"{rel}/{f}" for f in filenames)
        if len(out) > MAX_TREE_FILES:
            return None
    return out
