"""The skill listing's budget and labels (skills/listing.py), by Claude Code 2.1.328's rules
(read from its listing code and checked on the collections fixture, tests/integration/compat)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agentkeel.skills.listing import Entry, budget, description, label, lines


def test_budget_follows_the_window_the_fraction_and_the_variable() -> None:
    assert budget(200_000, {}) == 8000
    assert budget(1_000_000, {}) == 40_000
    assert budget(200_000, {}, 0.05) == 40_000
    assert budget(200_000, {"SLASH_COMMAND_TOOL_CHAR_BUDGET": "123"}) == 123
    assert budget(200_000, {"SLASH_COMMAND_TOOL_CHAR_BUDGET": "lots"}) == 8000
    assert budget(200_000, {"SLASH_COMMAND_TOOL_CHAR_BUDGET": "\u00b2"}) == 8000  # a digit int() refuses


def test_over_the_budget_descriptions_go_first_come_first_kept() -> None:
    entries = [Entry("a", "x" * 10), Entry("b", "y" * 100), Entry("c", "z" * 5)]
    assert lines(entries, 10_000) == ["- a: " + "x" * 10, "- b: " + "y" * 100, "- c: " + "z" * 5]
    # names: 3 + 3 + 3 + 2 newlines = 11; 30 left: a's 12 fits, b's 102 does not, c's 7 does
    assert lines(entries, 41) == ["- a: " + "x" * 10, "- b", "- c: zzzzz"]
    assert lines(entries, 5) == ["- a", "- b", "- c"]


def test_a_long_description_is_cut_and_brackets_escaped() -> None:
    assert description("a  b\n c") == "a b c"
    assert description("x" * 2000) == "x" * 1535 + "\u2026"
    assert description("more than >5 calls <tag>") == "more than &gt;5 calls &lt;tag&gt;"


def test_a_frontmatter_name_is_shown_when_it_calls_only_this_entry() -> None:
    nowait = Entry("nowait", "", "nowait-reasoning-optimizer")
    assert label(nowait, [nowait]) == "nowait (nowait-reasoning-optimizer)"
    spaced = Entry("plugin-dev:agent-development", "", "plugin-dev:Agent Development")
    assert label(spaced, [spaced]) == "plugin-dev:agent-development"  # not a name one can type
    other = Entry("nowait-reasoning-optimizer", "")
    assert label(nowait, [nowait, other]) == "nowait"  # the name calls another entry


@given(
    st.lists(st.tuples(st.from_regex(r"[a-z]{1,12}", fullmatch=True), st.text(max_size=80)), max_size=30),
    st.integers(min_value=1, max_value=3000),
)
def test_lines_keep_order_and_fit_when_the_names_fit(raw: list[tuple[str, str]], chars: int) -> None:
    entries = [Entry(n, d) for n, d in raw]
    out = lines(entries, chars)
    assert len(out) == len(entries)
    for line, e in zip(out, entries):
        assert line == f"- {e.name}" or line.startswith(f"- {e.name}: ")
    names = sum(len(e.name) + 2 for e in entries) + max(0, len(entries) - 1)
    if names <= chars:
        assert sum(map(len, out)) + max(0, len(out) - 1) <= chars
