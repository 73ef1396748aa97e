"""A real `keel serve` process on loopback against the fake model, and an SSE reader for tests."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentkeel.models.fake.server import FakeLLMServer
from kit import KEEL, wire_env


@dataclass
class Served:
    proc: subprocess.Popen[str]
    url: str  # ends with "/"
    token: str | None  # as printed in the address (None: it came from KEEL_SERVE_TOKEN)
    client: httpx.Client  # sends the token (Authorization: Bearer)
    secret: str = ""  # the token, printed or not
    model: FakeLLMServer | None = None  # the scripted model it talks to (the ``serve`` fixture's)

    @property
    def login_url(self) -> str:
        """The address a browser opens first: it swaps the token for the cookie."""
        return f"{self.url}?token={self.secret}"

    def post(self, path: str, body: Any = None, **kw: Any) -> httpx.Response:
        return self.client.post(self.url + path, json={} if body is None else body, **kw)

    def get(self, path: str, **kw: Any) -> httpx.Response:
        return self.client.get(self.url + path, **kw)

    def frames(
        self, sid: str, until: Callable[[dict[str, Any]], bool], *, after: int | None = None, timeout: float = 30
    ) -> list[dict[str, Any]]:
        """Read the session's SSE stream until a frame satisfies ``until`` (that frame included)."""
        headers = {} if after is None else {"Last-Event-ID": str(after)}
        return read_frames(self.client, self.url + f"api/sessions/{sid}/stream", until, headers, timeout)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.client.close()


def read_frames(
    client: httpx.Client,
    url: str,
    until: Callable[[dict[str, Any]], bool],
    headers: dict[str, str] | None = None,
    timeout: float = 30,
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    with client.stream("GET", url, headers=headers or {}, timeout=httpx.Timeout(timeout)) as res:
        assert res.status_code == 200, res.read()
        assert res.headers["content-type"].startswith("text/event-stream")
        for line in res.iter_lines():
            if time.monotonic() > deadline:
                raise AssertionError(f"no matching frame within {timeout}s; got {[f['kind'] for f in out]}")
            if not line.startswith("data: "):
                continue
            frame = json.loads(line[6:])
            out.append(frame)
            if until(frame):
                return out
    raise AssertionError(f"the stream ended first; got {[f['kind'] for f in out]}")


def kind(name: str) -> Callable[[dict[str, Any]], bool]:
    return lambda f: f["kind"] == name


def start_serve(
    project: Path, env: dict[str, str], *args: str, token_env: str | None = None, timeout: float = 30
) -> Served:
    full = {**os.environ, **env, "KEEL_MODEL": "claude-sonnet-4-5"}
    if token_env is not None:
        full["KEEL_SERVE_TOKEN"] = token_env
    proc = subprocess.Popen(
        [KEEL, "serve", "--port", "0", "--cwd", str(project), *args],
        cwd=project,
        env=full,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line.startswith("keel serve on "):
        proc.kill()
        raise AssertionError(f"keel serve did not start: {line!r} {proc.stderr.read() if proc.stderr else ''}")
    address = line.removeprefix("keel serve on ").split()[0]
    token = None
    if "?token=" in address:
        address, token = address.split("?token=")
    if "0.0.0.0" in address:
        address = address.replace("0.0.0.0", "127.0.0.1")
    headers = {"Authorization": f"Bearer {token or token_env}"} if (token or token_env) else {}
    return Served(proc, address, token, httpx.Client(headers=headers, timeout=timeout), token or token_env or "")


@pytest.fixture
def serve(project: Path, fake_llm: Callable[[Any], FakeLLMServer]) -> Iterator[Callable[..., Served]]:
    started: list[Served] = []

    def run(script: Any, *args: str, token_env: str | None = None, env: dict[str, str] | None = None) -> Served:
        server = fake_llm(script)
        s = start_serve(project, {**wire_env(server, "anthropic"), **(env or {})}, *args, token_env=token_env)
        s.model = server
        started.append(s)
        return s

    yield run
    for s in started:
        s.stop()
