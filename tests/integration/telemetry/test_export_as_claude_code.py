"""keel's OpenTelemetry export against Claude Code 2.1.328's, recorded on the same scripted session
(tests/data/otel/claude_code_2.1.328.json): the real ``keel -p`` against the scripted model,
exporting to a loopback OTLP receiver of its own port per test."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kit import KeelRun, wire_env

from .receiver import Receiver, shape

pytest.importorskip("opentelemetry.sdk")

RECORDING = json.loads((Path(__file__).parents[2] / "data" / "otel" / "claude_code_2.1.328.json").read_text())
PROMPT = "please tidy notes.txt"
SECRET = "sk-ant-api03-FAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKE0000-x"
# the events keel exports (Claude Code's managed_settings_resolved and plugin_loaded describe
# Claude Code's own managed settings and bundled plugins: keel has neither)
EVENTS = ("api_request", "assistant_response", "tool_decision", "tool_result", "user_prompt")
# attributes Claude Code sets from things keel does not have or does not measure the same way
NOT_IN_KEEL: dict[str, set[str]] = {}
STABLE = frozenset({"type", "decision", "source", "success", "tool_name", "language", "start_type", "event.name"})


def steps(project: Path) -> list[Any]:
    return [
        {
            "tool_calls": [
                {
                    "name": "Bash",
                    "input": {"command": f"echo hello-{SECRET}; echo done", "description": "say hello"},
                }
            ]
        },
        {"tool_calls": [{"name": "Read", "input": {"file_path": str(project / "notes.txt")}}]},
        {
            "tool_calls": [
                {
                    "name": "Edit",
                    "input": {
                        "file_path": str(project / "notes.txt"),
                        "old_string": "beta",
                        "new_string": "gamma\ndelta",
                    },
                }
            ]
        },
        {
            "tool_calls": [
                {"name": "Write", "input": {"file_path": str(project / "new.txt"), "content": "one\ntwo\nthree\n"}}
            ]
        },
        {"text": "All done.", "usage": {"input_tokens": 120, "output_tokens": 5}},
    ]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver("http") as r:
        yield r


def run(
    keel: Callable[..., KeelRun],
    fake_llm: Callable[[Any], Any],
    project: Path,
    receiver: Receiver,
    protocol: str = "http/json",
    allowed: str = "Bash,Read,Edit,Write",
    **extra: str,
) -> KeelRun:
    (project / "notes.txt").write_text("alpha\nbeta\n")
    server = fake_llm(steps(project))
    env = {
        **wire_env(server, "anthropic"),
        "CLAUDE_CODE_ENABLE_TELEMETRY": "1",
        "OTEL_METRICS_EXPORTER": "otlp",
        "OTEL_LOGS_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_METRIC_EXPORT_INTERVAL": "60000",  # longer than the run: only the flush at exit sends
        "OTEL_LOGS_EXPORT_INTERVAL": "60000",
        "OTEL_EXPORTER_OTLP_HEADERS": "x-team=keel-test",
        **extra,
    }
    result = keel("-p", PROMPT, "--allowedTools", allowed, "--model", "claude-sonnet-4-5", env=env, timeout=120)
    assert result.code == 0, result.stderr
    return result


def test_a_p_run_exports_claude_codes_metrics_and_events(keel, fake_llm, project, receiver) -> None:
    run(keel, fake_llm, project, receiver)
    oracle = RECORDING["sessions"]["default"]
    got = shape(receiver, STABLE)
    # every metric Claude Code exported on this session, with its type, temporality, unit, attribute keys
    for name, want in oracle["metrics"].items():
        have = got["metrics"].get(name)
        assert have is not None, f"{name} was not exported (got {sorted(got['metrics'])})"
        for field in ("type", "temporality", "unit", "monotonic", "scope"):
            assert have[field] == want[field], (name, field, have[field], want[field])
        assert have["attributes"] == want["attributes"], name
        for key in ("type", "decision", "source", "tool_name", "language"):
            if key in want["values"]:
                assert sorted(have["values"].get(key, [])) == sorted(want["values"][key]), (name, key)
    for name in EVENTS:
        want, have = oracle["events"][name], got["events"].get(name)
        assert have is not None, f"event {name} was not exported (got {sorted(got['events'])})"
        assert have["body"] == want["body"] and have["scope"] == want["scope"]
        assert have["attributes"] == want["attributes"], name
        for key in ("decision", "source", "tool_name", "success"):
            if key in want["values"]:
                assert sorted(have["values"].get(key, [])) == sorted(want["values"][key]), (name, key)
    assert set(got["resource"]) >= set(oracle["resource"])
    assert receiver.content_types() == {"application/json"}
    assert receiver.refused == []  # valid OTLP/JSON, as a collector parses it
    assert all(h.get("x-team") == "keel-test" for h in receiver.headers)
    # prompts and secrets stay home
    everything = receiver.everything()
    assert PROMPT not in everything
    assert SECRET not in everything
    prompts = [r for r in receiver.records() if r["attributes"]["event.name"] == "user_prompt"]
    assert [p["attributes"]["prompt"] for p in prompts] == ["<REDACTED>"]
    assert prompts[0]["attributes"]["prompt_length"] == str(len(PROMPT))


def test_the_switches_as_claude_code_reads_them(keel, fake_llm, project, receiver) -> None:
    """http/protobuf; prompts (and answers) exported when asked, secrets masked all the same; no
    session id; the version; resource attributes on the resource and on every point; a rejected
    Write counted as Claude Code counts it."""
    secret_prompt = f"{PROMPT} with {SECRET}"
    (project / "notes.txt").write_text("alpha\nbeta\n")
    server = fake_llm(steps(project))
    env = {
        **wire_env(server, "anthropic"),
        "CLAUDE_CODE_ENABLE_TELEMETRY": "1",
        "OTEL_METRICS_EXPORTER": "otlp",
        "OTEL_LOGS_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_LOG_USER_PROMPTS": "1",
        "OTEL_METRICS_INCLUDE_SESSION_ID": "false",
        "OTEL_METRICS_INCLUDE_VERSION": "true",
        "OTEL_RESOURCE_ATTRIBUTES": "team=platform,dept=eng",
    }
    result = keel("-p", secret_prompt, "--allowedTools", "Bash,Read,Edit", env=env, timeout=120)
    assert result.code == 0, result.stderr
    oracle = RECORDING["sessions"]["switches"]
    got = shape(receiver, STABLE)
    assert receiver.content_types() == {"application/x-protobuf"}
    for name, want in oracle["metrics"].items():
        assert got["metrics"][name]["attributes"] == want["attributes"], name
    for name in EVENTS:
        assert got["events"][name]["attributes"] == oracle["events"][name]["attributes"], name
    assert got["metrics"]["claude_code.code_edit_tool.decision"]["values"]["decision"] == ["accept", "reject"]
    assert all(r["team"] == "platform" and r["dept"] == "eng" for r in receiver.resources())
    prompts = [r["attributes"] for r in receiver.records() if r["attributes"]["event.name"] == "user_prompt"]
    assert len(prompts) == 1
    assert prompts[0]["prompt"] == prompts[0]["prompt_text"]
    assert prompts[0]["prompt"].startswith(PROMPT + " with ")  # the prompt, as asked...
    assert SECRET not in receiver.everything()  # ...with its secret masked
    answers = [r["attributes"] for r in receiver.records() if r["attributes"]["event.name"] == "assistant_response"]
    assert [a["response"] for a in answers] == ["All done."]
    assert not (project / "new.txt").exists()  # the Write was refused


@pytest.mark.parametrize("protocol", ["http/json", "http/protobuf", "grpc"])
def test_each_protocol_reaches_the_collector(keel, fake_llm, project, protocol) -> None:
    if protocol == "grpc":
        pytest.importorskip("grpc")
        pytest.importorskip("opentelemetry.exporter.otlp.proto.grpc")
    with Receiver("grpc" if protocol == "grpc" else "http") as receiver:
        run(keel, fake_llm, project, receiver, protocol=protocol)
        names = {p["name"] for p in receiver.points()}
        events = {r["attributes"]["event.name"] for r in receiver.records()}
    assert set(RECORDING["sessions"]["default"]["metrics"]) <= names
    assert set(EVENTS) <= events
    want = {"http/json": {"application/json"}, "http/protobuf": {"application/x-protobuf"}, "grpc": {"grpc"}}
    assert receiver.content_types() == want[protocol]
    assert all(h.get("x-team") == "keel-test" for h in receiver.headers)


def test_per_signal_switches(keel, fake_llm, project) -> None:
    """Metrics over http/json to one collector, events over http/protobuf to another (the
    per-signal endpoint is a full URL, as the OTel spec says); OTEL_LOGS_EXPORTER=none sends none;
    cumulative temporality when asked (delta by default, as Claude Code)."""
    with Receiver() as metrics, Receiver() as logs:
        run(
            keel,
            fake_llm,
            project,
            metrics,
            OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9",  # overridden per signal below
            OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=metrics.endpoint + "/v1/metrics",
            OTEL_EXPORTER_OTLP_LOGS_ENDPOINT=logs.endpoint + "/v1/logs",
            OTEL_EXPORTER_OTLP_LOGS_PROTOCOL="http/protobuf",
        )
        assert metrics.content_types() == {"application/json"} and metrics.bodies("metrics")
        assert not metrics.bodies("logs")
        assert logs.content_types() == {"application/x-protobuf"} and logs.bodies("logs")
    with Receiver() as receiver:
        (project / "new.txt").unlink()
        run(
            keel,
            fake_llm,
            project,
            receiver,
            OTEL_LOGS_EXPORTER="none",
            OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE="cumulative",
        )
        assert receiver.bodies("metrics") and not receiver.bodies("logs")
        assert {p["temporality"] for p in receiver.points()} == {2}  # AGGREGATION_TEMPORALITY_CUMULATIVE


def test_an_api_error_is_exported(keel, fake_llm, project, receiver) -> None:
    server = fake_llm([{"error": {"status": 400, "message": "scripted failure"}}])
    env = {
        **wire_env(server, "anthropic"),
        "KEEL_MAX_RETRIES": "0",
        "CLAUDE_CODE_ENABLE_TELEMETRY": "1",
        "OTEL_METRICS_EXPORTER": "otlp",
        "OTEL_LOGS_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
    }
    result = keel("-p", PROMPT, env=env, timeout=120)
    assert result.code != 0
    want = RECORDING["sessions"]["api_error"]["events"]["api_error"]
    errors = [r["attributes"] for r in receiver.records() if r["attributes"]["event.name"] == "api_error"]
    assert errors, sorted({r["attributes"]["event.name"] for r in receiver.records()})
    got = shape(receiver, STABLE)["events"]["api_error"]
    assert got["attributes"] == want["attributes"]
    assert errors[-1]["status_code"] == 400
    assert "claude_code.session.count" in {p["name"] for p in receiver.points()}


def test_a_secret_in_a_failed_tools_output_is_masked(keel, fake_llm, project, receiver) -> None:
    """A failed call's error goes out with its tool_result (as Claude Code's does): through
    keel's redaction first."""
    server = fake_llm(
        [
            {"tool_calls": [{"name": "Bash", "input": {"command": f"echo token={SECRET} >&2; exit 3"}}]},
            f"It failed: it printed token={SECRET}",
        ]
    )
    env = {
        **wire_env(server, "anthropic"),
        "CLAUDE_CODE_ENABLE_TELEMETRY": "1",
        "OTEL_LOGS_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_LOG_USER_PROMPTS": "1",
    }
    result = keel("-p", PROMPT, "--allowedTools", "Bash", env=env, timeout=120)
    assert result.code == 0, result.stderr
    failed = [r["attributes"] for r in receiver.records() if r["attributes"]["event.name"] == "tool_result"]
    assert [f["success"] for f in failed] == ["false"]
    assert "token=" in failed[0]["error"]
    answers = [r["attributes"] for r in receiver.records() if r["attributes"]["event.name"] == "assistant_response"]
    assert [a["response"].startswith("It failed: it printed token=") for a in answers] == [True]  # asked for
    assert SECRET not in receiver.everything()
    assert SECRET[:20] not in receiver.everything()


