"""With telemetry off (CLAUDE_CODE_ENABLE_TELEMETRY unset or 0) a ``keel -p`` run imports nothing
of OpenTelemetry and sends nothing, even with every OTEL_* variable pointing at a collector."""

from __future__ import annotations

import re

import pytest

from kit import wire_env

from .receiver import Receiver

pytest.importorskip("opentelemetry.sdk")


def _imported(stderr: str) -> set[str]:
    """The modules of ``-X importtime``'s report (PYTHONPROFILEIMPORTTIME)."""
    return {m.group(1) for m in re.finditer(r"^import time:\s+\d+ \|\s+\d+ \|\s*([\w.]+)", stderr, re.M)}


@pytest.mark.parametrize("switch", [None, "0", "1"])
def test_off_imports_and_sends_nothing(keel, fake_llm, switch) -> None:
    server = fake_llm(["hello"])
    with Receiver() as receiver:
        env = {
            **wire_env(server, "anthropic"),
            "PYTHONPROFILEIMPORTTIME": "1",
            "OTEL_METRICS_EXPORTER": "otlp",
            "OTEL_LOGS_EXPORTER": "otlp",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
            "OTEL_METRIC_EXPORT_INTERVAL": "100",
        }
        if switch is not None:
            env["CLAUDE_CODE_ENABLE_TELEMETRY"] = switch
        result = keel("-p", "hi", env=env, timeout=120)
        assert result.code == 0, result.stderr[-2000:]
        modules = _imported(result.stderr)
        assert "agentkeel.ui.cli.main" in modules or "agentkeel" in modules  # the report is there
        otel = sorted(m for m in modules if m.startswith("opentelemetry") or m.startswith("agentkeel.telemetry."))
        if switch == "1":  # the same run with telemetry on: the check sees the imports it looks for
            assert any(m.startswith("opentelemetry") for m in otel)
            assert receiver.requests
        else:
            assert otel == ["agentkeel.telemetry.config"], otel
            assert receiver.requests == []


def test_on_without_the_extra_is_one_line_and_the_run_goes_on(keel, fake_llm, tmp_path) -> None:
    """Switched on where the OpenTelemetry packages cannot be imported (shadowed here by a package
    that refuses to load): one line says what to install; the answer and exit code are unchanged."""
    import os

    shadow = tmp_path / "shadow" / "opentelemetry"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('not installed (test shadow)')\n")
    server = fake_llm(["hello"])
    env = {
        **wire_env(server, "anthropic"),
        "PYTHONPATH": os.pathsep.join([str(shadow.parent), os.environ.get("PYTHONPATH", "")]),
        "CLAUDE_CODE_ENABLE_TELEMETRY": "1",
        "OTEL_METRICS_EXPORTER": "otlp",
    }
    result = keel("-p", "hi", env=env, timeout=120)
    assert result.code == 0 and result.stdout.strip() == "hello"
    lines = [ln for ln in result.stderr.splitlines() if "telemetry" in ln]
    assert len(lines) == 1 and "pip install 'agentkeel[otel]'" in lines[0], result.stderr
    assert "Traceback" not in result.stderr
