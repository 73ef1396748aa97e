"""Benchmark: what the Bash sandbox adds to a Bash call.

The real Bash tool runs ``true`` in a scratch project, interleaving an unsandboxed call, a
sandboxed call with the network off, and (when socat is here) a sandboxed call with the domain
proxy's relay (``true`` needs no relay: keel starts it only for a command that may use the network;
``id`` does, against ``id`` unsandboxed); the overhead is each sandboxed call minus the unsandboxed
call next to it (pairs cancel most of the noise of a shared machine). Also timed: bubblewrap alone around ``true``
against ``bash -c true``, and the start of a relay inside (socat, against the floor a
pure-Python relay would pay: starting ``python3 -S``). The load average is recorded beside.

    python bench/sandbox_bench.py [--rounds 60] [--json bench/results/sandbox.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from agentkeel.core.tools import Services, ToolContext
from agentkeel.policy.sandbox import probe
from agentkeel.policy.sandbox.service import NAMESPACES
from agentkeel.tools.shell import ShellState
from sandbox_harness import BASH, SandboxedBash


def _q(samples: list[float]) -> dict[str, float]:
    q = statistics.quantiles(samples, n=100)
    return {"p50_ms": round(statistics.median(samples), 2), "p95_ms": round(q[94], 2)}


def _child_cpu_ms() -> float:
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (use.ru_utime + use.ru_stime) * 1000


async def _calls(project: Path, home: Path, rounds: int) -> dict[str, list[float]]:
    plain = ToolContext(cwd=project, session_id="b", services=Services(), emit=lambda e: None)
    boxed = SandboxedBash(project, home)
    proxied = SandboxedBash(project, home, settings={"network": {"allowedDomains": ["example.com"]}})
    # each kind: its context and command; ``_relay`` runs ``id`` (not a program keel knows to stay off
    # the network: the relay starts), against ``id`` unsandboxed
    kinds: dict[str, tuple[ToolContext, str]] = {"unsandboxed": (plain, "true"), "sandboxed": (boxed.ctx, "true")}
    if shutil.which("socat"):
        kinds["sandboxed_proxy"] = (proxied.ctx, "true")
        kinds["unsandboxed_id"] = (plain, "id")
        kinds["sandboxed_proxy_relay"] = (proxied.ctx, "id")
    out: dict[str, list[float]] = {k: [] for k in kinds} | {f"{k}_cpu": [] for k in kinds}
    for i in range(rounds + 3):
        for kind, (ctx, command) in kinds.items():
            t, c = time.perf_counter(), _child_cpu_ms()
            result = await BASH.run(BASH.parse({"command": command}), ctx)
            ms = (time.perf_counter() - t) * 1000
            assert not result.is_error, result.content
            if i >= 3:  # warm-up
                out[kind].append(ms)
                out[f"{kind}_cpu"].append(_child_cpu_ms() - c)  # CPU of bwrap, bash and all they ran
    for ctx, _ in kinds.values():
        await ctx.services.get(ShellState).aclose()
    await boxed.sandbox.aclose()
    await proxied.sandbox.aclose()
    return out


def _spawn(argv: list[str], rounds: int) -> list[float]:
    samples = []
    for _ in range(rounds):
        t = time.perf_counter()
        subprocess.run(argv, check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        samples.append((time.perf_counter() - t) * 1000)
    return samples


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=60)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args()
    found = probe()
    if not found.available:
        sys.exit(f"sandbox_bench: the sandbox cannot run here: {found.problem}")
    assert found.bwrap is not None
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        project, home = Path(tmp) / "project", Path(tmp) / "home"
        project.mkdir()
        home.mkdir()
        calls = asyncio.run(_calls(project, home, args.rounds))
    result: dict[str, object] = {
        "when": datetime.now().isoformat(timespec="seconds"),
        "rounds": args.rounds,
        "bwrap": found.version,
        "bash_call": {k: _q(v) for k, v in calls.items() if not k.endswith("_cpu")},
        "overhead": {
            k: _q(
                [
                    s - b
                    for s, b in zip(v, calls["unsandboxed_id" if k.endswith("_relay") else "unsandboxed"], strict=True)
                ]
            )
            for k, v in calls.items()
            if k.startswith("sandboxed") and not k.endswith("_cpu")
        },
        # CPU time the call's processes used (bubblewrap, bash, the relay): what the sandbox costs
        # without the wait for a core on a loaded machine
        "children_cpu": {k.removesuffix("_cpu"): _q(v) for k, v in calls.items() if k.endswith("_cpu")},
    }
    bash = shutil.which("bash") or "/bin/bash"
    raw = [
        found.bwrap,
        *NAMESPACES,
        "--ro-bind",
        "/",
        "/",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--",
        bash,
        "-c",
        "true",
    ]
    result["spawn"] = {
        "bash -c true": _q(_spawn([bash, "-c", "true"], args.rounds)),
        "bwrap": _q(_spawn(raw, args.rounds)),
    }
    relay: dict[str, object] = {
        "python -S -c pass (a pure-Python relay's floor)": _q(_spawn([sys.executable, "-S", "-c", "pass"], args.rounds))
    }
    if found.socat:
        relay["socat -V"] = _q(_spawn([found.socat, "-V"], args.rounds))
    result["relay_start"] = relay
    result["load_average"] = round(max(load, os.getloadavg()[0]), 2)
    result["cores"] = os.cpu_count()
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
