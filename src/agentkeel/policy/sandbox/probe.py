"""Is bubblewrap here, and does it work in this kernel and container?

Finding ``bwrap`` on the PATH is not enough: inside a container without user namespaces it
exits with "No permissions to creating new namespace" or "setting up uid map: Permission
denied". The probe runs the same namespaces a Bash call uses, once per process, and keeps the
first line bubblewrap printed when it fails.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from functools import lru_cache

from agentkeel.internal import procs

BWRAP_ENV = "KEEL_BWRAP"  # another bwrap binary (tests point it at a missing path to see the fallback)
# the namespaces every sandboxed call needs (the network one is dropped only for a proxy-less run
# that allows the network, which keel never does)
PROBE_ARGS = (
    "--unshare-all",
    "--die-with-parent",
    "--cap-drop",
    "ALL",
    "--ro-bind",
    "/",
    "/",
    "--proc",
    "/proc",
    "--dev",
    "/dev",
)


@dataclass(frozen=True)
class Probe:
    bwrap: str | None  # the binary, when found
    works: bool
    problem: str  # why it cannot be used ("" when it works)
    version: str = ""
    socat: str | None = None

    @property
    def available(self) -> bool:
        return self.bwrap is not None and self.works


def find_bwrap() -> str | None:
    chosen = os.environ.get(BWRAP_ENV)
    if chosen is not None:
        return chosen if os.path.isfile(chosen) and os.access(chosen, os.X_OK) else None
    return shutil.which("bwrap")


@lru_cache(maxsize=4)
def probe(bwrap: str | None = None) -> Probe:
    """Run bubblewrap once with the namespaces keel uses; cached for the process."""
    binary = bwrap or find_bwrap()
    socat = shutil.which("socat")
    if binary is None:
        return Probe(None, False, "bubblewrap (bwrap) is not installed", socat=socat)
    if not os.path.isdir("/proc/self"):
        return Probe(binary, False, "/proc is not mounted (bubblewrap needs it)", socat=socat)
    true = shutil.which("true") or "/bin/true"
    done = procs.run_sync([binary, *PROBE_ARGS, "--", true], cwd=None, env=None, timeout=10)
    if done.error:
        return Probe(binary, False, f"bubblewrap could not be run: {done.error}", socat=socat)
    version = procs.run_sync([binary, "--version"], cwd=None, env=None, timeout=5).stdout.decode(errors="replace")
    if done.exit_code != 0:
        first = (done.stderr.decode(errors="replace").strip().splitlines() or ["no message"])[0]
        return Probe(binary, False, f"bubblewrap cannot create the sandbox here: {first}", socat=socat)
    return Probe(binary, True, "", version.strip(), socat)
