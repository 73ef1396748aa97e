"""``keel -p --coordinate "GOAL"``: the coordinator of ``/coordinate`` as a headless run.

Plan -> a graph of subtasks -> parallel subagents (writers in their own worktrees) -> merged
(:mod:`agentkeel.agents.coordinator`). Each step is a ``CoordinatorProgress`` event on the
session's bus and in its transcript; ``--output-format stream-json`` writes it as a line
``{"type": "system", "subtype": "coordinator", "task_id", "status", "detail", ...}`` between
the init line and the result, and text output shows it on stderr. The result is the merged
summary; a task that failed (or was skipped after one) makes the run an error (exit 1), with
the summary still printed. Without ``-p`` the interactive session starts with ``/coordinate GOAL``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import time
from typing import TYPE_CHECKING, Any

from agentkeel.ui.cli._common import EXIT_INTERRUPTED, EXIT_OK, EXIT_RUN_ERROR, EXIT_TERMINATED, EXIT_USAGE

if TYPE_CHECKING:
    from agentkeel.app.runtime import Runtime


def coordinate_mode(args: argparse.Namespace, prompt: str) -> int:
    goal = (args.coordinate or "").strip()
    if prompt:
        print('keel: --coordinate takes the goal itself: keel -p --coordinate "what to build"', file=sys.stderr)
        return EXIT_USAGE
    if not goal:
        print('keel: --coordinate needs a goal: keel -p --coordinate "what to build"', file=sys.stderr)
        return EXIT_USAGE
    if args.input_format == "stream-json":
        print("keel: --coordinate does not take --input-format stream-json (the goal is the input)", file=sys.stderr)
        return EXIT_USAGE
    if not args.print_mode:
        from agentkeel.ui.cli.interactive import run_interactive

        return run_interactive(args, f"/coordinate {goal}")
    return run_coordinate(args, goal)


def progress_line(event: Any, session_id: str) -> dict[str, Any]:
    return {
        "type": "system",
        "subtype": "coordinator",
        "task_id": event.task_id,
        "status": event.status,
        "detail": event.detail,
        "session_id": session_id,
        "uuid": event.uuid,
        "timestamp": event.timestamp,
    }


def run_coordinate(args: argparse.Namespace, goal: str) -> int:
    from agentkeel import Event, KeelError, Notice, Runtime
    from agentkeel.agents.coordinator import CoordinatorProgress
    from agentkeel.protocol import stream_json
    from agentkeel.ui.cli.headless import Output, StreamJson, options_from_args

    started = time.monotonic()
    try:
        rt = Runtime.create(options_from_args(args))
    except KeelError as e:
        print(f"keel: {e}", file=sys.stderr)
        return EXIT_USAGE
    out = Output(rt)
    streaming = args.output_format == "stream-json"

    def show(event: Event) -> None:
        if isinstance(event, CoordinatorProgress):
            if streaming:
                out.write(stream_json.dumps(progress_line(event, rt.session_id)))
            else:
                detail = f": {event.detail.splitlines()[0][:120]}" if event.detail.strip() else ""
                print(f"keel: coordinator: {event.task_id or 'plan'} {event.status}{detail}", file=sys.stderr)
        elif not streaming and isinstance(event, Notice) and event.level != "info":
            print(f"keel: {event.message}", file=sys.stderr)

    if streaming:
        rt.bus.subscribe(StreamJson(rt, out, partial=args.include_partial_messages, hooks=args.include_hook_events))
    rt.bus.subscribe(show)
    try:
        return asyncio.run(_run(rt, goal, args.output_format, started, out))
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


async def _coordinate(rt: Runtime, goal: str) -> Any:
    """(the run's result): the summary, or what went wrong, as a RunResult."""
    from agentkeel.agents.coordinator import Coordinator, PlanError
    from agentkeel.agents.spawner import SubagentSpawner
    from agentkeel.core.events import SinkFailed
    from agentkeel.core.run import RunResult
    from agentkeel.core.types import Usage

    def failed(message: str) -> RunResult:
        return RunResult("error_during_execution", message, 0, Usage(), 0.0, 0, message)

    try:
        await rt.start()
    except SinkFailed as e:
        return failed(str(e))
    spawner = rt.agent.services.find(SubagentSpawner)
    if spawner is None:
        return failed("--coordinate: subagents are off in this session")
    coordinator = Coordinator(spawner)
    try:
        text = await coordinator.run(goal)
    except PlanError as e:
        return failed(f"--coordinate: {e}")
    results = [t.result for t in coordinator.tasks if t.result is not None]
    turns = sum(r.num_turns for r in results)
    cost = sum(r.cost_usd for r in results)
    bad = [t.id for t in coordinator.tasks if t.status != "finished"]
    if bad:
        why = f"{len(bad)} of {len(coordinator.tasks)} tasks did not finish: {', '.join(bad)}"
        return RunResult("error_during_execution", text, turns, Usage(), cost, 0, why)
    return RunResult("success", text, turns, Usage(), cost, 0)


async def _run(rt: Runtime, goal: str, output_format: str, started: float, out: Any) -> int:
    from agentkeel.core.run import RunResult
    from agentkeel.core.types import Usage
    from agentkeel.protocol import stream_json
    from agentkeel.ui.cli.headless import result_object

    loop = asyncio.get_running_loop()
    signals: list[int] = []
    work = asyncio.ensure_future(_coordinate(rt, goal))

    def on_signal(sig: int) -> None:
        signals.append(sig)
        if len(signals) > 1:
            os._exit(EXIT_TERMINATED if sig == signal.SIGTERM else EXIT_INTERRUPTED)
        work.cancel()  # each running child is interrupted and writes its ending

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal, sig)
    try:
        result = await work
    except asyncio.CancelledError:
        result = RunResult("interrupted", "", 0, Usage(), 0.0, 0, "interrupted")
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        await rt.aclose("interrupted" if signals else "exit")
    result.duration_ms = int((time.monotonic() - started) * 1000)
    if out.closed:
        return EXIT_OK
    if output_format == "text":
        if result.result and result.result != result.error:
            out.write(result.result + "\n")
        if result.is_error:
            print(f"keel: {result.subtype}: {result.error}", file=sys.stderr)
    else:
        out.write(stream_json.dumps(result_object(rt, result)))
    if signals:
        return EXIT_TERMINATED if signals[0] == signal.SIGTERM else EXIT_INTERRUPTED
    return EXIT_RUN_ERROR if result.is_error else EXIT_OK
