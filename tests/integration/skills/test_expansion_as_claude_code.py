"""Skill and command bodies expanded as Claude Code 2.1.328 expands them (issue #33, root causes 1,
2 and 8; @file and example !`cmd` lines), on real and real-shaped fixtures, through the keel binary.

Claude Code was run on the same fixtures against a scripted model that recorded every request body
(/work/shared/tools/fakellm.py with a body log), each time as::

    ANTHROPIC_BASE_URL=http://127.0.0.1:PORT ANTHROPIC_API_KEY=sk-ant-fake-0000 HOME=$(mktemp -d) \\
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 claude -p '<prompt>' [--allowedTools ...] [--plugin-dir ...]

and each test's docstring says what it did.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkeel.models.fake.server import FakeLLMServer
from kit import KeelRun, wire_env

Start = Callable[[Any], FakeLLMServer]
Keel = Callable[..., KeelRun]
DATA = Path(__file__).resolve().parents[2] / "data" / "expand"


def _claude_api_skill(project: Path) -> None:
    """anthropics/skills `claude-api`, unchanged (stored as SKILL.md.txt: the formatter leaves it alone)."""
    folder = project / ".claude" / "skills" / "claude-api"
    folder.mkdir(parents=True)
    shutil.copy(DATA / "claude-api" / "SKILL.md.txt", folder / "SKILL.md")
    shutil.copy(DATA / "claude-api" / "LICENSE.txt", folder / "LICENSE.txt")


def _texts(body: dict[str, Any]) -> str:
    """Every text the request's messages hold (text blocks and tool results), joined."""
    out: list[str] = []
    for message in body["messages"]:
        content = message["content"]
        if isinstance(content, str):
            out.append(content)
            continue
        for block in content:
            if block.get("type") == "text" and not block["text"].startswith("<environment>"):  # keel's note
                out.append(block["text"])
            elif block.get("type") == "tool_result":
                inner = block.get("content")
                out.append(inner if isinstance(inner, str) else "".join(b.get("text", "") for b in inner or [] if b))
    return "\n".join(out)


def _git(project: Path) -> None:
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


PRICE = """---
description: Quote a price for an item
argument-hint: [item] [qty]
---
QUOTE item=$0 qty=$1 third=$2 all=$ARGUMENTS idx1=$ARGUMENTS[1] idx5=$ARGUMENTS[5]
List price is $1.00 each, $1,500 a pallet, $10 shipping.
awk '{print $1}' orders.txt; SELECT * FROM orders WHERE id = $1 AND region = $2;
Escaped: \\$0 stays.
"""


def test_dollar_digits_stay_as_written_unless_that_argument_exists(project: Path, fake_llm: Start, keel: Keel) -> None:
    """Root cause 1. `claude -p '/price apple 3'` on this command sent the model:
    `QUOTE item=apple qty=3 third=$2 all=apple 3 idx1=3 idx5=$ARGUMENTS[5]` / `List price is 3.00 each,
    3,500 a pallet, $10 shipping.` / `awk '{print 3}' ...` (argument 1 exists: Claude Code substitutes
    it there too) / `WHERE id = 3 AND region = $2;` / `Escaped: $0 stays.`; and with one argument
    (`/price apple`) `$1.00`, `$1,500`, `awk '{print $1}'` and SQL `$1` stay as written. keel blanked
    every `$N` with no argument."""
    _git(project)
    _write(project / ".claude" / "commands" / "price.md", PRICE)
    server = fake_llm(["ok", "ok"])
    env = wire_env(server, "anthropic")
    run = keel("-p", "/price apple 3", env=env)
    assert run.code == 0, run.stderr
    text = _texts(server.cursor.requests[0]["body"])
    assert "QUOTE item=apple qty=3 third=$2 all=apple 3 idx1=3 idx5=$ARGUMENTS[5]\n" in text
    assert "List price is 3.00 each, 3,500 a pallet, $10 shipping." in text
    assert "awk '{print 3}' orders.txt; SELECT * FROM orders WHERE id = 3 AND region = $2;" in text
    assert "Escaped: $0 stays." in text

    run = keel("-p", "/price apple", env=env)
    assert run.code == 0, run.stderr
    text = _texts(server.cursor.requests[1]["body"])
    assert "QUOTE item=apple qty=$1 third=$2 all=apple idx1=$ARGUMENTS[1] idx5=$ARGUMENTS[5]\n" in text
    assert "List price is $1.00 each, $1,500 a pallet, $10 shipping." in text
    assert "awk '{print $1}' orders.txt; SELECT * FROM orders WHERE id = $1 AND region = $2;" in text


