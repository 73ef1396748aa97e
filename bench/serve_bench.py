"""`keel serve` event fan-out: one session's stream to N SSE clients (events/s, delivery latency).

The real path: `keel dev fake-llm` and `keel serve` as processes, a session whose one prompt runs
``--turns`` model turns, each a short streamed reply and a Glob call (about 10 events a turn:
request, deltas, message, permission, tool start/end, result), and N clients reading the
session's SSE stream over loopback HTTP (httpx, asyncio, all in this process). Latency is the
time from the event's own timestamp (set in the server when the event was made, millisecond
resolution, same machine clock) to its arrival at a client; events/s counts every frame every
client received, over the time from the first delta sent to the last client's last frame.
The clients share one process, so at high N they measure part of their own cost too.

    python bench/serve_bench.py [--clients 50] [--chars 60000] [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
KEEL = str(Path(sys.executable).parent / "keel")


def _ts(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _start(args: list[str], env: dict[str, str], cwd: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [KEEL, *args], env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    url = next(w for w in line.split() if w.startswith("http://"))
    return proc, url


TOKEN = "bench-token-not-a-secret-0123456789"  # keel serve needs one on every request (KEEL_SERVE_TOKEN)
AUTH = {"Authorization": f"Bearer {TOKEN}"}


async def _client(url: str, after: int, out: list[tuple[float, float]], ready: asyncio.Event) -> int:
    frames = 0
    async with (
        httpx.AsyncClient(timeout=httpx.Timeout(120), headers=AUTH) as client,
        client.stream("GET", url, headers={"Last-Event-ID": str(after)}) as res,
    ):
        async for line in res.aiter_lines():
            if line == ": live":
                ready.set()
            if not line.startswith("data: "):
                continue
            now = time.time()
            frame = json.loads(line[6:])
            frames += 1
            event = frame.get("event")
            if event is not None and "timestamp" in event:
                out.append((_ts(event["timestamp"]), now))
            if frame["kind"] == "idle":
                return frames
    return frames


def _cpu_s(pid: int) -> float:
    """The process's user + system CPU seconds (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _round(base: str, sid: str, clients: int, pid: int) -> dict[str, float]:
    async with httpx.AsyncClient(timeout=60, headers=AUTH) as api:
        after = (await api.get(f"{base}api/sessions/{sid}")).json()["last_seq"]
        samples: list[list[tuple[float, float]]] = [[] for _ in range(clients)]
        ready = [asyncio.Event() for _ in range(clients)]
        url = f"{base}api/sessions/{sid}/stream"
        tasks = [asyncio.create_task(_client(url, after, samples[i], ready[i])) for i in range(clients)]
        await asyncio.wait_for(asyncio.gather(*(r.wait() for r in ready)), 60)
        cpu = _cpu_s(pid)
        res = await api.post(f"{base}api/sessions/{sid}/messages", json={"text": "go"})
        assert res.status_code == 202, res.text
        counts = await asyncio.wait_for(asyncio.gather(*tasks), 300)
        cpu = _cpu_s(pid) - cpu
    flat = [s for per in samples for s in per]
    latencies = sorted((recv - made) * 1000 for made, recv in flat)
    start = min(made for made, _ in flat)
    end = max(recv for _, recv in flat)
    total = sum(counts)
    return {
        "clients": clients,
        "events_per_client": len(flat) / clients,
        "frames": total,
        "seconds": end - start,
        "events_per_s": total / (end - start),
        "p50_ms": statistics.median(latencies),
        "p95_ms": latencies[int(0.95 * (len(latencies) - 1))],
        "max_ms": latencies[-1],
        "server_cpu_s": cpu,
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--clients", type=int, default=50)
    p.add_argument("--turns", type=int, default=100)
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args()
    turn = {"text": "Looking for text files.", "tool_calls": [{"name": "Glob", "input": {"pattern": "*.txt"}}]}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "project").mkdir()
        (root / "home").mkdir()
        script = root / "script.json"
        script.write_text(json.dumps({"steps": [*[turn] * args.turns, "done"], "loop": True}))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_", "KEEL_"))}
        env.update(HOME=str(root / "home"), KEEL_HOME=str(root / "keel"), PYTHONPATH=str(ROOT / "src"))
        fake, fake_url = _start(["dev", "fake-llm", "--script", str(script), "--port", "0"], env, root)
        env.update(
            ANTHROPIC_BASE_URL=fake_url,
            ANTHROPIC_API_KEY="sk-ant-bench-not-a-key",
            KEEL_MODEL="claude-sonnet-4-5",
            KEEL_SERVE_TOKEN=TOKEN,
        )
        serve, base = _start(["serve", "--port", "0", "--no-memory", "--cwd", str(root / "project")], env, root)
        try:
            sid = httpx.post(f"{base}api/sessions", json={}, timeout=60, headers=AUTH).json()["session_id"]
            heads = ("clients", "events", "frames", "s", "events/s", "p50 ms", "p95 ms", "max ms", "srv cpu s")
            print(" ".join(f"{h:>9}" for h in heads))
            for clients in (1, args.clients):
                rows = [asyncio.run(_round(base, sid, clients, serve.pid)) for _ in range(args.runs)]
                best = min(rows, key=lambda r: r["p95_ms"])
                med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
                for label, r in (("median", med), ("best", best)):
                    cells = [f"{r['clients']:.0f}", f"{r['events_per_client']:.0f}", f"{r['frames']:.0f}"]
                    cells += [f"{r['seconds']:.2f}", f"{r['events_per_s']:.0f}"]
                    cells += [f"{r[k]:.1f}" for k in ("p50_ms", "p95_ms", "max_ms")] + [f"{r['server_cpu_s']:.2f}"]
                    print(" ".join(f"{c:>9}" for c in cells) + f"  ({label} of {args.runs})")
        finally:
            for proc in (serve, fake):
                proc.terminate()
                proc.wait(20)
    print()
    print(asyncio.run(_stream_only(args.clients)))


async def _stream_only(clients: int, frames: int = 20_000) -> str:
    """The fan-out alone: publish ``frames`` events, each to every reader (one asyncio loop)."""
    sys.path.insert(0, str(ROOT / "src"))
    from agentkeel.ui.serve.stream import EventStream

    stream = EventStream(buffer=frames + 10, queue=frames + 10)
    got = [0] * clients

    async def reader(i: int) -> None:
        async for text in stream.follow(0, ping_s=60):
            got[i] += text.count("data: ")
            if got[i] >= frames:
                return

    tasks = [asyncio.create_task(reader(i)) for i in range(clients)]
    await asyncio.sleep(0.05)  # every reader joined
    payload = {"event": {"type": "text_delta", "text": "fifteen chars.."}}
    start = time.perf_counter()
    for n in range(frames):
        stream.publish("text_delta", payload)
        if n % 500 == 0:
            await asyncio.sleep(0)  # let the readers drain, as the server's loop does between events
    await asyncio.gather(*tasks)
    took = time.perf_counter() - start
    return (
        f"EventStream alone: {frames} events to {clients} readers in {took:.2f}s: "
        f"{frames / took:,.0f} events/s published, {frames * clients / took:,.0f} frames/s delivered"
    )


if __name__ == "__main__":
    main()
