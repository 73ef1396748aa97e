"""Argument substitution as Claude Code 2.1.328 does it, case by case. Each expected text is what
Claude Code sent the model for the same body (`claude -p '/prices apple 3'`, `'/prices apple'`,
`'/prices'` on a skill with `arguments: [item, qty]`; `claude -p '/esc $1 b'` on a command), recorded
with a scripted model that logged every request body."""

from __future__ import annotations

import pytest

from agentkeel.skills.expand import find_commands, substitute_arguments

TAIL = "\nPrice is $1.00 or $1,500; awk '{print $1}'; $itemized $item_x"
SKILL = "item=$item qty=$qty $1 $0 $2 $3 $ARGUMENTS[1] $ARGUMENTS" + TAIL


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            "apple 3",
            "item=apple qty=3 3 apple $2 $3 3 apple 3\nPrice is 3.00 or 3,500; awk '{print 3}'; $itemized $item_x",
        ),
        (
            "apple",
            "item=apple qty= $1 apple $2 $3 $ARGUMENTS[1] apple" + TAIL,
        ),
        ("", "item= qty= $1 $0 $2 $3 $ARGUMENTS[1] " + TAIL),
    ],
)
def test_named_and_positional_arguments(args: str, expected: str) -> None:
    assert substitute_arguments(SKILL, args, ["item", "qty"]) == expected


def test_escapes_and_values_are_not_read_again() -> None:
    body = "esc=\\$1 \\$ARGUMENTS dbl=\\\\$1 dd=$$0 arg0=$0 end"
    assert substitute_arguments(body, "$1 b") == "esc=$1 $ARGUMENTS dbl=\\\\b dd=$$1 arg0=$1 end"


def test_a_dollar_number_without_its_argument_does_not_count_as_a_placeholder() -> None:
    assert substitute_arguments("Costs $5.00", "x") == "Costs $5.00\n\nARGUMENTS: x"


def test_commands_found_as_claude_code_finds_them() -> None:
    body = (
        "```!\necho one $ARGUMENTS\n```\n"
        "Inline: !`echo two` glued!`echo no` `!`echo no`` \n"
        "```markdown\nExample: !`echo three`\n```\n"
    )
    assert [c for _, _, c in find_commands(body)] == ["echo one $ARGUMENTS", "echo two", "echo three"]
