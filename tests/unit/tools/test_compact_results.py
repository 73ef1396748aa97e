"""What Read, Edit and Grep tell the model is as small as the information allows (#35 item 5):
Read's line numbers unpadded, Edit says where it changed the file instead of echoing it, Grep's
paths under the working directory are relative. What hooks receive (``tool_response``) is what it
always was."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentkeel.core.tools import Services, ToolContext, ToolError, ToolOutput, ToolRegistry
from agentkeel.tools import builtin_tools
from agentkeel.tools.views import observe

REGISTRY = ToolRegistry(builtin_tools())


class Tools:
    def __init__(self, cwd: Path) -> None:
        self.ctx = ToolContext(cwd=cwd, session_id="t", services=Services(), emit=lambda e: None)

    async def __call__(self, name: str, **tool_input: Any) -> ToolOutput:
        tool = REGISTRY.get(name)
        assert tool is not None
        try:
            return await tool.run(tool.parse(tool_input), self.ctx)
        except ToolError as e:
            return ToolOutput(str(e), is_error=True)

    def response(self, name: str, tool_input: dict[str, Any], output: ToolOutput) -> Any:
        tool = REGISTRY.get(name)
        assert tool is not None
        return tool.response(tool_input, output)


@pytest.fixture
def t(tmp_path: Path) -> Tools:
    return Tools(tmp_path)


async def test_read_numbers_lines_unpadded_and_hooks_still_get_cat_n(t: Tools, tmp_path: Path) -> None:
    f = tmp_path / "a.py"
    f.write_text("".join(f"x{i} = {i}\n" for i in range(1, 13)))
    out = await t("Read", file_path=str(f), offset=9, limit=3)
    assert (
        out.text()
        == "9\tx9 = 9\n10\tx10 = 10\n11\tx11 = 11\n\n[Showing lines 9-11 of 12. Use offset and limit to read more.]"
    )
    response = t.response("Read", {"file_path": str(f)}, out)
    assert response["file"]["content"].startswith("     9\tx9 = 9\n    10\tx10 = 10\n    11\tx11 = 11\n\n[Showing")


async def test_edit_says_where_not_what(t: Tools, tmp_path: Path) -> None:
    f = tmp_path / "m.py"
    body = "".join(f"line {i}\n" for i in range(1, 41))
    f.write_text(body)
    await t("Read", file_path=str(f))
    out = await t("Edit", file_path=str(f), old_string="line 30\n", new_string="line 30\nline 30b\n")
    assert out.text() == f"The file {f} has been updated (line 30)."
    assert "line 29" not in out.text() and "line 31" not in out.text()  # no echoed snippet
    response = t.response("Edit", {"file_path": str(f), "old_string": "line 30\n", "new_string": "x"}, out)
    assert response["filePath"] == str(f) and response["oldString"] == "line 30\n"  # Claude Code's shape, as before


async def test_multiedit_lines_are_where_the_edits_are_in_the_new_file(t: Tools, tmp_path: Path) -> None:
    f = tmp_path / "m.py"
    f.write_text("".join(f"line {i}\n" for i in range(1, 21)))
    await t("Read", file_path=str(f))
    edits = [
        {"old_string": "line 15\n", "new_string": "line 15\n"},  # identical: refused
    ]
    assert (await t("MultiEdit", file_path=str(f), edits=edits)).is_error
    edits = [
        {"old_string": "line 15\n", "new_string": "line 15 changed\n"},
        {"old_string": "line 3\n", "new_string": "line 3\nline 3a\nline 3b\n"},  # above: moves the first one down by 2
    ]
    out = await t("MultiEdit", file_path=str(f), edits=edits)
    lines = f.read_text().splitlines()
    assert lines[16] == "line 15 changed" and lines[2] == "line 3"
    assert out.text() == f"The file {f} has been updated (2 replacements: lines 3, 17)."


async def test_grep_paths_are_relative_under_the_working_directory(
    t: Tools, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("import os\nNEEDLE = 1\n")
    (tmp_path / "b.py").write_text("NEEDLE = 2\n")
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    (outside / "c.py").write_text("NEEDLE = 3\n")
    for engine in ("ripgrep", "python"):
        if engine == "python":
            monkeypatch.setenv("KEEL_GREP_PYTHON", "1")
        files = await t("Grep", pattern="NEEDLE")
        assert sorted(files.text().splitlines()) == ["Found 2 files", "b.py", "pkg/a.py"], engine
        content_input = {"pattern": "NEEDLE", "output_mode": "content", "-n": True}
        content = await t("Grep", **content_input)
        assert content.text().splitlines() == ["b.py:1:NEEDLE = 2", "pkg/a.py:2:NEEDLE = 1"], engine
        count = await t("Grep", pattern="NEEDLE", path=str(tmp_path / "pkg"), output_mode="count")
        assert count.text() == "pkg/a.py:1", engine
        far = await t("Grep", pattern="NEEDLE", path=str(outside))
        assert far.text() == f"Found 1 file\n{outside / 'c.py'}", engine  # outside the working directory: absolute
        # hooks see the paths as they always were: absolute
        response = t.response("Grep", content_input, content)
        assert response["output"] == f"{tmp_path}/b.py:1:NEEDLE = 2\n{tmp_path}/pkg/a.py:2:NEEDLE = 1", engine
        assert set(response) == {"output", "pattern", "match_count", "engine"}
        listing = t.response("Grep", {"pattern": "NEEDLE"}, files)["output"].splitlines()
        assert listing[0] == "Found 2 files" and sorted(listing[1:]) == [f"{tmp_path}/b.py", f"{tmp_path}/pkg/a.py"]
        # memory keeps the files a Grep found by their absolute paths
        _, meta = observe("Grep", content_input, content.text(), False, content.metadata)
        assert sorted(meta["files"]) == [f"{tmp_path}/b.py", f"{tmp_path}/pkg/a.py"], engine
