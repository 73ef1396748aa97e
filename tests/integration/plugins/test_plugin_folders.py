"""Plugin discovery as Claude Code 2.1.328 does it, on real-world-shaped plugins: ``--plugin-dir``
on a folder of plugins, skills named by their folder (the display name accepted too), a plugin's
root ``SKILL.md``.

The fixtures are faithful minimal equivalents of anthropics/claude-code's ``plugins/`` folder (its
licence does not allow copying): plugins with ``.claude-plugin/plugin.json`` beside one without a
manifest (``plugin-dev`` has none), and ``plugin-dev``'s skills whose ``name:`` is a display name
(``name: Agent Development`` in ``skills/agent-development/SKILL.md``).

Claude Code was run against a recording copy of /work/shared/tools/fakellm.py (the request bodies
written to a file)::

    ANTHROPIC_BASE_URL=http://127.0.0.1:PORT ANTHROPIC_API_KEY=sk-ant-fake-0000 HOME=$(mktemp -d) \\
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 claude -p hello --plugin-dir <claude-code>/plugins
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkeel.models.fake.server import FakeLLMServer
from agentkeel.plugins import find_plugins
from agents_fixtures import result_text, tool_results
from kit import KeelRun, wire_env

Start = Callable[[Any], FakeLLMServer]
Keel = Callable[..., KeelRun]


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _manifest(root: Path, name: str) -> None:
    _write(root / ".claude-plugin" / "plugin.json", json.dumps({"name": name, "version": "1.0.0"}))


def plugins_folder(root: Path) -> Path:
    """A checkout of a marketplace's ``plugins/``: two plugins with a manifest, one without."""
    review = root / "pr-review-toolkit"
    _manifest(review, "pr-review-toolkit")
    _write(
        review / "agents" / "silent-failure-hunter.md",
        "---\nname: silent-failure-hunter\ndescription: Use this agent when reviewing code changes in a pull "
        "request to identify silent failures. Examples: <example>Context: a PR adds a catch block\\nuser: "
        '"review it"\\nassistant: "I will use the silent-failure-hunter agent"</example>\nmodel: inherit\n'
        "color: yellow\n---\n\nYou hunt silent failures.\n",
    )
    _write(
        review / "commands" / "review-pr.md",
        '---\ndescription: "Comprehensive PR review using specialized agents"\nargument-hint: "[review-aspects]"\n'
        'allowed-tools: ["Bash", "Glob", "Grep", "Read", "Task"]\n---\n\nReview the PR: $ARGUMENTS\n',
    )
    design = root / "frontend-design"
    _manifest(design, "frontend-design")
    _write(
        design / "skills" / "frontend-design" / "SKILL.md",
        "---\nname: frontend-design\ndescription: Create distinctive, production-grade frontend interfaces\n"
        "---\n\nDESIGN-SKILL-BODY\n",
    )
    loose = root / "plugin-dev"  # no .claude-plugin/plugin.json, as in anthropics/claude-code
    _write(
        loose / "skills" / "hook-development" / "SKILL.md",
        "---\nname: Hook Development\ndescription: This skill should be used when the user asks to create a hook\n"
        "version: 0.1.0\n---\n\nHOOK-SKILL-BODY\n",
    )
    _write(root / "README.md", "# Plugins\n")
    return root


