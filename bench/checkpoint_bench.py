"""Benchmark: what file checkpoints cost per tool call, on a generated 2,000-file project.

The checkpoint recorder's own ``before_tool``/``after_tool`` handlers are timed around each
call (the tool's own work is done between them and not counted):

* Write/Edit: the file's content is stored before the call (content-addressed) and compared
  after it;
* Bash: the project's files are listed (``git ls-files -co --exclude-standard`` in a git
  repository, a walk otherwise) and stat'ed before and after; only files whose size or mtime
  moved are hashed. The first Bash call of a session stores every file once (the baseline);
  later calls pay the listing and the stats, plus the files that changed.

Wall-clock milliseconds and CPU milliseconds (this process and its finished children, the
``git`` calls): on a busy machine the wall clock includes waiting for a core; the load
average is recorded beside them.

The second part times the session index (``$KEEL_HOME/sessions.db``) over N sessions.

    python bench/checkpoint_bench.py [--files 2000] [--rounds 30] [--sessions 500] \
        [--json bench/results/checkpoint.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
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


def q(pairs: list[tuple[float, float]]) -> dict[str, float]:
    wall = sorted(w for w, _ in pairs)
    cpu = sorted(c for _, c in pairs)

    def p95(v: list[float]) -> float:
        return v[min(len(v) - 1, int(len(v) * 0.95))]

    return {
        "p50_ms": round(statistics.median(wall) * 1000, 2),
        "p95_ms": round(p95(wall) * 1000, 2),
        "cpu_p50_ms": round(statistics.median(cpu) * 1000, 2),
        "cpu_p95_ms": round(p95(cpu) * 1000, 2),
    }


def cpu_now() -> float:
    """This process's CPU time and its finished children's (git ls-files)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


async def timed(recorder: CheckpointRecorder, call: ToolCall, work: object) -> tuple[float, float]:
    """Wall and CPU seconds of the recorder's before_tool + after_tool (the tool's work not counted)."""
    ext = recorder.extension()
    assert ext.before_tool is not None and ext.after_tool is not None
    t0, c0 = time.perf_counter(), cpu_now()
    await ext.before_tool(call)
    t1, c1 = time.perf_counter(), cpu_now()
    if callable(work):
        work()
    t2, c2 = time.perf_counter(), cpu_now()
    await ext.after_tool(call, ToolOutput("ok"))
    t3, c3 = time.perf_counter(), cpu_now()
    return (t1 - t0) + (t3 - t2), (c1 - c0) + (c3 - c2)


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
        first_bash, first_cpu = await timed(recorder, call("Bash", {"command": "true"}), None)
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
            "bash_first_call_cpu_ms": round(first_cpu * 1000, 1),
            "bash_nothing_changed": q(idle),
            "bash_one_file_changed": q(one),
            "bash_eleven_files_changed": q(ten),
            "checkpoint_events": sum(1 for e in events if type(e).__name__ == "Checkpoint"),
            "objects": len(objects),
            "objects_mb": round(sum(o.stat().st_size for o in objects) / 1e6, 1),
        }


def index_bench(sessions: int) -> dict[str, object]:
    """The session index: a listing that builds it from the JSONL files, one with nothing new,
    one after a session grew; the files are real sessions written by SessionWriter."""
    from agentkeel.core.events import AssistantMessage, RunFinished, SessionStarted, UserMessage
    from agentkeel.core.types import Message, Usage
    from agentkeel.session.index import SessionIndex
    from agentkeel.session.store import SessionWriter, project_dir

    with tempfile.TemporaryDirectory(prefix="keel-index-bench-") as tmp:
        home, cwd = Path(tmp) / "home", Path(tmp) / "project"
        folder = project_dir(home, cwd)
        last = folder / "x.jsonl"
        for i in range(sessions):
            last = folder / f"{i:08d}-0000-4000-8000-000000000000.jsonl"
            w = SessionWriter(last, last.stem)
            w(SessionStarted(session_id=last.stem, cwd=str(cwd), model="m"))
            for t in range(10):
                w(UserMessage(message=Message.user(f"prompt {t} of session {i}")))
                w(AssistantMessage(message=Message(role="assistant", content=[]), cost_usd=0.001))
                w(
                    RunFinished(
                        subtype="success",
                        is_error=False,
                        result="",
                        num_turns=1,
                        duration_ms=1,
                        usage=Usage(),
                        total_cost_usd=0.001,
                    )
                )
            w.close()
        index = SessionIndex(home)

        def timed_ms(fn: Callable[[], object]) -> tuple[float, float]:
            t0, c0 = time.perf_counter(), cpu_now()
            fn()
            return round((time.perf_counter() - t0) * 1000, 1), round((cpu_now() - c0) * 1000, 1)

        build = timed_ms(lambda: index.list(cwd))
        steady = timed_ms(lambda: index.list(cwd))
        w = SessionWriter(last, last.stem)
        w(UserMessage(message=Message.user("one more")))
        w.close()
        grown = timed_ms(lambda: index.list(cwd))
        assert index.list(cwd)[0].turns == 11
        update = timed_ms(lambda: index.update(last))
    return {
        "sessions": sessions,
        "events_per_session": 31,
        "build_ms": build[0],
        "build_cpu_ms": build[1],
        "list_unchanged_ms": steady[0],
        "list_unchanged_cpu_ms": steady[1],
        "list_after_one_grew_ms": grown[0],
        "list_after_one_grew_cpu_ms": grown[1],
        "update_one_ms": update[0],
        "update_one_cpu_ms": update[1],
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--files", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--sessions", type=int, default=500, help="sessions for the index part")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args()
    results = [asyncio.run(run(args.files, args.rounds, git)) for git in (True, False)] if args.files else []
    index = index_bench(args.sessions)
    report = {
        "when": datetime.now().isoformat(timespec="seconds"),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
        "results": results,
        "index": index,
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
