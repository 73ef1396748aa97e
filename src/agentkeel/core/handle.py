"""What slash commands and front ends may ask of a live session.

A :class:`SessionHandle` is the conversation (its :class:`~agentkeel.core.loop.Agent`: the view,
the config, the tools, the services, ``append`` and ``request``), the session's bus, its id and
transcript, and the two verbs ``start`` and ``run``. What other layers know about the session
(the permission engine, the loaded settings, the model's catalog entry, the folder's trust, the
command registry...) is a service of the session: ``session.agent.services.get(PermissionEngine)``.
The application's ``Runtime`` is one; a test may bring its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from agentkeel.core.events import EventBus
from agentkeel.core.loop import Agent
from agentkeel.core.run import RunResult


class SessionHandle(Protocol):
    @property
    def agent(self) -> Agent: ...

    @property
    def bus(self) -> EventBus: ...

    @property
    def session_id(self) -> str: ...

    @property
    def session_path(self) -> Path: ...

    async def start(self) -> None:
        """Everything that must finish before the first request (idempotent)."""
        ...

    async def run(self, prompt: str) -> RunResult:
        """Run ``prompt`` to a stop."""
        ...
