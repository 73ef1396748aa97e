"""Which handlers an event reaches: the group ``matcher`` and the handler-level ``if``.

Matcher (SPEC 4, as Claude Code): ``*`` or empty matches everything; a matcher made only of
``[A-Za-z0-9_ ,|-]`` is a list of exact names split on ``|`` or ``,``; anything else is an
unanchored regular expression. What it is matched against depends on the event (the tool
name, the SessionStart source, the notification type...). A regex that does not compile
matches nothing (and is reported once when the hooks are loaded).

``if`` holds a permission rule (``"Bash(rm *)"``, ``"Edit(src/**)"``) and is decided by the
permission engine's own grammar and shell analysis: the handler runs when the rule would
catch the call as a deny rule does (any command of a compound line, either path of a link).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from agentkeel.core.tools import Tool
from agentkeel.tools import names_of

_NAMES = re.compile(r"^[A-Za-z0-9_ ,|-]+$")


@lru_cache(maxsize=1024)
def compile_matcher(matcher: str) -> Callable[[str], bool]:
    text = matcher.strip()
    if text in ("", "*"):
        return lambda _value: True
    if _NAMES.match(text):
        names = frozenset(n.strip() for n in re.split(r"[|,]", text) if n.strip())
        return lambda value: value in names
    try:
        pattern = re.compile(text)
    except re.error:
        return lambda _value: False
    return lambda value: pattern.search(value) is not None


def matcher_error(matcher: str) -> str | None:
    text = matcher.strip()
    if text in ("", "*") or _NAMES.match(text):
        return None
    try:
        re.compile(text)
    except re.error as e:
        return f"matcher {matcher!r} is not a valid regular expression ({e}); it matches nothing"
    return None


def matches(matcher: str, value: str | None) -> bool:
    """``value`` None: the event has nothing to match on, so every group applies. A tool is matched
    by each of its names (``Task`` and ``Agent``; ``KillShell`` and ``TaskStop``...), in a list or a
    pattern alike: a hook written for either name never misses a call made under the other."""
    if value is None:
        return True
    check = compile_matcher(matcher)
    return any(check(name) for name in names_of(value))


def condition_holds(
    rule: str, tool_name: str, tool_input: Mapping[str, Any], tool: Tool | None, cwd: Path, home: str
) -> bool:
    """Would ``rule`` catch this call? Decided by a one-rule permission engine, deny-style."""
    from agentkeel.policy.permissions import PermissionEngine

    engine = PermissionEngine(str(cwd), home=home)
    engine.add([rule], "deny", "hook if", "user")
    if engine.warnings:
        return False
    decision = engine.decide(tool_name, tool_input, tool)
    return decision.decision == "deny" and decision.rule == engine.rules[0].text
