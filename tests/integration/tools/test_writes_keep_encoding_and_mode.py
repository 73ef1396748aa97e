"""Edit and Write never destroy a file: its encoding, byte-order mark, line endings, symlinks and mode are kept,
and a keel killed mid-write leaves no temporary file in the project once keel starts again (issue 31, 2/5/13)."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentkeel.core.tools import Services, ToolContext, ToolError, ToolOutput, ToolRegistry
from agentkeel.models.fake.server import FakeLLMServer
from agentkeel.tools import builtin_tools
from kit import KEEL, KeelRun, wire_env

REGISTRY = ToolRegistry(builtin_tools(shipped=False))

LATIN1 = "# café crème, naïve façade — 1°C\nprice = 'ß 5€'\nname = 'Ærø'\n".encode("cp1252")


class Tools:
    def __init__(self, cwd: Path) -> None:
        self.ctx = ToolContext(cwd=cwd, session_id="t", services=Services(), emit=lambda e: None)

    def __call__(self, name: str, **tool_input: Any) -> ToolOutput:
        tool = REGISTRY.get(name)
        assert tool is not None

        async def run() -> ToolOutput:
            try:
                return await tool.run(tool.parse(tool_input), self.ctx)
            except ToolError as e:
                return ToolOutput(str(e), is_error=True)

        return asyncio.run(run())


@pytest.fixture
def tools(project: Path) -> Tools:
    return Tools(project)


def test_latin1_edit_keeps_every_byte_it_did_not_change(project: Path, tools: Tools) -> None:
    f = project / "legacy.py"
    f.write_bytes(LATIN1)
    shown = tools("Read", file_path=str(f))
    assert not shown.is_error
    assert "café crème" in str(shown.content) and "Ærø" in str(shown.content) and "\ufffd" not in str(shown.content)
    out = tools("Edit", file_path=str(f), old_string="price = 'ß 5€'", new_string="price = 'ß 6€'")
    assert not out.is_error, out.content
    assert f.read_bytes() == LATIN1.replace("ß 5€".encode("cp1252"), "ß 6€".encode("cp1252"))


def test_latin1_undefined_bytes_round_trip(project: Path, tools: Tools) -> None:
    data = bytes(range(0x20, 0x7F)) + b"\n" + bytes(range(0x80, 0x100)) + b"\nkey = 1\n"
    f = project / "all.txt"
    f.write_bytes(data)
    tools("Read", file_path=str(f))
    out = tools("Edit", file_path=str(f), old_string="key = 1", new_string="key = 2")
    assert not out.is_error, out.content
    assert f.read_bytes() == data.replace(b"key = 1", b"key = 2")


def test_a_character_the_encoding_cannot_hold_is_refused_and_nothing_written(project: Path, tools: Tools) -> None:
    f = project / "legacy.py"
    f.write_bytes(LATIN1)
    tools("Read", file_path=str(f))
    out = tools("Edit", file_path=str(f), old_string="name = 'Ærø'", new_string="name = '→ ✓'")
    assert out.is_error and "Windows-1252" in str(out.content) and "U+2192" in str(out.content)
    assert "\n" not in str(out.content)
    assert f.read_bytes() == LATIN1


def test_mixed_encodings_are_refused_with_one_line(project: Path, tools: Tools) -> None:
    data = "utf8: café\n".encode() + b"latin1: caf\xe9\n"
    f = project / "mixed.txt"
    f.write_bytes(data)
    tools("Read", file_path=str(f))
    out = tools("Edit", file_path=str(f), old_string="utf8", new_string="UTF8")
    assert out.is_error and "mixes UTF-8" in str(out.content) and "\n" not in str(out.content)
    assert f.read_bytes() == data


def test_crlf_and_utf8_bom_are_kept(project: Path, tools: Tools) -> None:
    data = b"\xef\xbb\xbfline one\r\nline two\r\nline three\r\n"
    f = project / "win.txt"
    f.write_bytes(data)
    shown = str(tools("Read", file_path=str(f)).content)
    assert shown.startswith("1\tline one\n") and "\ufeff" not in shown and "\r" not in shown
    out = tools("Edit", file_path=str(f), old_string="line one\nline two", new_string="line one\nline 1.5\nline two")
    assert not out.is_error, out.content
    assert f.read_bytes() == b"\xef\xbb\xbfline one\r\nline 1.5\r\nline two\r\nline three\r\n"
    tools("Read", file_path=str(f))
    out = tools("Write", file_path=str(f), content="new\nbody\n")
    assert not out.is_error, out.content
    assert f.read_bytes() == b"\xef\xbb\xbfnew\r\nbody\r\n"


def test_utf16_with_bom_is_read_and_edited_in_utf16(project: Path, tools: Tools) -> None:
    text = "Grüße\r\nzweite Zeile\r\n"
    f = project / "u16.txt"
    f.write_bytes(b"\xff\xfe" + text.encode("utf-16-le"))
    shown = str(tools("Read", file_path=str(f)).content)
    assert shown.startswith("1\tGrüße") and "\n2\tzweite Zeile" in shown
    out = tools("Edit", file_path=str(f), old_string="zweite", new_string="dritte")
    assert not out.is_error, out.content
    assert f.read_bytes() == b"\xff\xfe" + text.replace("zweite", "dritte").encode("utf-16-le")


def test_write_keeps_a_latin1_files_encoding(project: Path, tools: Tools) -> None:
    f = project / "legacy.txt"
    f.write_bytes(LATIN1)
    tools("Read", file_path=str(f))
    out = tools("Write", file_path=str(f), content="déjà vu\n")
    assert not out.is_error, out.content
    assert f.read_bytes() == "déjà vu\n".encode("cp1252")


def test_edit_through_a_symlink_keeps_the_link(project: Path, tools: Tools) -> None:
    (project / "real").mkdir()
    target = project / "real" / "config.txt"
    target.write_text("mode = slow\n")
    link = project / "config.txt"
    link.symlink_to("real/config.txt")
    tools("Read", file_path=str(link))
    out = tools("Edit", file_path=str(link), old_string="slow", new_string="fast")
    assert not out.is_error, out.content
    assert link.is_symlink() and os.readlink(link) == "real/config.txt"
    assert target.read_text() == "mode = fast\n"
    tools("Read", file_path=str(link))
    assert not tools("Write", file_path=str(link), content="mode = off\n").is_error
    assert link.is_symlink() and target.read_text() == "mode = off\n"
    assert sorted(p.name for p in project.rglob("*")) == ["config.txt", "config.txt", "real"]


def _run(args: list[str], cwd: Path, env: dict[str, str], umask: int = 0o022) -> KeelRun:
    proc = subprocess.run(
        [KEEL, *args], cwd=cwd, env={**os.environ, **env}, capture_output=True, text=True, timeout=120,
        stdin=subprocess.DEVNULL, umask=umask,
    )  # fmt: skip
    return KeelRun(proc.returncode, proc.stdout, proc.stderr)


def test_a_symlink_out_of_the_project_is_still_checked_at_its_real_path(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("untouched\n")
    (project / "link.txt").symlink_to(outside / "secret.txt")
    server = fake_llm(
        {"steps": [
            {"tool_calls": [{"name": "Read", "input": {"file_path": str(project / "link.txt")}}]},
            {"tool_calls": [{"name": "Write", "input": {"file_path": str(project / "link.txt"), "content": "x\n"}}]},
            {"text": "done"},
        ]}
    )  # fmt: skip
    run = _run(["-p", "go", "--permission-mode", "acceptEdits", "--output-format", "json"], project,
               wire_env(server, "anthropic"))  # fmt: skip
    assert run.code in (0, 1), run.stderr
    assert (outside / "secret.txt").read_text() == "untouched\n"
    assert (project / "link.txt").is_symlink()


def test_write_honours_the_umask_and_keeps_an_existing_mode(
    project: Path, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    script = project / "run.sh"
    script.write_text("echo hi\n")
    script.chmod(0o750)
    server = fake_llm(
        {"steps": [
            {"tool_calls": [{"name": "Write", "input": {"file_path": str(project / "new.txt"), "content": "new\n"}}]},
            {"tool_calls": [{"name": "Read", "input": {"file_path": str(script)}}]},
            {"tool_calls": [{"name": "Edit", "input": {"file_path": str(script), "old_string": "hi",
                                                       "new_string": "ho"}}]},
            {"text": "done"},
        ]}
    )  # fmt: skip
    run = _run(["-p", "go", "--permission-mode", "acceptEdits"], project, wire_env(server, "anthropic"), umask=0o027)
    assert run.code == 0, run.stderr
    assert stat.S_IMODE((project / "new.txt").stat().st_mode) == 0o640
    assert script.read_text() == "echo ho\n" and stat.S_IMODE(script.stat().st_mode) == 0o750


KILLED_MID_WRITE = """
import os, signal, sys
from pathlib import Path
from agentkeel.tools import writing

