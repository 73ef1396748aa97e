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
from agentkeel.policy.permissions import Decision, PermissionEngine
from agentkeel.policy.permissions.bash import analyse
from agentkeel.tools import builtin_tools

CORPUS = Path(__file__).parent / "corpus" / "permissions.json"


@dataclass(frozen=True)
class Case:
    """One tool call, or a sequence of them (``calls``) in one session: the shell's working
    directory is carried from each allowed Bash call to the next, as the Bash tool keeps it."""

    kind: str  # "attack" | "benign"
    group: str
    tool: str
    input: dict[str, Any]
    settings: dict[str, Any]
    calls: tuple[tuple[str, dict[str, Any]], ...] = ()
    expect: str | None = None  # a group's "expect": the exact decision (an attack that must be denied, not asked)

    def steps(self) -> tuple[tuple[str, dict[str, Any]], ...]:
        return self.calls or ((self.tool, self.input),)

    def label(self) -> str:
        shown = [i.get("command") or i.get("url") or i.get("file_path") or i for _, i in self.steps()]
        return f"{self.group} :: {self.tool} {shown[0] if len(shown) == 1 else shown!r}"


def load_cases() -> list[Case]:
    data = json.loads(CORPUS.read_text(encoding="utf-8"))
    out: list[Case] = []
    for kind, key, label in (("attack", "attacks", "technique"), ("benign", "benign", "kind")):
        for group in data[key]:
            for case in group["cases"]:
                calls = (
                    tuple(_call(group["tool"], c) for c in case["calls"])
                    if isinstance(case, dict) and "calls" in case
                    else ()
                )
                tool, tool_input = calls[0] if calls else _call(group["tool"], case)
                out.append(
                    Case(kind, group[label], tool, tool_input, group.get("settings", {}), calls, group.get("expect"))
                )
    return out


def _call(default_tool: str, case: Any) -> tuple[str, dict[str, Any]]:
    if isinstance(case, str):
        return default_tool, {"command": case}
    if "tool" in case and "input" in case:
        return case["tool"], case["input"]
    return default_tool, case


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
    """The case's decision: for a sequence, the first call not allowed (or the last one)."""
    shell_cwd = engine.cwd
    decision: Decision | None = None
    for tool, tool_input in case.steps():
        decision = engine.decide(tool, tool_input, _TOOLS.get(tool), shell_cwd=shell_cwd)
        if decision.decision != "allow":
            return decision
        if tool == "Bash" and isinstance(tool_input.get("command"), str):
            shell_cwd = analyse(tool_input["command"], shell_cwd, engine.home).cwd
    assert decision is not None
    return decision


def run(project: Path, home: Path) -> Iterator[tuple[Case, Decision]]:
    for case in load_cases():
        yield case, decide(case, engine_for(case, project, home))
