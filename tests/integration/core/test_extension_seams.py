"""Foundation II: the seams (named extensions, the event-derived view, provided services, open
event types) and the defects found tracing a turn, each through the CLI or the public API."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentkeel.app.runtime import Runtime, RuntimeOptions
from agentkeel.core.events import Event, register_event_type
from agentkeel.core.extensions import Extension, PromptInfo, PromptVerdict, ToolCall, Verdict
from agentkeel.core.provider import ModelRequest, ProviderError
from agentkeel.core.tools import ToolOutput
from agentkeel.core.types import to_data
from agentkeel.models.fake.server import FakeLLMServer
from agentkeel.session.load import load_session
from kit import KEEL, KeelRun, session_files, wait_until, wire_env

FAKE_SECRET = "sk-ant-" + "api03-" + "NOTAREALKEY" * 3  # obviously fake, built from pieces


def script_file(tmp: Path, steps: list[Any], name: str = "script.json") -> Path:
    path = tmp / name
    path.write_text(json.dumps({"steps": steps}))
    return path


# --- the acceptance test: a session through the public API, resumed byte for byte ------------


@register_event_type
class AuditNote(Event, frozen=True, kw_only=True, tag="test_audit_note"):
    """A persisted event type defined outside core (as hooks, compaction and subagents will)."""

    text: str


class Ledger:
    """A provided per-session service (Services.put): it needs arguments, so get() could not make it."""

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self.calls: list[str] = []


async def test_public_api_session_with_every_extension_kind_resumes_to_the_same_view(project: Path) -> None:
    (project / "notes.txt").write_text("alpha\n")
    steps = [
        {"tool_calls": [{"name": "Read", "input": {"file_path": "notes.txt"}}]},
        {"tool_calls": [{"name": "Bash", "input": {"command": "echo hi"}}]},
        {"error": {"status": 400, "message": "bad request on purpose"}},
        "done",
        "second answer",
    ]
    script = script_file(project.parent, steps)
    requests: list[ModelRequest] = []
    seen: dict[str, list[Any]] = {"before": [], "after": [], "errors": [], "asks": []}

    async def before_tool(call: ToolCall) -> Verdict | None:
        seen["before"].append((call.name, call.cwd, call.mode))
        if call.name == "Bash":
            return Verdict("ask", "the test extension wants a human for Bash")
        return None

    async def after_tool(call: ToolCall, output: ToolOutput) -> ToolOutput:
        seen["after"].append((call.name, output.metadata.get("exit_code")))
        return output

    async def on_prompt(info: PromptInfo) -> PromptVerdict:
        return PromptVerdict(context=(f"<project-note>first={info.first}</project-note>",))

    async def on_error(err: ProviderError) -> None:
        seen["errors"].append(err.kind)

    async def before_request(request: ModelRequest) -> ModelRequest:
        requests.append(request)
        return request

    async def ask(call: ToolCall, decision: Any) -> str:
        seen["asks"].append(call.name)
        return "allow"

    def options(**extra: Any) -> RuntimeOptions:
        ext = Extension(
            "test-extension",
            before_tool=before_tool,
            after_tool=after_tool,
            on_prompt=on_prompt,
            on_error=on_error,
            before_request=before_request,
        )
        return RuntimeOptions(
            cwd=project,
            model=f"scripted:{script}",
            ask=ask,
            extensions=[ext],
            services={Ledger: Ledger("tests")},
            env={**os.environ, "KEEL_MAX_RETRIES": "0"},
            **extra,
        )

    rt = Runtime.create(options())
    assert rt.agent.services.get(Ledger).owner == "tests"
    assert "test-extension" in rt.agent.ext.names() and "permission-gate" in rt.agent.ext.names()
    first = await rt.run(f"read the notes; my key is {FAKE_SECRET}")
    rt.bus.emit(AuditNote(text="a custom persisted event"))
    second = await rt.run("and now?")
    live_view = [to_data(m) for m in rt.agent.messages]
    session_path = rt.session_path
    await rt.aclose()
    assert first.subtype == "error_during_execution" and "bad request on purpose" in first.error
    assert seen["errors"] == ["bad_request"]
    assert second.subtype == "success" and second.result == "done"
    assert seen["asks"] == ["Bash"]  # the extension's ask went to the host's callback
    assert [c[0] for c in seen["before"]] == ["Read", "Bash"]
    assert all(cwd == project.resolve() and mode == "default" for _, cwd, mode in seen["before"])
    assert ("Bash", 0) in seen["after"]
    # the model never saw the secret, live or later; the prompt context reached it
    sent = json.dumps([to_data(m) for r in requests for m in r.messages])
    assert FAKE_SECRET not in sent and "[REDACTED" in sent and "first=True" in sent and "first=False" in sent
    # the custom event is in the log, and the session loads with it
    loaded = load_session(session_path)
    assert any(isinstance(e, AuditNote) and e.text == "a custom persisted event" for e in loaded.events)
    # resumed: the model's view is the live one, byte for byte
    resumed = Runtime.create(options(resume=rt.session_id))
    try:
        assert [to_data(m) for m in resumed.agent.messages] == live_view
        await resumed.run("third")
        last = requests[-1].messages
        assert [to_data(m) for m in last[: len(live_view)]] == live_view
    finally:
        await resumed.aclose()


def test_an_unknown_event_type_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    lines = [
        {"type": "user", "uuid": "u1", "message": {"role": "user", "content": [{"type": "text", "text": "hi"}]}},
        {"type": "from_a_newer_keel", "uuid": "x1", "payload": {"a": 1}},
        {
            "type": "assistant",
            "uuid": "a1",
            "message": {"role": "assistant", "content": [{"type": "text", "text": "yo"}]},
        },
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    loaded = load_session(path)
    assert loaded.report.clean
    assert [m.text() for m in loaded.messages] == ["hi", "yo"]


# --- named built-ins and disabled_hooks -----------------------------------------------------


def test_disabled_hooks_turns_the_loop_detector_off(project: Path, keel: Callable[..., KeelRun]) -> None:
    same = {"tool_calls": [{"name": "LS", "input": {"path": "."}}]}
    script = script_file(project.parent, [same, same, same, same, "done"])
    on = keel("-p", "list", "--model", f"scripted:{script}", "--output-format", "json")
    assert on.code == 0
    stopped = [e for e in _session_results(project) if "called with the same input" in e]
    assert stopped, "control: the loop detector stops the third identical call"
    settings = project / "off.json"
    settings.write_text(json.dumps({"disabled_hooks": ["loop-detector", "permission-gate", "no-such-thing"]}))
    off = keel("-p", "list", "--model", f"scripted:{script}", "--settings", str(settings))
    assert off.code == 0
    assert "'permission-gate' is a safety check and cannot be disabled" in off.stderr
    assert "no built-in named 'no-such-thing'" in off.stderr
    newest = max(session_files(Path(os.environ["KEEL_HOME"])), key=lambda p: p.stat().st_mtime)
    results = [e for e in _session_results(project, newest) if "called with the same input" in e]
    assert not results  # (the prompt's memory context may quote the first run: only the tool results count)


def _session_results(project: Path, only: Path | None = None) -> list[str]:
    out: list[str] = []
    for path in [only] if only is not None else session_files(Path(os.environ["KEEL_HOME"])):
        for line in path.read_text().splitlines():
            entry = json.loads(line)
            if entry.get("type") == "tool_results":
                out += [str(b.get("content")) for b in entry["message"]["content"]]
    return out


# --- defects --------------------------------------------------------------------------------


def test_a_transcript_that_cannot_be_written_stops_the_run_with_one_line(project: Path) -> None:
    """A full disk (simulated by RLIMIT_FSIZE: writes past the limit fail with EFBIG): the run
    stops with one line naming the session file, exit 1, no traceback flood."""
    big = "x" * 3000
    steps = [{"tool_calls": [{"name": "Bash", "input": {"command": f"echo {big}"}}]}] * 30 + ["done"]
    script = script_file(project.parent, steps)
    limit = 20_000

    def small_disk() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    proc = subprocess.run(
        [KEEL, "-p", "go", "--model", f"scripted:{script}", "--allowedTools", "Bash"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=small_disk,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 1, proc.stderr
    assert "cannot write the session file" in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.splitlines()) <= 3, proc.stderr
    (path,) = session_files(Path(os.environ["KEEL_HOME"]))
    loaded = load_session(path)
    # what was written before the failure is intact; nothing was written after a gap
    assert loaded.events and len(loaded.report.skipped) <= 1


def test_a_finished_tool_result_survives_a_kill_in_the_middle_of_its_batch(project: Path) -> None:
    calls = [
        {"name": "Bash", "input": {"command": "echo first-done"}},
        {"name": "Bash", "input": {"command": "sleep 60"}},
    ]
    script = script_file(project.parent, [{"tool_calls": calls}, "never"])
    proc = subprocess.Popen(
        [KEEL, "-p", "go", "--model", f"scripted:{script}", "--allowedTools", "Bash"],
        cwd=project,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    home = Path(os.environ["KEEL_HOME"])

    def first_done() -> bool:
        files = session_files(home)
        return bool(files) and any(
            '"tool_results"' in line and "first-done" in line for line in files[0].read_text().splitlines()
        )

    wait_until(first_done, 60, "the first tool result in the log")
    proc.kill()
    proc.wait()
    (path,) = session_files(home)
    view = load_session(path).messages
    results = view[-1].tool_results()
    assert "first-done" in results[0].text()  # the finished tool's output, not "missing"
    assert results[1].is_error and "missing" in results[1].text().lower()


def test_deeply_nested_lines_and_huge_integers_do_not_break_sessions_or_settings(
    project: Path, keel: Callable[..., KeelRun]
) -> None:
    script = script_file(project.parent, ["one", "two"])
    assert keel("-p", "hi", "--model", f"scripted:{script}").code == 0
    (path,) = session_files(Path(os.environ["KEEL_HOME"]))
    with path.open("a") as f:
        f.write('{"type": "user", "message": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    again = keel("-c", "-p", "more", "--model", f"scripted:{script}")
    assert again.code == 0 and "internal error" not in again.stderr, again.stderr
    assert "1 unreadable line(s) skipped" in again.stderr
    for body in ('{"hooks": {"Stop": ' + "[" * 100_000 + "]" * 100_000 + "}}", '{"maxTokens": ' + "9" * 5001 + "}"):
        bad = project / "bad.json"
        bad.write_text(body)
        run = keel("-p", "x", "--model", f"scripted:{script}", "--settings", str(bad))
        assert run.code == 2 and str(bad) in run.stderr and "internal error" not in run.stderr, run.stderr


def test_a_fifo_in_the_sessions_folder_never_hangs(project: Path, keel: Callable[..., KeelRun]) -> None:
    script = script_file(project.parent, ["one", "two", "three"])
    assert keel("-p", "hi", "--model", f"scripted:{script}").code == 0
    (path,) = session_files(Path(os.environ["KEEL_HOME"]))
    fifo = path.with_name("00000000-fifo.jsonl")
    os.mkfifo(fifo)
    os.utime(fifo, (time.time() + 100, time.time() + 100))  # the newest "session"
    listed = keel("sessions", "list", timeout=60)
    assert listed.code == 0 and path.stem in listed.stdout and "fifo" not in listed.stdout
    assert keel("-c", "-p", "again", "--model", f"scripted:{script}", timeout=60).code == 0
    assert keel("-r", "00000000-fifo", "-p", "x", "--model", f"scripted:{script}", timeout=60).code == 2


async def test_repeated_tool_use_ids_each_get_their_result(project: Path) -> None:
    (project / "a.txt").write_text("A\n")
    (project / "b.txt").write_text("B\n")
    calls = [
        {"id": "toolu_same", "name": "Read", "input": {"file_path": "a.txt"}},
        {"id": "toolu_same", "name": "Read", "input": {"file_path": "b.txt"}},
    ]
    script = script_file(project.parent, [{"tool_calls": calls}, "ok"])
    rt = Runtime.create(RuntimeOptions(cwd=project, model=f"scripted:{script}"))
    try:
        await rt.run("read both")
        uses = rt.agent.messages[1].tool_uses()
        results = rt.agent.messages[2].tool_results()
    finally:
        await rt.aclose()
    assert len({u.id for u in uses}) == 2
    assert [r.tool_use_id for r in results] == [u.id for u in uses]
    assert "A" in results[0].text() and "B" in results[1].text()


def test_a_resumed_request_never_sends_two_user_messages_in_a_row(
    project: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    server = fake_llm({"steps": [{"text": "slow", "delay_s": 30}, "resumed answer"]})
    env = {**wire_env(server, "anthropic"), "KEEL_MAX_RETRIES": "0"}
    proc = subprocess.Popen(
        [KEEL, "-p", "first question"],
        cwd=project,
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    wait_until(lambda: server.cursor.requests, 60, "keel's request")
    proc.kill()  # dies while the request is in flight: the log ends with a user message
    proc.wait()
    again = keel("-c", "-p", "second question", env=env)
    assert again.code == 0, again.stderr
    body = server.cursor.requests[-1]["body"]
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["user"], roles  # merged, as strict servers require alternation
    texts = [b.get("text") for b in body["messages"][0]["content"]]
    assert "first question" in texts and "second question" in texts


def test_an_untrusted_project_cannot_choose_the_model(project: Path, keel: Callable[..., KeelRun]) -> None:
    hostile = script_file(
        project, [{"tool_calls": [{"name": "Write", "input": {"file_path": "x.py", "content": "1"}}]}]
    )
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text(json.dumps({"model": f"scripted:{hostile}"}))
    run = keel("-p", "hello", "--permission-mode", "acceptEdits")
    assert run.code == 2 and "no model provider configured" in run.stderr, run.stderr
    assert not (project / "x.py").exists()
    # a catalog model of a provider the user configured is still allowed
    (project / ".claude" / "settings.json").write_text(json.dumps({"model": "haiku"}))
    from agentkeel.models.catalog import untrusted_model_allowed

    assert untrusted_model_allowed("haiku", {"ANTHROPIC_API_KEY": "sk-ant-test-not-a-real-key"})
    assert not untrusted_model_allowed("haiku", {})
    assert not untrusted_model_allowed(f"scripted:{hostile}", {"ANTHROPIC_API_KEY": "x"})
    assert not untrusted_model_allowed("ollama:qwen3", {"OPENAI_BASE_URL": "http://127.0.0.1:1/v1"})


# --- what a new user hits first -------------------------------------------------------------


def test_output_into_a_closed_pipe_is_a_normal_end(project: Path) -> None:
    script = script_file(project.parent, [{"tool_calls": [{"name": "LS", "input": {"path": "."}}]}, "done"])
    keel_cmd = f"{KEEL} -p hi --model scripted:{script} --output-format stream-json | head -1"
    run = subprocess.run(["bash", "-c", keel_cmd], cwd=project, capture_output=True, text=True, timeout=60)
    assert json.loads(run.stdout)["subtype"] == "init"
    assert "internal error" not in run.stderr and "Traceback" not in run.stderr, run.stderr
    for _ in range(3):
        subprocess.run([KEEL, "-p", "x", "--model", f"scripted:{script}"], cwd=project, capture_output=True)
    listed = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {KEEL} sessions list | head -1"], cwd=project, capture_output=True, text=True
    )
    assert listed.returncode == 0 and "internal error" not in listed.stderr, listed.stderr


def test_an_unwritable_keel_home_is_a_configuration_error(project: Path, tmp_path: Path) -> None:
    home = tmp_path / "file-not-dir"
    home.write_text("")
    script = script_file(project.parent, ["x"])
    run = subprocess.run(
        [KEEL, "-p", "hi", "--model", f"scripted:{script}"],
        cwd=project,
        capture_output=True,
        text=True,
        env={**os.environ, "KEEL_HOME": str(home)},
        stdin=subprocess.DEVNULL,
    )
    assert run.returncode == 2 and f"cannot write to KEEL_HOME ({home})" in run.stderr, run.stderr
    assert "internal error" not in run.stderr


def test_session_refs_that_name_nothing_are_errors(project: Path, keel: Callable[..., KeelRun]) -> None:
    script = script_file(project.parent, ["a", "b", "c"])
    none_yet = keel("-c", "-p", "x", "--model", f"scripted:{script}")
    assert none_yet.code == 2 and "no earlier session to continue" in none_yet.stderr
    assert keel("-r", "", "-p", "x", "--model", f"scripted:{script}").code == 2
    home = Path(os.environ["KEEL_HOME"])
    assert keel("-p", "x", "--model", f"scripted:{script}").code == 0
    (made,) = session_files(home)
    for stem in ("abcd1111-0000-4000-8000-000000000001", "abcd2222-0000-4000-8000-000000000002"):
        made.with_name(f"{stem}.jsonl").write_bytes(made.read_bytes())
    ambiguous = keel("-r", "abcd", "-p", "x", "--model", f"scripted:{script}")
    assert ambiguous.code == 2 and "matches 2 sessions" in ambiguous.stderr, ambiguous.stderr


def test_sessions_list_shows_the_prompt_not_the_memory_context(project: Path, keel: Callable[..., KeelRun]) -> None:
    script = script_file(project.parent, ["a", "b"])
    assert keel("-p", "remember the blue door", "--model", f"scripted:{script}").code == 0
    assert keel("-p", "what colour was the door", "--model", f"scripted:{script}").code == 0
    listed = keel("sessions", "list", "--json").json()
    assert {s["first_prompt"] for s in listed} == {"remember the blue door", "what colour was the door"}


def test_stream_json_init_lists_only_visible_tools_and_the_trust_notice_prints_once(
    project: Path, keel: Callable[..., KeelRun]
) -> None:
    script = script_file(project.parent, ["ok"])
    (project / ".keel").mkdir()
    (project / ".keel" / "settings.json").write_text(json.dumps({"permissions": {"deny": ["WebFetch"]}}))
    run = keel(
        "-p", "hi", "--model", f"scripted:{script}", "--output-format", "stream-json", "--disallowedTools", "Grep"
    )
    init = run.lines()[0]
    assert init["subtype"] == "init" and "WebFetch" not in init["tools"] and "Grep" not in init["tools"]
    assert "Read" in init["tools"]
    js = keel("-p", "hi", "--model", f"scripted:{script}", "--output-format", "json")
    assert js.stderr.count("not trusted") == 1, js.stderr


def test_a_malformed_disallowed_rule_warns_without_verbose(project: Path, keel: Callable[..., KeelRun]) -> None:
    script = script_file(project.parent, ["ok"])
    run = keel("-p", "hi", "--model", f"scripted:{script}", "--disallowedTools", "Bash(unclosed")
    assert run.code == 0 and "Bash(unclosed" in run.stderr and "denying the whole tool" in run.stderr, run.stderr


def test_verbose_shows_requests_and_tool_calls(project: Path, keel: Callable[..., KeelRun]) -> None:
    script = script_file(project.parent, [{"tool_calls": [{"name": "LS", "input": {"path": "."}}]}, "ok"])
    quiet = keel("-p", "hi", "--model", f"scripted:{script}")
    loud = keel("-p", "hi", "--model", f"scripted:{script}", "--verbose")
    assert "request 1" not in quiet.stderr
    assert "request 1 to" in loud.stderr and "LS ok" in loud.stderr, loud.stderr


def test_help_mentions_memory_commands(keel: Callable[..., KeelRun]) -> None:
    assert "keel mem" in keel("--help").stdout


def test_always_in_this_project_keeps_the_folder_trusted(project: Path) -> None:
    """The rule keel writes to .keel/settings.local.json must hold in the next -p run."""
    from agentkeel.config.trust import TrustStore
    from agentkeel.policy.permissions.gate import remember_for_project

    home = Path(os.environ["KEEL_HOME"])
    assert TrustStore(home).state(project).status == "nothing-to-trust"
    script = script_file(
        project.parent, [{"tool_calls": [{"name": "Bash", "input": {"command": "touch made.txt"}}]}, "ok"]
    )

    async def always(call: ToolCall, decision: Any) -> str:
        return "allow_project"

    import asyncio

    async def first() -> None:
        rt = Runtime.create(RuntimeOptions(cwd=project, model=f"scripted:{script}", ask=always))
        try:
            await rt.run("go")
        finally:
            await rt.aclose()

    asyncio.run(first())
    assert (project / ".keel" / "settings.local.json").is_file()
    assert TrustStore(home).state(project).trusted
    assert remember_for_project is not None
    run = subprocess.run(
        [KEEL, "-p", "go", "--model", f"scripted:{script}", "--output-format", "json"],
        cwd=project,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    assert run.returncode == 0 and "not trusted" not in run.stderr, run.stderr


@pytest.mark.parametrize(
    "name", ["agentkeel.ui.cli.headless", "agentkeel.ui.cli.interactive", "agentkeel.ui.cli.commands"]
)
def test_front_ends_do_not_import_cli_main(name: str) -> None:
    out = subprocess.run(
        [sys.executable, "-c", f"import sys, {name}; print('agentkeel.ui.cli.main' in sys.modules)"],
        capture_output=True,
        text=True,
    )
    assert out.stdout.strip() == "False", out.stderr


def test_a_claude_code_flag_keel_lacks_is_refused_in_one_line(keel: Callable[..., KeelRun]) -> None:
    run = keel("-p", "hi", "--effort", "high")
    assert run.code == 2 and run.stderr.strip().count("\n") == 0 and "--effort" in run.stderr, run.stderr


def test_read_deny_holds_after_the_shell_changes_directory(project: Path, keel: Callable[..., KeelRun]) -> None:
    """`cd a` then `cat secrets/key.txt` was allowed: the engine resolved paths against the project
    root while the shell had moved. Decisions now use the shell's live cwd (core Workdir)."""
    (project / "a" / "secrets").mkdir(parents=True)
    (project / "a" / "secrets" / "key.txt").write_text("TOP-SECRET-CONTENT\n")
    (project / ".keel").mkdir()
    (project / ".keel" / "settings.json").write_text(json.dumps({"permissions": {"deny": ["Read(./a/secrets/**)"]}}))
    steps = [
        {"tool_calls": [{"name": "Bash", "input": {"command": "cd a"}}]},
        {"tool_calls": [{"name": "Bash", "input": {"command": "cat secrets/key.txt"}}]},
        {"tool_calls": [{"name": "Bash", "input": {"command": "cd / && cat etc/hostname"}}]},
        "done",
    ]
    script = script_file(project.parent, steps)
    from agentkeel.config.trust import TrustStore

    TrustStore(Path(os.environ["KEEL_HOME"])).trust(project)
    run = keel("-p", "go", "--model", f"scripted:{script}", "--allowedTools", "Bash(cd *)", "Bash(cat *)")
    assert run.code == 0, run.stderr
    (path,) = session_files(Path(os.environ["KEEL_HOME"]))
    text = path.read_text()
    assert "TOP-SECRET-CONTENT" not in text
    results = [e for e in map(json.loads, text.splitlines()) if e["type"] == "tool_results"]
    second = results[1]["message"]["content"][0]
    assert second["is_error"] and "denied" in second["content"].lower(), second
    assert any(e["type"] == "cwd_changed" and e["new_cwd"].endswith("/a") for e in map(json.loads, text.splitlines()))


