"""TUI keystroke-to-render latency while an answer streams at 200 tokens/s.

The real app (``agentkeel.ui.tui.app.KeelApp``) on a real Runtime (the fake model server on
loopback), run headless by Textual at 120x40. A producer publishes ``TextDelta`` events on the
runtime's event bus at ``--rate`` tokens a second (a token is a word of about four characters;
the text is Markdown with a code block every 40 tokens, so the chat re-renders paragraphs and
highlighted fences), the same bus path the engine's stream takes. Meanwhile a key is typed into
the prompt every ``--interval-ms``; its latency is the time from posting the key event to the
first frame the app hands to its display that holds the new character (layout, compositing and
the Markdown stream included; the terminal write itself is not, as the app runs headless).

    python bench/tui_bench.py [--rate 200] [--keys 300] [--interval-ms 30] [--json bench/results/tui.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from textual import events  # noqa: E402

from agentkeel.app.runtime import RuntimeOptions  # noqa: E402
from agentkeel.core.events import TextDelta  # noqa: E402
from agentkeel.models.fake.script import Script  # noqa: E402
from agentkeel.models.fake.server import FakeLLMServer  # noqa: E402
from agentkeel.ui.tui.app import KeelApp  # noqa: E402
from agentkeel.ui.tui.prompt import PromptInput  # noqa: E402

WORDS = "the quick agent reads files edits code runs tests and reports what changed in this project".split()


def tokens(n: int) -> list[str]:
    out = []
    for i in range(n):
        if i and i % 40 == 0:
            out.append("\n\n```python\ndef f(x):\n    return x * 2\n```\n\n")
        elif i and i % 13 == 0:
            out.append("**" + WORDS[i % len(WORDS)] + "**. ")
        else:
            out.append(WORDS[i % len(WORDS)] + " ")
    return out


class BenchApp(KeelApp):
    """Records when a frame holding the awaited prompt text reaches the display."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.waiting: tuple[int, float] | None = None  # (prompt length to see, when the key was posted)
        self.cpu_posted = 0.0
        self.latencies: list[float] = []
        self.cpu_latencies: list[float] = []
        self.frames = 0
        self.shown = asyncio.Event()

    def _display(self, screen: Any, renderable: Any) -> None:
        super()._display(screen, renderable)
        if renderable is None:
            return
        self.frames += 1
        if self.waiting is not None:
            length, posted = self.waiting
            if len(self.query_one(PromptInput).text) >= length:
                self.latencies.append((time.perf_counter() - posted) * 1000)
                self.cpu_latencies.append((time.process_time() - self.cpu_posted) * 1000)
                self.waiting = None
                self.shown.set()


async def run(rate: float, keys: int, interval_ms: float) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="keel-tui-bench-"))
    (work / "project").mkdir()
    (work / "home").mkdir()
    os.environ["KEEL_HOME"] = str(work / "keelhome")
    server = FakeLLMServer(Script.from_data({"steps": ["ok"]}))
    server.start_background()
    env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-test-not-a-real-key", "ANTHROPIC_BASE_URL": server.url}

    def options() -> RuntimeOptions:
        return RuntimeOptions(cwd=work / "project", env=dict(env), home=work / "home")

    app = BenchApp(options, home=work / "keelhome")
    stream = tokens(int(rate * (keys * interval_ms / 1000 + 2)))
    sent = 0
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause(0.5)

            async def produce() -> None:
                nonlocal sent
                start = time.perf_counter()
                for i, tok in enumerate(stream):
                    app.rt.bus.emit(TextDelta(text=tok))
                    sent += 1
                    delay = start + (i + 1) / rate - time.perf_counter()
                    await asyncio.sleep(max(0.0, delay))

            producer = asyncio.ensure_future(produce())
            await asyncio.sleep(0.5)  # the stream is under way
            started = time.perf_counter()
            cpu_started = time.process_time()
            sent_before = sent
            for i in range(keys):
                ch = "abcdefghijklmnopqrstuvwxyz"[i % 26]
                app.shown.clear()
                app.waiting = (i + 1, time.perf_counter())
                app.cpu_posted = time.process_time()
                app.post_message(events.Key(ch, ch))
                try:
                    await asyncio.wait_for(app.shown.wait(), 2.0)
                except TimeoutError:
                    app.latencies.append(2000.0)  # never shown within 2 s: counted as 2 s
                    app.waiting = None
                next_at = started + (i + 1) * interval_ms / 1000
                await asyncio.sleep(max(0.0, next_at - time.perf_counter()))
            elapsed = time.perf_counter() - started
            cpu = time.process_time() - cpu_started
            tokens_during = sent - sent_before
            producer.cancel()
            await app.drain()
            shown = len(app.query_one("#chat").children)
    finally:
        server.shutdown()
        server.server_close()
    lat = sorted(app.latencies)
    cpu_lat = sorted(app.cpu_latencies)
    return {
        "rate_tokens_per_s": rate,
        "tokens_streamed": tokens_during,
        "stream_rate_achieved": round(tokens_during / elapsed, 1),
        "seconds": round(elapsed, 1),
        "cpu_share_of_one_core": round(cpu / elapsed, 3),  # the whole process: app, runtime, fake server
        "load_average_1m": round(os.getloadavg()[0], 1),
        "keys": len(lat),
        "p50_ms": round(statistics.median(lat), 2),
        "p95_ms": round(lat[int(0.95 * (len(lat) - 1))], 2),
        "max_ms": round(lat[-1], 2),
        # the process's CPU time between a key and its frame: what the latency would be on a core of
        # its own (an upper bound: the fake server's thread counts too); independent of the load
        "cpu_p50_ms": round(statistics.median(cpu_lat), 2),
        "cpu_p95_ms": round(cpu_lat[int(0.95 * (len(cpu_lat) - 1))], 2),
        "frames": app.frames,
        "chat_widgets": shown,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=200.0, help="tokens a second")
    parser.add_argument("--keys", type=int, default=300)
    parser.add_argument("--interval-ms", type=float, default=30.0)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    result = asyncio.run(run(args.rate, args.keys, args.interval_ms))
    print(
        f"keystroke-to-render while streaming {result['rate_tokens_per_s']:g} tokens/s "
        f"({result['stream_rate_achieved']:g} achieved, {result['tokens_streamed']} tokens): "
        f"p50 {result['p50_ms']} ms, p95 {result['p95_ms']} ms, max {result['max_ms']} ms over {result['keys']} keys; "
        f"CPU time key->frame p50 {result['cpu_p50_ms']} ms, p95 {result['cpu_p95_ms']} ms; "
        f"CPU {result['cpu_share_of_one_core'] * 100:.0f}% of a core; machine load {result['load_average_1m']}"
    )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
