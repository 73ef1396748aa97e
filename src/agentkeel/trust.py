"""Project trust: a folder's settings, hooks and MCP servers stay inert until the user trusts it.

Trust is stored per folder in ``$KEEL_HOME/trust.json`` with a hash of the files that can
widen permissions or run code (the project and local settings files and ``.mcp.json``). A
change to any of them makes the folder ask again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

TRUSTED_FILES = (
    ".claude/settings.json",
    ".claude/settings.local.json",
    ".keel/settings.json",
    ".keel/settings.local.json",
    ".mcp.json",
)
Status = Literal["trusted", "untrusted", "changed", "nothing-to-trust"]


@dataclass(frozen=True)
class TrustState:
    folder: Path
    status: Status
    files: tuple[str, ...]  # the project files that trust covers, as found now

    @property
    def trusted(self) -> bool:
        return self.status in ("trusted", "nothing-to-trust")


def project_files(folder: Path) -> list[str]:
    return [rel for rel in TRUSTED_FILES if (folder / rel).is_file()]


def content_hash(folder: Path) -> str:
    h = hashlib.sha256()
    for rel in project_files(folder):
        try:
            data = (folder / rel).read_bytes()
        except OSError:
            data = b"<unreadable>"
        h.update(rel.encode() + b"\0" + hashlib.sha256(data).digest())
    return h.hexdigest()


class TrustStore:
    def __init__(self, keel_home: Path) -> None:
        self.path = keel_home / "trust.json"

    def _load(self) -> dict[str, dict[str, object]]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError):
            return {}  # a corrupt store trusts nothing (fail closed); the next trust rewrites it
        return data if isinstance(data, dict) else {}

    def _save(self, data: dict[str, dict[str, object]]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".trust.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f, indent=2, sort_keys=True)
                f.flush()
                os.fsync(f.fileno())
            Path(tmp).replace(self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                Path(tmp).unlink()
            raise

    def state(self, folder: Path) -> TrustState:
        folder = folder.resolve()
        files = tuple(project_files(folder))
        if not files:
            return TrustState(folder, "nothing-to-trust", files)
        entry = self._load().get(str(folder))
        if not entry:
            return TrustState(folder, "untrusted", files)
        status: Status = "trusted" if entry.get("hash") == content_hash(folder) else "changed"
        return TrustState(folder, status, files)

    def trust(self, folder: Path) -> TrustState:
        folder = folder.resolve()
        data = self._load()
        data[str(folder)] = {
            "hash": content_hash(folder),
            "trusted_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        self._save(data)
        return self.state(folder)

    def revoke(self, folder: Path) -> bool:
        folder = folder.resolve()
        data = self._load()
        if data.pop(str(folder), None) is None:
            return False
        self._save(data)
        return True

    def folders(self) -> list[tuple[str, str]]:
        return sorted((k, str(v.get("trusted_at", ""))) for k, v in self._load().items())


def untrusted_notice(state: TrustState) -> str:
    what = "changed since you trusted it" if state.status == "changed" else "not trusted"
    return (
        f"this folder's project settings ({', '.join(state.files)}) are {what}; running without their hooks, "
        f"MCP servers and permission-widening keys. Run `keel trust {state.folder}` to trust them."
    )
