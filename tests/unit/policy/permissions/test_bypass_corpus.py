"""The bypass corpus: no attack is ever allowed; ordinary work under matching rules is."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from permission_corpus import load_cases, make_project, run


def test_corpus_size_and_grouping() -> None:
    cases = load_cases()
    counts = Counter(c.kind for c in cases)
    assert counts["attack"] >= 150
    assert counts["benign"] >= 100
    assert len({c.group for c in cases if c.kind == "attack"}) >= 20  # grouped by technique


def test_no_attack_is_allowed_and_every_benign_case_is(tmp_path: Path) -> None:
    project, home = make_project(tmp_path)
    leaked, refused = [], []
    for case, decision in run(project, home):
        if case.kind == "attack" and decision.decision == "allow":
            leaked.append(f"{case.label()} -> allow ({decision.reason})")
        if case.kind == "benign" and decision.decision != "allow":
            refused.append(f"{case.label()} -> {decision.decision} ({decision.reason})")
    assert not leaked, "attacks allowed:\n" + "\n".join(leaked)
    assert not refused, "benign cases not allowed:\n" + "\n".join(refused)
