"""``keel batch`` never loses a result (issue 31, item 3): a long torn last line, short writes, two batches on
one OUT file, and a cancelled task run again (one line per task, with ``attempts``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkeel.models.fake.script import Script
from agentkeel.models.fake.server import FakeLLMServer
from agentkeel.ui.batch.results import Result, ResultWriter, recorded
from kit import KEEL, wait_until, wire_env


def _conv(tid: str, sleep: float = 0.0) -> dict[str, Any]:
    first = f"sleep {sleep}; echo {tid}" if sleep else f"echo {tid}"
    return {"match": f"<{tid}>", "steps": [{"tool_calls": [{"name": "Bash", "input": {"command": first}}]},
                                           f"finished {tid}"]}  # fmt: skip


def _tasks(path: Path, ids: list[str]) -> Path:
    path.write_text(
        "".join(json.dumps({"id": t, "prompt": f"run <{t}>", "allowed_tools": ["Bash"]}) + "\n" for t in ids)
    )
    return path


def _env(server: FakeLLMServer) -> dict[str, str]:
    return {**os.environ, **wire_env(server, "anthropic"), "KEEL_MODEL": "anthropic:fake-model"}


def _requests_for(server: FakeLLMServer, tid: str) -> int:
    """Sessions of task ``tid`` the model saw start (first requests: one message, holding the task's prompt)."""

    def texts(message: dict[str, Any]) -> list[str]:
        content = message["content"]
        return [content] if isinstance(content, str) else [b.get("text", "") for b in content]

    return sum(
        1
        for r in server.cursor.requests
        if len(r["body"]["messages"]) == 1 and f"run <{tid}>" in texts(r["body"]["messages"][0])
    )


def test_resume_after_a_torn_line_over_one_mib_keeps_the_earlier_results(
    tmp_path: Path, project: Path, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    out = tmp_path / "out.jsonl"
    whole = b"".join(json.dumps({"id": t, "status": "success", "result": t}).encode() + b"\n" for t in ("a", "b"))
    out.write_bytes(whole + b'{"id": "c", "status": "success", "result": "' + b"x" * (3 << 20))
    server = fake_llm({"conversations": [_conv("c")]})
    tasks = _tasks(tmp_path / "t.jsonl", ["a", "b", "c"])
    run = subprocess.run([KEEL, "batch", str(tasks), "-o", str(out), "--resume"], cwd=project, env=_env(server),
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr
    results = recorded(out)
    assert list(results) == ["a", "b", "c"] and results["c"].result == "finished c"
    assert out.read_bytes().startswith(whole) and out.read_bytes().count(b"\n") == 3


def test_the_writer_cuts_only_the_torn_line_however_long(tmp_path: Path) -> None:
    out = tmp_path / "o.jsonl"
    head = b'{"id":"a","status":"success"}\n'
    out.write_bytes(head + b'{"id":"b","result":"' + b"y" * (5 << 20))
    w = ResultWriter(out)
    w.write(Result("b", "error", error="x"))
    w.close()
    assert out.read_bytes().startswith(head) and list(recorded(out)) == ["a", "b"]
    only = tmp_path / "only.jsonl"
    only.write_bytes(b'{"id":"a","result":"' + b"z" * (2 << 20))
    ResultWriter(only).close()
    assert only.read_bytes() == b""


SHORT_WRITE = """
import json, resource, sys
from pathlib import Path
from agentkeel.ui.batch.results import Result
from agentkeel.ui.batch.runner import BatchOptions, run_batch

class Backend:  # a backend (the runner's seam) whose tasks end with long results
    cancelled = False
    def run(self, tasks, spec, keep_going):
        for t in tasks:
            yield Result(t.id, "success", result=t.id * 4000)
    def cancel(self):
        self.cancelled = True

out = Path(sys.argv[1])
resource.setrlimit(resource.RLIMIT_FSIZE, (10_000, 10_000))
outcome = run_batch(BatchOptions(tasks_path=Path(sys.argv[2]), out_path=out), backend=Backend())
print(json.dumps({"error": outcome.write_error, "unrecorded": outcome.unrecorded, "done": outcome.progress.done}))
"""


def test_a_short_write_is_undone_and_the_result_not_reported_as_recorded(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    tasks = _tasks(tmp_path / "t.jsonl", ["a", "b", "c", "d"])
    proc = subprocess.run([sys.executable, "-c", SHORT_WRITE, str(out), str(tasks)], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    outcome = json.loads(proc.stdout)
    # a line is ~4.2 kB: two fit under the 10 kB limit, the third is cut short by the kernel
    assert outcome["done"] == 2 and outcome["unrecorded"] == ["c", "d"]
    assert "cannot record the result of task 'c'" in outcome["error"] and "too large" in outcome["error"]
    data = out.read_bytes()
    assert data.endswith(b"\n") and data.count(b"\n") == 2 and list(recorded(out)) == ["a", "b"]


def test_two_batches_on_one_out_file_the_second_refuses_and_each_task_runs_once(
    tmp_path: Path, project: Path, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    ids = ["L1", "L2"]
    server = fake_llm({"conversations": [_conv(t, sleep=2.0) for t in ids]})
    out = tmp_path / "out.jsonl"
    cmd = [KEEL, "batch", str(_tasks(tmp_path / "t.jsonl", ids)), "-o", str(out), "--concurrency", "1"]
    first = subprocess.Popen(cmd, cwd=project, env=_env(server), stdin=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             text=True)  # fmt: skip
    try:
        wait_until(lambda: server.cursor.requests, 120, "the first request", 0.1)
        second = subprocess.run([*cmd, "--resume"], cwd=project, env=_env(server), capture_output=True, text=True,
                                timeout=120)  # fmt: skip
        assert second.returncode == 1
        assert second.stderr.strip() == (
            f"keel batch: {out} is being written by another keel batch: wait for it to end, or choose another -o file"
        )
        _, err = first.communicate(timeout=300)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 0, err
    assert [_requests_for(server, t) for t in ids] == [1, 1]
    assert list(recorded(out)) == ids and out.read_text().count("\n") == 2


def test_cancel_then_resume_leaves_one_line_per_task_with_its_attempts(
    tmp_path: Path, project: Path, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    ids = ["C1", "C2", "C3"]
    server = fake_llm({"conversations": [_conv(t, sleep=30.0) for t in ids]})
    out = tmp_path / "out.jsonl"
    cmd = [KEEL, "batch", str(_tasks(tmp_path / "t.jsonl", ids)), "-o", str(out), "--concurrency", "2"]
    batch = subprocess.Popen(cmd, cwd=project, env=_env(server), stdin=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             text=True)  # fmt: skip
    wait_until(lambda: len(server.cursor.requests) >= 2, 120, "two requests", 0.1)
    time.sleep(0.5)  # the two sessions are in their sleeping Bash call
    batch.send_signal(signal.SIGINT)
    _, err = batch.communicate(timeout=120)
    assert batch.returncode == 130, err
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert sorted(x["id"] for x in lines) == ["C1", "C2"] and {x["status"] for x in lines} == {"cancelled"}
    assert all(x["attempts"] == 1 for x in lines)  # the field is always there, 1 included
    server.cursor.reset(Script.from_data({"conversations": [_conv(t) for t in ids]}))
    resumed = subprocess.run([*cmd, "--resume"], cwd=project, env=_env(server), capture_output=True, text=True,
                             timeout=300)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert sorted(x["id"] for x in lines) == ids, lines  # one final line per task
    assert {x["id"]: (x["status"], x["attempts"]) for x in lines} == {
        "C1": ("success", 2), "C2": ("success", 2), "C3": ("success", 1),
    }  # fmt: skip
    report = subprocess.run([KEEL, "batch", "report", str(out), "--json"], capture_output=True, text=True, timeout=60)
    assert json.loads(report.stdout)["by_status"] == {"success": 3}


def test_a_full_out_file_stops_the_batch_with_one_line_and_loses_nothing(
    tmp_path: Path, project: Path, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    import resource

    limit = 1 << 20
    out = tmp_path / "out.jsonl"
    filler = b"".join(json.dumps({"id": f"old{i}", "status": "success", "result": "r" * 900}).encode() + b"\n"
                      for i in range(1200))  # fmt: skip
    while len(filler) > limit - 2000:
        filler = filler[: filler.rindex(b"\n", 0, len(filler) - 1) + 1]
    pad = limit - 60 - len(filler) - len(b'{"id":"pad","status":"success","result":""}\n')
    filler += b'{"id":"pad","status":"success","result":"' + b"p" * pad + b'"}\n'
    assert len(filler) == limit - 60  # room for less than a result line
    out.write_bytes(filler)
    server = fake_llm({"conversations": [_conv("x")]})
    run = subprocess.run(
        [KEEL, "batch", str(_tasks(tmp_path / "t.jsonl", ["x"])), "-o", str(out), "--resume"], cwd=project,
        env=_env(server), capture_output=True, text=True, timeout=300,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit)),
    )  # fmt: skip
    assert run.returncode == 1, run.stderr
    assert "cannot record the result of task 'x'" in run.stderr and "Not recorded: x" in run.stderr
    assert "Traceback" not in run.stderr
    assert out.read_bytes() == filler  # no torn line, nothing else touched
