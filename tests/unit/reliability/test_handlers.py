"""The reliability handlers' pure parts: what counts as interactive, as slop, as a known 400, as prunable."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentkeel.app.extensions import BUILTINS, Reliability
from agentkeel.core.extensions import ToolCall
from agentkeel.core.provider import PromptTooLongError, ProviderError
from agentkeel.core.types import Message, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from agentkeel.reliability.comments import slop_comments
from agentkeel.reliability.errors import classify
from agentkeel.reliability.messages import order_thinking, sanitize_empty, strip_thinking
from agentkeel.reliability.pruning import DUPLICATE, prune, shrink
from agentkeel.reliability.shell import interactive_problem

SPEC5 = {
    "thinking-block-validator",
    "empty-message-sanitizer",
    "tool-pairing-validator",
    "non-interactive-env",
    "comment-checker",
    "context-window-monitor",
    "error-pattern-detector",
    "session-recovery",
    "todo-continuation-enforcer",
    "model-fallback",
    "tool-output-truncator",
    "dynamic-context-pruning",
}


def test_every_reliability_handler_is_a_named_switchable_builtin_with_its_failure_documented() -> None:
    names = {b.name for b in BUILTINS}
    assert names >= SPEC5
    assert all(not b.required for b in BUILTINS if b.name in SPEC5)
    handlers = [(b.name, b.factory.build) for b in BUILTINS if isinstance(b.factory, Reliability)]
    assert len(handlers) == 11
    for name, build in handlers:
        assert "Failure:" in (build.__doc__ or ""), name


@pytest.mark.parametrize(
    "command",
    [
        "vim notes.txt",
        "cd src && nano main.py",
        "sudo vi /etc/hosts",
        "EDITOR=vim /usr/bin/nvim x",
        "git add -p",
        "git add --patch src/",
        "git rebase -i HEAD~3",
        "git checkout -p",
        "watch -n 1 ls",
        "htop",
        "git mergetool",
    ],
)
def test_interactive_commands_are_named(command: str) -> None:
    assert interactive_problem(command)


@pytest.mark.parametrize(
    "command",
    [
        "ls -la | less",
        "git log --oneline",
        "git add src/a.py",
        "GIT_SEQUENCE_EDITOR=\"sed -i 's/pick/squash/'\" git rebase -i HEAD~2",
        "emacs --batch -l build.el",
        "top -b -n 1",
        "echo vim is an editor",
        "grep -r vim .",
        "man ls",
    ],
)
def test_non_interactive_commands_pass(command: str) -> None:
    assert interactive_problem(command) is None


def _edit(name: str, path: str, **inp: object) -> ToolCall:
    return ToolCall(id="t", name=name, input={"file_path": path, **inp}, tool=None)


def test_slop_comments() -> None:
    added = "x = 1\n# Added retry logic as requested\n// not a python comment\n# Step 2: now we parse\n"
    assert slop_comments(_edit("Write", "a.py", content=added)) == [
        "# Added retry logic as requested",
        "# Step 2: now we parse",
    ]
    keep = "#!/usr/bin/env python3\n# type: ignore\n# The cache is keyed by inode: renames keep entries\n"
    assert slop_comments(_edit("Write", "a.py", content=keep)) == []
    assert slop_comments(_edit("Write", "notes.md", content="# Added a section\n")) == []  # markdown heading
    edit = _edit(
        "Edit", "a.ts", old_string="// Return the result\nreturn x", new_string="// Return the result\nreturn y"
    )
    assert slop_comments(edit) == []  # the comment was there before
    multi = _edit("MultiEdit", "a.go", edits=[{"old_string": "a", "new_string": "// Increment the counter\na++"}])
    assert slop_comments(multi) == ["// Increment the counter"]


def test_error_patterns() -> None:
    def bad(message: str) -> ProviderError:
        return ProviderError("bad_request", message, status=400)

    assert classify(PromptTooLongError("prompt is too long")) == "prompt_too_long"
    assert classify(bad("This model's maximum context length is 128000 tokens")) == "prompt_too_long"
    assert classify(bad("`tool_use` ids were found without `tool_result` blocks immediately after")) == (
        "tool_result_missing"
    )
    assert classify(bad("messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `tool_use`"))
    assert classify(bad("messages.1: thinking is disabled, so the content cannot contain thinking blocks")) == (
        "thinking_disabled_violation"
    )
    assert classify(bad("messages.3: all messages must have non-empty content")) == "empty_content"
    assert classify(bad("invalid x-api-key")) is None
    assert classify(ProviderError("overloaded", "tool_use tool_result")) is None  # not a 400


def test_thinking_and_empty_repairs() -> None:
    msg = Message(role="assistant", content=[TextBlock(text="a"), ThinkingBlock(thinking="t", signature="s")])
    ordered, moved = order_thinking([Message.user("q"), msg])
    assert moved == 1 and isinstance(ordered[1].content[0], ThinkingBlock)
    stripped, removed = strip_thinking([msg])
    assert removed == 1 and stripped[0].content == [TextBlock(text="a")]
    empty = [Message.user(" "), Message(role="assistant", content=[TextBlock(text="done  ")])]
    fixed, n = sanitize_empty(empty)
    assert (
        n == 2
        and fixed[0].content == [TextBlock(text="[empty message]")]
        and fixed[1].content[0] == TextBlock(text="done")
    )


def _turn(i: int, name: str, inp: dict[str, object], result: str, error: bool = False) -> list[Message]:
    return [
        Message(role="assistant", content=[ToolUseBlock(id=f"t{i}", name=name, input=inp)]),
        Message(role="user", content=[ToolResultBlock(tool_use_id=f"t{i}", content=result, is_error=error)]),
    ]


def test_prune_and_shrink_leave_the_input_list_alone() -> None:
    messages = [Message.user("go")]
    messages += _turn(1, "Grep", {"pattern": "x"}, "old hits")
    messages += _turn(2, "Grep", {"pattern": "x"}, "new hits")
    messages += _turn(3, "Grep", {"pattern": "x"}, "newest hits")
    before = list(messages)
    pruned, stats = prune(messages, protect_turns=1)
    assert stats.duplicates == 2 and messages == before
    assert [m.content[0] for m in pruned if m.role == "user"][1:] == [
        ToolResultBlock(tool_use_id="t1", content=DUPLICATE),
        ToolResultBlock(tool_use_id="t2", content=DUPLICATE),
        ToolResultBlock(tool_use_id="t3", content="newest hits"),
    ]
    assert prune(messages, protect_turns=3)[1].total() == 0
    assert prune(messages, protect_turns=0, protect_tools=["Grep"])[1].total() == 0
    big = [Message.user("go"), *_turn(1, "Read", {"file_path": str(Path("a"))}, "x" * 5000), *_turn(2, "LS", {}, "y")]
    shrunk, stats = shrink(big, keep_turns=1)
    block = shrunk[2].content[0]
    assert stats.shrunk == 1 and isinstance(block, ToolResultBlock) and "pruned to fit" in block.text()


def test_paired_is_the_view_builders_rule_in_one_pass() -> None:
    from agentkeel.reliability.messages import paired

    ok = [Message.user("go"), *_turn(1, "LS", {}, "a"), *_turn(2, "LS", {}, "b")]
    assert paired(ok)
    assert not paired(ok[:-1])  # the last tool_use has no result
    assert not paired([ok[0], ok[1], Message.user("no result, just words")])
    orphan = Message(role="user", content=[ToolResultBlock(tool_use_id="nobody", content="x")])
    assert not paired([*ok[:3], Message(role="assistant", content=[TextBlock(text="hm")]), orphan])
    assert not paired(ok[1:])  # starts with the assistant
    assert not paired([ok[0], Message(role="assistant", content=[])])
