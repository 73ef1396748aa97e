"""``keel acp`` as a command: usage errors are one line; the end of standard input ends it cleanly."""

from __future__ import annotations

from collections.abc import Callable

from kit import KeelRun


def test_a_usage_error_is_one_line(keel: Callable[..., KeelRun]) -> None:
    run = keel("acp", "--bogus")
    assert run.code == 2 and run.stdout == ""
    assert run.stderr.strip().splitlines() == ["keel acp: unrecognized arguments: --bogus (see keel acp --help)"]


def test_the_end_of_input_ends_it_with_nothing_on_stdout(keel: Callable[..., KeelRun]) -> None:
    run = keel("acp", stdin="", timeout=60)
    assert (run.code, run.stdout) == (0, "")
