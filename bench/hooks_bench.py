"""Hook dispatcher overhead per tool call (PreToolUse + PostToolUse), and the cost of a hung hook.

The real ``hooks`` extension and dispatcher, with the session's event bus (redaction) and its
transcript writer on a temporary file, around one Bash call: 0 handlers (hooks configured
for other events only), 10 and 50 in-process python handlers (distinct coroutine functions),
and one command hook (a process spawned per event); and keel's memory capture beside them, the
memory extension's bus subscribers on the call's events, writing to a real outbox. Then a command
hook that sleeps for ever with ``timeout: 1``: what it costs the loop, and that its process group
is gone. Last, the
reliability built-ins (SPEC 5): their ``before_request`` transforms on a 200-message request
(pruning idle below its threshold, and forced on), and their per-tool-call checks.

    python bench/hooks_bench.py [--calls 200]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, cast

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from agentkeel.core.events import EventBus, ToolFinished, ToolResults, ToolStarted  # noqa: E402
from agentkeel.core.extensions import Extension, ToolCall  # noqa: E402
from agentkeel.core.provider import ModelRequest  # noqa: E402
from agentkeel.core.tools import ToolOutput  # noqa: E402
from agentkeel.core.types import Message, TextBlock, ToolResultBlock, ToolUseBlock  # noqa: E402
from agentkeel.hooks import HookConfig, HookContext, HookDispatcher, HooksExtension, parse_hooks  # noqa: E402
from agentkeel.policy.redaction import redact_event  # noqa: E402
from agentkeel.session.store import SessionWriter  # noqa: E402
from agentkeel.tools import builtin_tools  # noqa: E402


def _python_handlers(n: int) -> list[dict[str, Any]]:
    def make(i: int) -> Any:
        async def handler(payload: dict[str, Any]) -> None:
            return None

        handler.__qualname__ = f"handler_{i}"
        return handler

    return [{"type": "python", "callable": make(i)} for i in range(n)]


def _config(kind: str, n: int) -> HookConfig:
    if kind == "none":  # hooks exist, but for another event: the per-call cost of looking
        hooks: dict[str, Any] = {"SessionEnd": [{"hooks": [{"type": "command", "command": "true"}]}]}
    elif kind == "python":
        groups = [{"matcher": "Bash", "hooks": _python_handlers(n)}]
        hooks = {"PreToolUse": groups, "PostToolUse": groups}
    else:
        command = [{"type": "command", "command": "cat >/dev/null"}]
        hooks = {"PreToolUse": [{"matcher": "Bash", "hooks": command}], "PostToolUse": [{"hooks": command}]}
    return parse_hooks(hooks, "bench", "sdk")


async def per_call(kind: str, n: int, calls: int, tmp: Path) -> list[float]:
    bus = EventBus()
    bus.transforms.append(redact_event)
    writer = SessionWriter(tmp / f"{kind}-{n}.jsonl", f"{kind}-{n}")
    bus.subscribe(writer, critical=True)
    ctx = HookContext("bench", tmp / "bench.jsonl", tmp, bus.emit, env=dict(os.environ))
    plugin = None
    if kind == "memory":  # keel's memory: the memory extension's capture on the bus, into a real outbox and store
        from agentkeel.config.settings import MemorySettings
        from agentkeel.memory.plugin import MemoryPlugin

        plugin = MemoryPlugin(
            MemorySettings(embedder="none"), cwd=tmp, keel_home=tmp / "kh", session_id="bench", window_tokens=200_000
        )
        for subscriber in plugin.extension(bus.emit, cast(Any, None), "m", tools=[]).subscribers:
            bus.subscribe(subscriber)
        config = _config("none", 0)
    else:
        config = _config(kind, n)
    hooks = HooksExtension(HookDispatcher(config, ctx))
    bash = next(t for t in builtin_tools() if t.name == "Bash")
    output = ToolOutput("hi", metadata={"exit_code": 0, "duration_ms": 3})
    times: list[float] = []
    for i in range(calls):
        call = ToolCall(f"toolu_{i}", "Bash", {"command": "echo hi"}, bash, tmp, "default")
        started = time.perf_counter()
        await hooks.before_tool(call)
        started_event = ToolStarted(tool_use_id=call.id, name=call.name, input=call.input)  # the call ran
        hooks.on_event(started_event)
        await hooks.after_tool(call, output)
        if plugin is not None:  # the events the loop emits for the call, which memory's subscribers read
            bus.emit(started_event)
            bus.emit(ToolFinished(tool_use_id=call.id, name=call.name, is_error=False, duration_ms=3, metadata={}))
            result = ToolResultBlock(tool_use_id=call.id, content="hi")
            bus.emit(ToolResults(message=Message(role="user", content=[result])))
        times.append((time.perf_counter() - started) * 1000)
    writer.close()
    if plugin is not None:
        plugin.close()
    return times


async def hung(tmp: Path) -> tuple[float, bool]:
    import psutil

    mark = "4243.75"
    config = parse_hooks(
        {"Stop": [{"hooks": [{"command": f"sleep {mark} & sleep {mark}; wait", "timeout": 1}]}]}, "bench", "sdk"
    )
    ctx = HookContext("bench", tmp / "bench.jsonl", tmp, lambda _e: None, env=dict(os.environ))
    dispatcher = HookDispatcher(config, ctx)
    started = time.perf_counter()
    await dispatcher.fire("Stop", {"stop_hook_active": False})
    elapsed = time.perf_counter() - started
    left = [p for p in psutil.process_iter(["cmdline"]) if mark in " ".join(p.info["cmdline"] or [])]
    return elapsed, not left


def _conversation(n: int) -> list[Message]:
    """A coding session's shape: prompts, reads (some repeated), writes, edits, failing commands."""
    out = [Message.user("fix the failing tests")]
    i = 0
    while len(out) < n:
        kind = i % 5
        path = f"/p/src/mod{i % 7}.py"
        if kind in (0, 1):
            name, inp, result, err = "Read", {"file_path": path}, "x = 1\n" * 200, False
        elif kind == 2:
            name, inp, result, err = "Write", {"file_path": path, "content": "y = 2\n" * 150}, "ok", False
        elif kind == 3:
            name, inp, result, err = "Bash", {"command": f"pytest -q tests/t{i % 3}.py"}, "E" * 1500, True
        else:
            name, inp, result, err = "Edit", {"file_path": path, "old_string": "x", "new_string": "z"}, "ok", False
        use = ToolUseBlock(id=f"toolu_{i}", name=name, input=inp)
        out.append(Message(role="assistant", content=[TextBlock(text=f"step {i}"), use]))
        out.append(Message(role="user", content=[ToolResultBlock(tool_use_id=use.id, content=result, is_error=err)]))
        i += 1
    return out  # n messages or one more: it ends with the last tool results, as a request does


