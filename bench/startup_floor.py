"""Benchmark: how far keel's first request is from the floor of the stack it is built on.

Time from process start to the first model request the server receives, for four programs run
in turn (interleaved, so that machine drift hits them alike), against the same scripted server
(`../shared/tools/fakellm.py`, or keel's own copy when that is absent):

- ``python``: the interpreter alone (``python -c pass``; no request: its exit time);
- ``asyncio``: the interpreter importing asyncio (no request: its exit time);
- ``floor``: the smallest program on keel's decided stack (asyncio + httpx, trio and httpx's CLI
  kept out as keel keeps them out) that streams one Messages request: the time to its request;
- ``keel``: ``keel -p`` with the Bash tool allowed: the time to its first request;
- ``floor-agent``: the least agent on that stack (one Bash tool, the stream parsed, each call run
  with ``bash -c``, nothing else) through the 20-step session: its wall time;
- ``keel-session``: ``keel -p`` through the same 20-step session: its wall time.

The difference between ``keel`` and ``floor`` is what keel itself costs before its first request;
``floor`` is the least any program on Python, asyncio and httpx pays on this machine, and
``floor-agent`` the least a 20-step session costs on it.

    python bench/startup_floor.py [--runs 9] [--json bench/results/startup_floor.json]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SHARED_FAKE = HERE.parent.parent / "shared" / "tools" / "fakellm.py"
KEEL = str(Path(sys.executable).parent / "keel")

FLOOR = r"""
import sys
for name in ("trio", "httpx._main"):
    sys.modules[name] = None
import asyncio, json, ssl
import httpx

async def main(url):
    body = {"model": "claude-floor", "max_tokens": 64, "stream": True,
            "messages": [{"role": "user", "content": "hi"}]}
    # an http:// endpoint: no CA bundle to load (keel skips it too)
    async with httpx.AsyncClient(verify=ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)) as client:
        headers = {"x-api-key": "sk-ant-floor-fake", "anthropic-version": "2023-06-01"}
        async with client.stream("POST", url + "/v1/messages", json=body, headers=headers) as r:
            async for _ in r.aiter_bytes():
                pass

asyncio.run(main(sys.argv[1]))
"""

# The least agent on the same stack: one Bash tool, the SSE stream parsed, each tool call run with
# `bash -c` and its output sent back, until the model answers with text. No settings, permissions,
# session log, checkpoints, hooks, redaction or memory: what keel adds is the rest.
FLOOR_AGENT = r"""
import sys
for name in ("trio", "httpx._main"):
    sys.modules[name] = None
import asyncio, json, ssl
import httpx

TOOL = {"name": "Bash", "description": "Run a command", "input_schema": {"type": "object",
        "properties": {"command": {"type": "string"}}, "required": ["command"]}}

async def turn(client, url, messages):
    body = {"model": "claude-floor", "max_tokens": 1024, "stream": True, "tools": [TOOL],
            "messages": messages}
    headers = {"x-api-key": "sk-ant-floor-fake", "anthropic-version": "2023-06-01"}
    blocks, pending = [], ""
    async with client.stream("POST", url + "/v1/messages", json=body, headers=headers) as r:
        async for line in r.aiter_lines():
            if not line.startswith("data: "):
                continue
            event = json.loads(line[6:])
            kind = event["type"]
            if kind == "content_block_start":
                blocks.append(dict(event["content_block"]))
                pending = ""
            elif kind == "content_block_delta":
                delta = event["delta"]
                if delta["type"] == "text_delta":
                    blocks[-1]["text"] += delta["text"]
                else:
                    pending += delta["partial_json"]
            elif kind == "content_block_stop" and blocks[-1]["type"] == "tool_use":
                blocks[-1]["input"] = json.loads(pending or "{}")
    return blocks

