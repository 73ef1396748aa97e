"""``keel batch`` with telemetry on: each task's metrics and events carry the batch's and the
task's ids (resource attributes, copied onto every point and event as Claude Code copies them)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kit import wire_env

from .receiver import Receiver

pytest.importorskip("opentelemetry.sdk")


def test_each_task_is_tagged_with_the_batch_and_its_id(tmp_path: Path, keel, fake_llm) -> None:
    ids = ["alpha", "beta,2"]  # a comma in an id survives the k=v,k=v form (percent-encoded)
    server = fake_llm({"conversations": [{"match": f"<{t}>", "steps": [f"done {t}"]} for t in ids]})
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"id": t, "prompt": f"task <{t}>"}) + "\n" for t in ids))
    with Receiver() as receiver:
        env = {
            **wire_env(server, "anthropic"),
            "KEEL_MODEL": "anthropic:fake-model",
            "CLAUDE_CODE_ENABLE_TELEMETRY": "1",
            "OTEL_METRICS_EXPORTER": "otlp",
            "OTEL_LOGS_EXPORTER": "otlp",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
            "OTEL_RESOURCE_ATTRIBUTES": "team=platform",
        }
        run = keel("batch", str(tasks), "-o", str(tmp_path / "out.jsonl"), "--concurrency", "2", env=env, timeout=240)
        assert run.code == 0, run.stderr
        resources = receiver.resources()
        points = list(receiver.points())
        records = list(receiver.records())
    assert {r.get("keel.task.id") for r in resources} == set(ids)
    batches = {r.get("keel.batch.id") for r in resources}
    assert len(batches) == 1 and None not in batches  # one batch, both tasks
    assert all(r.get("team") == "platform" for r in resources)  # the user's own attributes stay
    prompts = [r for r in records if r["attributes"]["event.name"] == "user_prompt"]
    assert sorted(p["attributes"]["keel.task.id"] for p in prompts) == sorted(ids)
    sessions = [p for p in points if p["name"] == "claude_code.session.count"]
    assert sorted(p["attributes"]["keel.task.id"] for p in sessions) == sorted(ids)
