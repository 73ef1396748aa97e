"""Project trust: a folder's settings, hooks and MCP servers stay inert until the user trusts it.

Trust is stored per folder in ``$KEEL_HOME/trust.json`` with a hash of the files that can
widen permissions or run code: the project and local settings files, ``.mcp.json``, the
project's definitions (``.claude|.keel`` ``/agents``, ``/skills``, ``/commands``: prompts,
tool lists, permission modes, skill scripts) and the ``hooks/hooks.json`` of each plugin kept
inside the folder (``plugin_hook_files``). A change to any of them (an edit, a new file, a removed one) makes
the folder ask again. A folder with none of them has nothing to trust.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Literal

import msgspec

TRUSTED_FILES = (
    ".claude/settings.json",
    ".claude/settings.local.json",
    ".keel/settings.json",
    ".keel/settings.local.json",
    ".mcp.json",
)
DEFINITION_DIRS = tuple(f"{base}/{kind}" for base in (".claude", ".keel") for kind in ("agents", "skills", "commands"))
MAX_DEFINITION_FILES = 2000  # per definitions folder, the files whose content trust covers
PLUGIN_SEARCH_DIRS = 200  # folders looked at per parent, at most: trust is read before every session
Status = Literal["trusted", "untrusted", "changed", "nothing-to-trust"]


class TrustState(msgspec.Struct, frozen=True):
    folder: Path
    status: Status
    files: tuple[str, ...]  # the project files that trust covers, as found now

    @property
    def trusted(self) -> bool:
        return self.status in ("trusted", "nothing-to-trust")


def project_files(folder: Path) -> list[str]:
    """What trust covers here: the settings files and ``.mcp.json``, then each definitions
    folder that holds a file and each plugin ``hooks/hooks.json`` (relative paths)."""
    found = [rel for rel in TRUSTED_FILES if (folder / rel).is_file()]
    found += [rel for rel in DEFINITION_DIRS if _definition_files(folder / rel)]
    found += plugin_hook_files(folder)
    return found


def _definition_files(root: Path) -> list[Path]:
    if not root.is_dir():
        return []
    out: list[Path] = []
    for base, dirs, files in os.walk(root, followlinks=False):
        dirs.sort()
        out += (Path(base) / f for f in sorted(files))
        if len(out) >= MAX_DEFINITION_FILES:
            break
    return out


def plugin_hook_files(folder: Path) -> list[str]:
    """``<plugin>/hooks/hooks.json`` of each plugin (a folder with ``.claude-plugin/plugin.json``)
    inside ``folder`` where plugins live: the folder itself, its top-level folders, and the folders
    in ``plugins/``, ``.claude/plugins/`` and ``.keel/plugins/`` (a marketplace's layout). Trust is
    read before every session, so this is a few ``scandir`` calls, never a walk of the tree."""
    out: list[str] = []
    candidates = [folder]
    for parent in (folder, folder / "plugins", folder / ".claude" / "plugins", folder / ".keel" / "plugins"):
        try:
            entries = sorted(os.scandir(parent), key=lambda e: e.name)
        except OSError:
            continue
        candidates += [Path(e.path) for e in entries if e.is_dir(follow_symlinks=False)][:PLUGIN_SEARCH_DIRS]
    for path in dict.fromkeys(candidates):
        manifest = path / ".claude-plugin" / "plugin.json"
        if not manifest.is_file():
            continue
        hooks = path / "hooks" / "hooks.json"
        if hooks.is_file():
            out.append(hooks.relative_to(folder).as_posix())
        if '"hooks"' in _head(manifest):  # the manifest names hooks (a file or an inline table): it is code too
            out.append(manifest.relative_to(folder).as_posix())
            out += [p.relative_to(folder).as_posix() for p in _listed_hooks(path) if p.is_file()]
    return list(dict.fromkeys(out))


def _head(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")[:65536]
    except OSError:
        return ""


def _listed_hooks(root: Path) -> list[Path]:
    from agentkeel.plugins.loader import manifest_hook_files

    return [p for p in manifest_hook_files(root) if p.is_relative_to(root.resolve())]


def _digest(path: Path) -> bytes:
    try:
        return hashlib.sha256(path.read_bytes()).digest()
    except OSError:
        return b"<unreadable>"


def content_hash(folder: Path) -> str:
    h = hashlib.sha256()
    for rel in project_files(folder):
        path = folder / rel
        if rel in DEFINITION_DIRS:
            for n, file in enumerate(_definition_files(path)):
                name = file.relative_to(folder).as_posix().encode()
                if n < MAX_DEFINITION_FILES:
                    h.update(name + b"\0" + _digest(file))
            continue
        h.update(rel.encode() + b"\0" + _digest(path))
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
        entry = self._load().get(str(folder))
        if not files:
            # explicitly trusted all the same: what trust grants beyond files (CLAUDE.md imports from
            # outside the folder) follows the user's word
            return TrustState(folder, "trusted" if entry else "nothing-to-trust", files)
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
    what = "changed since you trusted them" if state.status == "changed" else "not trusted"
    return (
        f"this folder's project settings and definitions ({', '.join(state.files)}) are {what}; running without "
        f"their hooks, MCP servers and permission-widening keys. Run `keel trust {state.folder}` to trust them."
    )
