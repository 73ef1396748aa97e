"""Host Unix sockets from inside the Bash sandbox (issue #30, item 9): a tmux server, an agent
socket in $HOME, one bound to a relative name, one bound in another network namespace. Each is
out of reach by default, and reachable when ``sandbox.network.allowUnixSockets`` names it
(Claude Code's key); a socket the sandboxed commands make themselves still works."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentkeel.policy.sandbox import parse_config
from agentkeel.tools.shell import ShellState
from kit import wait_until, wait_until_async
from sandbox_harness import SandboxedBash, bwrap_works

pytestmark = pytest.mark.skipif(not bwrap_works(), reason="bubblewrap cannot create namespaces here")
needs_socat = pytest.mark.skipif(shutil.which("socat") is None, reason="socat is not installed")
needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

DENIAL = "[Sandbox denial:"


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A directory in /tmp with a short path (a socket path holds 107 bytes at most)."""
    d = Path(tempfile.mkdtemp(prefix="ks-", dir="/tmp"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def home() -> Path:
    return Path(os.environ["HOME"])


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    p = tmp_path / "p"
    p.mkdir()
    return p


def _listen(path: Path, cwd: Path | None = None) -> subprocess.Popen[bytes]:
    """A host process answering "hi" on a Unix socket (bound as ``path``, relative to ``cwd`` if given)."""
    code = (
        "import socket,sys\n"
        "s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen()\n"
        "print('ready', flush=True)\n"
        "while True:\n"
        "    c,_=s.accept()\n"
        "    try: c.sendall(b'hi-from-host\\n')\n"
        "    except OSError: pass\n"
        "    c.close()\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, str(path)], cwd=cwd, stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
    return proc


def _connect(path: Path | str) -> str:
    code = f"import socket; s=socket.socket(socket.AF_UNIX); s.connect('{path}'); print(s.recv(64).decode())"
    return f'{sys.executable} -c "{code}"'


def _wait_for(sock: Path, timeout: float = 60) -> None:
    """Until a server accepts on ``sock`` (its start may be slow on a loaded machine)."""

    def accepts() -> bool:
        try:
            with socket.socket(socket.AF_UNIX) as probe:
                probe.connect(str(sock))
        except OSError:
            return False
        return True

    wait_until(accepts, timeout, f"a server listening on {sock}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.kill()
    proc.wait()


def _run(proj: Path, home: Path, command: str, settings: dict[str, object] | None = None) -> tuple[str, bool]:
    bash = SandboxedBash(proj, home, settings=settings)
    try:
        out = bash(command)
        return out.content, bool(out.is_error)
    finally:
        bash.close()


@needs_tmux
def test_a_tmux_server_in_tmp_cannot_be_driven(short_tmp: Path, proj: Path, home: Path) -> None:
    sock, marker = short_tmp / "tmux.sock", short_tmp / "pwned"
    env = {k: v for k, v in os.environ.items() if k != "TMUX"}
    subprocess.run(["tmux", "-S", str(sock), "new-session", "-d", "-s", "k", "sh"], check=True, env=env)
    try:
        attack = f"tmux -S {sock} send-keys -t k 'touch {marker}' Enter"
        content, failed = _run(proj, home, attack)
        time.sleep(0.5)  # what the tmux shell would have run by now
        assert failed and not marker.exists(), content
        assert DENIAL in content and "allowUnixSockets" in content
        # the user can let one through: the same call then drives it
        content, failed = _run(proj, home, attack, {"network": {"allowUnixSockets": [str(sock)]}})
        assert not failed, content
        wait_until(marker.exists, 10, lambda: f"the marker the allowed call makes; it answered {content}")
    finally:
        subprocess.run(["tmux", "-S", str(sock), "kill-server"], check=False, env=env)


def test_an_agent_socket_in_home_is_covered_unless_allowed(proj: Path, home: Path) -> None:
    (home / ".agent").mkdir()
    sock = home / ".agent" / "agent.sock"
    server = _listen(sock)
    try:
        content, failed = _run(proj, home, _connect(sock))
        assert failed and "hi-from-host" not in content and DENIAL in content
        for allowed in ("~/.agent/agent.sock", "~/.agent", str(sock)):  # the socket, or its directory
            content, failed = _run(proj, home, _connect(sock), {"network": {"allowUnixSockets": [allowed]}})
            assert not failed and "hi-from-host" in content, (allowed, content)
        content, failed = _run(proj, home, _connect(sock), {"network": {"allowAllUnixSockets": True}})
        assert "hi-from-host" in content
    finally:
        _stop(server)


@needs_socat
def test_a_socat_listener_in_tmp_is_covered(short_tmp: Path, proj: Path, home: Path) -> None:
    sock = short_tmp / "s.sock"
    server = subprocess.Popen(["socat", f"UNIX-LISTEN:{sock},fork", "EXEC:echo hi-from-host"])
    try:
        _wait_for(sock)
        content, failed = _run(proj, home, f"socat - UNIX-CONNECT:{sock} </dev/null")
        assert failed and "hi-from-host" not in content and DENIAL in content
    finally:
        server.kill()
        server.wait()


def test_a_socket_bound_to_a_relative_name_deep_in_home_is_found(proj: Path, home: Path) -> None:
    """Deeper than the walk goes: found through /proc/net/unix and the holder's working directory."""
    deep = home / "a" / "b" / "c"
    deep.mkdir(parents=True)
    server = _listen(Path("r.sock"), cwd=deep)
    try:
        content, failed = _run(proj, home, _connect(deep / "r.sock"))
        assert failed and "hi-from-host" not in content, content
    finally:
        _stop(server)


def test_a_socket_of_another_network_namespace_in_the_runtime_dir_is_found(
    short_tmp: Path, proj: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rootless Docker daemon binds its socket in its own namespace: not in keel's /proc/net/unix,
    found by the walk of $XDG_RUNTIME_DIR."""
    runtime = short_tmp / "run"
    runtime.mkdir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    sock = runtime / "docker.sock"
    code = (
        "import socket,sys\ns=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen()\n"
        "while True:\n    c,_=s.accept()\n"
        "    try: c.sendall(b'hi-from-host\\n')\n    except OSError: pass\n    c.close()\n"
    )
    bwrap = shutil.which("bwrap") or "bwrap"
    server = subprocess.Popen(
        [
            *(bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"),
            *("--bind", str(runtime), str(runtime), "--", sys.executable, "-c", code, str(sock)),
        ]
    )
    try:
        wait_until(sock.exists, 60, f"the namespaced server's {sock}", interval=0.02)
        # another namespace's: not in keel's table (until a connection from here is accepted: the
        # accepted end is in the connecting side's namespace, with the server's path)
        assert str(sock) not in Path("/proc/net/unix").read_text()
        _wait_for(sock)  # reachable from the host
        content, failed = _run(proj, home, _connect(sock))
        assert failed and "hi-from-host" not in content, content
    finally:
        server.kill()
        server.wait()


def test_an_abstract_socket_on_the_host_is_out_of_reach(proj: Path, home: Path) -> None:
    """Abstract sockets belong to a network namespace, and the sandbox always has its own."""
    name = f"\0keel-test-{os.getpid()}"
    server = socket.socket(socket.AF_UNIX)
    server.bind(name)
    server.listen()
    try:
        probe = f"{sys.executable} -c \"import socket; socket.socket(socket.AF_UNIX).connect('\\0{name[1:]}')\""
        content, failed = _run(proj, home, probe)
        assert failed and "ConnectionRefused" in content, content
    finally:
        server.close()


def test_sockets_the_sandboxed_commands_make_still_work(proj: Path, home: Path) -> None:
    """A server the session runs in the background binds in the project: the next call reaches it."""
    bash = SandboxedBash(proj, home)
    server = "socat UNIX-LISTEN:app.sock,fork 'EXEC:echo hi-from-app'" if shutil.which("socat") else ""
    code = (
        "import socket; s=socket.socket(socket.AF_UNIX); s.bind('one.sock'); s.listen(); "
        "c=socket.socket(socket.AF_UNIX); c.connect('one.sock'); print('same-call-ok')"
    )
    one_call = f'{sys.executable} -c "{code}"'

    async def scenario() -> tuple[str, str]:
        first = await bash.run(one_call)
        second = "skipped"
        if server:
            await bash.run(server, run_in_background=True)

            async def answered() -> bool:
                nonlocal second
                second = (await bash.run("socat - UNIX-CONNECT:app.sock </dev/null")).content
                return "hi-from-app" in second

            await wait_until_async(answered, 20, lambda: f"the app's socket to answer; it said {second!r}", 0.1)
        await bash.services.get(ShellState).aclose()
        return first.content, second

    try:
        first, second = asyncio.run(scenario())
    finally:
        bash.close()
    assert "same-call-ok" in first
    assert "hi-from-app" in second or not server, second


def test_allow_unix_sockets_is_claude_codes_key() -> None:
    config = parse_config({"enabled": True, "network": {"allowUnixSockets": ["/var/run/docker.sock", "~/.x"]}})
    assert config.allow_unix_sockets == ("/var/run/docker.sock", "~/.x") and not config.warnings
    bad = parse_config({"enabled": True, "network": {"allowUnixSockets": "/var/run/docker.sock"}})
    assert bad.allow_unix_sockets == () and "allowUnixSockets" in bad.warnings[0]


@pytest.mark.skipif(not os.access("/run", os.W_OK), reason="needs a writable /run to bind a socket there")
def test_an_allowed_socket_under_the_emptied_run_is_bound_back(proj: Path, home: Path) -> None:
    """``/run`` is an empty directory inside; a socket there that allowUnixSockets names (Claude
    Code's example is /var/run/docker.sock) is bound back, and nothing else of /run is."""
    where = Path(tempfile.mkdtemp(prefix="keel-test-", dir="/run"))
    sock = where / "d.sock"
    server = _listen(sock)
    try:
        content, failed = _run(proj, home, _connect(sock))
        assert failed and "hi-from-host" not in content
        content, failed = _run(proj, home, _connect(sock), {"network": {"allowUnixSockets": [str(sock)]}})
        assert not failed and "hi-from-host" in content, content
        content, _ = _run(proj, home, "ls /run", {"network": {"allowUnixSockets": [str(sock)]}})
        assert content.split() == [where.name], content
    finally:
        _stop(server)
        shutil.rmtree(where, ignore_errors=True)
