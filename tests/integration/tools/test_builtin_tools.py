"""Every built-in tool on real files and real subprocesses, called the way the loop calls it."""

from __future__ import annotations

import ast
import asyncio
import base64
import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Thread
from typing import Any

import pytest

from agentkeel import replace
from agentkeel.core.events import Event, TodosUpdated
from agentkeel.core.tools import (
    Services,
    ToolContext,
    ToolError,
    ToolInputError,
    ToolOutput,
    ToolRegistry,
    generated_schema,
)
from agentkeel.core.types import ImageBlock
from agentkeel.tools import builtin_tools
from agentkeel.tools.schemas import SCHEMA_FILE, with_shipped_schemas
from kit import wait_until_async


def generate() -> dict[str, Any]:
    """``scripts/schemagen.py``'s ``generate`` (a development tool, outside the package)."""
    import importlib.util

    path = Path(__file__).resolve().parents[3] / "scripts" / "schemagen.py"
    spec = importlib.util.spec_from_file_location("schemagen", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result: dict[str, Any] = module.generate()
    return result


REGISTRY = ToolRegistry(builtin_tools())


class Harness:
    def __init__(self, cwd: Path) -> None:
        self.events: list[Event] = []
        self.ctx = ToolContext(cwd=cwd, session_id="t", services=Services(), emit=self.events.append)

    async def __call__(self, name: str, **tool_input: Any) -> ToolOutput:
        tool = REGISTRY.get(name)
        assert tool is not None
        try:
            return await tool.run(tool.parse(tool_input), self.ctx)
        except ToolError as e:
            return ToolOutput(str(e), is_error=True)


@pytest.fixture
def t(tmp_path: Path) -> Harness:
    return Harness(tmp_path)


def test_builtin_names_match_claude_code() -> None:
    assert {t.name for t in REGISTRY.list()} == {
        "Read",
        "Write",
        "Edit",
        "MultiEdit",
        "LS",
        "Bash",
        "BashOutput",
        "KillShell",
        "Glob",
        "Grep",
        "WebFetch",
        "TodoWrite",
        "NotebookEdit",
    }
    read = REGISTRY.get("Read")
    assert read is not None
    assert set(read.input_schema["properties"]) == {"file_path", "offset", "limit"}
    assert read.input_schema["required"] == ["file_path"]
    assert read.input_schema["additionalProperties"] is False


def test_invalid_input_is_a_clear_error() -> None:
    tool = REGISTRY.get("Edit")
    assert tool is not None
    with pytest.raises(ToolInputError, match="Invalid input for Edit: old_string: Field required"):
        tool.parse({"file_path": "/x", "new_string": "y"})


async def test_read_numbered_offset_limit_and_errors(t: Harness, tmp_path: Path) -> None:
    f = tmp_path / "a.txt"
    f.write_text("".join(f"line {i}\n" for i in range(1, 11)))
    out = await t("Read", file_path=str(f))
    assert out.text().splitlines()[0] == "1\tline 1" and not out.is_error
    part = await t("Read", file_path="a.txt", offset=3, limit=2)  # relative to cwd
    assert part.text().startswith("3\tline 3\n4\tline 4") and "Showing lines 3-4 of 10" in part.text()
    assert "does not exist" in (await t("Read", file_path=str(tmp_path / "nope"))).text()
    assert "is a directory" in (await t("Read", file_path=str(tmp_path))).text()
    (tmp_path / "bin").write_bytes(b"\x00\x01\x02")
    assert "binary" in (await t("Read", file_path=str(tmp_path / "bin"))).text()
    (tmp_path / "empty").write_text("")
    assert "empty" in (await t("Read", file_path=str(tmp_path / "empty"))).text()


async def test_read_image_and_notebook(t: Harness, tmp_path: Path) -> None:
    png = base64.b64decode(
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
    )
    (tmp_path / "p.png").write_bytes(png)
    out = await t("Read", file_path=str(tmp_path / "p.png"))
    assert isinstance(out.content, list) and isinstance(out.content[0], ImageBlock)
    assert out.content[0].media_type == "image/png"
    nb = {"cells": [{"cell_type": "code", "source": ["print(1)"], "outputs": [{"text": ["1\n"]}]}]}
    (tmp_path / "n.ipynb").write_text(json.dumps(nb))
    text = (await t("Read", file_path=str(tmp_path / "n.ipynb"))).text()
    assert "print(1)" in text and "<output>\n1\n" in text


async def test_write_requires_read_for_existing_files(t: Harness, tmp_path: Path) -> None:
    f = tmp_path / "new" / "dir" / "f.txt"
    out = await t("Write", file_path=str(f), content="one\n")
    assert not out.is_error and f.read_text() == "one\n"  # parents created
    g = tmp_path / "existing.txt"
    g.write_text("keep")
    denied = await t("Write", file_path=str(g), content="clobber")
    assert denied.is_error and "has not been read" in denied.text() and g.read_text() == "keep"
    await t("Read", file_path=str(g))
    assert not (await t("Write", file_path=str(g), content="replaced")).is_error
    assert g.read_text() == "replaced"


async def test_edit_rules(t: Harness, tmp_path: Path) -> None:
    f = tmp_path / "code.py"
    f.write_text("a = 1\nb = 1\nc = 2\n")
    assert "has not been read" in (await t("Edit", file_path=str(f), old_string="c", new_string="d")).text()
    await t("Read", file_path=str(f))
    multi = await t("Edit", file_path=str(f), old_string="= 1", new_string="= 9")
    assert multi.is_error and "Found 2 matches" in multi.text()
    missing = await t("Edit", file_path=str(f), old_string="zzz", new_string="y")
    assert missing.is_error and "not found" in missing.text()
    same = await t("Edit", file_path=str(f), old_string="c", new_string="c")
    assert same.is_error and "identical" in same.text()
    ok = await t("Edit", file_path=str(f), old_string="= 1", new_string="= 9", replace_all=True)
    assert not ok.is_error and f.read_text() == "a = 9\nb = 9\nc = 2\n"
    assert ok.text() == f"The file {f} has been updated (2 replacements: lines 1, 2)."  # no echo of the file
    # a change made behind the model's back must be re-read first
    time.sleep(0.01)
    f.write_text("changed outside\n")
    os.utime(f, ns=(time.time_ns(), time.time_ns() + 10_000_000))
    stale = await t("Edit", file_path=str(f), old_string="changed", new_string="x")
    assert stale.is_error and "modified since it was read" in stale.text()


async def test_edit_preserves_crlf_and_mode(t: Harness, tmp_path: Path) -> None:
    f = tmp_path / "win.sh"
    f.write_bytes(b"echo a\r\necho b\r\n")
    f.chmod(0o755)
    await t("Read", file_path=str(f))
    out = await t("Edit", file_path=str(f), old_string="echo a\necho b", new_string="echo A\necho B")
    assert not out.is_error
    assert f.read_bytes() == b"echo A\r\necho B\r\n"
    assert f.stat().st_mode & 0o777 == 0o755


async def test_multiedit_is_all_or_nothing(t: Harness, tmp_path: Path) -> None:
    f = tmp_path / "m.txt"
    f.write_text("alpha beta gamma\n")
    await t("Read", file_path=str(f))
    bad = await t(
        "MultiEdit",
        file_path=str(f),
        edits=[{"old_string": "alpha", "new_string": "A"}, {"old_string": "delta", "new_string": "D"}],
    )
    assert bad.is_error and "edit 2" in bad.text() and f.read_text() == "alpha beta gamma\n"
    good = await t(
        "MultiEdit",
        file_path=str(f),
        edits=[{"old_string": "alpha", "new_string": "A"}, {"old_string": "A beta", "new_string": "A B"}],
    )
    assert not good.is_error and f.read_text() == "A B gamma\n"


async def test_ls(t: Harness, tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "m.py").write_text("")
    (tmp_path / ".hidden").write_text("")
    (tmp_path / "skip.log").write_text("")
    out = (await t("LS", path=str(tmp_path), ignore=["*.log"])).text()
    assert "- src/" in out and "  - m.py" in out and ".hidden" not in out and "skip.log" not in out
    assert "does not exist" in (await t("LS", path=str(tmp_path / "none"))).text()


async def test_bash_foreground(t: Harness, tmp_path: Path) -> None:
    out = await t("Bash", command="echo out; echo err >&2; exit 3")
    assert out.is_error and "out" in out.text() and "err" in out.text() and "Exit code 3" in out.text()
    assert out.metadata["exit_code"] == 3
    env = (await t("Bash", command="echo $CI $GIT_TERMINAL_PROMPT $PAGER; test -t 0 || echo no-tty")).text()
    assert env.splitlines() == ["true 0 cat", "no-tty"]
    read_stdin = await t("Bash", command="cat; echo after")  # stdin closed: never hangs
    assert read_stdin.text() == "after"


async def test_bash_cwd_persists(t: Harness, tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    await t("Bash", command="cd sub")
    assert (await t("Bash", command="pwd")).text() == str((tmp_path / "sub").resolve())


async def test_bash_timeout_kills_process_group(t: Harness, tmp_path: Path) -> None:
    marker = tmp_path / "child-alive"
    started = time.monotonic()
    out = await t("Bash", command=f"(sleep 3; touch {marker}) & sleep 120", timeout=300)
    assert out.is_error and "timed out after 0.3s" in out.text()
    assert time.monotonic() - started < 60  # not the 120 s sleep (a loaded machine: loose)
    await asyncio.sleep(3.5)
    assert not marker.exists()  # the background child died with its group


async def _output_until(t: Harness, text: str, **tool_input: Any) -> str:
    """BashOutput of bash_1, read until ``text`` is in it (each read returns only what is new)."""

    async def read() -> str | None:
        out = (await t("BashOutput", bash_id="bash_1", **tool_input)).text()
        if text in out:
            return out
        assert "<output>\n\n</output>" in out, out  # nothing new yet
        return None

    out: str = await wait_until_async(read, 60, repr(text))
    return out


async def test_bash_background_output_and_kill(t: Harness, tmp_path: Path) -> None:
    go = tmp_path / "go"  # the job prints "second" only once the first read is done
    job = f"echo first; until [ -e {go} ]; do sleep 0.05; done; echo second; sleep 30"
    start = await t("Bash", command=job, run_in_background=True)
    assert "bash_1" in start.text()
    first = await _output_until(t, "first")
    assert "<status>running</status>" in first
    go.touch()
    second = await _output_until(t, "second", filter="sec")
    assert "first" not in second  # only new, filtered output
    assert "Killed shell bash_1" in (await t("KillShell", shell_id="bash_1")).text()
    assert "<status>killed</status>" in (await t("BashOutput", bash_id="bash_1")).text()
    assert (await t("BashOutput", bash_id="bash_9")).is_error


def _tree(root: Path) -> None:
    (root / ".git").mkdir()
    (root / ".gitignore").write_text("build/\n*.tmp\n")
    for rel, text in {
        "src/app.py": "def main():\n    return 'Hello'\n\nclass App:\n    pass\n",
        "src/util.py": "import os\n\ndef helper():\n    return os.sep\n",
        "src/web/index.ts": "export const hello = 'hello';\n",
        "src-extra/more.py": "def main():\n    return 1\n",  # sorts after src/ in a walk, before it as a string
        "README.md": "# Hello project\nSay hello.\n",
        "build/out.py": "def main(): pass\n",
        "build/cache.tmp": "def main(): cached\n",
        "notes.tmp": "hello tmp\n",
        ".secret/hidden.py": "def main(): hidden\n",
    }.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


async def test_glob(t: Harness, tmp_path: Path) -> None:
    _tree(tmp_path)
    out = (await t("Glob", pattern="**/*.py")).text().splitlines()
    assert sorted(Path(p).name for p in out) == ["app.py", "more.py", "util.py"]  # build/ ignored, hidden skipped
    braces = (await t("Glob", pattern="src/**/*.{ts,py}")).text().splitlines()
    assert len(braces) == 3
    assert (await t("Glob", pattern="*.nothing")).text() == "No files found"
    absolute = (await t("Glob", pattern=str(tmp_path / "src" / "*.py"))).text().splitlines()
    assert len(absolute) == 2


GREP_CASES: list[dict[str, Any]] = [
    {"pattern": "def main"},
    {"pattern": "hello", "-i": True},
    {"pattern": "hello", "-i": True, "output_mode": "content", "-n": True},
    {"pattern": "return", "output_mode": "count"},
    {"pattern": "def", "glob": "*.py", "output_mode": "content"},
    {"pattern": "hello", "type": "ts", "output_mode": "content", "-n": True},
    {"pattern": "import", "output_mode": "content", "-n": True, "-A": 2},
    {"pattern": "class", "output_mode": "content", "-n": True, "-C": 1},
    {"pattern": "main.*\\n.*return", "multiline": True},
    {"pattern": "e", "output_mode": "content", "head_limit": 3, "offset": 1},
]


@pytest.mark.parametrize("case", GREP_CASES, ids=lambda c: json.dumps(c))
async def test_grep_python_engine(
    case: dict[str, Any], t: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _tree(tmp_path)
    monkeypatch.setenv("KEEL_GREP_PYTHON", "1")
    out = await t("Grep", **case)
    assert out.metadata["engine"] == "python" and not out.is_error
    text = out.text()
    assert "build/out.py" not in text and "notes.tmp" not in text and ".secret" not in text


@pytest.mark.skipif(shutil.which("rg") is None, reason="ripgrep not installed (.ci/run installs it)")
@pytest.mark.parametrize("case", GREP_CASES, ids=lambda c: json.dumps(c))
async def test_grep_ripgrep_and_python_agree(
    case: dict[str, Any], t: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _tree(tmp_path)
    with_rg = await t("Grep", **case)
    monkeypatch.setenv("KEEL_GREP_PYTHON", "1")
    with_py = await t("Grep", **case)
    assert with_rg.metadata["engine"] == "ripgrep"
    assert with_rg.text() == with_py.text()


async def test_a_search_started_inside_an_ignored_directory_searches_it(
    t: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As ripgrep does: `build/` does not hide build's own files when asked for them; `*.tmp` still applies."""
    _tree(tmp_path)
    listed = (await t("Glob", pattern="**/*", path=str(tmp_path / "build"))).text().splitlines()
    assert [Path(p).name for p in listed] == ["out.py"]
    engines = [None, "1"] if shutil.which("rg") else ["1"]
    found = []
    for python in engines:
        if python:
            monkeypatch.setenv("KEEL_GREP_PYTHON", python)
        out = await t("Grep", pattern="def main", path="build")
        found.append(out.text())
    assert all("out.py" in text and "cache.tmp" not in text for text in found)
    assert len(set(found)) == 1  # ripgrep and the Python engine agree


async def test_grep_bad_regex(t: Harness) -> None:
    out = await t("Grep", pattern="(unclosed")
    assert out.is_error and "invalid regex" in out.text()


class _Site(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        if self.path == "/away":
            self.send_response(302)
            self.send_header("Location", "http://example.invalid/elsewhere")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.path == "/hop":
            self.send_response(301)
            self.send_header("Location", "/page")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = (
            b"<html><head><style>x{}</style></head><body><h1>Title</h1><p>Hello <a href='/x'>link</a></p>"
            b"<script>evil()</script></body></html>"
        )
        self.send_response(200 if self.path == "/page" else 404)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


async def test_webfetch(t: Harness) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Site)
    Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        page = (await t("WebFetch", url=base + "/hop", prompt="title?")).text()
        assert "# Title" in page and "Hello link (/x)" in page and "evil" not in page and "x{}" not in page
        away = (await t("WebFetch", url=base + "/away", prompt="?")).text()
        assert "REDIRECT DETECTED" in away and "example.invalid" in away
        missing = await t("WebFetch", url=base + "/missing", prompt="?")
        assert missing.is_error and "Status: 404" in missing.text()
        assert "not a fetchable URL" in (await t("WebFetch", url="file:///etc/passwd", prompt="?")).text()
    finally:
        server.shutdown()


async def test_todowrite(t: Harness) -> None:
    todos = [{"content": "a", "status": "in_progress", "activeForm": "doing a"}, {"content": "b", "status": "pending"}]
    out = await t("TodoWrite", todos=todos)
    assert "0/2 completed" in out.text()
    assert isinstance(t.events[-1], TodosUpdated) and t.events[-1].todos[0]["content"] == "a"
    two = [dict(x, status="in_progress") for x in todos]
    assert (await t("TodoWrite", todos=two)).is_error


# --- shipped schemas -------------------------------------------------------------------------


def test_shipped_schemas_are_the_models_schemas() -> None:
    """tools/schemas.json is derived data; when this fails, run `.venv/bin/python scripts/schemagen.py`."""
    assert json.loads(SCHEMA_FILE.read_text(encoding="utf-8")) == generate()


def test_builtin_tools_use_the_shipped_schemas_and_others_generate_theirs() -> None:
    tools = {t.name: t for t in builtin_tools()}
    assert all(t.raw_schema is not None and t.input_model is None for t in tools.values())  # stand-ins
    assert tools["Read"].input_schema == generated_schema(tools["Read"].model())  # loads the real one
    real = {t.name: t for t in builtin_tools(shipped=False)}
    for name, tool in tools.items():  # a stand-in carries the real tool's flags
        assert (tool.read_only, tool.parallel, tool.group, tool.timeout_s) == (
            real[name].read_only,
            real[name].parallel,
            real[name].group,
            real[name].timeout_s,
        ), name
    custom = replace(real["Read"], name="NotShipped", raw_schema=None)
    [kept] = with_shipped_schemas([custom])
    assert kept.raw_schema is None and kept.input_schema == tools["Read"].input_schema


def test_a_session_reaches_its_first_request_without_pydantic_or_the_tool_modules(project: Path) -> None:
    """The lean path: built-in tools are offered from shipped data and load at their first call."""
    script = project / "s.json"
    script.write_text(json.dumps({"steps": ["hello"]}))
    code = (
        "import sys\n"
        "from agentkeel.ui.cli.main import main\n"
        f"main(['-p', 'hi', '--model', 'scripted:{script}'])\n"
        "print(sorted(m for m in sys.modules if m == 'pydantic' or m.startswith('agentkeel.tools.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=project, capture_output=True, text=True, check=True).stdout
    loaded = set(ast.literal_eval(out.splitlines()[-1]))
    heavy = {"pydantic", *(f"agentkeel.tools.{m}" for m in ("files", "shell", "search", "web", "todo"))}
    assert "agentkeel.tools.schemas" in loaded and not loaded & heavy, out


@pytest.mark.parametrize("engine", ["ripgrep", "python"])
async def test_grep_refuses_a_fifo_or_a_device_instead_of_hanging(
    engine: str, t: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Grep given a FIFO nobody writes to, or /dev/zero, used to hang (and leave rg running)."""
    if engine == "python":
        monkeypatch.setenv("KEEL_GREP_PYTHON", "1")
    elif shutil.which("rg") is None:
        pytest.skip("ripgrep not installed (.ci/run installs it)")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for path in (str(fifo), "/dev/zero"):
        out = await asyncio.wait_for(t("Grep", pattern="x", path=path), 10)
        assert out.is_error and "not a regular file" in out.text(), out.text()


@pytest.mark.skipif(shutil.which("rg") is None, reason="ripgrep not installed (.ci/run installs it)")
async def test_a_cancelled_grep_leaves_no_ripgrep_behind(tmp_path: Path) -> None:
    from agentkeel.tools.search import GrepInput, ripgrep

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    rg = shutil.which("rg")
    assert rg is not None
    task = asyncio.ensure_future(ripgrep(GrepInput(pattern="x"), fifo, rg))  # rg blocks opening the FIFO
    await asyncio.sleep(0.5)

    def ripgreps() -> list[int]:
        pids = []
        for d in Path("/proc").iterdir():
            try:
                cmd = (d / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if d.name.isdigit() and cmd and cmd[0].endswith(b"rg") and str(fifo).encode() in cmd:
                pids.append(int(d.name))
        return pids

    assert ripgreps(), "ripgrep should be running on the FIFO"
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert ripgreps() == []


def test_keel_tools_run_a_session_of_calls_without_pydantic(project: Path) -> None:
    """Built-in tool inputs are msgspec Structs: validating Bash, Read, Edit, Grep and TodoWrite calls
    (a bad one included) never imports pydantic."""
    (project / "a.txt").write_text("one\n")
    calls = [
        {"name": "Bash", "input": {"command": "echo hi", "timeout": "5000"}},
        {"name": "Read", "input": {"file_path": "a.txt"}},
        {"name": "Edit", "input": {"file_path": "a.txt", "old_string": "one", "new_string": "two"}},
        {"name": "Grep", "input": {"pattern": "two", "-i": True, "-C": 1}},
        {"name": "TodoWrite", "input": {"todos": [{"content": "x", "status": "pending"}]}},
        {"name": "Read", "input": {"file_path": "a.txt", "offset": -1, "bogus": 1}},
    ]
    script = project / "s.json"
    script.write_text(json.dumps({"steps": [{"tool_calls": [c]} for c in calls] + ["done"]}))
    code = (
        "import sys\n"
        "from agentkeel.ui.cli.main import main\n"
        f"main(['-p', 'hi', '--model', 'scripted:{script}', '--output-format', 'stream-json', '--verbose',"
        " '--allowedTools', 'Bash', 'Edit'])\n"
        "print(sorted(m for m in sys.modules if m.startswith('pydantic')))"
    )
    run = subprocess.run([sys.executable, "-c", code], cwd=project, capture_output=True, text=True, check=True)
    lines = run.stdout.splitlines()
    assert ast.literal_eval(lines[-1]) == [], run.stdout[-2000:]
    results = [
        b
        for line in lines[:-1]
        if line.startswith("{") and (e := json.loads(line)).get("type") == "user"
        for b in e["message"]["content"]
        if isinstance(b, dict) and b.get("type") == "tool_result"
    ]
    assert [bool(r.get("is_error")) for r in results] == [False] * 5 + [True], results
    assert (project / "a.txt").read_text() == "two\n"
    bad = json.dumps(results[-1]["content"])
    assert "Invalid input for Read: bogus: Extra inputs are not permitted" in bad, bad


def test_struct_input_errors_name_every_missing_and_unknown_field_and_locate_the_rest() -> None:
    tools = {t.name: t for t in builtin_tools(shipped=False)}
    with pytest.raises(ToolInputError) as err:
        tools["Edit"].parse({"new_string": "y", "nope": 1})
    assert str(err.value) == (
        "Invalid input for Edit: file_path: Field required; old_string: Field required; "
        "nope: Extra inputs are not permitted"
    )
    with pytest.raises(ToolInputError, match=r"Invalid input for Bash: timeout: Expected `int` >= 1$"):
        tools["Bash"].parse({"command": "ls", "timeout": 0})
    with pytest.raises(ToolInputError, match=r"Invalid input for Bash: command: Expected `str`, got `int`$"):
        tools["Bash"].parse({"command": 5})
    with pytest.raises(ToolInputError, match=r"Invalid input for MultiEdit: edits\.1\.new_string: Field required$"):
        tools["MultiEdit"].parse(
            {"file_path": "/x", "edits": [{"old_string": "a", "new_string": "b"}, {"old_string": "c"}]}
        )
    with pytest.raises(ToolInputError, match=r"edits: Expected `array` of length >= 1$"):
        tools["MultiEdit"].parse({"file_path": "/x", "edits": []})
    with pytest.raises(ToolInputError, match=r"todos\.0\.status: Invalid enum value 'done'$"):
        tools["TodoWrite"].parse({"todos": [{"content": "x", "status": "done"}]})
    # lax, as pydantic was: a number or a flag written as a string is taken
    args = tools["Grep"].parse({"pattern": "x", "-i": "true", "-A": "2"})
    assert (args.case_insensitive, args.after, args.line_numbers) == (True, 2, False)
