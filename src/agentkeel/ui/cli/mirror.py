"""The Claude Code-format session mirror (agentkeel.session.mirror) attached to a running session.

On for the SDKs' mode (``--input-format stream-json``): the files under Claude Code's projects
folder, which ``get_session_messages``, ``list_sessions`` and the subagent readers read.
``--session-mirror`` (what the SDKs pass with a ``SessionStore``) adds the ``transcript_mirror``
frames on stdout; it needs ``--output-format stream-json``. Never read back by keel."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from agentkeel import Runtime


def attach_mirror(
    rt: Runtime,
    write: Callable[[dict[str, Any]], None],
    env: Mapping[str, str] | None,
    *,
    files: bool,
    frames: bool,
) -> None:
    """Mirror ``rt`` (files and/or frames written through ``write``); nothing when neither is asked."""
    if not (files or frames):
        return
    from agentkeel.agents.spawner import SubagentSpawner
    from agentkeel.core.events import Notice
    from agentkeel.session.load import load_session
    from agentkeel.session.mirror import TranscriptMirror, projects_dir

    mirror = TranscriptMirror(
        projects_dir(env),
        rt.agent.context.cwd,
        rt.session_id,
        files=files,
        frames=write if frames else None,
        notice=lambda why: rt.bus.emit(Notice(level="warning", message=why)),
    )
    if rt.resumed is not None:  # resumed or forked: the history it starts from
        try:
            mirror.seed(load_session(rt.session_path).events)
        except OSError:
            pass
    rt.bus.subscribe(mirror.on_event)
    spawner = rt.agent.services.find(SubagentSpawner)
    if spawner is not None:
        spawner.listeners.append(mirror.on_subagent)