@pytest.mark.parametrize("protocol", ["http/json", "http/protobuf"])
def test_an_unreachable_collector_costs_the_run_nothing(keel, fake_llm, project, protocol) -> None:
    """Convenience fails open: the answer is printed, the exit code is 0, one line says what was not sent."""
    with Receiver() as gone:
        endpoint = gone.endpoint
    server = fake_llm(["hello"])
    env = {
        **wire_env(server, "anthropic"),
        "CLAUDE_CODE_ENABLE_TELEMETRY": "1",
        "OTEL_METRICS_EXPORTER": "otlp",
        "OTEL_LOGS_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        "OTEL_EXPORTER_OTLP_TIMEOUT": "1000",
    }
    result = keel("-p", "hi", env=env, timeout=120)
    assert result.code == 0 and result.stdout.strip() == "hello"
    assert "Traceback" not in result.stderr
    lines = [ln for ln in result.stderr.splitlines() if "telemetry" in ln]
    assert len(lines) == 1 and endpoint in lines[0], result.stderr


def test_switched_on_from_a_settings_files_env(keel, fake_llm, project, receiver, tmp_path) -> None:
    """Claude Code's documented rollout: the variables in a settings file's ``env`` section."""
    home = tmp_path / "userhome"
    (home / ".claude").mkdir(parents=True, exist_ok=True)
    (home / ".claude" / "settings.json").write_text(
        json.dumps(
            {
                "env": {
                    "CLAUDE_CODE_ENABLE_TELEMETRY": "1",
                    "OTEL_METRICS_EXPORTER": "otlp",
                    "OTEL_LOGS_EXPORTER": "otlp",
                    "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
                    "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
                }
            }
        )
    )
    server = fake_llm(["hello"])
    result = keel("-p", "hi", env={**wire_env(server, "anthropic"), "HOME": str(home)}, timeout=120)
    assert result.code == 0, result.stderr
    assert "claude_code.session.count" in {p["name"] for p in receiver.points()}
    assert "user_prompt" in {r["attributes"]["event.name"] for r in receiver.records()}
