"""Interactive mode: a line-based REPL with streaming output, until the TUI lands.

Enter sends; Ctrl-C interrupts the running turn (twice within 2 s exits); Ctrl-D exits;
history is kept in ``$KEEL_HOME/history``. ``/exit``; every other ``/name`` goes through the
slash-command registry (:mod:`agentkeel.commands`): ``/help`` lists them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from prompt_toolkit import PromptSession

from agentkeel import (
    Event,
    KeelError,
    Notice,
    Runtime,
    StreamRetry,
    TextDelta,
    ToolCall,
    ToolFinished,
    ToolStarted,
    TrustStore,
    keel_home,
)
from agentkeel import PermissionAnswer as Answer
from agentkeel import PermissionDecision as Decision
from agentkeel.commands.run import route_line
from agentkeel.ui.cli._common import EXIT_OK, EXIT_USAGE
from agentkeel.ui.cli.headless import options_from_args
from agentkeel.ui.cli.mcp import approve_new_servers


async def _trust_prompt(session: PromptSession[str], cwd: Path) -> bool:
    """Ask once per folder (and again after its project settings change) whether to trust it."""
    store = TrustStore(keel_home())
    state = store.state(cwd)
    if state.trusted:
        return True
    what = "have changed since you trusted them" if state.status == "changed" else "can run commands (hooks, MCP)"
    print(f"This folder's project settings ({', '.join(state.files)}) {what} and widen permissions.")
    answer = (await session.prompt_async(f"Trust {state.folder}? [y/N]: ")).strip().lower()
    if answer in ("y", "yes"):
        store.trust(cwd)
        return True
    print("Running without them; `keel trust` trusts this folder later.")
    return False


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


def slash_completer(rt: Runtime) -> Any:
    """Completion of ``/name`` from the session's command registry, with argument hints."""
    from prompt_toolkit.completion import Completer, Completion

    from agentkeel.commands.registry import CommandRegistry

    registry = rt.agent.services.find(CommandRegistry)

    class SlashCompleter(Completer):
        def get_completions(self, document: Any, complete_event: Any) -> Any:
            text = document.text_before_cursor
            if registry is None or not text.startswith("/") or " " in text:
                return
            for item in registry.completions(text):
                meta = f"{item['argument_hint']} {item['description']}".strip()
                yield Completion(item["name"], start_position=-len(text), display_meta=meta)

    return SlashCompleter()


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
    opts.channel = "interactive"
    if not await _trust_prompt(session, opts.cwd):
        opts.trust_project = False
    elif not await approve_new_servers(opts.cwd, session.prompt_async, print):
        print("keel: this session starts no MCP server of .mcp.json (answers not saved)")
        opts.skip_project_mcp = True

    async def ask(call: ToolCall, decision: Decision) -> Answer:
        sys.stdout.write(f"\n{decision.reason}\n  {_summary(call.name, call.input)}\n")
        rules = ", ".join(decision.suggestions)
        options = "[y] yes once"
        if rules:
            options += f" / [s] yes, and allow {rules} this session / [p] always in this project"
        options += " / [n] no: "
        while True:
            answer = (await session.prompt_async(options)).strip().lower()
            if answer in ("y", "yes"):
                return "allow"
            if rules and answer in ("s", "a", "always"):
                return "allow_session"
            if rules and answer == "p":
                return "allow_project"
            if answer in ("n", "no", ""):
                return "deny"

    async def ask_repeat(call: ToolCall, count: int) -> bool:
        sys.stdout.write(
            f"\n{call.name} was called with the same input {count} times: {_summary(call.name, call.input)}\n"
        )
        answer = (await session.prompt_async("Let it run again? [y/N]: ")).strip().lower()
        return answer in ("y", "yes")

    opts.ask_repeat = ask_repeat
    opts.ask = ask
    try:
        rt = Runtime.create(opts)
    except KeelError as e:
        print(f"keel: {e}", file=sys.stderr)
        return EXIT_USAGE
    rt.bus.subscribe(Printer())
    session.completer = slash_completer(rt)
    session.complete_while_typing = True
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
            if prompt.startswith("/"):
                routed = await route_line(rt, prompt, interactive=True)
                if routed.kind == "output":
                    print(routed.text)
                    continue
                if routed.kind == "error":
                    print(f"[{routed.command or 'command'}] {routed.text}")
                    continue
                prompt = routed.text

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