def killed(*args, **kwargs):  # the kill point: the temporary file is written, the rename not done
    os.kill(os.getpid(), signal.SIGKILL)

writing.os.replace = killed
writing.atomic_write(Path(sys.argv[1]), b"new content\\n")
"""


def test_a_kill_at_commit_time_leaves_no_temporary_file_after_the_next_start(
    project: Path, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    target = project / "notes.txt"
    target.write_text("old content\n")
    proc = subprocess.run([sys.executable, "-c", KILLED_MID_WRITE, str(target)], env=dict(os.environ), timeout=60)
    assert proc.returncode == -9
    left = [p.name for p in project.iterdir() if p.name.endswith(".keel-tmp")]
    assert len(left) == 1  # the kill point was reached
    assert target.read_text() == "old content\n"
    server = fake_llm({"steps": [{"text": "hello"}]})
    run = _run(["-p", "hi"], project, wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    assert sorted(p.name for p in project.iterdir()) == ["notes.txt"]
    assert target.read_text() == "old content\n"


def test_the_sweep_leaves_a_live_writers_file_and_anything_not_keels(project: Path, tmp_path: Path) -> None:
    from agentkeel.tools.writing import pending_dir, sweep

    mine = project / ".notes.txt.0123456789abcdef.keel-tmp"
    mine.write_text("a live write")
    other = project / "user-file.txt"
    other.write_text("the user's")
    where = pending_dir()
    where.mkdir(parents=True)
    (where / "1-foreign").write_bytes(os.fsencode(other))  # not a keel temporary name: never removed
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl,os,sys,time; fd=os.open(sys.argv[1], os.O_RDWR|os.O_CREAT);"
         "os.write(fd, sys.argv[2].encode()); fcntl.flock(fd, fcntl.LOCK_EX); print(flush=True); time.sleep(60)",
         str(where / "2-live"), str(mine)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "\n"
        assert sweep() == []
        assert mine.exists() and other.exists()
        assert (where / "2-live").exists() and not (where / "1-foreign").exists()
    finally:
        holder.kill()
        holder.wait()
    assert sweep() == [mine] and not mine.exists()


def test_read_shows_a_latin1_file_as_edit_sees_it(project: Path, tools: Tools) -> None:
    f = project / "big.txt"
    lines = [f"ligne {i}: été".encode("cp1252") for i in range(5000)]
    f.write_bytes(b"\n".join(lines) + b"\n")
    shown = str(tools("Read", file_path=str(f), offset=4000, limit=3).content)
    assert "4000\tligne 3999: été" in shown and "\ufffd" not in shown
    assert json.dumps(shown)  # a view the transcript can hold


def test_a_file_whose_name_takes_all_255_bytes_can_be_written(project: Path, tools: Tools) -> None:
    f = project / ("é" * 125 + "a.txt")  # 255 bytes: the temporary file's name must stay within the limit
    out = tools("Write", file_path=str(f), content="x\n")
    assert not out.is_error, out.content
    assert f.read_text() == "x\n" and sorted(p.name for p in project.iterdir()) == [f.name]


@settings(max_examples=400)
@given(
    data=st.one_of(
        st.binary(max_size=300),
        st.text(max_size=100).map(lambda t: t.encode("utf-8")),
        st.text(alphabet=st.characters(max_codepoint=255), max_size=100).map(lambda t: t.encode("latin-1")),
        st.text(max_size=60).map(lambda t: b"\xef\xbb\xbf" + t.encode("utf-8")),
        st.text(max_size=60).map(lambda t: b"\xff\xfe" + t.encode("utf-16-le", "surrogatepass")),
    )
)
def test_a_file_keel_can_decode_is_written_back_byte_for_byte(data: bytes) -> None:
    from agentkeel.tools.textfile import decode_file, encode_text

    try:
        text, fmt = decode_file(Path("f"), data)
    except ToolError as e:
        assert "\n" not in str(e)
        return
    assert encode_text(Path("f"), text, fmt) == data