async def main(url):
    messages = [{"role": "user", "content": "run the steps"}]
    async with httpx.AsyncClient(verify=ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)) as client:
        while True:
            blocks = await turn(client, url, messages)
            messages.append({"role": "assistant", "content": blocks})
            calls = [b for b in blocks if b["type"] == "tool_use"]
            if not calls:
                print(blocks[0]["text"])
                return
            results = []
            for call in calls:
                proc = await asyncio.create_subprocess_exec(
                    "bash", "-c", call["input"]["command"],
                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
                out, _ = await proc.communicate()
                results.append({"type": "tool_result", "tool_use_id": call["id"], "content": out.decode()})
            messages.append({"role": "user", "content": results})

asyncio.run(main(sys.argv[1]))
"""


LABELS = {"python": "exit", "asyncio": "exit", "floor-agent": "20-step wall", "keel-session": "20-step wall"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(log: Path, steps: int) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = dict(os.environ, FAKELLM_STEPS=str(steps), FAKELLM_LOG=str(log))
    if SHARED_FAKE.exists():
        cmd = [sys.executable, str(SHARED_FAKE), str(port)]
    else:
        cmd = [KEEL, "dev", "fake-llm", "--port", str(port)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit(f"startup_floor: the scripted server did not listen on port {port}")


def first_request(log: Path, since: float) -> float | None:
    for line in log.read_text().splitlines():
        entry = json.loads(line)
        if entry.get("path", "").startswith("/v1/messages") and entry["t"] >= since:
            return float(entry["t"])
    return None


def run_once(kind: str, url: str, log: Path, tmp: Path) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_", "KEEL_"))}
    env.update(ANTHROPIC_BASE_URL=url, ANTHROPIC_API_KEY="sk-ant-bench-fake", KEEL_HOME=str(tmp / "keelhome"))
    project = tmp / "project"
    project.mkdir(exist_ok=True)
    cmd = {
        "python": [sys.executable, "-c", "pass"],
        "asyncio": [sys.executable, "-c", "import asyncio"],
        "floor": [sys.executable, "-c", FLOOR, url],
        "keel": [KEEL, "-p", "run the steps", "--allowedTools", "Bash", "--output-format", "json"],
        "floor-agent": [sys.executable, "-c", FLOOR_AGENT, url],
        "keel-session": [KEEL, "-p", "run the steps", "--allowedTools", "Bash", "--output-format", "json"],
    }[kind]
    log.write_text("")
    start = time.time()
    done = subprocess.run(cmd, cwd=project, env=env, capture_output=True, stdin=subprocess.DEVNULL, timeout=120)
    end = time.time()
    if done.returncode != 0:
        raise SystemExit(f"startup_floor: {kind} exited {done.returncode}: {done.stderr.decode()[-300:]}")
    if kind in ("python", "asyncio", "floor-agent", "keel-session"):
        if kind != "python" and kind != "asyncio" and b"done after 20" not in done.stdout:
            raise SystemExit(f"startup_floor: {kind} did not finish the 20 steps: {done.stdout[-300:]!r}")
        return (end - start) * 1000
    arrived = first_request(log, start)
    if arrived is None:
        raise SystemExit(f"startup_floor: {kind} sent no request")
    return (arrived - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    kinds = ("python", "asyncio", "floor", "keel", "floor-agent", "keel-session")
    times: dict[str, list[float]] = {k: [] for k in kinds}
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        log = tmp / "requests.jsonl"
        one, one_url = start_server(log, 1)
        twenty, twenty_url = start_server(log, 20)
        urls = {k: twenty_url if k in ("floor-agent", "keel-session") else one_url for k in kinds}
        try:
            for k in kinds:  # one warm-up of each (page cache), not counted
                run_once(k, urls[k], log, tmp)
            for _ in range(args.runs):
                for k in kinds:
                    times[k].append(run_once(k, urls[k], log, tmp))
        finally:
            for server in (one, twenty):
                server.terminate()
                server.wait()
    result: dict[str, Any] = {"runs": args.runs, "load_average": os.getloadavg()}
    for k in kinds:
        med = statistics.median(times[k])
        result[k] = {"median_ms": round(med, 1), "min_ms": round(min(times[k]), 1), "max_ms": round(max(times[k]), 1)}
        label = LABELS.get(k, "first request")
        print(f"{k:12} {label:14} median {med:7.1f} ms  ({min(times[k]):.1f}-{max(times[k]):.1f})")
    for a, b in (("keel", "floor"), ("keel-session", "floor-agent")):
        over = statistics.median(x - y for x, y in zip(times[a], times[b], strict=True))
        result[f"{a}_minus_{b}_ms"] = round(over, 1)
        print(f"{a} - {b} (median of the pairs): {over:.1f} ms")
    print(f"load average {os.getloadavg()[0]:.2f}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
