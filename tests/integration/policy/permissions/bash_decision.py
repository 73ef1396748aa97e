"""The Bash permission decision the attack-family tests ask for: the built-in tools by name, and
``decide``, one engine per call with the given allow and deny rules."""

from __future__ import annotations

from pathlib import Path

from agentkeel.policy.permissions import PermissionEngine
from agentkeel.tools import builtin_tools

TOOLS = {t.name: t for t in builtin_tools()}


def decide(
    root: Path,
    home: Path,
    command: str,
    *,
    allow: tuple[str, ...] = (),
    deny: tuple[str, ...] = (),
) -> str:
    engine = PermissionEngine(cwd=str(root), home=str(home), keel_home=str(home / ".keel"))
    engine.add(allow, "allow", "test")
    engine.add(deny, "deny", "test")
    return engine.decide("Bash", {"command": command}, TOOLS["Bash"]).decision
