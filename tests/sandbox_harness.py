"""A Bash tool with the session's sandbox, for the sandbox tests and bench/sandbox_bench.py: the
real tool, the real bubblewrap, a permission engine holding the rules the sandbox reads."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from agentkeel.core.tools import Services, ToolContext, ToolOutput
from agentkeel.policy.permissions import PermissionEngine
from agentkeel.policy.sandbox import Sandbox, parse_config, probe
from agentkeel.tools import builtin_tools
from agentkeel.tools.shell import ShellState

BASH = next(t for t in builtin_tools() if t.name == "Bash")


def bwrap_works() -> bool:
    return probe().available


class SandboxedBash:
    def __init__(
        self,
        project: Path,
        home: Path,
        *,
        settings: dict[str, Any] | None = None,
        deny: tuple[str, ...] = (),
        allow: tuple[str, ...] = ("Bash(*)",),
        keel_home: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.engine = PermissionEngine(
            cwd=str(project), home=str(home), keel_home=str(keel_home) if keel_home else None
        )
        self.engine.add(list(allow), "allow", "test")
        self.engine.add(list(deny), "deny", "test")
        config = parse_config({"enabled": True, **(settings or {})})
        self.sandbox = Sandbox(config, cwd=project, home=home, keel_home=keel_home, engine=self.engine)
        self.engine.sandbox_auto_allow = self.sandbox.auto_allow
        services = Services()
        services.put(Sandbox, self.sandbox)
        self.services = services
        self.ctx = ToolContext(cwd=project, session_id="t", services=services, emit=lambda e: None, env=env or {})

    async def run(self, command: str, **extra: Any) -> ToolOutput:
        return await BASH.run(BASH.parse({"command": command, **extra}), self.ctx)

    def __call__(self, command: str, **extra: Any) -> ToolOutput:
        # a fresh set of shells for each call: the last one's watchdog may still be sweeping its session
        # (it does once keel closed its end), and would stop a new call tagged with the same session
        self.services.put(ShellState, ShellState())
        return asyncio.run(self._once(command, **extra))

    async def _once(self, command: str, **extra: Any) -> ToolOutput:
        try:
            return await self.run(command, **extra)
        finally:
            await self.services.get(ShellState).aclose()

    def close(self) -> None:
        asyncio.run(self.sandbox.aclose())
