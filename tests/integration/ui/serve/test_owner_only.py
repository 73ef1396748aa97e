"""`keel serve` admits only its owner, and keel's files are the owner's alone (issue #30 item 4).

A second OS user (uid 65534, run through ``subprocess(user=)``: the tests run as root) holds no
token: it can neither open a session, read a transcript (JSON API, SSE, memory), nor answer a
permission prompt, and cannot read keel's files from disk. A client with the token still cannot
pick a ``scripted:`` model, a model file or a base URL, nor bypassPermissions unless the owner
started the server with ``--allow-bypass-permissions``."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentkeel.memory.project import project_id
from kit import KEEL, wait_until
from serve_fixtures import Served, kind
from serve_fixtures import serve as serve  # the fixture

Serve = Callable[..., Served]
NOBODY = 65534
WRITE = {"text": "Writing.", "tool_calls": [{"name": "Write", "input": {"file_path": "out.txt", "content": "made\n"}}]}

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="running a client as another user needs root")

# What another local user runs: plain HTTP from the standard library, no token (it has none).
OTHER_USER_CLIENT = r"""
import json, sys, urllib.error, urllib.request
base, sid, ask = sys.argv[1:4]

def call(method, path, body=None, headers=None, line=False):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method,
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=10) as res:
            return [res.status, (res.readline() if line else res.read()).decode("utf-8", "replace")]
    except urllib.error.HTTPError as e:
        return [e.code, e.read().decode("utf-8", "replace")]

print(json.dumps({
    "list": call("GET", "api/sessions"),
    "create": call("POST", "api/sessions", {"permission_mode": "bypassPermissions", "prompt": "run id"}),
    "show": call("GET", f"api/sessions/{sid}"),
    "events": call("GET", f"api/sessions/{sid}/events"),
    "stream": call("GET", f"api/sessions/{sid}/stream?after=0", line=True),
    "turns": call("GET", f"api/sessions/{sid}/turns"),
    "answer": call("POST", f"api/sessions/{sid}/permissions/{ask}", {"answer": "allow"}),
    "mode": call("POST", f"api/sessions/{sid}/mode", {"mode": "bypassPermissions"}),
    "memory": call("GET", "memory/api/search?q=secret"),
    "guessed_bearer": call("GET", "api/sessions", headers={"Authorization": "Bearer not-the-token"}),
    "guessed_cookie": call("GET", "api/sessions", headers={"Cookie": "keel_token=x; keel_token_1=x"}),
    "page": call("GET", ""),
}))
"""

READ_AS_OTHER_USER = r"""
import json, os, sys
tried = {}
for path in sys.argv[1:]:
    try:
        if os.path.isdir(path):
            os.listdir(path)
        else:
            with open(path, "rb") as f:
                f.read(1)
        tried[path] = "read"
    except OSError as e:
        tried[path] = type(e).__name__
