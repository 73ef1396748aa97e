"""Secret redaction: planted (fake) secrets never survive; ordinary text is left alone."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentkeel.fakellm.server import FakeLLMServer
from agentkeel.redact import redact, redact_obj
from conftest import KeelRun, session_files, wire_env

# obviously fake values, shaped like the real thing
SECRETS = {
    "anthropic": "sk-ant-api03-FAKEFAKEFAKEFAKEFAKEFAKE0000",
    "openai": "sk-proj-FAKEfakeFAKEfakeFAKEfake1234",
    "github": "ghp_FAKEfakeFAKEfakeFAKEfakeFAKEfake1234",
    "aws": "AKIAFAKEFAKEFAKE1234",
    "google": "AIzaFAKEfakeFAKEfakeFAKEfakeFAKEfake123",
    "slack": "xoxb-0000-FAKE-fakefake",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJmYWtlIn0.FAKEsignatureFAKE",
    "card": "4111 1111 1111 1111",
}


@pytest.mark.parametrize("name", sorted(SECRETS))
def test_known_secret_shapes_are_masked(name: str) -> None:
    out = redact(f"here it is: {SECRETS[name]} (done)")
    assert SECRETS[name] not in out and "[REDACTED:" in out and out.endswith("(done)")


@pytest.mark.parametrize(
    "text",
    [
        "password=hunter2-fake",
        'DB_PASSWORD: "fake-pass-123"',
        '{"api_key": "fake0123456789abcdef"}',
        "export GITHUB_TOKEN=fakefakefake123",
        "Authorization: Bearer fakeTokenValue0123456789",
        "postgres://admin:fakepassword@db.internal/app",
        "-----BEGIN OPENSSH PRIVATE KEY-----\nFAKEKEYDATA\n-----END OPENSSH PRIVATE KEY-----",
    ],
)
def test_assignments_headers_urls_and_keys(text: str) -> None:
    out = redact(text)
    for needle in (
        "hunter2",
        "fake-pass-123",
        "fake0123456789",
        "fakefakefake123",
        "fakeTokenValue",
        "fakepassword",
        "FAKEKEYDATA",
    ):
        assert needle not in out


@pytest.mark.parametrize(
    "text",
    [
        "git status && git diff",
        "def tokenize(text):",
        "the password field is required",
        "order 1234 5678",
        "sk-short",
        "version 2.1.328",
        "See https://example.com/path",
    ],
)
def test_ordinary_text_is_untouched(text: str) -> None:
    assert redact(text) == text


def test_redact_obj_walks_json() -> None:
    obj = {"a": [SECRETS["openai"], {"b": f"key={SECRETS['github']}"}], "n": 3}
    out = json.dumps(redact_obj(obj))
    assert SECRETS["openai"] not in out and SECRETS["github"] not in out and '"n": 3' in out


@given(st.text(max_size=300))
def test_redact_never_crashes_and_is_idempotent(text: str) -> None:
    once = redact(text)
    assert redact(once) == once


def test_transcript_never_holds_a_planted_secret(
    tmp_path: Path, project: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    (project / ".env").write_text(f"OPENAI_API_KEY={SECRETS['openai']}\n")
    server = fake_llm(
        {
            "steps": [
                {
                    "text": f"I will not echo {SECRETS['anthropic']}",
                    "tool_calls": [{"name": "Read", "input": {"file_path": str(project / ".env")}}],
                },
                "Read it.",
            ]
        }
    )
    run = keel("-p", f"my token is {SECRETS['github']}", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    [log] = session_files(tmp_path / "keelhome")
    text = log.read_text()
    assert all(secret not in text for secret in SECRETS.values())
    assert "[REDACTED:" in text