def test_permissions_check_takes_the_shells_cwd(project: Path, keel: Callable[..., KeelRun]) -> None:
    (project / "a" / "secrets").mkdir(parents=True)
    (project / "a" / "secrets" / "key.txt").write_text("x\n")
    rules = project / "rules.json"
    rules.write_text(json.dumps({"permissions": {"deny": ["Read(./a/secrets/**)"], "allow": ["Bash(cat *)"]}}))
    base = ["permissions", "check", "--tool", "Bash", "--input", '{"command": "cat secrets/key.txt"}']
    at_root = keel(*base, "--settings", str(rules), "--json").json()
    moved = keel(*base, "--settings", str(rules), "--shell-cwd", "a", "--json").json()
    assert at_root["decision"] != "deny" and moved["decision"] == "deny", (at_root, moved)


def test_a_huge_sparse_or_long_lined_session_loads_in_bounded_memory(
    project: Path, keel: Callable[..., KeelRun]
) -> None:
    """A session file with a 4 GB hole and a 100 MiB line: `keel -c` resumes it under a 1 GiB
    address-space limit and a hard timeout; both are reported as skipped lines."""
    script = script_file(project.parent, ["one", "two"])
    assert keel("-p", "hi", "--model", f"scripted:{script}").code == 0
    (path,) = session_files(Path(os.environ["KEEL_HOME"]))
    with path.open("ab") as f:
        f.write(b'{"type": "user", "message": "' + b"x" * (100 * 1024 * 1024) + b'"}\n')
        f.truncate(f.tell() + 4 * 1024**3)  # a 4 GB hole
        f.seek(0, os.SEEK_END)
        f.write(b"\n")

    def small_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1024**3, 1024**3))

    proc = subprocess.run(
        [KEEL, "-c", "-p", "again", "--model", f"scripted:{script}"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=small_memory,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr
    assert "2 unreadable line(s) skipped" in proc.stderr, proc.stderr


def test_mem_reindex_takes_the_embedder_after_the_action_as_the_readme_writes_it(
    keel: Callable[..., KeelRun],
) -> None:
    run = keel("mem", "reindex", "--embedder", "none")
    assert run.code != 2 or "unrecognized arguments" not in run.stderr, run.stderr
