"""The one frontmatter parser (``agentkeel.internal.frontmatter``), as lenient as Claude Code, on
real skills, agents and commands (tests/data/frontmatter, see its SOURCES.md) and on the shapes
people write; skills, agents, commands, output styles and rules all read through it."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from agentkeel.agents.defs import agent_from_file
from agentkeel.commands.custom import load_commands
from agentkeel.commands.registry import CommandRegistry
from agentkeel.context.instructions import Instructions
from agentkeel.context.styles import find_style
from agentkeel.internal.frontmatter import FrontmatterError, names, parse, split
from agentkeel.skills.loader import load_skills

DATA = Path(__file__).parents[2] / "data" / "frontmatter"
MIRRORS = Path("/work/.mirror")


def _skill_dir(root: Path, data_file: str, folder: str) -> None:
    target = root / ".claude" / "skills" / folder
    target.mkdir(parents=True)
    shutil.copy(DATA / data_file, target / "SKILL.md")


def test_real_skills_show_the_name_and_description_claude_code_shows(tmp_path: Path) -> None:
    _skill_dir(tmp_path, "superpowers-systematic-debugging-SKILL.md", "debugging")
    _skill_dir(tmp_path, "anthropics-skills-mcp-builder-SKILL.md", "mcp")
    catalog = load_skills(tmp_path, tmp_path / "home")
    assert catalog.warnings == []
    debugging = catalog.get("systematic-debugging")
    assert debugging is not None and debugging.description == (
        "Use when encountering any bug, test failure, or unexpected behavior, before proposing fixes"
    )
    mcp = catalog.get("mcp-builder")
    assert mcp is not None and mcp.description.startswith("Guide for creating high-quality MCP (Model Context")
    assert mcp.description.endswith("whether in Python (FastMCP) or Node/TypeScript (MCP SDK).")


def test_real_agents_with_multi_line_descriptions_and_both_tool_list_forms(tmp_path: Path) -> None:
    reviewer, warnings = agent_from_file(DATA / "claude-code-feature-dev-code-reviewer.md", "plugin")
    assert reviewer is not None and warnings == []
    assert reviewer.name == "code-reviewer" and reviewer.description.startswith("Reviews code for bugs, logic")
    assert reviewer.tools is not None and reviewer.tools[:3] == ("Glob", "Grep", "LS") and len(reviewer.tools) == 10
    # YAML refuses these (`user: "..."` lines inside a plain scalar); Claude Code loads them
    creator, warnings = agent_from_file(DATA / "claude-code-plugin-dev-agent-creator.md", "plugin")
    assert creator is not None and warnings == []
    assert creator.name == "agent-creator" and creator.model == "sonnet" and creator.tools == ("Write", "Read")
    assert creator.description.startswith('Use this agent when the user asks to "create an agent"')
    assert 'user: "Create an agent that reviews code for quality issues"' in creator.description
    assert creator.description.endswith("</example>")
    assert creator.prompt.startswith("You are an elite AI agent architect")
    simplifier, warnings = agent_from_file(DATA / "claude-code-pr-review-code-simplifier.md", "plugin")
    assert simplifier is not None and warnings == [] and simplifier.model == "opus"
    assert simplifier.description.startswith("Use this agent when code has been written or modified")
    assert "Context: The assistant has just implemented a new feature" in simplifier.description


def test_a_real_command_with_bash_rules_in_allowed_tools(tmp_path: Path) -> None:
    commands = tmp_path / ".claude" / "commands"
    commands.mkdir(parents=True)
    shutil.copy(DATA / "claude-code-code-review-command.md", commands / "code-review.md")
    registry = CommandRegistry()
    load_commands(registry, tmp_path, tmp_path / "home")
    assert registry.warnings == []
    assert registry.commands["code-review"].description == "Code review a pull request"


def _expected(head: str, key: str) -> str | None:
    """What Claude Code shows for ``key``: YAML's value when YAML reads the block, else the line's text."""
    try:
        data = yaml.safe_load(head)
    except yaml.YAMLError:
        data = None
    if isinstance(data, dict):
        value = data.get(key)
        return None if value is None else str(value)
    m = re.search(rf"^{key}:[ \t]*(.*)$", head, re.MULTILINE)
    return m.group(1).strip() if m else None


@pytest.mark.skipif(not MIRRORS.is_dir(), reason="the fetched repositories are not on this machine")
def test_every_skill_agent_and_command_of_the_reference_repositories_parses() -> None:
    wanted = {
        "anthropics+skills": r"SKILL\.md$",
        "obra+superpowers": r"(SKILL\.md|^agents/.*\.md|^commands/.*\.md)$",
        "anthropics+claude-code": r"^plugins/.*(SKILL\.md|/agents/[^/]*\.md|/commands/[^/]*\.md)$",
    }
    checked = 0
    for repo, pattern in wanted.items():
        git = MIRRORS / repo / "repo"
        if not git.is_dir():
            continue
        listing = subprocess.run(["git", "-C", str(git), "ls-tree", "-r", "--name-only", "HEAD"], capture_output=True)
        for name in listing.stdout.decode().split():
            if not re.search(pattern, name):
                continue
            raw = subprocess.run(["git", "-C", str(git), "show", f"HEAD:{name}"], capture_output=True).stdout
            text = raw.decode("utf-8", "replace")
            doc = parse(text, Path(name))  # never FrontmatterError
            head, _ = split(text)
            assert head is not None, name
            for key in ("name", "description"):
                want = _expected(head, key)
                got = doc.meta.get(key)
                if want is None:
                    assert got is None, (name, key)
                else:  # a description YAML refuses continues past its first line
                    assert got is not None and str(got).startswith(want.strip("'\"")), (name, key, got)
            assert not {"Context", "user", "assistant"} & set(doc.meta), name
            checked += 1
    assert checked >= 40


@pytest.mark.parametrize(
    "text",
    [
        "\ufeff---\nname: x\ndescription: d\n---\nbody",  # byte-order mark
        "---\r\nname: x\r\ndescription: d\r\n---\r\nbody",  # CRLF
        "---   \nname: x\ndescription: d\n---  \nbody",  # trailing spaces on the fences
        "---\nname:\tx\ndescription:\td\n---\nbody",  # tabs after the colon
        "---\nname: x\ndescription: >\n\td\n---\nbody",  # a tab that indents
        "---\nname: 'x'\ndescription: \"d\"\n---\nbody",
    ],
)
def test_the_shapes_claude_code_accepts(text: str) -> None:
    doc = parse(text, Path("x.md"))
    assert (doc.meta["name"], str(doc.meta["description"]).strip(), doc.body) == ("x", "d", "body")


def test_colons_empty_blocks_and_lists() -> None:
    assert parse("---\n---\nbody", Path("x.md")).meta == {}
    assert parse("---\n\n---\nbody", Path("x.md")).body == "body"
    assert parse("no frontmatter\n---\n", Path("x.md")).meta == {}
    meta = parse("---\ndescription: Use when: the tests fail # not a comment\nmodel: x\n---\n", Path("x.md")).meta
    assert meta == {"description": "Use when: the tests fail # not a comment", "model": "x"}
    meta = parse("---\ndescription: Run it: now\ntools:\n  - Read\n  - Grep\n---\n", Path("x.md")).meta
    assert meta == {"description": "Run it: now", "tools": ["Read", "Grep"]}
    assert names("Read, Grep") == names(["Read", "Grep"]) == ["Read", "Grep"]
    assert names("src/*.{ts,tsx}, lib/**") == ["src/*.{ts,tsx}", "lib/**"]
    # the Agent Skills form: space-separated, a rule's own spaces kept
    assert names("Read Grep Bash(git diff *)") == ["Read", "Grep", "Bash(git diff *)"]
    assert names("Bash(git add:*, git commit:*), Read") == ["Bash(git add:*, git commit:*)", "Read"]
    assert names("my docs/*.md, b") == ["my docs/*.md", "b"]
    assert parse("---\npaths: **/*.py\n---\n", Path("x.md")).meta == {"paths": "**/*.py"}
    assert parse("---\npaths: [src/*.{ts,tsx}, b]\n---\n", Path("x.md")).meta == {"paths": ["src/*.{ts,tsx}", "b"]}


def test_what_no_reading_recovers_is_one_line_naming_the_file() -> None:
    with pytest.raises(FrontmatterError, match=r"^x\.md: the frontmatter must be a mapping"):
        parse("---\n- just\n- a list\n---\n", Path("x.md"))
    for head in ("name: [unclosed", 'description: "unclosed', "tools: {Read"):
        with pytest.raises(FrontmatterError, match=r"^x\.md: the YAML frontmatter is not valid \(line \d\)"):
            parse(f"---\n{head}\n---\n", Path("x.md"))


# moved from tests/integration/skills/test_skills_and_commands.py (the parser was agents/frontmatter.py)
def test_frontmatter_fast_path_agrees_with_yaml(tmp_path: Path) -> None:
    heads = [
        "name: reviewer\ndescription: Reviews code carefully\ntools: Read, Grep\nmaxTurns: 5\n",
        "name: x\ndescription: 'quoted: yes'\nuser-invocable: false\nmodel: inherit\n",
        "paths: ['*.py']\nhooks:\n  PreToolUse: []\n",
        'argument-hint: "<version>"\ncontext: fork\n# a comment\n',
        "description: tabs and # not a comment\n",
    ]
    for head in heads:
        doc = parse(f"---\n{head}---\nbody\n", tmp_path / "x.md")
        assert doc.meta == yaml.safe_load(head), head
        assert doc.body == "body"
    lenient = parse("---\ndescription: Use it: always\n---\n", tmp_path / "x.md")  # YAML would refuse this
    assert lenient.meta == {"description": "Use it: always"}


# moved from tests/unit/context/test_instructions_rules_prompt.py (the parser was context/instructions.py:frontmatter, a
# YAML subset that kept `true` as a string; the one parser reads it as YAML does)
def test_frontmatter_lists_and_quotes() -> None:
    doc = parse("---\nname: Terse\npaths:\n  - 'src/**'\n  - \"*.md\"\nkeep: true\n---\nbody", Path("x.md"))
    assert doc.meta == {"name": "Terse", "paths": ["src/**", "*.md"], "keep": True} and doc.body == "body"


def test_styles_and_rules_read_the_frontmatter_agents_read(tmp_path: Path) -> None:
    """The two files that disagreed before: a description with a colon and a CRLF file."""
    styles = tmp_path / ".claude" / "output-styles"
    styles.mkdir(parents=True)
    (styles / "terse.md").write_bytes(
        b"\xef\xbb\xbf---\r\nname: Terse\r\ndescription: Short: no fluff\r\nkeep-coding-instructions: true\r\n"
        b"---\r\nBe brief.\r\n"
    )
    style, warning = find_style("terse", tmp_path, tmp_path / "home")
    assert warning == "" and (style.name, style.description, style.text, style.keep_coding) == (
        "Terse",
        "Short: no fluff",
        "Be brief.",
        True,
    )
    (tmp_path / ".git").mkdir()
    rules = tmp_path / ".claude" / "rules"
    rules.mkdir(parents=True)
    (rules / "py.md").write_bytes(b"---\r\ndescription: Python: style\r\npaths: src/**/*.py\r\n---\r\nUse black.\r\n")
    loaded = Instructions.load(tmp_path, tmp_path / "home", tmp_path / "keelhome", env={})
    assert [(r.globs, r.text) for r in loaded.rules] == [(("src/**/*.py",), "Use black.")]


def test_a_skill_with_space_separated_allowed_tools(tmp_path: Path) -> None:
    folder = tmp_path / ".claude" / "skills" / "review"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\ndescription: Reviews\nallowed-tools: Read Grep Bash(git diff *)\n---\nGo.\n")
    skill = load_skills(tmp_path, tmp_path / "home").get("review")
    assert skill is not None and skill.allowed_tools == ("Read", "Grep", "Bash(git diff *)")
