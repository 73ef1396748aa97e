"""Settings files that change during a session: ConfigChange, and what of the change applies now.

The ``settings-watch`` built-in stats every settings file the session read (and the project's
that may appear) at each turn boundary, a handful of ``stat`` calls. For a changed file it fires
ConfigChange through the session's :class:`LifecyclePoint` (``source``: user_settings,
project_settings, local_settings, policy_settings; ``file_path``). As in Claude Code, a handler
that blocks (exit 2, ``decision: "block"``) keeps the old settings in effect for the session and
its reason is shown; a change to managed policy cannot be blocked.

What a change can do mid-session is only ever tighten: the file's new ``deny`` and ``ask``
permission rules apply at once. Anything that would widen (an allow rule, a removed deny) or
change hooks waits for the next session, and in a project for trust, so a session cannot widen
its own permissions by writing a settings file. A file of an untrusted project stays inert.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from agentkeel.core.events import Event, Notice
from agentkeel.core.extensions import Extension, LifecyclePoint
from agentkeel.core.provider import ModelRequest
from agentkeel.core.tools import Services
from agentkeel.hooks.watch import Watcher
from agentkeel.policy.permissions.engine import PermissionEngine, rule_root

_SOURCE = {
    "user": "user_settings",
    "project": "project_settings",
    "local": "local_settings",
    "managed": "policy_settings",
}
_TIGHTENING: tuple[Literal["deny", "ask"], ...] = ("deny", "ask")


class SettingsWatch:
    def __init__(
        self,
        files: dict[Path, str],
        engine: PermissionEngine,
        services: Services,
        emit: Callable[[Event], None],
        *,
        trusted: bool = True,
    ) -> None:
        self.scope = files  # path -> scope (user | project | local | cli | managed)
        self.engine = engine
        self.services = services
        self.emit = emit
        self.trusted = trusted
        self.watcher = Watcher(files)

    def extension(self) -> Extension:
        return Extension("settings-watch", before_request=self.before_request)

    async def before_request(self, request: ModelRequest) -> ModelRequest:
        for path, _ in self.watcher.changes():
            await self.changed(path)
        return request

    async def changed(self, path: Path) -> None:
        scope = self.scope.get(path, "project")
        source = _SOURCE.get(scope, f"{scope}_settings")
        life = self.services.find(LifecyclePoint)
        if life is not None and life.listens("ConfigChange"):
            result = await life.fire("ConfigChange", {"source": source, "file_path": str(path)}, match=source)
            if result.blocked and scope != "managed":
                reason = result.reason or "a ConfigChange hook blocked it"
                self._notice(f"{path}: settings change not applied ({reason}); the session keeps its settings")
                return
        if scope in ("project", "local") and not self.trusted:
            return
        added = self.apply(path, scope)
        if added:
            self._notice(f"{path}: {added} new deny/ask rule(s) apply now; other changes apply from the next session")

    def apply(self, path: Path, scope: str) -> int:
        """The file's deny and ask rules the session does not hold yet; returns how many were added."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            return 0
        perms = data.get("permissions") if isinstance(data, dict) else None
        if not isinstance(perms, dict):
            return 0
        added = 0
        for kind in _TIGHTENING:
            texts = perms.get(kind)
            if not isinstance(texts, list):
                continue
            have = {r.text for r in self.engine.rules if r.source == str(path) and r.kind == kind}
            new = [t for t in texts if isinstance(t, str) and t.strip() and t not in have]
            before = len(self.engine.rules)
            self.engine.add(new, kind, str(path), scope, rule_root(str(path)))
            added += len(self.engine.rules) - before
        return added

    def _notice(self, message: str) -> None:
        self.emit(Notice(level="warning", message=message))
