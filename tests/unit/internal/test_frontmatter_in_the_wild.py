"""Frontmatter as people write it in public repositories, read as Claude Code 2.1.328 reads it.

``argument-hint: [user prompt] [orchestration prompt]`` is not YAML (a list, then more text), and
a file that has it often has nested blocks YAML must read too (``hooks:`` in disler's popular
``/plan_w_team`` command). The shapes below are faithful minimal equivalents (that repository
states no licence), not copies.

Claude Code (``claude -p hello`` in a project whose ``.claude/commands/plan_w_team.md`` is the
real file, against a recording copy of /work/shared/tools/fakellm.py) listed it in the Skill tool
as ``- plan_w_team: Creates a concise engineering implementation plan ...``: it loads the file.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from agentkeel.commands.custom import load_commands
from agentkeel.commands.registry import CommandRegistry
from agentkeel.internal.frontmatter import parse, split

MIRRORS = Path("/work/.mirror")

PLAN_W_TEAM = """---
description: Creates a concise engineering implementation plan and saves it to specs directory
argument-hint: [user prompt] [orchestration prompt]
model: opus
disallowed-tools: Task, EnterPlanMode
hooks:
  Stop:
    - hooks:
        - type: command
          command: >-
            uv run $CLAUDE_PROJECT_DIR/.claude/hooks/validators/validate_new_file.py
            --directory specs
            --extension .md
        - type: command
          command: >-
            uv run $CLAUDE_PROJECT_DIR/.claude/hooks/validators/validate_file_contains.py
            --contains '## Task Description'
---

# Plan With Team

USER_PROMPT: $1
"""


def test_a_bracketed_argument_hint_beside_frontmatter_hooks() -> None:
    """Before: YAML refused the block, the line-by-line fallback took ``hooks`` for a list of its
    lines (``["hooks:", "type: command", "-directory specs", ...]``) and the hint for a list."""
    meta = parse(PLAN_W_TEAM, Path("plan_w_team.md")).meta
    assert meta["argument-hint"] == "[user prompt] [orchestration prompt]"
    assert meta["model"] == "opus" and meta["disallowed-tools"] == "Task, EnterPlanMode"
    stop = meta["hooks"]["Stop"][0]["hooks"]
    assert stop[0] == {
        "type": "command",
        "command": "uv run $CLAUDE_PROJECT_DIR/.claude/hooks/validators/validate_new_file.py "
        "--directory specs --extension .md",
    }
    assert stop[1]["command"].endswith("--contains '## Task Description'")


@pytest.mark.parametrize(
    ("line", "hint"),
    [
        ("argument-hint: [pr-number] [priority] [assignee]", "[pr-number] [priority] [assignee]"),  # Claude Code's docs
        ("argument-hint: [user prompt] [orchestration prompt]", "[user prompt] [orchestration prompt]"),
        ("argument-hint: [file] - optional", "[file] - optional"),
        ("argument-hint: add [tagId] | remove [tagId] | list", "add [tagId] | remove [tagId] | list"),
    ],
)
def test_argument_hints_that_start_a_list_and_go_on(line: str, hint: str, tmp_path: Path) -> None:
    """Before: ``[a] [b]`` read as the list ``["a] [b"]``, and the command's hint as ``a] [b``."""
    text = f"---\ndescription: Review a pull request\n{line}\n---\nReview $ARGUMENTS\n"
    assert parse(text, Path("x.md")).meta["argument-hint"] == hint
    commands = tmp_path / ".claude" / "commands"
    commands.mkdir(parents=True)
    (commands / "review.md").write_text(text)
    registry = CommandRegistry()
    load_commands(registry, tmp_path, tmp_path / "home")
    command = registry.get("review")
    assert command is not None and command.argument_hint == hint


def test_a_list_that_is_the_whole_value_is_still_a_list() -> None:
    text = "---\ndescription: d\nallowed-tools: [Read, Grep]\nargument-hint: [message]\n---\nbody"
    meta = parse(text, Path("x.md")).meta
    assert meta["allowed-tools"] == ["Read", "Grep"] and meta["argument-hint"] == ["message"]  # as YAML reads it


def test_double_quoted_values_decode_their_escapes() -> None:
    """anthropics/skills ``pptx/SKILL.md``: ``... mentions \\"deck,\\" \\"slides,\\" ...``."""
    text = '---\nname: pptx\ndescription: "Trigger when the user mentions \\"deck,\\" \\"slides,\\" or a .pptx"\n---\nb'
    assert (
        parse(text, Path("SKILL.md")).meta["description"]
        == 'Trigger when the user mentions "deck," "slides," or a .pptx'
    )


WIDER = {
    "disler+claude-code-hooks-mastery": r"^\.claude/(commands|agents)/.*\.md$|SKILL\.md$",
    "wshobson+agents": r"^plugins/.*(SKILL\.md|/agents/[^/]*\.md|/commands/[^/]*\.md)$",
    "VoltAgent+awesome-claude-code-subagents": r"^categories/.*\.md$",
}


def _files(repo: str, pattern: str) -> list[tuple[str, str]]:
    git = MIRRORS / repo / "repo"
    listing = subprocess.run(["git", "-C", str(git), "ls-tree", "-r", "--name-only", "HEAD"], capture_output=True)
    out = []
    for name in listing.stdout.decode().splitlines():
        if re.search(pattern, name):
            raw = subprocess.run(["git", "-C", str(git), "show", f"HEAD:{name}"], capture_output=True).stdout
            out.append((name, raw.decode("utf-8", "replace")))
    return out


@pytest.mark.skipif(not (MIRRORS / "wshobson+agents").is_dir(), reason="the fetched repositories are not here")
def test_every_definition_of_wider_repositories_reads_as_yaml_does_or_by_its_top_level_keys() -> None:
    """Every file YAML reads gets exactly YAML's values (numbers aside: ``version: 2.0`` stays
    text); every file YAML refuses gets exactly its top-level keys, no nested line taken for a
    value, nothing dropped (``Context:``/``user:`` lines of ``<example>`` dialogue aside)."""
    checked = 0
    for repo, pattern in WIDER.items():
        if not (MIRRORS / repo / "repo").is_dir():
            continue
        for name, text in _files(repo, pattern):
            head, _ = split(text)
            if head is None or not head.strip():
                continue
            meta = parse(text, Path(name)).meta
            checked += 1
            try:
                strict = yaml.safe_load(head)
            except yaml.YAMLError:
                strict = None
            if isinstance(strict, dict):
                want = {str(k): v for k, v in strict.items() if not isinstance(v, (int, float)) or isinstance(v, bool)}
                assert {k: v for k, v in meta.items() if k in want} == want, name
                continue
            keys = set(re.findall(r"^([A-Za-z_][\w-]*)[ \t]*:", head, re.M)) - {"Context", "user", "assistant"}
            assert set(meta) == keys, name
            for value in meta.values():
                items = value if isinstance(value, list) else []
                assert not any(isinstance(i, str) and re.match(r"^-|^\w[\w-]*:", i) for i in items), (name, value)
    assert checked >= 200