def _reliability(force_pruning: bool) -> list[Extension]:
    from agentkeel.config.settings import ReliabilitySettings
    from agentkeel.reliability.registry import HANDLERS
    from agentkeel.reliability.shell import non_interactive_env
    from agentkeel.reliability.state import ReliabilityState

    bus = EventBus()
    config = ReliabilitySettings(pruneAtPercent=0 if force_pruning else 50)
    state = ReliabilityState(config=config, context_window=200_000, last_input_tokens=60_000, fallback_model="m2")
    built = [build(bus, state) for build in HANDLERS.values()]
    return [e for e in [*built, non_interactive_env(bus, state, {})] if e is not None]


async def reliability_per_request(force_pruning: bool, rounds: int) -> list[float]:
    exts = [e for e in _reliability(force_pruning) if e.before_request is not None]
    request = ModelRequest(model="m", system="s", messages=_conversation(200), tools=[], max_tokens=1000)
    times: list[float] = []
    for _ in range(rounds):
        started = time.perf_counter()
        r = request
        for ext in exts:
            assert ext.before_request is not None
            r = await ext.before_request(r)
        times.append((time.perf_counter() - started) * 1000)
    return times


async def reliability_per_call(rounds: int) -> list[float]:
    exts = _reliability(False)
    edit = next(t for t in builtin_tools() if t.name == "Edit")
    new = "def f(x):\n    # clamp first: callers pass raw input\n    return max(x, 0)\n" * 20
    call = ToolCall("t", "Edit", {"file_path": "/p/a.py", "old_string": "pass", "new_string": new}, edit)
    output = ToolOutput("The file /p/a.py has been updated." + " ok" * 2000)
    times: list[float] = []
    for _ in range(rounds):
        started = time.perf_counter()
        for ext in exts:
            if ext.before_tool is not None:
                await ext.before_tool(call)
        out = output
        for ext in exts:
            if ext.after_tool is not None:
                out = await ext.after_tool(call, out)
        times.append((time.perf_counter() - started) * 1000)
    return times


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        print(f"dispatcher overhead per tool call (PreToolUse + PostToolUse), {args.calls} calls")
        print(f"{'handlers':<28} {'p50 ms':>8} {'p95 ms':>8} {'mean ms':>8}")
        for label, kind, n, calls in (
            ("0 (other events only)", "none", 0, args.calls),
            ("10 python", "python", 10, args.calls),
            ("50 python", "python", 50, args.calls),
            ("1 command (spawn)", "command", 1, max(20, args.calls // 5)),
            ("memory capture (bus)", "memory", 1, args.calls),
        ):
            await per_call(kind, n, 5, tmp)  # warm up
            times = await per_call(kind, n, calls, tmp)
            print(f"{label:<28} {pct(times, 0.5):>8.3f} {pct(times, 0.95):>8.3f} {statistics.mean(times):>8.3f}")
        elapsed, clean = await hung(tmp)
        print(f"hook sleeping for ever, timeout 1s: cost {elapsed:.3f}s; process group gone: {clean}")
        print("reliability built-ins")
        for label, times in (
            ("per request, 200 messages", await reliability_per_request(False, args.calls)),
            ("  with pruning forced on", await reliability_per_request(True, args.calls)),
            ("per tool call (Edit)", await reliability_per_call(args.calls)),
        ):
            print(f"{label:<28} {pct(times, 0.5):>8.3f} {pct(times, 0.95):>8.3f} {statistics.mean(times):>8.3f}")


if __name__ == "__main__":
    asyncio.run(main())
