"""``keel -p``: run one prompt to a stop and print the result as text, JSON or stream-JSON."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkeel.cli.main import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_RUN_ERROR,
    EXIT_TERMINATED,
    EXIT_USAGE,
    split_tools,
)
from agentkeel.core.events import (
    AssistantMessage,
    Event,
    Notice,
    SessionStarted,
    ToolResults,
)
from agentkeel.core.loop import RunResult
from agentkeel.runtime import KeelError, Runtime, RuntimeOptions
from agentkeel.settings import PermissionMode
from agentkeel.trust import untrusted_notice


def options_from_args(args: argparse.Namespace) -> RuntimeOptions:
    mode: PermissionMode | None = "bypassPermissions" if args.dangerously_skip_permissions else args.permission_mode
    return RuntimeOptions(
        cwd=Path(args.cwd) if args.cwd else Path.cwd(),
        model=args.model,
        permission_mode=mode,
        allowed_tools=split_tools(args.allowed_tools),
        disallowed_tools=split_tools(args.disallowed_tools),
        max_turns=args.max_turns,
        max_budget_usd=args.max_budget_usd,
        append_system_prompt=args.append_system_prompt,
        add_dirs=[Path(d) for d in args.add_dirs],
        continue_session=args.continue_session,
        resume=args.resume,
        settings_files=[Path(f) for f in args.settings],
        channel="headless",
    )


def result_object(rt: Runtime, result: RunResult) -> dict[str, Any]:
    """Claude Code's result message shape."""
    subtype = "error_during_execution" if result.subtype == "interrupted" else result.subtype
    return {
        "type": "result",
        "subtype": subtype,
        "is_error": result.is_error,
        "duration_ms": result.duration_ms,
        "num_turns": result.num_turns,
        "result": result.result,
        "session_id": rt.session_id,
        "total_cost_usd": result.total_cost_usd,
        "usage": result.usage.to_wire(),
    }


class StreamJson:
    """Writes the session as Claude Code's stream-json lines to stdout."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt

    def __call__(self, event: Event) -> None:
        line: dict[str, Any] | None = None
        sid = self.rt.session_id
        if isinstance(event, SessionStarted):
            line = {
                "type": "system",
                "subtype": "init",
                "session_id": sid,
                "cwd": event.cwd,
                "model": event.model,
                "tools": [t.name for t in self.rt.agent.tools.list()],
                "keel_version": event.version,
            }
        elif isinstance(event, AssistantMessage):
            msg = event.message.model_dump(mode="json")
            msg.update(
                {
                    "type": "message",
                    "model": event.model,
                    "stop_reason": event.stop_reason,
                    "usage": event.usage.to_wire(),
                }
            )
            line = {"type": "assistant", "message": msg, "session_id": sid, "uuid": event.uuid}
        elif isinstance(event, ToolResults):
            line = {
                "type": "user",
                "message": event.message.model_dump(mode="json"),
                "session_id": sid,
                "uuid": event.uuid,
            }
        elif isinstance(event, Notice):
            line = {
                "type": "system",
                "subtype": "notice",
                "level": event.level,
                "message": event.message,
                "session_id": sid,
            }
        if line is not None:
            sys.stdout.write(json.dumps(line, ensure_ascii=False) + "\n")
            sys.stdout.flush()


def run_headless(args: argparse.Namespace, prompt: str) -> int:
    started = time.monotonic()
    try:
        rt = Runtime.create(options_from_args(args))
    except KeelError as e:
        print(f"keel: {e}", file=sys.stderr)
        return EXIT_USAGE
    if args.output_format == "stream-json":
        rt.bus.subscribe(StreamJson(rt))
    else:
        rt.bus.subscribe(_notices_to_stderr(verbose=bool(getattr(args, "verbose", False))))
    if not rt.trust.trusted and args.output_format != "text":  # text mode prints every notice to stderr
        print(f"keel: {untrusted_notice(rt.trust)}", file=sys.stderr)
    try:
        return asyncio.run(_run(rt, prompt, args.output_format, started))
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


def _notices_to_stderr(verbose: bool) -> Callable[[Event], None]:
    """Warnings and errors always; info notices (a memory summary's token cost, ...) with --verbose."""

    def show(event: Event) -> None:
        if isinstance(event, Notice) and (verbose or event.level != "info"):
            print(f"keel: {event.message}", file=sys.stderr)

    return show


async def _run(rt: Runtime, prompt: str, output_format: str, started: float) -> int:
    loop = asyncio.get_running_loop()
    signals: list[int] = []

    def on_signal(sig: int) -> None:
        signals.append(sig)
        if len(signals) > 1:
            os._exit(EXIT_TERMINATED if sig == signal.SIGTERM else EXIT_INTERRUPTED)  # entries already flushed
        rt.agent.interrupt()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal, sig)
    try:
        result = await rt.run(prompt)
    finally:
        await rt.aclose("interrupted" if signals else "exit")
    result.duration_ms = int((time.monotonic() - started) * 1000)
    obj = result_object(rt, result)
    if output_format == "text":
        if result.is_error:
            print(f"keel: {result.subtype}: {result.error or result.result}", file=sys.stderr)
        elif result.result:
            print(result.result)
    else:
        print(json.dumps(obj, ensure_ascii=False))
    if signals:
        return EXIT_TERMINATED if signals[0] == signal.SIGTERM else EXIT_INTERRUPTED
    return EXIT_RUN_ERROR if result.is_error else EXIT_OK
