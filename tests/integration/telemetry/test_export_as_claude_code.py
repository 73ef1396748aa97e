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
    assert all(h.get("x-team") == "keel-test" for h in receiver.headers)
    # prompts and secrets stay home
    everything = receiver.everything()
    assert PROMPT not in everything
    assert SECRET not in everything
    prompts = [r for r in receiver.records() if r["attributes"]["event.name"] == "user_prompt"]
    assert [p["attributes"]["prompt"] for p in prompts] == ["<REDACTED>"]
    assert prompts[0]["attributes"]["prompt_length"] == str(len(PROMPT))

