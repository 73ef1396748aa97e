"""A live session: what the CLI, the TUI, the web app and the SDK drive (``start``, ``run``,
``aclose``). It is assembled by :mod:`agentkeel.app.builder`, the composition root; the core depends
on none of it.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from agentkeel._version import __version__
from agentkeel.app.assembly import KeelError as KeelError  # re-exported: callers import it from here
from agentkeel.app.builder import FIRST_CALL_MODULES as FIRST_CALL_MODULES
from agentkeel.app.builder import Built, build
from agentkeel.app.builder import import_refusal as _import_refusal  # noqa: F401 (tests/test_review_safety.py)
from agentkeel.app.options import RuntimeOptions as RuntimeOptions  # re-exported: the public API
from agentkeel.app.place import project_trust as project_trust
from agentkeel.app.place import read_settings as read_settings
from agentkeel.config.settings import LoadedSettings
from agentkeel.config.trust import TrustState, untrusted_notice
from agentkeel.core.events import Notice, SessionEnded, SessionStarted, SinkFailed
from agentkeel.core.loop import Agent
from agentkeel.core.run import RunResult
from agentkeel.internal import childwatch as _childwatch
from agentkeel.models.catalog import ModelInfo
from agentkeel.policy.permissions import PermissionEngine
from agentkeel.session.openrewinds import listed as open_rewinds
from agentkeel.session.store import SessionLock, SessionWriter

if TYPE_CHECKING:
    from agentkeel.memory.plugin import MemoryPlugin
    from agentkeel.session.load import LoadReport

log = logging.getLogger(__name__)


class Runtime:
    def __init__(
        self,
        agent: Agent,
        *,
        session_id: str,
        session_path: Path,
        writer: SessionWriter,
        lock: SessionLock,
        settings: LoadedSettings,
        model: ModelInfo,
        resumed: LoadReport | None,
        permissions: PermissionEngine,
        trust: TrustState,
        start_timeout_s: float = 30.0,
        memory: MemoryPlugin | None = None,
    ) -> None:
        self.agent = agent
        self.bus = agent.bus
        self.session_id = session_id
        self.session_path = session_path
        self.writer = writer
        self.lock = lock
        self.settings = settings
        self.model = model
        self.resumed = resumed
        self.permissions = permissions
        self.trust = trust
        self.memory = memory
        self.start_timeout_s = start_timeout_s
        self._started = False
        self._closed = False

    @classmethod
    def create(cls, opts: RuntimeOptions) -> Runtime:
        """The session ``opts`` describes, assembled by the one builder (agentkeel.app.builder)."""
        built = build(opts)
        log_ = built.log
        rt = cls(
            built.agent,
            session_id=log_.session_id,
            session_path=log_.path,
            writer=log_.writer,
            lock=log_.lock,
            settings=built.place.loaded,
            model=built.model,
            resumed=log_.resumed.report if log_.resumed else None,
            permissions=built.engine,
            trust=built.place.trust,
            start_timeout_s=opts.start_timeout_s,
            memory=built.memory,
        )
        rt._recover_rewinds(built)
        return rt

    def _recover_rewinds(self, built: Built) -> None:
        """A rewind killed half-way (this session's, or another's of the project): completed or
        rolled back now (its journal). A failure is a warning; the markers stay for the next start."""
        warnings = self.settings.warnings
        if built.log.resumed is not None:
            from agentkeel.session.history import recover_rewind

            try:
                recovered = recover_rewind(self, built.log.resumed.events)
            except Exception as exc:  # the session still opens; the journal stays open for the next start
                log.exception("recovering an interrupted rewind failed")
                recovered = f"an interrupted rewind could not be finished: {exc}"
            if recovered:
                warnings.append(recovered)
        sessions = built.place.sessions
        if any(sid != self.session_id for sid in open_rewinds(sessions)):  # one listing when there is none
            from agentkeel.session.history import recover_open_rewinds

            try:  # another session's rewind killed half-way: finished now, not when (if) it is resumed
                warnings += recover_open_rewinds(sessions, current=self.session_id)
            except Exception as exc:  # this session still opens; the markers stay for the next start
                log.exception("recovering another session's interrupted rewind failed")
                warnings.append(f"an interrupted rewind could not be finished: {exc}")

    async def start(self) -> None:
        """Everything that must finish before the first request: each extension's ``start``
        (MCP connects, SessionStart work), each under ``start_timeout_s``; then SessionStarted.
        A start that fails or times out is a warning, never a hang."""
        if self._started:
            return
        self._started = True
        _childwatch.install()  # Python 3.11: a pidfd per Bash call, not a thread
        for ext in self.agent.ext:
            if ext.start is None:
                continue
            limit = ext.start_timeout_s or self.start_timeout_s
            try:
                await asyncio.wait_for(ext.start(), limit)
            except TimeoutError:
                self.settings.warnings.append(f"{ext.name} did not start within {limit:g}s; skipped")
            except Exception as exc:
                log.exception("extension %s failed to start", ext.name)
                self.settings.warnings.append(f"{ext.name} failed to start: {exc}")
        source: Literal["startup", "resume"] = "resume" if self.resumed is not None else "startup"
        self.bus.emit(
            SessionStarted(
                session_id=self.session_id,
                cwd=str(self.agent.context.cwd),
                model=self.model.qualified,
                source=source,
                version=__version__,
            )
        )
        if self.resumed is not None and not self.resumed.clean:
            self.bus.emit(Notice(level="warning", message=self.resumed.summary()))
        if not self.trust.trusted:
            self.bus.emit(Notice(level="warning", message=untrusted_notice(self.trust)))
        for warning in self.settings.warnings:
            self.bus.emit(Notice(level="warning", message=warning))

    async def run(self, prompt: str) -> RunResult:
        try:
            await self.start()
        except SinkFailed as e:
            return self.agent.failed(str(e))
        source = "resume" if self.resumed is not None else "startup"
        return await self.agent.run(prompt, source=source)

    async def aclose(self, reason: str = "exit") -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if self._started:
                try:
                    self.bus.emit(SessionEnded(reason=reason))
                except SinkFailed:
                    pass  # already reported by the run that hit it
            await self.agent.services.aclose()  # background shells, and any provided service
            for ext in self.agent.ext:
                if ext.close is None:
                    continue
                try:
                    await ext.close()
                except Exception:
                    log.exception("extension %s failed to close", ext.name)
            await self.agent.provider.aclose()
        finally:
            self.writer.close()
            self.lock.release()
