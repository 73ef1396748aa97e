"""The sandbox escape corpus (tests/corpus/sandbox_escapes.json), run for real in bubblewrap under
``Bash(*)``: every case fails, changes nothing outside the writable set, leaks no secret, and is
reported to the model as a sandbox denial."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentkeel.tools.shell import ShellState
from sandbox_harness import SandboxedBash, bwrap_works
from tests.integration.policy.sandbox.test_properties import _scratch, _snapshot, _writable

pytestmark = pytest.mark.skipif(not bwrap_works(), reason="bubblewrap cannot create namespaces here")

CORPUS = Path(__file__).parents[3] / "corpus" / "sandbox_escapes.json"


def _cases() -> list[tuple[str, str]]:
    data = json.loads(CORPUS.read_text(encoding="utf-8"))
    return [(g["technique"], c) for g in data["groups"] for c in g["cases"]]


def test_corpus_size() -> None:
    assert len(_cases()) >= 40
    assert len({t for t, _ in _cases()}) >= 7


_SERVER = (
    "import socket,sys\ns=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen()\nprint('ready', flush=True)\n"
    "while True:\n    c,_=s.accept()\n    try: c.sendall(b'obviously-fake-socket-secret')\n    except OSError: pass\n"
    "    c.close()\n"
)


@pytest.fixture
def host_sockets() -> Iterator[Path]:
    """{S}: a directory in /tmp outside the scratch tree for the host's sockets (and the tmux server's)."""
    short = Path(tempfile.mkdtemp(prefix="ks-", dir="/tmp"))
    try:
        yield short
    finally:
        env = {k: v for k, v in os.environ.items() if k != "TMUX"}
        subprocess.run(
            ["tmux", "-S", str(short / "tmux.sock"), "kill-server"], env=env, capture_output=True, check=False
        )
        shutil.rmtree(short, ignore_errors=True)


def _listen(path: Path) -> subprocess.Popen[bytes]:
    path.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen([sys.executable, "-c", _SERVER, str(path)], stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
    return proc


def test_every_escape_fails_changes_nothing_outside_and_is_reported(tmp_path: Path, host_sockets: Path) -> None:
    root = tmp_path / "scratch"
    project, home = _scratch(root)
    (project / ".env").write_text("API_KEY=obviously-fake-value\n")
    (project / "etclink").symlink_to("/etc")
    failures: list[str] = []
    servers = [_listen(host_sockets / "host.sock"), _listen(home / ".agent" / "agent.sock")]
    env = {k: v for k, v in os.environ.items() if k != "TMUX"}
    tmux = ["tmux", "-S", str(host_sockets / "tmux.sock"), "new-session", "-d", "-s", "k", "sh"]
    subprocess.run(tmux, check=True, env=env)

    async def run_all() -> None:
        bash = SandboxedBash(project, home, deny=("Read(./.env)",), keel_home=home / ".keel")
        try:
            await bash.run("true")  # the session's empty mount point for the missing .keel (gone at the end)
            for technique, case in _cases():
                command = case.replace("{P}", str(project)).replace("{H}", str(home)).replace("{O}", str(root / "O"))
                command = command.replace("{PY}", shlex.quote(sys.executable)).replace("{S}", str(host_sockets))
                before = _snapshot(root)
                out = await bash.run(command)
                after = _snapshot(root)
                changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
                escaped = sorted(k for k in changed if not _writable(k))
                if escaped:
                    failures.append(f"{technique} :: {case}: changed {escaped}")
                if "obviously-fake" in out.content:
                    failures.append(f"{technique} :: {case}: leaked a secret")
                if "[Sandbox denial:" not in out.content:
                    failures.append(f"{technique} :: {case}: not reported as a sandbox denial: {out.content[-300:]!r}")
        finally:
            await bash.services.get(ShellState).aclose()
            await bash.sandbox.aclose()

    try:
        asyncio.run(run_all())
    finally:
        for server in servers:
            server.kill()
            server.wait()
    assert not (project / ".keel").exists()
    alive = [p for p in os.listdir("/proc") if p.isdigit() and b"41.00" in _cmdline(p)]
    assert not alive, "background processes outlived their command"
    assert not failures, "\n".join(failures)


def _cmdline(pid: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""
