"""One truth per fact: a tool's name is written in ``tools/`` only. Everyone else asks the tool
(its ``Effects``) or takes the name from ``agentkeel.tools`` (#32)."""

from __future__ import annotations

import ast
from pathlib import Path

import agentkeel
from agentkeel.memory.toolnames import MEMORY_TOOLS
from agentkeel.tools import ELSEWHERE, MCP_LIST, MCP_READ, RENAMED, real_builtin_tools

SRC = Path(agentkeel.__file__).parent


def _names() -> set[str]:
    ghosts = {"NotebookRead", "WebSearch", "KillBash", "ExitPlanMode"}
    return (
        {t.name for t in real_builtin_tools()} | set(ELSEWHERE) | {MCP_LIST, MCP_READ, *RENAMED, *MEMORY_TOOLS} | ghosts
    )


def test_no_module_outside_tools_writes_a_tool_name() -> None:
    names = _names()
    found = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC)
        if rel.parts[0] == "tools" or rel.as_posix() == "memory/toolnames.py":
            continue  # where the names are declared
        tree = ast.parse(path.read_text())
        exported = {
            id(elt)
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
            for elt in ast.walk(node.value)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in names and id(node) not in exported:
                found.append(f"{rel}:{node.lineno}: {node.value!r}")
    web = (SRC / "ui" / "serve" / "web" / "app.js").read_text()
    found += [f"ui/serve/web/app.js: {n!r}" for n in names if f'"{n}"' in web or f"'{n}'" in web]
    found += [f"{p.relative_to(SRC)}: f-string rule" for p in SRC.rglob("*.py") if 'f"Bash(' in p.read_text()]
    assert not found, (
        "tool names outside tools/ (ask the tool's Effects, or import the name from agentkeel.tools):\n"
        + "\n".join(found)
    )
