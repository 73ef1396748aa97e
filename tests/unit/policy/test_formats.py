"""Secret formats redaction used to miss (#30 item 14), the prose and data it must leave alone, and a
base URL's password kept out of what `keel -p` prints and logs."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from agentkeel.policy.redact import redact
from kit import KeelRun

PW = "s3cr3tP4ssFAKE"
TOKEN = "ghs0FAKEtoken0123456789abcdefFAKE"


@pytest.mark.parametrize(
    "text",
    [
        f"redis://:{PW}@localhost:6379/0",
        f"https://{TOKEN}@github.com/org/repo.git",
        f"git clone https://x-access-token:{TOKEN}@github.com/org/repo",
        f"machine api.example.com login bob password {PW}",
        f"machine api.example.com\n  login bob\n  password {PW}\n",
        f"default login bob password {PW}",
        f"<password>{PW}</password>",
        f'<add key="x"><ClientSecret>{PW}</ClientSecret></add>',
        f"sshpass -p {PW} ssh deploy@host",
        f"sshpass -p'{PW}' ssh deploy@host",
        f"docker login -u bob -p {PW} registry.example.com",
        f"docker login registry.example.com --username bob --password={PW}",
        f"podman login --password {PW} quay.io",
        f"echo {base64.b64encode(f'password={PW}'.encode()).decode()} | base64 -d",
        f"echo {base64.b64encode(b'sk-ant-api03-FAKEfakeFAKEfakeFAKEfake0123').decode()} | base64 -d > key",
        f"token: {base64.urlsafe_b64encode(f'DB_PASSWORD={PW}'.encode()).decode()}",
    ],
)
def test_each_format_is_masked(text: str) -> None:
    out = redact(text)
    assert "[REDACTED:" in out
    assert PW not in out and TOKEN not in out and "sk-ant" not in out
    assert redact(out) == out  # idempotent


@pytest.mark.parametrize(
    "text",
    [
        "ssh://git@github.com/org/repo.git",
        "https://anonymous@ftp.example.com/pub",
        "mailto:someone@example.com",
        "the machine learning password policy",
        "machine learning: login to the dashboard, then reset your password here",
        "<token_type>bearer</token_type>",
        "<password>VALUE</password>",
        "docker run -p 8080:80 nginx",
        "docker push registry.example.com/app:1.2.3",
        "ssh -p 2222 deploy@host",
        "sha512-z4PhNX7vuL3xVChQ1m2AB9Yg5AULVxXcg/SpIdNs6c5H0NE8XYXysP+DGNKHfuwvY7kxvUdBeoGlODJ6+SfaPg==",
        f"echo {base64.b64encode(b'hello world, this is test data').decode()} | base64 -d",
        "VGhpcyBpcyBqdXN0IGEgc2VudGVuY2UgaW4gYmFzZTY0Lg==",
        "550e8400-e29b-41d4-a716-446655440000 9b74c9897bac770ffc029102a200c5de",
        "ThisIsAVeryLongIdentifierNameForAClassThatDoesThings",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact(text) == text


def test_keel_p_never_prints_or_logs_a_base_url_password(tmp_path: Path, keel: Callable[..., KeelRun]) -> None:
    env = {
        "ANTHROPIC_API_KEY": "sk-ant-test-not-a-real-key",
        "ANTHROPIC_BASE_URL": f"http://proxyuser:{PW}@127.0.0.1:9",
    }
    for fmt in ("text", "json", "stream-json"):
        args = ["-p", "hi", "--output-format", fmt] + (["--verbose"] if fmt == "stream-json" else [])
        run = keel(*args, env=env)
        assert run.code != 0
        if fmt == "json":
            assert json.loads(run.stdout)["is_error"] is True
        assert "cannot reach http://127.0.0.1:9" in run.stdout + run.stderr
        assert PW not in run.stdout and PW not in run.stderr and "proxyuser" not in run.stdout + run.stderr
    for path in (tmp_path / "keelhome").rglob("*"):
        if path.is_file():
            assert PW.encode() not in path.read_bytes(), path
