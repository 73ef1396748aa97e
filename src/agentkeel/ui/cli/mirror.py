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
    from agentkeel.agents.forwarding import SubagentActivity
    from agentkeel.agents.spawner import SubagentSpawner
    from agentkeel.core.events import Event, Notice
    from agentkeel.policy.redact import redact
    from agentkeel.policy.redaction import redact_event
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
    # storage: every event fully masked, as keel's own log gets it (readers see the model's words)
    rt.bus.subscribe(lambda event: mirror.on_event(redact_event(event)))
    spawner = rt.agent.services.find(SubagentSpawner)
    if spawner is not None:

        def on_subagent(kind: str, activity: Any, item: Any) -> None:
            masked = SubagentActivity(
                activity.agent_id, activity.agent_type, redact(activity.description), activity.tool_use_id, ""
            )
            mirror.on_subagent(kind, masked, redact_event(item) if isinstance(item, Event) else item)

        spawner.listeners.append(on_subagent)
