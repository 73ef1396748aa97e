"""Benchmark: what file checkpoints cost per tool call, on a generated 2,000-file project.

The checkpoint recorder's own ``before_tool``/``after_tool`` handlers are timed around each
call (the tool's own work is done between them and not counted):

* Write/Edit: the file's content is stored before the call (content-addressed) and compared
  after it;
* Bash: the project's files are listed (``git ls-files -co --exclude-standard`` in a git
  repository, a walk otherwise) and stat'ed before and after; only files whose size or mtime
  moved are hashed. The first Bash call of a session stores every file once (the baseline);
  later calls pay the listing and the stats, plus the files that changed.

Wall-clock milliseconds; the machine's load average is recorded beside them.

    python bench/checkpoint_bench.py [--files 2000] [--rounds 30] [--json bench/results/checkpoint.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import tempfile
import time
from datetime import datetime
from pathlib import Path

from agentkeel.core.events import Event
from agentkeel.core.extensions import ToolCall
from agentkeel.core.tools import ToolOutput
from agentkeel.session.checkpoints import CheckpointRecorder


def make_project(root: Path, files: int, git: bool) -> list[Path]:
    paths = []
    for i in range(files):
        p = root / f"pkg{i % 20}" / f"mod{(i // 20) % 10}" / f"file{i}.py"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"# file {i}\n" + "x = 1\n" * 300)  # ~1.8 KB
        paths.append(p)
    if git:
        (root / ".gitignore").write_text("build/\n")
        subprocess.run(["git", "init", "-q", str(root)], check=True)
        subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
        env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@example.invalid"}
        env |= {"GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@example.invalid"}
        subprocess.run(["git", "-C", str(root), "commit", "-qm", "init"], check=True, env=env)
    return paths


def q(values: list[float]) -> dict[str, float]:
    values = sorted(values)
    return {
        "p50_ms": round(statistics.median(values) * 1000, 2),
        "p95_ms": round(values[min(len(values) - 1, int(len(values) * 0.95))] * 1000, 2),
        "max_ms": round(values[-1] * 1000, 2),
    }


async def timed(recorder: CheckpointRecorder, call: ToolCall, work: object) -> float:
    ext = recorder.extension()
    assert ext.before_tool is not None and ext.after_tool is not None
    t0 = time.perf_counter()
    await ext.before_tool(call)
    t1 = time.perf_counter()
    if callable(work):
        work()
    t2 = time.perf_counter()
    await ext.after_tool(call, ToolOutput("ok"))
    t3 = time.perf_counter()
    return (t1 - t0) + (t3 - t2)


async def run(files: int, rounds: int, git: bool) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="keel-ckpt-bench-") as tmp:
        root = Path(tmp) / "project"
        paths = make_project(root, files, git)
        events: list[Event] = []
        recorder = CheckpointRecorder(Path(tmp) / "home" / "s.jsonl", root, events.append)
        n = 0

        def call(name: str, inp: dict[str, object]) -> ToolCall:
            nonlocal n
            n += 1
            return ToolCall(id=f"t{n}", name=name, input=dict(inp), tool=None, cwd=root)

        write_times = []
        for i in range(rounds):
            target = paths[(i * 37) % len(paths)]
            write_times.append(
                await timed(
                    recorder,
                    call("Write", {"file_path": str(target)}),
                    lambda t=target, i=i: t.write_text(f"changed {i}\n"),  # type: ignore[misc]
                )
            )
        first_bash = await timed(recorder, call("Bash", {"command": "true"}), None)
        idle, one, ten = [], [], []
        for i in range(rounds):
            idle.append(await timed(recorder, call("Bash", {"command": "true"}), None))

            def touch_one(i: int = i) -> None:
                paths[(i * 53) % len(paths)].write_text(f"bash {i}\n")

            one.append(await timed(recorder, call("Bash", {"command": "sed -i ..."}), touch_one))

            def touch_ten(i: int = i) -> None:
                for k in range(10):
                    paths[(i * 101 + k * 7) % len(paths)].write_text(f"bash {i} {k}\n")
                (root / f"new{i}.txt").write_text("new\n")

            ten.append(await timed(recorder, call("Bash", {"command": "make"}), touch_ten))
        objects = list((recorder.dir / "objects").iterdir())
        return {
            "files": files,
            "git": git,
            "write_edit": q(write_times),
            "bash_first_call_ms": round(first_bash * 1000, 1),
            "bash_nothing_changed": q(idle),
            "bash_one_file_changed": q(one),
            "bash_eleven_files_changed": q(ten),
            "checkpoint_events": sum(1 for e in events if type(e).__name__ == "Checkpoint"),
            "objects": len(objects),
            "objects_mb": round(sum(o.stat().st_size for o in objects) / 1e6, 1),
        }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--files", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args()
    results = [asyncio.run(run(args.files, args.rounds, git)) for git in (True, False)]
    report = {
        "when": datetime.now().isoformat(timespec="seconds"),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
        "results": results,
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