print(json.dumps(tried))
"""


def as_other_user(code: str, *args: str) -> Any:
    done = subprocess.run(
        ["/usr/bin/python3", "-c", code, *args],
        user=NOBODY,
        group=NOBODY,
        extra_groups=[],
        cwd="/",
        env={"PATH": "/usr/bin:/bin", "NO_PROXY": "*"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@needs_root
def test_another_user_without_the_token_can_neither_open_read_nor_answer(serve: Serve, project: Path) -> None:
    s = serve({"steps": [WRITE, "written"]})
    res = s.post("api/sessions", {"prompt": "write the secret plan to out.txt"})
    assert res.status_code == 201
    sid = res.json()["session_id"]
    ask = s.frames(sid, kind("permission_request"))[-1]

    tried = as_other_user(OTHER_USER_CLIENT, s.url, sid, ask["ask_id"])
    assert {name: status for name, (status, _) in tried.items()} == dict.fromkeys(tried, 401), tried
    assert "secret plan" not in json.dumps(tried)
    assert "needs its token" in tried["page"][1]

    listing = s.get("api/sessions").json()  # the owner: nothing changed
    assert [r["session_id"] for r in listing["live"]] == [sid]
    state = s.get(f"api/sessions/{sid}").json()
    assert state["mode"] == "default" and [a["ask_id"] for a in state["pending_asks"]] == [ask["ask_id"]]
    assert not (project / "out.txt").exists()
    assert s.post(f"api/sessions/{sid}/permissions/{ask['ask_id']}", {"answer": "allow"}).status_code == 200
    wait_until(lambda: (project / "out.txt").exists(), what="the owner's answer to run the Write")


def test_the_token_is_required_on_loopback_and_swapped_for_a_per_port_httponly_cookie(serve: Serve) -> None:
    s = serve({"steps": ["x"]})
    assert s.token and len(s.token) >= 24  # printed in the address
    port = httpx.URL(s.url).port
    with httpx.Client() as anon:
        assert anon.get(s.url + "api/info").status_code == 401
        page = anon.get(s.url)
        assert page.status_code == 401 and page.headers["content-type"].startswith("text/html")
        assert anon.get(s.url + "?token=wrong", follow_redirects=False).status_code == 401
        swap = anon.get(s.url + f"?token={s.token}", follow_redirects=False)
        assert swap.status_code == 303 and swap.headers["location"] == "/"
        cookie = swap.headers["set-cookie"]
        assert cookie.startswith(f"keel_token_{port}=") and "HttpOnly" in cookie and "SameSite=Strict" in cookie
        assert anon.get(s.url + "api/sessions").status_code == 200
        assert anon.get(s.url + "api/info").json()["bypass"] is False
    assert httpx.get(s.url + "api/info", cookies={"keel_token": s.token}).status_code == 401  # another port's name


def test_a_short_token_from_the_environment_is_refused(project: Path, keel: Callable[..., Any]) -> None:
    run = keel("serve", "--port", "0", env={"KEEL_SERVE_TOKEN": "short"}, timeout=30)
    assert run.code == 2 and run.stderr.strip() == (
        "keel serve: KEEL_SERVE_TOKEN is too short: use at least 16 random characters"
    )


def test_a_client_cannot_choose_a_scripted_model_a_model_file_or_a_base_url(serve: Serve, project: Path) -> None:
    script = project.parent / "attack.json"
    step = {"tool_calls": [{"name": "Bash", "input": {"command": "touch pwned"}}]}
    script.write_text(json.dumps({"steps": [step, "done"]}))
    s = serve({"steps": ["the server's own model"]})
    for model in (
        f"scripted:{script}",
        str(script),
        "http://127.0.0.1:9/v1",
        "openai:gpt-4o",  # a provider this server is not configured for
        "ollama:qwen3",  # a local server
        "openai:http://127.0.0.1:9/v1",
    ):
        res = s.post("api/sessions", {"model": model, "prompt": "go", "permission_mode": "acceptEdits"})
        assert res.status_code == 403, (model, res.text)
        assert res.json()["error"].startswith(f"model {model!r} cannot be chosen from a client")
    assert s.get("api/sessions").json()["live"] == []
    assert not (project / "pwned").exists()
    ok = s.post("api/sessions", {"model": "sonnet"})  # a catalog model of the configured provider
    assert ok.status_code == 201 and ok.json()["model"] == "anthropic:claude-sonnet-4-5"


def test_bypass_permissions_from_the_web_only_with_the_owners_flag(serve: Serve, project: Path, tmp_path: Path) -> None:
    bash = {"tool_calls": [{"name": "Bash", "input": {"command": "touch ran-unasked"}}]}
    s = serve({"steps": ["x"]})
    refused = s.post("api/sessions", {"permission_mode": "bypassPermissions", "prompt": "go"})
    assert refused.status_code == 403 and "--allow-bypass-permissions" in refused.json()["error"]
    assert s.get("api/sessions").json()["live"] == []
    sid = s.post("api/sessions", {}).json()["session_id"]
    assert s.post(f"api/sessions/{sid}/mode", {"mode": "bypassPermissions"}).status_code == 403
    assert s.get(f"api/sessions/{sid}").json()["mode"] == "default"
    assert s.post(f"api/sessions/{sid}/mode", {"mode": "acceptEdits"}).status_code == 200  # the others still work
    s.stop()

    settings = tmp_path / "userhome" / ".claude" / "settings.json"  # the owner's settings ask for bypass
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps({"permissions": {"defaultMode": "bypassPermissions"}}))
    s = serve({"steps": [bash, "done"]})
    opened = s.post("api/sessions", {"prompt": "go"}).json()
    assert opened["mode"] == "default"
    warned = s.frames(opened["session_id"], kind("warning"), after=0)[-1]
    assert "--allow-bypass-permissions" in warned["message"]
    s.frames(opened["session_id"], kind("permission_request"))  # it asks
    assert not (project / "ran-unasked").exists()
    s.stop()

    settings.unlink()
    s = serve({"steps": [bash, "done"]}, "--allow-bypass-permissions")
    assert s.get("api/info").json()["bypass"] is True
    made = s.post("api/sessions", {"permission_mode": "bypassPermissions", "prompt": "go"})
    assert made.status_code == 201 and made.json()["mode"] == "bypassPermissions"
    s.frames(made.json()["session_id"], kind("idle"))
    assert (project / "ran-unasked").exists()  # nobody was asked


# --- keel's files -------------------------------------------------------------------------------


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A folder every user may enter (pytest's own is root's alone, which would hide the modes)."""
    base = Path(tempfile.mkdtemp(prefix="keel-modes-", dir="/tmp"))
    base.chmod(0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def keel_p(base: Path, keel_home: Path, steps: list[Any], *args: str) -> subprocess.CompletedProcess[str]:
    project = base / "project"
    project.mkdir(exist_ok=True)
    (base / "userhome").mkdir(exist_ok=True)
    script = base / "script.json"
    script.write_text(json.dumps({"steps": steps}))
    env = {**os.environ, "KEEL_HOME": str(keel_home), "HOME": str(base / "userhome")}
    done = subprocess.run(
        [KEEL, "-p", "hello", "--model", f"scripted:{script}", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
        preexec_fn=lambda: os.umask(0o022),  # the user's usual umask, for this run only
    )
    assert done.returncode == 0, done.stderr
    return done


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def keel_files(home: Path) -> list[Path]:
    return [p for p in home.rglob("*") if "models" not in p.relative_to(home).parts]  # a downloaded model: not ours


def test_keel_home_transcripts_index_memory_and_logs_are_private_after_a_run(shared_tmp: Path) -> None:
    home = shared_tmp / "keelhome"
    touch = {"tool_calls": [{"name": "Bash", "input": {"command": "touch by-bash.txt"}}]}
    keel_p(shared_tmp, home, [touch, "done"], "--allowedTools", "Bash")
    assert mode(home) == 0o700
    files = keel_files(home)
    names = {p.name for p in files}
    assert {"sessions.db", "memory.db", "keel.log", "logs", "memory", "projects"} <= names
    assert any(p.suffix == ".jsonl" for p in files)
    too_open = {str(p.relative_to(home)): oct(mode(p)) for p in files if p.is_file() and mode(p) != 0o600}
    assert too_open == {}  # every file keel wrote, in a 0700 KEEL_HOME
    (transcripts,) = (home / "projects").iterdir()
    assert {oct(mode(d)) for d in (home, home / "projects", transcripts, home / "logs", home / "memory")} == {"0o700"}
    assert mode(shared_tmp / "project" / "by-bash.txt") == 0o644  # the umask still rules the user's files


def test_keel_mem_creates_its_store_private(shared_tmp: Path) -> None:
    home = shared_tmp / "keelhome"
    project = shared_tmp / "project"
    project.mkdir()
    seed = shared_tmp / "seed.jsonl"
    seed.write_text(json.dumps({"id": "m1", "type": "fact", "project": project_id(project), "text": "Tea at four."}))
    env = {**os.environ, "KEEL_HOME": str(home), "HOME": str(shared_tmp)}
    done = subprocess.run(
        [KEEL, "mem", "import", "jsonl", str(seed)], cwd=project, env=env, capture_output=True, text=True, timeout=90
    )
    assert done.returncode == 0, done.stderr
    assert (home / "memory" / "memory.db").exists()
    assert mode(home) == 0o700 and mode(home / "memory") == 0o700
    too_open = {str(p.relative_to(home)): oct(mode(p)) for p in keel_files(home) if p.is_file() and mode(p) != 0o600}
    assert too_open == {}


@needs_root
def test_another_user_cannot_read_keels_files_from_disk(shared_tmp: Path) -> None:
    home = shared_tmp / "keelhome"
    keel_p(shared_tmp, home, ["the answer nobody else should read"])
    paths = [home, *keel_files(home)]
    tried = as_other_user(READ_AS_OTHER_USER, *map(str, paths))
    assert [p for p, how in tried.items() if how == "read"] == []


def test_an_existing_keel_home_open_to_others_is_tightened_and_the_log_says_so(shared_tmp: Path) -> None:
    home = shared_tmp / "keelhome"
    home.mkdir(mode=0o755)
    home.chmod(0o755)
    keel_p(shared_tmp, home, ["ok"])
    assert mode(home) == 0o700
    assert (
        f"KEEL_HOME {home} was open to other users (mode 755): made it 700" in (home / "logs" / "keel.log").read_text()
    )


def test_a_shared_folder_as_keel_home_is_reported_not_changed(shared_tmp: Path) -> None:
    home = shared_tmp / "shared"
    home.mkdir()
    home.chmod(0o1777)  # sticky and world-writable, as /tmp: never chmod-ed
    keel_p(shared_tmp, home, ["ok"])
    assert mode(home) == 0o1777
    assert "is open to other users (mode 1777) and was left as it is" in (home / "logs" / "keel.log").read_text()
    assert mode(home / "sessions.db") == 0o600 and mode(home / "projects") == 0o700
