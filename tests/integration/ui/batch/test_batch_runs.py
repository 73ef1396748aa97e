"""``keel batch``: many sessions from a TASKS file, on the local backend and on a local Ray cluster,
against ``keel dev fake-llm`` (its stateless conversations mode: any number of sessions at once)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentkeel.models.fake.script import Script
from agentkeel.models.fake.server import FakeLLMServer
from agentkeel.ui.batch.limiter import Limits, SharedLimiter
from agentkeel.ui.batch.results import Result, ResultWriter, recorded
from agentkeel.ui.batch.tasks import TaskFileError, load_tasks
from kit import KEEL, KeelRun, session_files, wait_until, wire_env
from memory_fixtures import postgres_dsn


def _bash(command: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "Bash", "input": {"command": command}}]}


def _fleet(n: int, *, sleep: float = 0.0) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """n tasks; every 10th fails on purpose (a 400 from the model), every 10th+5 runs out of turns."""
    convs: list[dict[str, Any]] = []
    tasks: list[dict[str, Any]] = []
    for i in range(n):
        tid = f"T{i:03d}"
        first = f"sleep {sleep}; echo {tid}-a" if sleep else f"echo {tid}-a"
        if i % 10 == 3:
            steps: list[Any] = [_bash(first), {"error": {"status": 400, "message": "scripted failure"}}]
        else:
            steps = [_bash(first), _bash(f"echo {tid}-b"), f"finished {tid}"]
        convs.append({"match": f"<{tid}>", "steps": steps})
        task: dict[str, Any] = {"id": tid, "prompt": f"run task <{tid}>", "allowed_tools": ["Bash"]}
        if i % 10 == 7:
            task["max_turns"] = 1
        tasks.append(task)
    return convs, tasks


def _write_tasks(path: Path, tasks: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    return path


def _env(server: FakeLLMServer) -> dict[str, str]:
    return {**wire_env(server, "anthropic"), "KEEL_MODEL": "anthropic:fake-model"}


def _expected(tid: str) -> str:
    i = int(tid[1:])
    return "error" if i % 10 in (3, 7) else "success"


def _check(out: Path, n: int) -> dict[str, Result]:
    results = recorded(out)
    assert sorted(results) == [f"T{i:03d}" for i in range(n)]
    for tid, r in results.items():
        assert r.status == _expected(tid), (tid, r)
        if r.status == "success":
            assert r.result == f"finished {tid}" and r.session_id and r.turns == 3
    lines = [ln for ln in out.read_text().splitlines() if ln]
    assert len(lines) == len({json.loads(ln)["id"] for ln in lines}), "a task was recorded twice"
    return results


def _signature(results: dict[str, Result]) -> list[tuple[str, str, str]]:
    return sorted((r.id, r.status, r.result) for r in results.values())


@pytest.mark.timeout(900)  # its batch is allowed 600 s
def test_a_100_task_batch_on_the_local_backend(
    tmp_path: Path, project: Path, keel: Callable[..., KeelRun], fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    convs, tasks = _fleet(100)
    server = fake_llm({"conversations": convs})
    out = tmp_path / "out.jsonl"
    run = keel("batch", str(_write_tasks(tmp_path / "tasks.jsonl", tasks)), "-o", str(out),
               "--concurrency", "4", env=_env(server), timeout=600)  # fmt: skip
    assert run.code == 1, run.stderr  # some tasks fail on purpose
    assert "80 ok, 20 not ok of 100" in run.stderr
    results = _check(out, 100)
    assert results["T007"].error == "max turns"
    assert "scripted failure" in results["T003"].error
    progress = [json.loads(ln) for ln in run.stderr.splitlines() if ln.startswith("{")]
    assert len(progress) == 100 and progress[-1]["done"] == 100  # JSON progress lines without a TTY
    # every task is an ordinary session: its transcript is where keel sessions finds it
    assert len(session_files(tmp_path / "keelhome")) == 100
    listed = keel("sessions", "list", "--json", env=_env(server))
    assert {r.session_id for r in results.values() if r.session_id} <= {
        s["session_id"] for s in json.loads(listed.stdout)
    }
    # the report
    html = tmp_path / "report.html"
    rep = keel("batch", "report", str(out), "--html", str(html), "--json")
    summary = json.loads(rep.stdout)
    assert summary["tasks"] == 100 and summary["by_status"] == {"success": 80, "error": 20}
    assert "T003" in html.read_text() and "80.0%" in html.read_text()
    text = keel("batch", "report", str(out)).stdout
    assert "success     80.0%" in text and "T013" in text


def _cmdlines() -> Iterator[tuple[int, list[bytes]]]:
    """Every process's pid and argv (a process that ends mid-scan is skipped)."""
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            yield int(d.name), (d / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue


def _keel_children(marker: str, server: FakeLLMServer) -> list[int]:
    """keel -p sessions whose arguments mention ``marker`` and that talk to this test's ``server``
    (tests running in parallel start sessions with the same task ids: those are not this test's)."""
    mine = f"ANTHROPIC_BASE_URL={server.url}".encode()
    found = []
    for pid, cmd in _cmdlines():
        if b"-p" in cmd and any(marker.encode() in part for part in cmd):
            try:
                environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if mine in environ:
                found.append(pid)
    return found


def test_a_killed_worker_loses_nothing_and_resume_runs_exactly_the_missing_tasks(
    tmp_path: Path, project: Path, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    convs, tasks = _fleet(12, sleep=1.0)
    server = fake_llm({"conversations": convs})
    tasks_file = _write_tasks(tmp_path / "tasks.jsonl", tasks)
    out = tmp_path / "out.jsonl"
    env = {**os.environ, **_env(server)}
    cmd = [KEEL, "batch", str(tasks_file), "-o", str(out), "--concurrency", "3"]
    batch = subprocess.Popen(cmd, cwd=project, env=env, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    # a worker dies mid-task: its task runs again
    victim = wait_until(lambda: _keel_children("<T001>", server), 120, "the session of T001", 0.1)[0]
    os.kill(victim, signal.SIGKILL)
    # then the whole batch dies, with some results written (the retried one among them) and some tasks running
    wait_until(lambda: len(recorded(out)) >= 5 and "T001" in recorded(out), 120, "5 results, T001 among them", 0.1)
    batch.kill()
    batch.wait()
    before = recorded(out)
    assert before["T001"].attempts == 2 and before["T001"].status == "success"
    wait_until(lambda: not _keel_children("<T0", server), 60, "the killed batch's sessions to die with it", 0.1)
    n_requests = len(server.cursor.requests)
    resumed = subprocess.run([*cmd, "--resume"], cwd=project, env=env, stdin=subprocess.DEVNULL,
                             capture_output=True, text=True, timeout=600)  # fmt: skip
    assert resumed.returncode == 1, resumed.stderr  # two fail on purpose
    after = _check(out, 12)
    for tid, r in before.items():
        assert after[tid] == r  # nothing recorded was run again
    # only the missing tasks reached the model again
    rerun = {first for r in server.cursor.requests[n_requests:] for first in _task_ids(r)}
    assert rerun == set(after) - set(before)


def _task_ids(record: dict[str, Any]) -> set[str]:
    msgs = record["body"]["messages"]
    first = msgs[0]["content"]
    text = first if isinstance(first, str) else first[0]["text"]
    return {text.split("<")[1].split(">")[0]} if "<" in text else set()


def test_the_shared_rate_limiter_keeps_a_batch_under_the_providers_limit(
    tmp_path: Path, project: Path, keel: Callable[..., KeelRun], fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    convs, tasks = _fleet(10)
    tasks = [t for t in tasks if t["id"] not in ("T003", "T007")]
    # the provider: 6 requests per 3 s window, then 429 with retry-after
    server = fake_llm({"conversations": convs, "rate_limit": {"per_minute": 6, "window_s": 3, "retry_after": 1}})
    out = tmp_path / "out.jsonl"
    run = keel("batch", str(_write_tasks(tmp_path / "tasks.jsonl", tasks)), "-o", str(out), "--concurrency", "8",
               "--rpm", "5", "--rate-window-s", "3", env=_env(server), timeout=600)  # fmt: skip
    assert run.code == 0, run.stderr
    results = recorded(out)
    assert len(results) == 8 and all(r.status == "success" for r in results.values())
    limit = server.cursor.script.rate_limit
    assert limit is not None
    accepted = [r["received_at"] for r in server.cursor.requests if not r.get("rate_limited")]
    assert len(accepted) == 24
    # every request went through the one limiter, and every 429 was absorbed there: no worker saw one
    m = re.search(r"rate limiter: (\d+) request\(s\) sent, (\d+) refused", run.stderr)
    assert m is not None, run.stderr
    assert int(m.group(2)) == limit.rejected and int(m.group(1)) == 24 + limit.rejected


async def test_the_limiter_window_holds_requests_back() -> None:
    limiter = SharedLimiter(Limits(rpm=5, window_s=0.3))
    times = []
    for _ in range(11):
        await limiter.admit(10)
        times.append(time.monotonic())
    # any 6 consecutive admissions span at least one window (a lower bound: slowness cannot break it)
    assert all(b - a >= 0.3 - 1e-3 for a, b in zip(times, times[5:], strict=False))
    tokens = SharedLimiter(Limits(tpm=100, window_s=0.3))
    t0 = time.monotonic()
    for _ in range(3):
        await tokens.admit(60)  # 60 + 60 > 100: each waits for the one before to leave the window
    assert time.monotonic() - t0 >= 0.6 - 1e-3
    tokens.pause(0.2)
    t1 = time.monotonic()
    await tokens.admit(1)
    assert time.monotonic() - t1 >= 0.2 - 1e-3 and tokens.stats.upstream_429 == 1


def test_the_budget_stops_new_tasks(
    tmp_path: Path, project: Path, keel: Callable[..., KeelRun], fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    convs, tasks = _fleet(6)
    for c in convs:
        for s in c["steps"]:
            if isinstance(s, dict) and "tool_calls" in s:
                s["usage"] = {"input_tokens": 100_000, "output_tokens": 10}  # about $0.30 a request on sonnet
    server = fake_llm({"conversations": convs})
    out = tmp_path / "out.jsonl"
    env = {**_env(server), "KEEL_MODEL": "anthropic:claude-sonnet-4-5"}
    tasks_file = _write_tasks(tmp_path / "tasks.jsonl", tasks)
    run = keel("batch", str(tasks_file), "-o", str(out), "--concurrency", "1", "--max-budget-usd", "0.01", env=env)
    assert run.code == 1
    assert "not started (budget $0.01 reached)" in run.stderr
    assert len(recorded(out)) == 1


def test_bad_tasks_files_are_one_clear_line(tmp_path: Path, keel: Callable[..., KeelRun]) -> None:
    cases = {
        '{"id": "a"}\n': "missing required field `prompt`",
        '{"id": "a", "prompt": "x"}\n{"id": "a", "prompt": "y"}\n': "already used on line 1",
        "not json\n": "not a JSON object",
        '{"id": "a", "prompt": "x", "permission_mode": "yolo"}\n': "permission_mode",
        '{"id": "a", "prompt": "x", "colour": "red"}\n': "unknown field `colour`",
        "\n": "no tasks",
    }
    for text, message in cases.items():
        f = tmp_path / "t.jsonl"
        f.write_text(text)
        with pytest.raises(TaskFileError, match=message.replace("$", r"\$")):
            load_tasks(f)
        run = keel("batch", str(f), "-o", str(tmp_path / "o.jsonl"))
        assert run.code == 2 and "Traceback" not in run.stderr and len(run.stderr.strip().splitlines()) == 1
    run = keel("batch", str(tmp_path / "missing.jsonl"), "-o", str(tmp_path / "o.jsonl"))
    assert run.code == 2 and "cannot read" in run.stderr


def test_an_existing_output_is_never_overwritten_without_resume(tmp_path: Path, keel: Callable[..., KeelRun]) -> None:
    out = tmp_path / "o.jsonl"
    out.write_text(json.dumps({"id": "a", "status": "success"}) + "\n")
    (tmp_path / "t.jsonl").write_text('{"id": "a", "prompt": "x"}\n')
    run = keel("batch", str(tmp_path / "t.jsonl"), "-o", str(out))
    assert run.code == 2 and "--resume" in run.stderr
    assert out.read_text() == json.dumps({"id": "a", "status": "success"}) + "\n"


def test_a_partial_last_line_is_cut_before_appending(tmp_path: Path) -> None:
    out = tmp_path / "o.jsonl"
    out.write_bytes(b'{"id":"a","status":"success"}\n{"id":"b","sta')
    assert list(recorded(out)) == ["a"]
    w = ResultWriter(out)
    w.write(Result("c", "error", error="x"))
    w.close()
    assert list(recorded(out)) == ["a", "c"]
    assert out.read_text().count("\n") == 2


@pytest.mark.skipif(sys.platform != "linux", reason="Ray local cluster test runs on Linux")
@pytest.mark.timeout(2400)  # its own bounds: 300 s for a worker, 900 s for each batch
def test_the_same_batch_on_a_local_ray_cluster_with_a_worker_killed(
    tmp_path: Path, project: Path, keel: Callable[..., KeelRun], fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    pytest.importorskip("ray", reason="the ray extra is not installed (scripts/setup installs it)")
    convs, tasks = _fleet(100)
    server = fake_llm({"conversations": convs})
    tasks_file = _write_tasks(tmp_path / "tasks.jsonl", tasks)
    local_out, ray_out = tmp_path / "local.jsonl", tmp_path / "ray.jsonl"
    env = {**os.environ, **_env(server), "RAY_USAGE_STATS_ENABLED": "0"}
    ray_batch = subprocess.Popen(
        [KEEL, "batch", str(tasks_file), "-o", str(ray_out), "--backend", "ray", "--concurrency", "4", "--retries=2"],
        cwd=project, env=env, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    # kill a Ray worker while it runs a task: Ray retries the task, nothing is lost
    worker = wait_until(lambda: [p for p in _procs("ray::_ray_run") if p != ray_batch.pid], 300, "a ray worker", 0.1)[0]
    os.kill(worker, signal.SIGKILL)
    _, err = ray_batch.communicate(timeout=900)
    assert ray_batch.returncode == 1, err
    local = keel("batch", str(tasks_file), "-o", str(local_out), "--concurrency", "4", env=_env(server), timeout=900)
    assert local.code == 1, local.stderr
    assert _signature(_check(ray_out, 100)) == _signature(_check(local_out, 100))


def _procs(marker: str) -> list[int]:
    return [pid for pid, cmd in _cmdlines() if any(marker.encode() in part for part in cmd)]


def test_workers_share_one_postgres_memory(
    tmp_path: Path,
    project: Path,
    request: pytest.FixtureRequest,
    keel: Callable[..., KeelRun],
    fake_llm: Callable[[Any], FakeLLMServer],
) -> None:
    """With memory.store on PostgreSQL, what one task's session recorded is recalled by the next one's."""
    dsn = postgres_dsn(request.getfixturevalue("pg_root"))
    convs = [
        {"match": "<learn>", "steps": [_bash("echo ok"), "Noted: deploys go through make ship-it-now"]},
        {"match": "<recall>", "steps": ["done"]},
    ]
    server = fake_llm({"conversations": convs})
    settings = {"memory": {"store": dsn, "embedder": "none"}}
    tasks = [
        {"id": "learn", "prompt": "<learn> the deploy command is make ship-it-now", "allowed_tools": ["Bash"],
         "settings": settings},
        {"id": "recall", "prompt": "<recall> how do deploys work here?", "settings": settings},
    ]  # fmt: skip
    out = tmp_path / "out.jsonl"
    # concurrency 1: the second task starts after the first has ended (and its capture is flushed)
    run = keel("batch", str(_write_tasks(tmp_path / "tasks.jsonl", tasks)), "-o", str(out), "--concurrency", "1",
               env=_env(server))  # fmt: skip
    assert run.code == 0, run.stderr
    recall = [r for r in server.cursor.requests if "<recall>" in json.dumps(r["body"]["messages"][0])]
    assert recall and "ship-it-now" in json.dumps(recall[0]["body"])
    # and it came from PostgreSQL: the SQLite default store under KEEL_HOME was never created
    assert not (tmp_path / "keelhome" / "memory" / "memory.db").exists()


def test_ctrl_c_cancels_cleanly_and_resume_finishes(
    tmp_path: Path, project: Path, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    convs, tasks = _fleet(6, sleep=30.0)
    server = fake_llm({"conversations": convs})
    tasks_file = _write_tasks(tmp_path / "tasks.jsonl", tasks)
    out = tmp_path / "out.jsonl"
    env = {**os.environ, **_env(server)}
    cmd = [KEEL, "batch", str(tasks_file), "-o", str(out), "--concurrency", "2"]
    batch = subprocess.Popen(cmd, cwd=project, env=env, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wait_until(
        lambda: len(_keel_children("<T00", server)) == 2 and len(server.cursor.requests) >= 2, 120, "two sessions", 0.1
    )
    batch.send_signal(signal.SIGINT)
    _, err = batch.communicate(timeout=120)
    assert batch.returncode == 130, err
    assert "interrupted; run again with --resume" in err and "Traceback" not in err
    cancelled = recorded(out)
    assert len(cancelled) == 2 and all(r.status == "cancelled" and r.session_id for r in cancelled.values())
    assert not _keel_children("<T00", server)
    for f in session_files(tmp_path / "keelhome"):  # every transcript is whole: each line is JSON
        assert all(json.loads(line) for line in f.read_text().splitlines())
    # --resume runs the cancelled tasks and the ones never started (with the sleeps made short)
    fast, _ = _fleet(6)
    server.cursor.reset(Script.from_data({"conversations": fast}))
    resumed = subprocess.run([*cmd, "--resume"], cwd=project, env=env, stdin=subprocess.DEVNULL,
                             capture_output=True, text=True, timeout=600)  # fmt: skip
    assert resumed.returncode == 1, resumed.stderr  # T003 fails on purpose
    assert {r.status for r in recorded(out).values()} == {"success", "error"} and len(recorded(out)) == 6


def _git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def test_git_tasks_worktrees_and_timeouts(
    tmp_path: Path, project: Path, keel: Callable[..., KeelRun], fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    """A task cloned from a git URL at a ref; two tasks in worktrees of one repository; one timed out."""
    origin = tmp_path / "origin"
    origin.mkdir()
    _git("init", "-q", "-b", "main", cwd=origin)
    (origin / "VERSION").write_text("one\n")
    _git("add", ".", cwd=origin)
    _git("-c", "user.email=t@example.invalid", "-c", "user.name=t", "commit", "-qm", "one", cwd=origin)
    _git("tag", "v1", cwd=origin)
    (origin / "VERSION").write_text("two\n")
    _git("-c", "user.email=t@example.invalid", "-c", "user.name=t", "commit", "-qam", "two", cwd=origin)
    convs = [
        {"match": "<clone>", "steps": [_bash("cat VERSION"), "read it"]},
        {"match": "<wt-a>", "steps": [_bash("pwd"), "a"]},
        {"match": "<wt-b>", "steps": [_bash("pwd"), "b"]},
        {"match": "<slow>", "steps": [_bash("sleep 60"), "never"]},
    ]
    server = fake_llm({"conversations": convs})
    tasks = [
        {"id": "clone", "prompt": "<clone>", "git": origin.as_uri(), "ref": "v1", "allowed_tools": ["Bash"]},
        {"id": "wt-a", "prompt": "<wt-a>", "repo": "origin", "worktree": True, "allowed_tools": ["Bash"]},
        {"id": "wt-b", "prompt": "<wt-b>", "repo": "origin", "worktree": True, "allowed_tools": ["Bash"]},
        {"id": "slow", "prompt": "<slow>", "allowed_tools": ["Bash"], "timeout_s": 3},
    ]
    out = tmp_path / "out.jsonl"
    run = keel("batch", str(_write_tasks(tmp_path / "tasks.jsonl", tasks)), "-o", str(out), env=_env(server))
    assert run.code == 1, run.stderr
    results = recorded(out)
    assert {k: r.status for k, r in results.items()} == {
        "clone": "success", "wt-a": "success", "wt-b": "success", "slow": "timeout"
    }  # fmt: skip
    clone_req = [r for r in server.cursor.requests if "<clone>" in json.dumps(r["body"]["messages"][0])][-1]
    assert '"one' in json.dumps(clone_req["body"]["messages"][-1])  # the clone was checked out at v1
    trees = {k: Path(results[k].cwd) for k in ("wt-a", "wt-b")}
    assert trees["wt-a"] != trees["wt-b"] and all(t.parent == origin / ".keel" / "worktrees" for t in trees.values())
    assert "keel-batch/wt-a" in _git("branch", "--list", cwd=origin)
    assert "timed out after 3 s" in results["slow"].error
    assert not _keel_children("<slow>", server)  # its session was stopped with it
