"""Host Unix sockets a sandboxed command could reach by path, to cover before it starts.

A pathname socket is reachable from any network namespace: connecting needs only a path to
it, and a read-only mount does not stop ``connect()``. So ``tmux -S /tmp/tmux-1000/default
send-keys 'CMD' Enter`` from inside the sandbox would run CMD in the user's tmux, outside.
Abstract sockets (``@name``) belong to a network namespace: the sandbox always has its own, so
none is reachable (X11's and D-Bus's abstract ones included).

Where the pathname sockets are:

* every socket bound in keel's network namespace is listed in ``/proc/net/unix`` with the path
  it was bound to; a relative one (``bind("app.sock")``) is resolved against the working
  directory of the process holding it (found through ``/proc/<pid>/fd``);
* sockets bound in another namespace (a rootless Docker daemon, a container, another
  sandbox) are not listed there; keel also walks the usual places for them: ``/tmp`` and
  ``/var/tmp`` two levels deep (``/tmp/ssh-XXXX/agent.1``, ``/tmp/tmux-1000/default``),
  ``$XDG_RUNTIME_DIR`` three, ``$HOME`` two (``~/.x/sock``), :data:`SCAN_LIMIT` entries at
  most, leaving out the working directories (a server the session runs sandboxed in the
  background binds its socket there, in the sandbox's namespace). A socket the walk finds that
  the table does not list is either another namespace's or stale (its server gone: Chromium
  leaves its SingletonSocket behind): keel connects to it once and closes at once, and covers it
  unless the answer is "connection refused" (nobody bound; each cover is a mount, ~1 ms of
  bubblewrap's time under load). The walk and the knock cost milliseconds (7 ms here with a
  busy ``/tmp``), so a session reuses them for :data:`WALK_TTL` seconds; the table is read at
  every call (0.05 ms).

``/run`` (and with it ``/run/user/<uid>``, the usual ``$XDG_RUNTIME_DIR``) and ``/tmp/.X11-unix``
are replaced by empty directories already. Each socket found is covered by an empty file
nobody may open (``connect()`` fails with EACCES), except the ones ``sandbox.network.allowUnixSockets``
names (a socket, or a directory holding sockets) and keel's own proxy socket. A socket bound on
the host after the command started is not covered.
"""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Iterable

SCAN_LIMIT = 20_000
WALK_TTL = 30.0
PROC_NET_UNIX = "/proc/net/unix"


