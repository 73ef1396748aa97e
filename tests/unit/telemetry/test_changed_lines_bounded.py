"""The lines-of-code count runs in the bus subscriber: its work is bounded, whatever the edit.
(A guard against the quadratic diff, not a benchmark: the old count took minutes on these.)"""

from __future__ import annotations

import json
import subprocess
import sys

from agentkeel.telemetry.recorder import changed_lines

GUARD_S = 90  # generous (a loaded machine): the bounded count takes well under a second; the old one minutes

COUNT = (
    "import json, sys\nfrom agentkeel.telemetry.recorder import changed_lines\n"
    "old, new = json.load(sys.stdin)\nprint(json.dumps(changed_lines(old, new)))\n"
)


def _count(old: str, new: str) -> tuple[int, int]:
    """changed_lines in a child that is killed past the guard (a thread could not be stopped)."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", COUNT],
            input=json.dumps([old, new]),
            capture_output=True,
            text=True,
            timeout=GUARD_S,
            check=True,
        )
    except subprocess.TimeoutExpired:
        raise AssertionError(f"changed_lines took over {GUARD_S} s") from None
    added, removed = json.loads(done.stdout)
    return added, removed


def test_a_rename_over_every_line_of_a_big_file_is_counted_exactly() -> None:
    n = 2000
    old = "".join(f"    value_{i} = compute({i}, alpha)\n" for i in range(n))
    new = "".join(f"    value_{i} = compute({i}, beta)\n" for i in range(n))
    assert _count(old, new) == (n, n)


def test_repeated_lines_do_not_blow_up_and_never_count_more_than_the_diff() -> None:
    old = "\n".join([""] * 3000)
    new = "\n".join(["", "z"] * 1500)
    added, removed = _count(old, new)
    assert (added, removed) == (1500, 1500) or (added <= 1500 and removed <= 1500)


def test_the_counts_are_the_shortest_diff() -> None:
    assert changed_lines("a\nb\nc\n", "a\nB\nc\n") == (1, 1)
    assert changed_lines("a\nb\nc\nd\n", "b\nc\nd\ne\n") == (1, 1)
    assert changed_lines("x\n" * 10, "x\n" * 12) == (2, 0)
    assert changed_lines("", "") == (0, 0)
