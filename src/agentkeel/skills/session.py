"""The agent a session's skills run against (a per-agent service: each child has its own).

A command's (or skill's) ``allowed-tools`` is a grant in Claude Code: those calls run without a
prompt while it runs. :meth:`SkillHost.scope_turn` adds them as allow rules of scope ``command``
(the deny and ask stages still come first, so a grant never widens a deny) and its ``model:`` as
the model; both end with the turn (the run's ``RunFinished``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

import msgspec

from agentkeel.core.events import Event, RunFinished
from agentkeel.core.loop import Agent
from agentkeel.policy.permissions import PermissionEngine
from agentkeel.policy.permissions.rules import Rule
from agentkeel.skills.loader import Skill


class ModelCommand(msgspec.Struct, frozen=True):
    """A command file the model may run through the Skill tool: its name and description for the
    listing, and ``load`` to read it (again) as a Skill when it is called."""

    name: str
    description: str
    load: Callable[[], Skill]


class SkillHost(msgspec.Struct):
    agent: Agent
    active_tools: tuple[str, ...] | None = None  # allowed-tools of the inline skill now running
    activated: set[str] = msgspec.field(default_factory=set)  # path-activated skills already announced
    granted: list[Rule] = msgspec.field(default_factory=list)  # this turn's allowed-tools grants
    session_model: str | None = None  # the model before a command's ``model:`` took this turn
    watching: bool = False  # subscribed to the bus for the turn's end

    def scope_turn(self, *, allow: Sequence[str] = (), model: str | None = None, source: str) -> None:
        """Grant ``allow`` (rule texts) and switch to ``model`` until the current turn ends."""
        engine = self.agent.services.find(PermissionEngine)
        if engine is not None and allow:
            before = len(engine.rules)
            engine.add([t for t in allow if t.strip()], "allow", f"{source} allowed-tools", scope="command")
            self.granted += [r for r in engine.rules[before:] if r.kind == "allow"]
        chosen = _model(self.agent, model)
        if chosen is not None and chosen != self.agent.config.model:
            if self.session_model is None:
                self.session_model = self.agent.config.model
            self.agent.config.model = chosen
        if (self.granted or self.session_model is not None) and not self.watching:
            self.watching = True
            self.agent.bus.subscribe(self._on_event)

    def end_turn(self) -> None:
        engine = self.agent.services.find(PermissionEngine)
        if engine is not None and self.granted:
            ids = {id(r) for r in self.granted}
            engine.rules = [r for r in engine.rules if id(r) not in ids]
        self.granted = []
        if self.session_model is not None:
            self.agent.config.model = self.session_model
            self.session_model = None

    def _on_event(self, event: Event) -> None:
        if isinstance(event, RunFinished):
            self.end_turn()


def _model(agent: Agent, name: str | None) -> str | None:
    """A definition's ``model:`` as a model of the session's provider; None keeps the session's
    (``inherit``, an unknown name or another provider's model: convenience fails open)."""
    if not name or name.strip().lower() == "inherit":
        return None
    from agentkeel.models.catalog import ModelConfigError, ModelInfo, resolve_model

    try:
        info = resolve_model(name.strip(), {**os.environ, **agent.context.env})
    except ModelConfigError:
        return None
    current = agent.services.find(ModelInfo)
    if current is not None and info.provider != current.provider:
        return None
    return info.model
