"""Interactive mode: a line-based REPL with streaming output, until the TUI lands.

Enter sends; Ctrl-C interrupts the running turn (twice within 2 s exits); Ctrl-D exits;
history is kept in ``$KEEL_HOME/history``. ``/help``, ``/cost``, ``/exit``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import time
from typing import Any

from agentkeel.cli.headless import options_from_args
from agentkeel.cli.main import EXIT_OK, EXIT_USAGE
from agentkeel.core.events import Event, Notice, StreamRetry, TextDelta, ToolFinished, ToolStarted
from agentkeel.core.extensions import ToolCall
from agentkeel.permissions import Decision
from agentkeel.runtime import KeelError, Runtime
from agentkeel.session.store import keel_home

HELP = """Commands: /help  /cost  /exit (or Ctrl-D).  Ctrl-C interrupts the current turn; twice exits."""


def _summary(name: str, tool_input: dict[str, Any]) -> str:
    for key in ("command", "file_path", "pattern", "path", "url"):
        if key in tool_input:
            value = str(tool_input[key]).replace("\n", " ")
            return f"{name}({value[:80]}{'…' if len(value) > 80 else ''})"
    return f"{name}({json.dumps(tool_input)[:60]})"


class Printer:
    def __init__(self) -> None:
        self.mid_line = False

    def __call__(self, event: Event) -> None:
        out = sys.stdout
        if isinstance(event, TextDelta):
            out.write(event.text)
            self.mid_line = not event.text.endswith("\n")
        elif isinstance(event, ToolStarted):
            self._newline()
            out.write(f"● {_summary(event.name, event.input)}\n")
        elif isinstance(event, ToolFinished):
            first = event.summary.strip().splitlines()[0][:100] if event.summary.strip() else ""
            mark = "✗" if event.is_error else "⎿"
            out.write(f"  {mark} {first}\n")
        elif isinstance(event, StreamRetry):
            self._newline()
            out.write(f"[model request failed ({event.error}); retrying in {event.delay_s:.1f}s]\n")
        elif isinstance(event, Notice) and event.level != "info":
            self._newline()
            out.write(f"[{event.level}] {event.message}\n")
        out.flush()

    def _newline(self) -> None:
        if self.mid_line:
            sys.stdout.write("\n")
            self.mid_line = False


def run_interactive(args: argparse.Namespace, first_prompt: str) -> int:
    if not sys.stdin.isatty():
        print('keel: interactive mode needs a terminal; use keel -p "prompt" for headless runs', file=sys.stderr)
        return EXIT_USAGE
    try:
        return asyncio.run(_repl(args, first_prompt))
    except KeyboardInterrupt:
        return EXIT_OK


async def _repl(args: argparse.Namespace, first_prompt: str) -> int:
    from prompt_toolkit import PromptSession
    from prompt_toolkit.history import FileHistory

    home = keel_home()
    home.mkdir(parents=True, exist_ok=True)
    session: PromptSession[str] = PromptSession(history=FileHistory(str(home / "history")))
    opts = options_from_args(args)
    always: set[str] = set()

    async def ask(call: ToolCall, decision: Decision) -> bool:
        if call.name in always:
            return True
        sys.stdout.write(f"\n{decision.reason}: {_summary(call.name, call.input)}\n")
        while True:
            answer = (await session.prompt_async("Allow? [y]es once / [a]lways this session / [n]o: ")).strip().lower()
            if answer in ("y", "yes"):
                return True
            if answer in ("a", "always"):
                always.add(call.name)
                return True
            if answer in ("n", "no", ""):
                return False

    opts.ask = ask
    try:
        rt = Runtime.create(opts)
    except KeelError as e:
        print(f"keel: {e}", file=sys.stderr)
        return EXIT_USAGE
    rt.bus.subscribe(Printer())
    print(f"keel · {rt.model.qualified} · session {rt.session_id[:8]} · /help for commands")
    loop = asyncio.get_running_loop()
    last_sigint = 0.0
    pending = first_prompt
    try:
        while True:
            if not pending:
                try:
                    pending = (await session.prompt_async("> ")).strip()
                except KeyboardInterrupt:
                    now = time.monotonic()
                    if now - last_sigint < 2:
                        break
                    last_sigint = now
                    print("(Ctrl-C again to exit)")
                    continue
                except EOFError:
                    break
            prompt, pending = pending, ""
            if not prompt:
                continue
            if prompt in ("/exit", "/quit"):
                break
            if prompt == "/help":
                print(HELP)
                continue
            if prompt == "/cost":
                u = rt.agent.usage
                print(f"${rt.agent.cost_usd:.4f} · {u.input_tokens} in / {u.output_tokens} out tokens")
                continue

            def on_sigint() -> None:
                nonlocal last_sigint
                now = time.monotonic()
                if now - last_sigint < 2:
                    raise KeyboardInterrupt
                last_sigint = now
                rt.agent.interrupt()

            loop.add_signal_handler(signal.SIGINT, on_sigint)
            try:
                result = await rt.run(prompt)
            finally:
                loop.remove_signal_handler(signal.SIGINT)
            print()
            if result.subtype == "interrupted":
                print("[interrupted]")
            elif result.is_error:
                print(f"[{result.subtype}] {result.error}")
    finally:
        await rt.aclose()
    return EXIT_OK