def test_official_skill_price_table_survives_a_typed_argument(project: Path, fake_llm: Start, keel: Keel) -> None:
    """Root cause 1 on a real skill: anthropics/skills `claude-api` (its model table lists prices as
    `$5.00`, `$1.00`). `claude -p '/claude-api python'` sent the body with `| Claude Opus 4.8 | ... |
    $5.00 | $25.00 |` and `| Claude Haiku 4.5 | ... | $1.00 | $5.00 |` unchanged and, the body having
    no placeholder, `ARGUMENTS: python` at its end. keel sent `|  | $25.00 |`."""
    _git(project)
    _claude_api_skill(project)
    server = fake_llm(["ok"])
    run = keel("-p", "/claude-api python", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    text = _texts(server.cursor.requests[0]["body"])
    assert "| Claude Opus 4.8   | `claude-opus-4-8`   | 1M             | $5.00      | $25.00      |" in text
    assert "| Claude Haiku 4.5  | `claude-haiku-4-5`  | 200K           | $1.00      | $5.00       |" in text
    assert text.rstrip().endswith("ARGUMENTS: python")


def test_a_73k_official_skill_reaches_the_model_whole(project: Path, fake_llm: Start, keel: Keel) -> None:
    """Root cause 2. The model calls `Skill {"skill": "claude-api"}` (anthropics/skills, 73,938
    characters). Claude Code (`claude -p 'how much is opus'`, the scripted model calling that Skill)
    answered the call with `Launching skill: claude-api` and sent the whole body (72,233 characters
    after the frontmatter) in the next request, its last paragraph included. keel's output budget
    cut it at 30,000 characters (a spill file and the middle omitted)."""
    _git(project)
    _claude_api_skill(project)
    body = (DATA / "claude-api" / "SKILL.md.txt").read_text().split("\n---\n", 1)[1]
    middle = body[len(body) // 2 : len(body) // 2 + 200]
    last = body.rstrip()[-300:]
    server = fake_llm([{"tool_calls": [{"name": "Skill", "input": {"skill": "claude-api"}}]}, "done"])
    run = keel("-p", "how much is opus", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    text = _texts(server.cursor.requests[1]["body"])
    assert middle in text and last in text
    assert "characters omitted" not in text


SETUP_LOOP = """#!/bin/bash
# the shape of plugins/ralph-wiggum/scripts/setup-ralph-loop.sh: the prompt and options are its arguments
set -euo pipefail
PROMPT=() MAX=0 PROMISE=null
while [[ $# -gt 0 ]]; do
  case $1 in
    --max-iterations) MAX=$2; shift 2 ;;
    --completion-promise) PROMISE="\\"$2\\""; shift 2 ;;
    *) PROMPT+=("$1"); shift ;;
  esac
done
mkdir -p .claude
printf -- '---\\nactive: true\\niteration: 1\\nmax_iterations: %s\\ncompletion_promise: %s\\n---\\n\\n%s\\n' \\
  "$MAX" "$PROMISE" "${PROMPT[*]}" > .claude/ralph-loop.local.md
echo "Loop activated. Iteration: 1, max: $MAX"
"""

LOOP_COMMAND = """---
description: "Start a loop in the current session"
argument-hint: "PROMPT [--max-iterations N] [--completion-promise TEXT]"
hide-from-slash-command-tool: "true"
---

# Loop Command

Execute the setup script to initialize the loop:

```!
"${CLAUDE_PLUGIN_ROOT}/scripts/setup-loop.sh" $ARGUMENTS
```

Please work on the task. When you try to exit, the loop will feed the SAME PROMPT back to you.
"""


def test_a_fenced_bang_block_starts_a_plugins_loop(project: Path, tmp_path: Path, fake_llm: Start, keel: Keel) -> None:
    """Root cause 8, on a plugin shaped as anthropics/claude-code `plugins/ralph-wiggum` (its
    `/ralph-loop` command runs `"${CLAUDE_PLUGIN_ROOT}/scripts/setup-ralph-loop.sh" $ARGUMENTS` in a
    ```` ```! ```` block). Claude Code (`claude -p '/loop abc' --allowedTools Bash` on a ```` ```! ````
    block writing a file) ran the block with the arguments substituted and sent the model the
    block's output in its place, fence and command gone. keel sent the fence as text and ran nothing:
    the loop never started."""
    _git(project)
    plugin = tmp_path / "looper"
    _write(plugin / ".claude-plugin" / "plugin.json", json.dumps({"name": "looper", "version": "1.0.0"}))
    _write(plugin / "commands" / "loop.md", LOOP_COMMAND)
    script = _write(plugin / "scripts" / "setup-loop.sh", SETUP_LOOP)
    script.chmod(0o755)
    settings = _write(tmp_path / "allow.json", json.dumps({"permissions": {"allow": [f"Bash({script}:*)"]}}))
    server = fake_llm(["ok"])
    run = keel(
        "-p",
        '/loop Build a "todo API" --max-iterations 20 --completion-promise DONE',
        "--plugin-dir",
        str(plugin),
        "--settings",
        str(settings),
        env=wire_env(server, "anthropic"),
    )
    assert run.code == 0, run.stderr
    state = (project / ".claude" / "ralph-loop.local.md").read_text()
    assert "max_iterations: 20\n" in state and 'completion_promise: "DONE"\n' in state
    assert state.endswith("\nBuild a todo API\n")
    text = _texts(server.cursor.requests[0]["body"])
    assert "Loop activated. Iteration: 1, max: 20" in text
    assert "```!" not in text and "setup-loop.sh" not in text


EXAMPLES_SKILL = """---
name: command-writing
description: How to write slash commands with dynamic context
---
# Writing commands

Live context for this session: !`touch live-ran && echo LIVE-CONTEXT`

Write `!`cmd`` in a command to run it; a bang glued to a word,as in word!`touch glued-ran`, is not one.

## Examples

```markdown
Files changed: !`touch example-ran && echo EXAMPLE-OUTPUT`
```
"""


def test_example_bang_lines_run_only_where_claude_code_runs_them(
    project: Path, tmp_path: Path, fake_llm: Start, keel: Keel
) -> None:
    """Item "example !`cmd` lines" (a skill shaped as anthropics/claude-code
    `plugins/plugin-dev/skills/command-development`, whose examples sit in ```` ```markdown ```` fences).
    Claude Code 2.1.328 (`claude -p '/gitflow' --allowedTools Bash`) runs a `` !`cmd` `` whose `!`
    starts a line or follows white space, also inside a code fence (its example ran and its output
    replaced it), but not one inside an inline code span (`` `!`cmd`` ``) nor one glued to a word
    (`glued!`cmd``): keel ran those too."""
    _git(project)
    _write(project / ".claude" / "skills" / "command-writing" / "SKILL.md", EXAMPLES_SKILL)
    settings = _write(tmp_path / "allow.json", json.dumps({"permissions": {"allow": ["Bash(touch:*)"]}}))
    server = fake_llm(["ok"])
    run = keel("-p", "/command-writing", "--settings", str(settings), env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    text = _texts(server.cursor.requests[0]["body"])
    assert "Live context for this session: LIVE-CONTEXT" in text
    assert "Files changed: EXAMPLE-OUTPUT" in text
    assert "Write `!`cmd`` in a command" in text and "word!`touch glued-ran`" in text
    assert not (project / "glued-ran").exists() and not (project / "cmd").exists()


REFUSED_SKILL = """---
name: test-runner
description: Run the tests of a change
---
Prepared: !`touch first-ran`

```markdown
Run tests: !`npm test $1`
```

Finished: !`touch third-ran`
"""


def test_when_one_command_is_refused_none_runs(project: Path, tmp_path: Path, fake_llm: Start, keel: Keel) -> None:
    """Claude Code (`claude -p '/mix' --allowedTools 'Bash(touch:*)'` on this skill) refused the whole
    invocation ("Shell command permission check failed for pattern "!`npm test $1`"") and ran
    neither `touch`: no file, no model request. keel ran the allowed ones before it. keel now runs
    none and tells the model which command was refused (a deliberate difference: the text still
    reaches the model, each command marked as not run)."""
    _git(project)
    _write(project / ".claude" / "skills" / "test-runner" / "SKILL.md", REFUSED_SKILL)
    settings = _write(tmp_path / "allow.json", json.dumps({"permissions": {"allow": ["Bash(touch:*)"]}}))
    server = fake_llm(["ok"])
    run = keel("-p", "/test-runner", "--settings", str(settings), env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    assert not (project / "first-ran").exists() and not (project / "third-ran").exists()
    text = _texts(server.cursor.requests[0]["body"])
    assert "Run tests: [!`npm test $1` was not run:" in text
    assert "Prepared: [!`touch first-ran` was not run: !`npm test $1` in the same text was refused]" in text


def test_at_file_is_attached_whole(project: Path, fake_llm: Start, keel: Keel) -> None:
    """Item "@file". Claude Code (`claude -p '/rev'`, the command `Review @big.txt and @wide.txt now.`)
    attached both files whole as Read results: big.txt (3,000 lines, 81,000 characters) to its last
    line, wide.txt (300 lines of 207 characters) uncut; a 540,000-byte file was not attached ("too
    large to read all at once. Read it in portions with the offset and limit parameters"). keel cut
    every file at 40,000 characters."""
    _git(project)
    (project / "big.txt").write_text("".join(f"line {i:05d} of the big file\n" for i in range(3000)))
    (project / "huge.txt").write_text("".join(f"line {i:06d} of the huge file padding padding\n" for i in range(12000)))
    _write(
        project / ".claude" / "commands" / "rev.md",
        "---\ndescription: review\n---\nReview @big.txt and @huge.txt now.\n",
    )
    server = fake_llm(["ok"])
    run = keel("-p", "/rev", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    text = _texts(server.cursor.requests[0]["body"])
    assert "line 00000 of the big file\n" in text and "line 02999 of the big file\n" in text
    assert "file truncated" not in text
    assert "line 000000 of the huge file" not in text
    assert "@huge.txt [not attached:" in text and "too large to read all at once" in text


def test_arguments_in_a_fenced_block_are_words_never_shell(
    project: Path, tmp_path: Path, fake_llm: Start, keel: Keel
) -> None:
    """A deliberate difference. Claude Code puts `$ARGUMENTS` into a ```` ```! ```` block as typed
    (its own Gemini importer notes that "Claude Code's `$ARGUMENTS` substitution doesn't" shell-escape,
    so typed arguments can inject shell commands). keel splits the arguments as Claude Code does
    (shell words) and puts each into the command shell-quoted: the script gets them as words and
    nothing an argument says runs."""
    _git(project)
    plugin = tmp_path / "looper"
    _write(plugin / ".claude-plugin" / "plugin.json", json.dumps({"name": "looper", "version": "1.0.0"}))
    _write(plugin / "commands" / "loop.md", LOOP_COMMAND)
    script = _write(plugin / "scripts" / "setup-loop.sh", SETUP_LOOP)
    script.chmod(0o755)
    settings = _write(tmp_path / "allow.json", json.dumps({"permissions": {"allow": [f"Bash({script}:*)"]}}))
    server = fake_llm(["ok"])
    prompt = "fix it; touch pwned-1 $(touch pwned-2) && touch pwned-3"
    run = keel(
        "-p", f"/loop {prompt}", "--plugin-dir", str(plugin), "--settings", str(settings),
        env=wire_env(server, "anthropic"),
    )  # fmt: skip
    assert run.code == 0, run.stderr
    assert not any((project / f"pwned-{i}").exists() for i in (1, 2, 3))
    assert (project / ".claude" / "ralph-loop.local.md").read_text().endswith(f"\n{prompt}\n")


async def _allow(tool: str, tool_input: dict[str, object]) -> str | None:
    return None


def test_an_argument_goes_into_a_command_as_the_literal_text_typed(tmp_path: Path) -> None:
    """Each placeholder inside a command is filled with the typed text quoted for where it stands:
    bare, it is the shell words Claude Code splits the arguments into; in "..." or '...', the text
    as typed. Nothing in an argument runs ($(...), backquotes, ;)."""
    import asyncio

    from agentkeel.skills.expand import expand

    body = (
        "bare: !`printf '<%s>' $ARGUMENTS`\n"
        'double: !`printf "<%s>" "$ARGUMENTS"`\n'
        "single: !`printf '<%s>' '$0'`\n"
        'named: !`printf "<%s>" "x-$who" $1`\n'
    )
    args = """Build a "todo API" ';' $(touch pwned) `touch pwned`"""
    out = asyncio.run(expand(body, args, cwd=tmp_path, check=_allow, named=["who"]))
    assert out.splitlines() == [
        "bare: <Build><a><todo API><;><$(touch><pwned)><`touch><pwned`>",
        f"double: <{args}>",
        "single: <Build>",
        "named: <x-Build><a>",
    ]
    assert not (tmp_path / "pwned").exists()


def test_a_popular_skills_awk_example_reaches_the_model_as_written(project: Path, fake_llm: Start, keel: Keel) -> None:
    """Root cause 1 on obra/superpowers `requesting-code-review` (MIT), whose example reads
    `BASE_SHA=$(git log --oneline | grep "Task 1" | head -1 | awk '{print $1}')`. The model calls
    `Skill {"skill": "requesting-code-review"}` with no arguments; Claude Code (`claude -p 'review my
    work'`, the scripted model calling that Skill) sent that line unchanged. keel sent `awk '{print }'`."""
    _git(project)
    folder = project / ".claude" / "skills" / "requesting-code-review"
    folder.mkdir(parents=True)
    shutil.copy(DATA / "requesting-code-review" / "SKILL.md.txt", folder / "SKILL.md")
    server = fake_llm([{"tool_calls": [{"name": "Skill", "input": {"skill": "requesting-code-review"}}]}, "done"])
    run = keel("-p", "review my work", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    text = _texts(server.cursor.requests[1]["body"])
    assert """BASE_SHA=$(git log --oneline | grep "Task 1" | head -1 | awk '{print $1}')""" in text
