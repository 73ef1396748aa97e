"""Verdicts of the permission pipeline: one stage's (:class:`StageResult`), the final
:class:`Decision`, and how several verdicts compose: by strength, never by order."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

import msgspec

DecisionKind = Literal["allow", "ask", "deny"]
Verdict = Literal["allow", "ask", "deny", "continue"]
GroupVerdict = Literal["allow", "ask", "deny"]
Strength = Literal["soft", "hard", "always"]


class StageResult(msgspec.Struct, frozen=True):
    stage: str
    verdict: Verdict
    reason: str = ""
    rule: str | None = None
    # for an ask: "soft" yields to an allow rule or bypass mode, "hard" only to bypass mode,
    # "always" to nothing (ask rules, protected paths, transactional tools)
    strength: Strength = "soft"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"stage": self.stage, "verdict": self.verdict}
        if self.reason:
            out["reason"] = self.reason
        if self.rule:
            out["rule"] = self.rule
        if self.verdict == "ask":
            out["strength"] = self.strength
        return out


class Decision(msgspec.Struct, frozen=True):
    decision: DecisionKind
    reason: str
    rule: str | None = None
    stage: str = "default"
    trace: tuple[StageResult, ...] = ()
    suggestions: tuple[str, ...] = ()  # rules that would let this call through next time

    def to_json(self, *, trace: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {"decision": self.decision, "reason": self.reason, "rule": self.rule, "stage": self.stage}
        if self.suggestions:
            out["suggestions"] = list(self.suggestions)
        if trace:
            out["trace"] = [s.to_json() for s in self.trace]
        return out


_RANK: dict[Strength, int] = {"soft": 0, "hard": 1, "always": 2}


def strongest(verdicts: Iterable[StageResult | None], stage: str = "tool") -> StageResult:
    """The strongest of several verdicts (deny, then ask by strength; the first among equals),
    or ``continue`` when there is none: verdicts compose by strength, never by order."""
    best: StageResult | None = None
    for v in verdicts:
        if v is None or v.verdict == "continue":
            continue
        if best is None or _key(v) > _key(best):
            best = v
    return best if best is not None else StageResult(stage, "continue")


def _key(v: StageResult) -> tuple[int, int]:
    return (1 if v.verdict == "deny" else 0, _RANK[v.strength] if v.verdict == "ask" else -1)
