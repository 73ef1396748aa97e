"""The ``hooks`` built-in: where each Claude Code hook event fires in keel's loop.

Each event's matcher field, payload fields, honoured outputs and place are in the table of
``spec.py``; this module fires the loop's own events there (``start``, ``on_prompt``,
``before_tool``, the gate's ``request_hooks``, ``after_tool``, ``on_stop``, ``on_error``, the bus,
``close``) and gives the session the :class:`LifecyclePoint` through which subsystems fire theirs
(compaction, subagents, skills, instruction loading, settings changes). A Stop block continues the
loop at most ``MAX_STOP_CONTINUES`` times; asyncRewake handlers still running are waited for first.
"""

from __future__ import annotations

import os
import re
import time
import uuid
from pathlib import Path
from typing import Any, Literal

from agentkeel.core.events import (
    AssistantMessage,
    CwdChanged,
    Event,
    Notice,
    PermissionDecided,
    SessionEnded,
    ToolStarted,
)
from agentkeel.core.extensions import (
    Extension,
    LifecyclePoint,
    LifecycleResult,
    PromptInfo,
    PromptVerdict,
    StopInfo,
    ToolCall,
    Verdict,
)
from agentkeel.core.provider import ModelRequest, ModelResponse, ProviderError
from agentkeel.core.tools import Services, Tool, ToolOutput, Workdir, default_response
from agentkeel.core.types import TextBlock
from agentkeel.hooks.commandhooks import PromptGate
from agentkeel.hooks.dispatcher import CHILD, ChildAgent, HookDispatcher
from agentkeel.hooks.output import Combined
from agentkeel.internal import procs
from agentkeel.policy.permissions.engine import Decision
from agentkeel.tools import effects_for
from agentkeel.tools.fileresponses import ORIGINAL_FILE

MAX_STOP_CONTINUES = 8  # a Stop hook that always blocks cannot keep the loop going for ever
_END_REASONS = frozenset({"clear", "logout", "prompt_input_exit", "other", "bypass_permissions_disabled"})
_STOP_FAILURE = {
    "rate_limit": "rate_limit",
    "overloaded": "server_error",
    "server": "server_error",
    "stream_broken": "server_error",
    "auth": "authentication_failed",
    "bad_request": "invalid_request",
    "not_found": "invalid_request",
}
_IGNORED_ENV = frozenset({"SHLVL", "_", "PWD", "OLDPWD", "BASH_EXECUTION_STRING"})


class StoppedByHook(Exception):
    """A hook answered ``"continue": false``: the run ends before its next request."""


def hook_input(tool: Tool | None, tool_input: dict[str, Any], cwd: Path) -> dict[str, Any]:
    """``tool_input`` as Claude Code sends it to hooks: the fields the tool declares as paths
    (``effects.path_fields``) absolute, resolved against the session's working directory."""
    if tool is None or not tool.effects.path_fields:
        return tool_input
    out = dict(tool_input)
    for field in tool.effects.path_fields:
        for path in tool.paths({field: tool_input.get(field)}, cwd):
            out[field] = os.path.normpath(path)
    return out


def tool_response(
    tool: Tool | None, tool_input: dict[str, Any], output: ToolOutput, original: str | None = None
) -> Any:
    """The ``tool_response`` Claude Code sends: the tool's own shape (``Tool.respond``), else the
    text with the tool's plain facts. ``original``: the text of the file a writing tool changed,
    read before it ran (Write's and Edit's ``originalFile`` and ``structuredPatch``)."""
    if tool is None:
        return default_response(output)
    if original is not None:
        output = ToolOutput(
            output.content, is_error=output.is_error, metadata={**output.metadata, ORIGINAL_FILE: original}
        )
    return tool.response(tool_input, output)


ORIGINAL_CAP = 10 * 1024 * 1024  # a file larger than this is not read for a hook's originalFile


def read_original(path: str) -> str | None:
    """A file's text before a writing tool runs (None: it does not exist, or is too large to send)."""
    try:
        p = Path(path)
        if not p.is_file() or p.stat().st_size > ORIGINAL_CAP:
            return None
        return p.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def tool_metadata(output: ToolOutput) -> dict[str, Any]:
    """The tool's own facts (exit code, path, counts, status): its metadata's plain values."""
    return {k: v for k, v in output.metadata.items() if v is None or isinstance(v, str | int | float | bool)}


