"""The one ``paths:`` glob dialect (``agentkeel.internal.globs``, gitignore's, on pathspec): a rule
and a skill with the same globs apply to the same files."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentkeel.internal.globs import Globs, expand_braces, matches
from agentkeel.models.fake.server import FakeLLMServer
from conftest import KeelRun, wire_env


@pytest.mark.parametrize(
    ("globs", "path", "hit"),
    [
        (["src/**/*.py"], "src/a.py", True),
        (["src/**/*.py"], "src/a/b/c.py", True),
        (["src/*.py"], "src/a/b.py", False),  # a slash anchors; * stays in one folder
        (["*.{md,txt}"], "x.txt", True),
        (["*.md"], "docs/deep/x.md", True),  # no slash: any depth
        (["./src/*.ts"], "src/a.ts", True),
        (["src/"], "src/a/b.ts", True),
        (["**/*.{ts,tsx}"], "web/a.tsx", True),
        (["src/**", "!src/gen/**"], "src/gen/x.py", False),
        (["src/**", "!src/gen/**"], "src/x.py", True),
        (["*.py"], "../x.py", False),
        ([], "x.py", False),
    ],
)
def test_gitignore_semantics(globs: list[str], path: str, hit: bool) -> None:
    assert matches(globs, path) is hit


def test_braces_expand_and_an_unclosed_one_is_literal() -> None:
    assert expand_braces("a/*.{ts,tsx}") == ["a/*.ts", "a/*.tsx"]
    assert expand_braces("{a,b}/{c,d}") == ["a/c", "a/d", "b/c", "b/d"]
    assert expand_braces("x{y") == ["x{y"] and expand_braces("{only}") == ["{only}"]
    assert not Globs([" "]) and Globs(["*.py"])


def test_a_rule_and_a_skill_with_the_same_globs_apply_to_the_same_files(
    project: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    """Before: the rule matched ``*.md`` at the top only and ``src/*.ts`` one folder deep; the
    skill (fnmatch) matched both at any depth."""
    (project / ".git").mkdir()
    globs = '["src/*.ts", "*.md"]'
    (project / ".claude" / "rules").mkdir(parents=True)
    (project / ".claude" / "rules" / "web.md").write_text(f"---\npaths: {globs}\n---\nRULE-WEB-APPLIES\n")
    skill = project / ".claude" / "skills" / "webstyle"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(f"---\ndescription: web style\npaths: {globs}\n---\nUse tabs.\n")
    files = ["src/deep/b.ts", "docs/x.md", "src/a.ts"]
    for rel in files:
        (project / rel).parent.mkdir(parents=True, exist_ok=True)
        (project / rel).write_text("x\n")
    reads = [{"tool_calls": [{"name": "Read", "input": {"file_path": str(project / rel)}}]} for rel in files]
    server = fake_llm([*reads, "done"])
    run = keel("-p", "read them", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    seen: dict[str, tuple[bool, bool]] = {}
    before = ""
    for rel, request in zip(files, server.cursor.requests[1:], strict=False):
        text = json.dumps(request["body"]["messages"])
        new = text[len(before) - 2 :] if before else text  # what this read added
        seen[rel] = ("RULE-WEB-APPLIES" in new, "Skills that apply to" in new and "webstyle" in new)
        before = text
    # the skill is announced once, the rule loaded once: both on the first file that matches
    assert seen == {"src/deep/b.ts": (False, False), "docs/x.md": (True, True), "src/a.ts": (False, False)}