def _under(path: str, roots: Iterable[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def _is_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.lstat(path).st_mode)
    except OSError:
        return False


def bound_sockets(table: str = PROC_NET_UNIX) -> list[str]:
    """The paths of the sockets bound in this network namespace that exist as sockets now."""
    try:
        with open(table, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()[1:]
    except OSError:
        return []
    found: list[str] = []
    relative: dict[str, str] = {}  # socket inode -> the name it was bound to
    for line in lines:
        fields = line.split(None, 7)
        if len(fields) < 8 or fields[7].startswith("@"):
            continue  # unbound, or abstract (another namespace's: not reachable)
        path = fields[7]
        if path.startswith("/"):
            found.append(path)
        else:
            relative[fields[6]] = path
    if relative:
        found += _resolve_relative(relative)
    return [p for p in dict.fromkeys(os.path.normpath(p) for p in found) if _is_socket(p)]


def _resolve_relative(names: dict[str, str]) -> list[str]:
    """A socket bound to a relative name lies in its process's working directory (as long as the
    process did not move since)."""
    out: list[str] = []
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return out
    left = dict(names)
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:[") and target[8:-1] in left:
                name = left.pop(target[8:-1])
                try:
                    out.append(os.path.join(os.readlink(f"/proc/{pid}/cwd"), name))
                except OSError:
                    pass
        if not left:
            break
    return out


def scan(roots: Iterable[tuple[str, int]], skip: Iterable[str] = (), limit: int = SCAN_LIMIT) -> list[str]:
    """Sockets under each ``(root, depth)`` (symlinks not followed, ``skip`` left out), breadth
    first, ``limit`` entries at most in all."""
    skipped = [s for s in skip if s]
    found: list[str] = []
    seen = 0
    for root, depth in roots:
        if not root or not os.path.isdir(root) or os.path.islink(root):
            continue
        level = [root]
        for _ in range(depth):
            below: list[str] = []
            for directory in level:
                if _under(directory, skipped):
                    continue
                try:
                    entries = list(os.scandir(directory))
                except OSError:
                    continue
                for entry in entries:
                    seen += 1
                    try:
                        mode = entry.stat(follow_symlinks=False).st_mode
                    except OSError:
                        continue
                    if stat.S_ISSOCK(mode):
                        found.append(entry.path)
                    elif stat.S_ISDIR(mode):
                        below.append(entry.path)
                if seen > limit:
                    return found
            level = below
    return list(dict.fromkeys(found))


def live(paths: Iterable[str]) -> list[str]:
    """The sockets of ``paths`` something is bound to: a connection is refused only when nobody
    is (a stream connect to a datagram socket fails otherwise: that one is live too)."""
    out: list[str] = []
    for path in paths:
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        probe.setblocking(False)
        try:
            probe.connect(path)
        except ConnectionRefusedError:
            continue
        except OSError:
            pass
        finally:
            probe.close()
        out.append(path)
    return out


def walk_roots(home: str, masked: Iterable[str], runtime_dir: str | None = None) -> list[tuple[str, int]]:
    masked = [os.path.realpath(m) for m in masked]
    runtime = runtime_dir if runtime_dir is not None else os.environ.get("XDG_RUNTIME_DIR", "")
    roots = [("/tmp", 2), ("/var/tmp", 2), (runtime, 3), (home, 2)]
    return [(r, d) for r, d in ((os.path.realpath(r), d) for r, d in roots if r) if not _under(r, masked)]


def host_sockets(
    *, walked: Iterable[str], own: Iterable[str], allowed: Iterable[str], masked: Iterable[str]
) -> list[str]:
    """The host sockets to cover: the bound ones and ``walked`` (from :func:`scan`), less those
    under ``own`` (keel's proxy socket), ``allowed`` or ``masked`` (an empty directory already)."""
    own = [os.path.realpath(o) for o in own if o]
    masked = [os.path.realpath(m) for m in masked]
    allowed = [os.path.realpath(a) for a in allowed]
    out: list[str] = []
    for path in [*bound_sockets(), *walked]:
        real = os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
        if not (_under(real, masked) or _under(real, own) or _under(real, allowed)) and reachable(real):
            out.append(real)
    return list(dict.fromkeys(out))


def reachable(path: str) -> bool:
    """Could a sandboxed command of this user connect to ``path`` (search every directory on the
    way, write the socket)? One it cannot reach needs no cover, and cannot have one: bubblewrap,
    unable to see it, would try to create the mount point and fail the call (a database's socket
    in a directory private to its own user). Without privileges the kernel answers (``access``,
    ACLs included); as root, whose capabilities the sandbox drops, the permission bits do."""
    if os.geteuid() != 0:
        return os.access(path, os.W_OK)
    uid, groups = os.getuid(), {os.getgid(), *os.getgroups()}

    def allows(st: os.stat_result, shift: int) -> bool:  # shift: 0 for x, 1 for w
        bits = (stat.S_IXUSR, stat.S_IXGRP, stat.S_IXOTH) if shift == 0 else (stat.S_IWUSR, stat.S_IWGRP, stat.S_IWOTH)
        if st.st_uid == uid:
            return bool(st.st_mode & bits[0])
        if st.st_gid in groups:
            return bool(st.st_mode & bits[1])
        return bool(st.st_mode & bits[2])

    try:
        directory = os.path.dirname(path)
        while True:
            if not allows(os.stat(directory), 0):
                return False
            if directory == "/":
                break
            directory = os.path.dirname(directory)
        return allows(os.lstat(path), 1)
    except OSError:
        return False