def _reminder(event: str, tool: str, context: str) -> str:
    """A hook's ``additionalContext`` for one call, worded and wrapped as Claude Code 2.1.328 sends it."""
    return f"<system-reminder>\n{event}:{tool} hook additional context: {context}\n</system-reminder>"


def _with_notes(output: ToolOutput, event: str, notes: list[str]) -> ToolOutput:
    text = "\n".join((f"[{event} hook] {n}" if event else n) for n in notes if n)
    if not text:
        return output
    if isinstance(output.content, str):
        content: Any = f"{output.content}\n\n{text}" if output.content else text
    else:
        content = [*output.content, TextBlock(text=text)]
    return ToolOutput(content, is_error=output.is_error, metadata=output.metadata, notes=output.notes)


_COMMAND_FRAME = re.compile(
    r"(?:<command-message>[^<]*</command-message>\n)?<command-name>(/[^<\n]+)</command-name>"
    r"(?:\n<command-args>(.*?)</command-args>)?",
    re.DOTALL,
)


def typed_prompt(text: str) -> str:
    """What the user typed, as UserPromptSubmit hooks get it in Claude Code: a slash command's line
    (``/name args``), not the command's expanded text (its body, its ``!`` output, a skill's text)."""
    m = _COMMAND_FRAME.match(text)
    if m is None:
        return text
    args = (m.group(2) or "").strip()
    return f"{m.group(1)} {args}" if args else m.group(1)


def _rule(rule: str) -> dict[str, str]:
    name, sep, content = rule.partition("(")
    if sep and content.endswith(")"):
        return {"toolName": name, "ruleContent": content[:-1]}
    return {"toolName": rule}


def permission_suggestions(call: ToolCall, rules: tuple[str, ...]) -> list[dict[str, Any]]:
    """PermissionRequest's ``permission_suggestions`` as Claude Code 2.1.328 sends them: for a file
    edit, the acceptEdits mode for the session, and for one outside the working directories also
    ``addDirectories`` with its folder; a read outside them, a rule for that folder for the session;
    for the rest, one ``addRules`` entry with every rule that would allow the call, for the local
    settings."""
    effects = effects_for(call.tool, call.name)
    outside = [r.partition("(")[2][1:-1].removesuffix("/**") for r in rules if "(//" in r and r.endswith("/**)")]
    if effects.writes and effects.path_fields and not effects.shell:
        edit: list[dict[str, Any]] = [{"type": "setMode", "mode": "acceptEdits", "destination": "session"}]
        if outside:
            edit.append({"type": "addDirectories", "directories": outside, "destination": "session"})
        return edit
    if not rules:
        return []
    where = "session" if outside and len(outside) == len(rules) else "localSettings"
    return [{"type": "addRules", "rules": [_rule(r) for r in rules], "behavior": "allow", "destination": where}]


def _always_asks(decision: Decision) -> bool:
    return any(s.verdict == "ask" and s.strength == "always" for s in decision.trace)


class HookLifecycle(LifecyclePoint):
    """LifecyclePoint events (PreCompact, SubagentStart, InstructionsLoaded...) fired through the hooks.

    SubagentStart also marks the asyncio context the child runs in (the spawner fires it in the
    task that then starts the child): the child's tool calls, which pass through this session's
    hooks, are then sent with its ``agent_id`` and ``agent_type``, as Claude Code does."""

    def __init__(self, dispatcher: HookDispatcher) -> None:
        self.d = dispatcher

    def listens(self, event: str) -> bool:
        return self.d.has(event)

    async def fire(self, event: str, fields: dict[str, Any], *, match: str | None = None) -> LifecycleResult:
        if event == "SubagentStart" and isinstance(fields.get("agent_id"), str):
            agent_id = fields["agent_id"]
            transcript = self.d.ctx.transcript_path.with_suffix("") / "subagents" / f"agent-{agent_id}.jsonl"
            # the child's task copies this context; the tool call that spawned it runs in a task of its own
            CHILD.set(ChildAgent(agent_id, str(fields.get("agent_type") or ""), str(transcript)))
        if not self.d.has(event):
            return LifecycleResult()
        if event == "SubagentStop":  # Claude Code's fields the spawner does not know of
            fields = {"background_tasks": [], "session_crons": [], **fields}
        result = await self.d.fire(event, fields, match=match)
        return LifecycleResult(blocked=result.blocked, reason=result.block_reason, context=tuple(result.context))


