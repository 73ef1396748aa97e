"""The memory plugin on the hook API: its injection and capture as in-process ``python`` handlers.

keel's memory attaches to a session the way a plugin's hooks do, through the same events and
payloads (SPEC 4), so keel's own feature proves the API plugins use:

================  ===================================================================
SessionStart      report a damaged store or outbox before the first request
UserPromptSubmit  the prompt is captured; ``<memory-context>`` goes back as additionalContext
PostToolUse(+     one tool observation, compressed per tool (``capture.observe``), with the
Failure)          tool's own facts (the payload's ``tool_metadata``: exit code, counts)
PermissionDenied  a call that never ran, recorded as denied (``capture.not_run``): no summary
                  lists its change, no lesson counts it as work done
Stop              the final answer is captured; the idle embedding pass may begin
SessionEnd        the session summary and lesson, then the outbox is flushed and closed
================  ===================================================================

Every handler fails open: memory's own methods already never raise, and a handler that still
does is one notice from the dispatcher, never a blocked prompt or tool. What reaches memory is
redacted first (hook payloads carry what the tool returned, before the result guard) and then
masked by memory's own ``maskPatterns``.

Only the memory package's public names are used; notices the plugin raises itself go to a
private bus of its own and are forwarded to the session's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentkeel.core.events import Event, EventBus, Notice
from agentkeel.core.provider import Provider
from agentkeel.memory.capture import CONTEXT_TAG, not_run, observe
from agentkeel.memory.model import new_record_id, now_iso
from agentkeel.memory.plugin import MemoryPlugin
from agentkeel.redact import redact, redact_obj

SOURCE = "builtin:memory"  # the source name `keel hooks list` and HookRan errors show
SESSION_END_TIMEOUT_S = 90.0  # a model summary (30 s) and the outbox flush (5 s + 2 s) fit in it
_MAX_CAPTURED = 2000  # as MemoryCapture: the summary reads at most this many records


class MemoryHooks:
    """One session's memory handlers; ``hooks()`` is their Claude Code-shaped configuration."""

    def __init__(self, plugin: MemoryPlugin, emit: Callable[[Event], None], provider: Provider, model: str) -> None:
        self.plugin = plugin
        self.provider = provider
        self.model = model
        # the plugin reports its own problems and costs as notices: give it a bus that forwards them
        own = EventBus()
        own.subscribe(lambda event: emit(event) if isinstance(event, Notice) else None)
        plugin.attach(own)  # its bus capture stays on that private bus, which carries no session events

    def hooks(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for event, name in HANDLERS:
            handler = {"type": "python", "callable": getattr(self, name)}
            if event == "SessionEnd":
                handler["timeout"] = SESSION_END_TIMEOUT_S
            out[event] = [{"hooks": [handler]}]
        return out

    # --- handlers (coroutines: the dispatcher awaits them on the loop, no thread per call) ------

    async def session_start(self, payload: dict[str, Any]) -> None:
        self.plugin.report_problems()  # what is known now; the first prompt gives the check a moment more

    async def user_prompt_submit(self, payload: dict[str, Any]) -> dict[str, Any] | None:
        embedding = self.plugin.embedding
        if embedding is not None:
            embedding.busy()
        prompt = str(payload.get("prompt") or "")
        if not prompt.startswith(CONTEXT_TAG):
            self._record("user_prompt", redact(prompt), {})
        context = self.plugin.prompt_context(prompt)
        self.plugin.report_problems()  # what the background check found since
        if not context:
            return None
        return {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": context}}

    async def post_tool_use(self, payload: dict[str, Any]) -> None:
        name = str(payload.get("tool_name") or "")
        if not name or name in self.plugin.capture.excluded:
            return
        tool_input = payload.get("tool_input")
        tool_input = redact_obj(tool_input) if isinstance(tool_input, dict) else {}
        failed = payload.get("hook_event_name") == "PostToolUseFailure"
        output = str(payload.get("error") or "") if failed else response_text(payload.get("tool_response"))
        facts = payload.get("tool_metadata")
        facts = redact_obj(facts) if isinstance(facts, dict) else None
        text, meta = observe(name, tool_input, redact(output), failed, facts)
        duration = payload.get("duration_ms")
        if isinstance(duration, int):
            meta["duration_ms"] = duration
        self._record("tool_observation", text, meta)

    async def permission_denied(self, payload: dict[str, Any]) -> None:
        """A call that never ran: recorded as denied, so no summary or lesson counts it as done."""
        name = str(payload.get("tool_name") or "")
        if not name or name in self.plugin.capture.excluded:
            return
        tool_input = payload.get("tool_input")
        tool_input = redact_obj(tool_input) if isinstance(tool_input, dict) else {}
        text, meta = not_run(name, tool_input, redact(str(payload.get("reason") or "")))
        self._record("tool_observation", text, meta)

    async def stop(self, payload: dict[str, Any]) -> None:
        text = str(payload.get("last_assistant_message") or "")
        self._record("assistant_response", redact(text), {})
        embedding = self.plugin.embedding
        if embedding is not None and not self.plugin.problems():
            embedding.idle()

    async def session_end(self, payload: dict[str, Any]) -> None:
        try:
            await self.plugin.summarise_with_model(self.provider, self.model)
        finally:
            self.plugin.close()

    # --- capture --------------------------------------------------------------------------------

    def _record(self, kind: str, text: str, metadata: dict[str, Any]) -> None:
        """One record into memory's outbox (queued, no I/O here), masked by memory's own patterns."""
        if not text.strip():
            return
        capture = self.plugin.capture
        record = {
            "id": new_record_id(),
            "type": kind,
            "project": capture.project,
            "session": capture.session,
            "timestamp": now_iso(),
            "text": capture.masker.text(text),
            "metadata": capture.masker.obj(metadata),
        }
        capture.outbox.put(record)
        if len(capture.captured) < _MAX_CAPTURED:
            capture.captured.append(record)


def response_text(response: Any) -> str:
    """The text a tool returned, from PostToolUse's Claude Code-shaped ``tool_response``."""
    if isinstance(response, str):
        return response
    if not isinstance(response, dict):
        return ""
    if isinstance(response.get("stdout"), str):  # Bash
        err = response.get("stderr")
        return str(response["stdout"]) + (f"\n{err}" if isinstance(err, str) and err else "")
    file = response.get("file")
    if isinstance(file, dict) and isinstance(file.get("content"), str):  # Read
        return str(file["content"])
    if isinstance(response.get("output"), str):
        return str(response["output"])
    return ""


HANDLERS = (
    ("SessionStart", "session_start"),
    ("UserPromptSubmit", "user_prompt_submit"),
    ("PostToolUse", "post_tool_use"),
    ("PostToolUseFailure", "post_tool_use"),
    ("PermissionDenied", "permission_denied"),
    ("Stop", "stop"),
    ("SessionEnd", "session_end"),
)


def listing() -> dict[str, Any]:
    """The handlers as `keel hooks list` names them (``module:MemoryHooks.method``), to show, not run."""
    target = f"{__name__}:MemoryHooks."
    return {event: [{"hooks": [{"type": "python", "callable": target + name}]}] for event, name in HANDLERS}


def memory_hooks(plugin: MemoryPlugin, emit: Callable[[Event], None], provider: Provider, model: str) -> dict[str, Any]:
    """The memory plugin's handlers, in the shape ``load_hooks`` reads (python callables)."""
    return MemoryHooks(plugin, emit, provider, model).hooks()
