"""The permission-bypass corpus (tests/corpus/permissions.json): a scratch project to run it
in, and one decision per case through the engine the loop uses. Shared by the corpus test and
bench/permissions_bench.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentkeel.core.tools import Tool
from agentkeel.permissions import Decision, PermissionEngine
from agentkeel.tools import builtin_tools

CORPUS = Path(__file__).parent / "corpus" / "permissions.json"


@dataclass(frozen=True)
class Case:
    kind: str  # "attack" | "benign"
    group: str
    tool: str
    input: dict[str, Any]
    settings: dict[str, Any]

    def label(self) -> str:
        shown = self.input.get("command") or self.input.get("url") or self.input.get("file_path") or self.input
        return f"{self.group} :: {self.tool} {shown!r}"


def load_cases() -> list[Case]:
    data = json.loads(CORPUS.read_text(encoding="utf-8"))
    out: list[Case] = []
    for kind, key, label in (("attack", "attacks", "technique"), ("benign", "benign", "kind")):
        for group in data[key]:
            for case in group["cases"]:
                if isinstance(case, str):
                    tool, tool_input = group["tool"], {"command": case}
                elif "tool" in case and "input" in case:
                    tool, tool_input = case["tool"], case["input"]
                else:
                    tool, tool_input = group["tool"], case
                out.append(Case(kind, group[label], tool, tool_input, group.get("settings", {})))
    return out


def make_project(root: Path) -> tuple[Path, Path]:
    """A project with secrets, symlinks in and out (vendor -> outside, etclink -> /etc), a .git
    dir; returns (project, home)."""
    home = root / "home"
    project = home / "work" / "project"
    outside = root / "outside"
    for d in (
        project / "src",
        project / "docs",
        project / "secrets",
        project / ".git" / "hooks",
        outside,
        home / ".ssh",
    ):
        d.mkdir(parents=True, exist_ok=True)
    (project / "src" / "app.py").write_text("print('hi')\n")
    (project / "docs" / "guide.md").write_text("# guide\n")
    (project / "README.md").write_text("# project\n")
    (project / ".env").write_text("API_KEY=obviously-fake-value\n")
    (project / "secrets" / "key.pem").write_text("not a real key\n")
    (project / ".git" / "config").write_text("[core]\n")
    (outside / "notes.txt").write_text("outside\n")
    (home / ".bashrc").write_text("# rc\n")
    (project / "envlink").symlink_to(project / ".env")
    (project / "vendor").symlink_to(outside)
    (project / "etclink").symlink_to("/etc")  # a committed link out of the project
    return project, home


def engine_for(case: Case, project: Path, home: Path) -> PermissionEngine:
    s = case.settings
    engine = PermissionEngine(
        cwd=str(project), mode=s.get("mode", "default"), home=str(home), keel_home=str(home / ".keel")
    )
    for kind in ("deny", "ask", "allow"):
        engine.add(s.get(kind, []), kind, "corpus", "user")
    return engine


_TOOLS: dict[str, Tool] = {t.name: t for t in builtin_tools()}


def decide(case: Case, engine: PermissionEngine) -> Decision:
    return engine.decide(case.tool, case.input, _TOOLS.get(case.tool))


def run(project: Path, home: Path) -> Iterator[tuple[Case, Decision]]:
    for case in load_cases():
        yield case, decide(case, engine_for(case, project, home))