class HooksExtension:
    def __init__(
        self,
        dispatcher: HookDispatcher,
        *,
        tool_env: dict[str, str] | None = None,
        source: str = "startup",
        services: Services | None = None,
    ) -> None:
        self.d = dispatcher
        self.services = services
        self.tool_env = tool_env  # Bash's environment: CLAUDE_ENV_FILE exports land here
        self._cwd_move: tuple[str, str] | None = None  # a CwdChanged seen on the bus, fired after the call
        self.source = source
        self.session_context: list[str] = []
        self.end_reason = "other"
        self.stopped: str | None = None
        self.stop_count = 0
        self._started: dict[str, float] = {}
        self._allowed: dict[str, float] = {}  # child agents' calls the permission gate allowed
        self.iteration = 0  # AgentIterationStart/End: model requests of this session
        self._iteration_open = False
        self._calls: dict[str, ToolCall] = {}
        self._originals: dict[str, tuple[str, str | None]] = {}  # a writing call's file before it ran
        self._pre_context: dict[str, list[str]] = {}  # PreToolUse additionalContext, sent with the result
        self._prefired: tuple[str, Combined] | None = None  # a typed command's UserPromptSubmit
        self._batch: list[str] = []
        self._batch_done: list[dict[str, Any]] = []
        if services is not None:
            services.put(LifecyclePoint, HookLifecycle(dispatcher))
            services.put(PromptGate, PromptGate(self.before_expansion))

    def extension(self) -> Extension:
        return Extension(
            "hooks",
            before_request=self.before_request,
            after_response=self.after_response,
            before_tool=self.before_tool,
            after_tool=self.after_tool,
            on_prompt=self.on_prompt,
            on_stop=self.on_stop,
            on_error=self.on_error,
            subscribers=[self.on_event],
            start=self.start,
            # SessionStart handlers run under their own timeouts (which name the handler that ran over),
            # not under the session's 30 s for an extension's start
            start_timeout_s=self._start_limit(),
            close=self.close,
            fail_closed=True,  # only its before_request raises, and only to end a run a hook stopped
        )

    # --- session ------------------------------------------------------------------------------

    def _start_limit(self) -> float | None:
        timeouts = [h.handler.timeout for h in self.d.config.hooks if h.event == "SessionStart"]
        return max(timeouts) + 5.0 if timeouts else None

    async def start(self) -> None:
        if self.d.ctx.env_file is not None:
            self.d.ctx.env_file.parent.mkdir(parents=True, exist_ok=True)
        result = await self.d.fire("SessionStart", {"source": self.source}, match=self.source)
        self.session_context += result.context
        self._note_stop(result)
        await self.load_env_file()

    async def close(self) -> None:
        try:
            await self.d.fire("SessionEnd", {"reason": self.end_reason})
        finally:
            await self.d.drain()

    async def load_env_file(self) -> None:
        """What SessionStart (or CwdChanged) hooks exported into ``CLAUDE_ENV_FILE`` reaches Bash."""
        path = self.d.ctx.env_file
        if self.tool_env is None or path is None or not path.is_file() or path.stat().st_size == 0:
            return
        base = {**os.environ, **self.tool_env}
        script = 'set -a; . "$1" >/dev/null 2>&1; env -0'
        ran = await procs.run(["bash", "-c", script, "keel-env", str(path)], cwd=None, env=base, timeout=10)
        if ran.exit_code is None:
            why = "took over 10s" if ran.timed_out else ran.error
            self.d.notice(f"{path}: sourcing the hook environment file {why}; ignored")
            return
        out = ran.stdout
        for item in out.decode("utf-8", "replace").split("\0"):
            name, sep, value = item.partition("=")
            if sep and name not in _IGNORED_ENV and base.get(name) != value:
                self.tool_env[name] = value

    def _note_stop(self, result: Combined) -> None:
        stop = result.stop
        if stop is not None and self.stopped is None:
            self.stopped = stop.stop_reason or f"{stop.spec.event} hook `{stop.spec.handler.label}` stopped the session"

    async def before_request(self, request: ModelRequest) -> ModelRequest:
        if self.stopped is not None:
            raise StoppedByHook(self.stopped)
        await self._check_watched()
        await self._iteration_start()
        if self.stopped is not None:
            raise StoppedByHook(self.stopped)
        return request

    # --- iterations: one model request and the tool calls it asked for -------------------------

    async def _iteration_start(self) -> None:
        if self._iteration_open:  # the last one ended without its tools finishing (an error, a retry)
            await self._iteration_end(interrupted=True)
        self.iteration += 1
        self._iteration_open = True
        if self.d.has("AgentIterationStart"):
            self._note_stop(await self.d.fire("AgentIterationStart", {"iteration": self.iteration}))

    async def _iteration_end(self, tool_calls: int = 0, *, interrupted: bool = False) -> None:
        if not self._iteration_open:
            return
        self._iteration_open = False
        if self.d.has("AgentIterationEnd"):
            fields = {"iteration": self.iteration, "tool_calls": tool_calls, "interrupted": interrupted}
            self._note_stop(await self.d.fire("AgentIterationEnd", fields))

    async def after_response(self, response: ModelResponse) -> None:
        if not response.message.tool_uses():  # an answer without tool calls ends the iteration now
            await self._iteration_end()

    async def _check_watched(self) -> None:
        """Turn boundary: a changed watched path fires FileChanged (ConfigChange: configchange.py)."""
        if self.d.has("FileChanged"):
            for path, change in self.d.watcher.changes():
                result = await self.d.fire("FileChanged", {"file_path": str(path), "event": change}, match=path.name)
                self._note_stop(result)

    # --- prompts and stops --------------------------------------------------------------------

    async def before_expansion(self, typed: str) -> str | None:
        """UserPromptSubmit for a typed slash command, fired before the command expands (and runs
        its ``!`` lines), as Claude Code fires it: the block's reason, or None. The prompt the
        command then submits does not fire the event again."""
        if self.stopped is not None:
            return self.stopped
        self.d.prompt_id = str(uuid.uuid4())
        result = await self.d.fire("UserPromptSubmit", {"prompt": typed})
        blocked = self._prompt_block(result)
        self._prefired = None if blocked is not None else (typed, result)
        return blocked

    @staticmethod
    def _prompt_block(result: Combined) -> str | None:
        stop = result.stop
        if stop is not None:  # the prompt is not sent; the session goes on to the next one
            return stop.stop_reason or "a UserPromptSubmit hook stopped this prompt"
        if result.blocked:
            return result.block_reason or "a UserPromptSubmit hook blocked the prompt"
        return None

    async def on_prompt(self, info: PromptInfo) -> PromptVerdict | None:
        context: list[str] = []
        if info.first:
            context, self.session_context = self.session_context, []
        if self.stopped is not None:
            return PromptVerdict(block=self.stopped)
        typed = typed_prompt(info.text)
        pre, self._prefired = self._prefired, None
        if pre is not None and pre[0].split(" ", 1)[0] == typed.split(" ", 1)[0]:  # fired before it expanded
            result = pre[1]
        else:
            self.d.prompt_id = str(uuid.uuid4())
            result = await self.d.fire("UserPromptSubmit", {"prompt": typed})
        blocked = self._prompt_block(result)
        if blocked is not None:
            return PromptVerdict(block=blocked)
        context += result.context
        context += self._take_rewake()
        late, self.d.late_context = self.d.late_context, []  # async-protocol handlers that have ended since
        context += late
        return PromptVerdict(context=tuple(context)) if context else None

    def _take_rewake(self) -> list[str]:
        woke, self.d.rewake = self.d.rewake, []
        return woke

    async def on_stop(self, info: StopInfo) -> str | None:
        if not info.continued:
            self.stop_count = 0
        await self.d.wait_rewake()
        woke = self._take_rewake()
        if woke:  # an asyncRewake handler blocked: the model hears it before the loop goes idle
            return "\n".join(woke)
        fields = {
            "stop_hook_active": info.continued,
            "last_assistant_message": info.last_text,
            "background_tasks": [],
            "session_crons": [],
        }
        result = await self.d.fire("Stop", fields)
        self._note_stop(result)
        if self.stopped is not None or not result.blocked:
            return None
        if self.stop_count >= MAX_STOP_CONTINUES:
            self.d.notice(f"Stop hooks kept the session going {MAX_STOP_CONTINUES} times in a row; stopping here")
            return None
        self.stop_count += 1
        return f"Stop hook feedback:\n{result.block_reason or 'A Stop hook asked you to continue.'}"

    async def on_error(self, err: ProviderError) -> None:
        kind = _STOP_FAILURE.get(err.kind, "unknown")
        await self.d.fire("StopFailure", {"error": kind, "error_details": str(err)}, match=kind)

    # --- tools --------------------------------------------------------------------------------

    def _input(self, call: ToolCall) -> dict[str, Any]:
        return hook_input(call.tool, call.input, call.cwd or self.d.cwd)

    async def before_tool(self, call: ToolCall) -> Verdict | None:
        self._calls[call.id] = call  # the loop updates its input; PermissionDenied reads it
        fields = {"tool_name": call.name, "tool_input": self._input(call), "tool_use_id": call.id}
        result = await self.d.fire("PreToolUse", fields, match=call.name, call=call, cwd=call.cwd)
        update = result.updated_input
        self._snapshot(call, update if update is not None else call.input)
        if not result.outcomes:
            return None
        if result.context:  # Claude Code sends it after the call's result, a block of its own
            self._pre_context[call.id] = [_reminder("PreToolUse", call.name, c) for c in result.context]
        failed = result.failed_closed()
        if failed:
            return Verdict("deny", f"{failed[0].error}; denied because the hook is marked failClosed", "hooks")
        self._note_stop(result)
        if self.stopped is not None:
            return Verdict("deny", f"A hook stopped the session: {self.stopped}", "hooks")
        permission = result.permission
        if permission == "deny":
            reason = result.reason_for("deny") or f"{call.name} was blocked by a PreToolUse hook"
            return Verdict("deny", f"PreToolUse hook blocked this call: {reason}", "hooks")
        if permission == "ask":
            return Verdict("ask", result.reason_for("ask"), "hooks", updated_input=update)
        if permission == "allow":
            call.approved_by = "PreToolUse hook"
            return Verdict("allow", result.reason_for("allow"), "hooks", updated_input=update)
        return Verdict("allow", "", "hooks", updated_input=update) if update is not None else None

    def _snapshot(self, call: ToolCall, tool_input: dict[str, Any]) -> None:
        """Keep the text of the file a writing tool is about to change, when a PostToolUse hook
        will want it (Claude Code's ``originalFile``)."""
        if not self.d.has("PostToolUse") or not effects_for(call.tool, call.name).writes:
            return
        path = hook_input(call.tool, tool_input, call.cwd or self.d.cwd).get("file_path")
        if isinstance(path, str):
            self._originals[call.id] = (path, read_original(path))

    async def permission_request(self, call: ToolCall, decision: Decision) -> Literal["allow", "deny"] | None:
        fields = {
            "tool_name": call.name,
            "tool_input": self._input(call),
            "tool_use_id": call.id,
            "permission_suggestions": permission_suggestions(call, decision.suggestions),
        }
        result = await self.d.fire("PermissionRequest", fields, match=call.name, call=call, cwd=call.cwd)
        if result.failed_closed():
            return "deny"
        permission = result.permission
        if permission == "allow" or permission == "deny":
            return permission
        return None

    async def after_tool(self, call: ToolCall, output: ToolOutput) -> ToolOutput:
        started = self._started.pop(call.id, None)
        self._calls.pop(call.id, None)
        snapshot = self._originals.pop(call.id, None)
        pre_context = self._pre_context.pop(call.id, [])
        child = self._allowed.pop(call.id, None)  # a child agent's call: its ToolStarted is on its own bus
        if started is None and child is not None and CHILD.get() is not None:
            started = child
        event = "PostToolUseFailure" if output.is_error else "PostToolUse"
        if started is not None and self.d.has(event):  # it ran (a denied call has no ToolStarted), and a hook waits
            tool_input = self._input(call)
            fields: dict[str, Any] = {"tool_name": call.name, "tool_input": tool_input, "tool_use_id": call.id}
            duration = int((time.monotonic() - started) * 1000)
            if output.is_error:
                fields.update(error=output.text(), is_interrupt=False, duration_ms=duration)
            else:
                original = snapshot[1] if snapshot is not None and snapshot[0] == tool_input.get("file_path") else None
                response = tool_response(call.tool, tool_input, output, original)
                fields.update(tool_response=response, duration_ms=duration)
            fields["tool_metadata"] = tool_metadata(output)  # keel's addition: the tool's own facts
            result = await self.d.fire(event, fields, match=call.name, call=call, cwd=call.cwd)
            self._note_stop(result)
            output = _with_notes(output, event, [result.block_reason] if result.blocked else [])
            pre_context += [_reminder(event, call.name, c) for c in result.context]
        output.notes += pre_context  # after the result, each its own block: PreToolUse's, then PostToolUse's
        if self.d.late_context and CHILD.get() is None:  # async-protocol handlers that ended since
            late, self.d.late_context = self.d.late_context, []
            output = _with_notes(output, "", late)
        if CHILD.get() is not None:
            return output  # the child's cwd and batches are its own
        if effects_for(call.tool, call.name).shell:  # a shell can move the session's working directory
            await self._check_cwd()
        return await self._batch_step(call, output)

    async def _check_cwd(self) -> None:
        """A ``cd`` that persists moves the session: CwdChanged hooks fire before the next call."""
        move, self._cwd_move = self._cwd_move, None
        if move is None and self.services is not None:
            workdir = self.services.find(Workdir)
            if workdir is not None and workdir.path is not None:
                move = (str(self.d.cwd), str(workdir.path))
        if move is not None and Path(move[1]) != self.d.cwd:
            await self._cwd_changed(*move)

    async def _batch_step(self, call: ToolCall, output: ToolOutput) -> ToolOutput:
        if call.id not in self._batch:
            return output
        self._batch_done.append(
            {
                "tool_name": call.name,
                "tool_input": self._input(call),
                "tool_use_id": call.id,
                "tool_response": output.text(),
            }
        )
        if len(self._batch_done) < len(self._batch):
            return output
        calls, self._batch, self._batch_done = self._batch_done, [], []
        result = await self.d.fire("PostToolBatch", {"tool_calls": calls})
        self._note_stop(result)
        await self._iteration_end(len(calls))
        notes = ([result.block_reason] if result.blocked else []) + result.context
        return _with_notes(output, "PostToolBatch", notes)

    # --- the bus ------------------------------------------------------------------------------

    def on_event(self, event: Event) -> None:
        if isinstance(event, ToolStarted):
            self._started[event.tool_use_id] = time.monotonic()
        elif isinstance(event, AssistantMessage):
            self._batch, self._batch_done = [u.id for u in event.message.tool_uses()], []
        elif isinstance(event, CwdChanged):
            self._cwd_move = (event.old_cwd, event.new_cwd)  # fired, awaited, right after the call
        elif isinstance(event, Notice):
            if not self.d.noticing and self.d.has("Notification"):
                kind = f"keel_{event.level}"
                note = {"message": event.message, "title": "keel", "notification_type": kind}
                self.d.spawn(self.d.fire("Notification", note, match=kind))
        elif isinstance(event, PermissionDecided):
            if event.decision == "allow" and CHILD.get() is not None:
                self._allowed[event.tool_use_id] = time.monotonic()  # the gate let a child's call run
            if event.decision == "deny" and self.d.has("PermissionDenied"):
                call = self._calls.get(event.tool_use_id)
                fields = {
                    "tool_name": event.tool_name,
                    "tool_input": self._input(call) if call is not None else {},
                    "tool_use_id": event.tool_use_id,
                    "reason": event.reason,
                }
                self.d.spawn(self.d.fire("PermissionDenied", fields, match=event.tool_name))
        elif isinstance(event, SessionEnded):
            self.end_reason = event.reason if event.reason in _END_REASONS else "other"

    async def _cwd_changed(self, old: str, new: str) -> None:
        self.d.cwd = Path(new)
        if not self.d.has("CwdChanged"):
            return
        await self.d.fire("CwdChanged", {"old_cwd": old, "new_cwd": new}, cwd=Path(new))
        await self.load_env_file()