def test_plugin_dir_on_a_folder_of_plugins_loads_each_child_plugin(
    project: Path, tmp_path: Path, fake_llm: Start, keel: Keel
) -> None:
    """Claude Code, run as in the module docstring on anthropics/claude-code's ``plugins/``, listed
    the agents (``pr-review-toolkit:silent-failure-hunter``, ``hookify:conversation-analyzer``...)
    and skills and commands (``pr-review-toolkit:review-pr``, ``frontend-design:frontend-design``) of
    every child that has a ``.claude-plugin/plugin.json``, and nothing of ``plugin-dev``, which has
    none. keel loaded nothing: it took the folder itself for one empty plugin."""
    folder = plugins_folder(tmp_path / "plugins")
    server = fake_llm(["ok"])
    run = keel("-p", "hello", "--plugin-dir", str(folder), env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    body = json.dumps(server.cursor.requests[0]["body"])
    assert "pr-review-toolkit:silent-failure-hunter" in body
    assert "frontend-design:frontend-design" in body
    assert "Hook Development" not in body and "hook-development" not in body
    assert "plugins:" not in body  # the folder itself is no plugin
    server = fake_llm(["ok"])
    run = keel(
        "-p", "/pr-review-toolkit:review-pr tests", "--plugin-dir", str(folder), env=wire_env(server, "anthropic")
    )
    assert run.code == 0, run.stderr
    assert "Review the PR: tests" in json.dumps(server.cursor.requests[0]["body"]["messages"])


def _skill_calls(*names: str) -> list[Any]:
    return [{"tool_calls": [{"name": "Skill", "input": {"skill": name}}]} for name in names] + ["done"]


def _skill_results(server: FakeLLMServer) -> list[str]:
    return [result_text(b) for b in tool_results(server.cursor.requests[-1]["body"])]


def test_plugin_skills_are_named_by_folder_and_the_display_name_is_accepted(
    project: Path, tmp_path: Path, fake_llm: Start, keel: Keel
) -> None:
    """plugin-dev's ``skills/hook-development/SKILL.md`` says ``name: Hook Development``. Claude
    Code (``claude -p hello --plugin-dir <claude-code>/plugins/plugin-dev --allowedTools Skill``,
    the model calling ``Skill`` with ``plugin-dev:Agent Development``, then ``Display Name`` and
    ``my-folder`` for a project skill ``.claude/skills/my-folder`` with ``name: Display Name``)
    listed ``plugin-dev:agent-development`` and ``my-folder``, and ran all three calls ("Launching
    skill: ..." and the body). keel listed ``plugin-dev:Hook Development`` and knew no folder name."""
    folder = plugins_folder(tmp_path / "plugins") / "plugin-dev"
    _write(
        project / ".claude" / "skills" / "my-folder" / "SKILL.md",
        "---\nname: Display Name\ndescription: A project skill named apart from its folder\n---\n\nPROJECT-BODY\n",
    )
    server = fake_llm(_skill_calls("plugin-dev:hook-development", "plugin-dev:Hook Development", "Display Name"))
    run = keel("-p", "hello", "--plugin-dir", str(folder), "--allowedTools", "Skill", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    listing = json.dumps(server.cursor.requests[0]["body"])
    assert "plugin-dev:hook-development" in listing and "plugin-dev:Hook Development" not in listing
    assert "my-folder" in listing and "Display Name" not in listing
    results = _skill_results(server)
    assert len(results) == 3
    assert "HOOK-SKILL-BODY" in results[0] and "HOOK-SKILL-BODY" in results[1], results
    assert "PROJECT-BODY" in results[2], results


def test_a_plugins_root_skill_md_is_a_skill(project: Path, tmp_path: Path, fake_llm: Start, keel: Keel) -> None:
    """A plugin that is one skill keeps its ``SKILL.md`` at the root. Claude Code (``claude -p hello
    --plugin-dir solo --plugin-dir solo2 --allowedTools Skill``; ``solo`` has a manifest naming it
    ``solo-kit`` and a root SKILL.md with ``name: solo-display``, ``solo2`` no manifest and ``name:
    other-display``) listed ``solo-kit:solo-display`` and ``solo2:other-display``; without a
    ``name:`` it listed ``solo-kit:solo`` (the folder). ``Skill`` with ``solo-kit:solo-display`` and
    with ``solo-display`` ran it; ``solo-kit`` alone was "Unknown skill". keel ignored the file."""
    solo = tmp_path / "solo"
    _manifest(solo, "solo-kit")
    _write(
        solo / "SKILL.md",
        "---\nname: solo-display\ndescription: ROOTSKILL a skill at the plugin root\n---\nROOT-BODY\n",
    )
    bare = tmp_path / "solo2"
    _write(bare / "SKILL.md", "---\ndescription: ROOTSKILL2 a root skill without a name\n---\nROOT2-BODY\n")
    server = fake_llm(_skill_calls("solo-kit:solo-display", "solo-display", "solo2:solo2"))
    args = ("--plugin-dir", str(solo), "--plugin-dir", str(bare), "--allowedTools", "Skill")
    run = keel("-p", "hello", *args, env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    listing = json.dumps(server.cursor.requests[0]["body"])
    assert "solo-kit:solo-display" in listing and "solo2:solo2" in listing
    results = _skill_results(server)
    assert "ROOT-BODY" in results[0] and "ROOT-BODY" in results[1] and "ROOT2-BODY" in results[2], results


def test_agent_files_claude_code_loads_and_the_ones_it_does_not(
    project: Path, tmp_path: Path, fake_llm: Start, keel: Keel
) -> None:
    """Claude Code (``claude -p hello --plugin-dir solo3``, the project's ``.claude/agents`` holding
    ``file-name.md`` with ``name: other-name``, ``noname.md`` and ``nodesc.md`` each lacking one of
    ``name``/``description``, a ``README.md`` without frontmatter and ``sub/nested.md``; the plugin's
    ``agents/`` one file without ``name`` and a ``README.md`` with a description) listed
    ``other-name``, ``nested-agent``, ``pk:plug-noname`` and ``pk:README`` only. keel also made
    agents of ``noname``, ``nodesc`` and ``README``, and of its own per-agent memory
    ``.keel/agents/main/MEMORY.md`` (an agent type ``MEMORY``, with a warning every session)."""
    agents = project / ".claude" / "agents"
    _write(agents / "file-name.md", "---\nname: other-name\ndescription: AGENTX named apart from its file\n---\nb\n")
    _write(agents / "noname.md", "---\ndescription: AGENTY without a name\n---\nb\n")
    _write(agents / "nodesc.md", "---\nname: nodesc-agent\n---\nAGENTV\n")
    _write(agents / "README.md", "# The team's agents\n")
    _write(agents / "sub" / "nested.md", "---\nname: nested-agent\ndescription: AGENTN in a subfolder\n---\nb\n")
    _write(project / ".keel" / "agents" / "main" / "MEMORY.md", "# Notes\n- the tests need a database\n")
    plugin = tmp_path / "solo3"
    _manifest(plugin, "pk")
    _write(plugin / "agents" / "plug-noname.md", "---\ndescription: AGENTW a plugin agent without a name\n---\nb\n")
    _write(plugin / "agents" / "README.md", "---\ndescription: AGENTP a plugin README with a description\n---\n")
    server = fake_llm(["ok"])
    run = keel("-p", "hello", "--plugin-dir", str(plugin), env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    body = json.dumps(server.cursor.requests[0]["body"])
    for shown in ("other-name", "nested-agent", "pk:plug-noname", "pk:README", "AGENTW", "AGENTN"):
        assert shown in body, shown
    for hidden in ("AGENTY", "nodesc-agent", "- MEMORY:", "- README:", "- noname:"):
        assert hidden not in body, hidden
    assert "noname.md: not an agent without both 'name' and 'description'" in run.stderr
    assert "MEMORY.md" not in run.stderr and "README.md" not in run.stderr


def test_a_plugin_with_plugins_inside_is_one_plugin(tmp_path: Path) -> None:
    """Claude Code (``claude -p hello --plugin-dir nest``, ``nest`` with a manifest naming it
    ``outer`` and an agent, ``nest/kid`` a plugin of its own) listed ``outer:oa`` only. A folder
    of plugins without any plugin child stays one plugin named after the folder (Claude Code loaded
    anthropics/skills' root so: ``anthropics+skills:pdf`` ...)."""
    nest = tmp_path / "nest"
    _manifest(nest, "outer")
    _manifest(nest / "kid", "kid")
    plugins, warnings = find_plugins([nest])
    assert [p.name for p in plugins] == ["outer"] and warnings == []
    loose = tmp_path / "skills-repo"
    _write(loose / "skills" / "pdf" / "SKILL.md", "---\nname: pdf\ndescription: PDFs\n---\nb\n")
    _write(loose / "template" / "SKILL.md", "---\nname: template-skill\ndescription: t\n---\nb\n")
    plugins, _ = find_plugins([loose])
    assert [p.name for p in plugins] == ["skills-repo"]
    children = plugins_folder(tmp_path / "plugins")
    plugins, _ = find_plugins([children, nest])
    assert [p.name for p in plugins] == ["frontend-design", "pr-review-toolkit", "outer"]
