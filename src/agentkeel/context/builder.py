"""The system prompt, built from sections (replaces the old string join).

Each section has an id, a priority, a required flag and a token estimate. Sections always appear
in one fixed order, the most stable first (identity, style, environment, instruction files by
layer, rules, what the user appends), so that the prompt is a stable prefix the provider caches
turn after turn. When the sections exceed the budget, optional ones are dropped lowest priority
first (and noted). The result is memoised and rebuilt only when a source file changes.
"""

from __future__ import annotations

import platform
import time
from datetime import date
from pathlib import Path

import msgspec

from agentkeel.context.instructions import Instructions, render
from agentkeel.context.styles import OutputStyle
from agentkeel.internal.git import find_root
from agentkeel.models.caching import session_part

IDENTITY = "You are keel, an AI coding agent working in the user's repository through tools."
CODING = """Read before you edit; make the smallest change that does the job; run the project's tests when you
change code. Use Read, Grep, Glob and LS to explore; Edit and Write to change files (Read a file before editing it);
Bash for commands. Be concise: say what you did and what is left.
When you take a decision the rest of the work depends on, state it on its own line as `Decision: <what> because
<why>`; state a fact you will need later as `Fact: <fact>`. These lines are kept when the conversation is compacted."""

_PRIORITY = {"managed": 95, "user": 60, "project": 80, "local": 70, "rule": 50}


class Section(msgspec.Struct, frozen=True):
    id: str
    priority: int
    required: bool
    text: str
    kind: str = "system"  # the breakdown's source: system | instructions | rules | style

    @property
    def tokens(self) -> int:
        return len(self.text) // 3 + 1


class PromptBuilder(msgspec.Struct):
    cwd: Path
    model: str
    instructions: Instructions
    style: OutputStyle
    budget_tokens: int
    additional_dirs: tuple[Path, ...] = ()
    append: str | None = None
    dropped: list[str] = msgspec.field(default_factory=list)
    builds: int = 0
    # sources are re-checked (stat) at most this often; a session's own edits invalidate at once
    check_interval_s: float = 1.0
    _memo: tuple[tuple[object, ...], str, list[Section]] | None = None
    _checked: float = 0.0

    def sections(self) -> list[Section]:
        identity = IDENTITY if not self.style.text or self.style.keep_coding else IDENTITY.replace(" coding", "")
        out = [Section("identity", 100, True, identity + ("\n" + CODING if self.style.keep_coding else ""))]
        if self.style.text:
            out.append(
                Section(
                    f"style:{self.style.name}",
                    90,
                    True,
                    f"# Output style: {self.style.name}\n{self.style.text}",
                    "style",
                )
            )
        env = [
            f"Working directory: {self.cwd}",
            f"Is a git repository: {'yes' if find_root(self.cwd) else 'no'}",
            f"Platform: {platform.system().lower()}",
            f"Model: {self.model}",
        ]
        if self.additional_dirs:
            env.append("Additional working directories: " + ", ".join(str(d) for d in self.additional_dirs))
        out.append(Section("environment", 99, True, "<env>\n" + "\n".join(env) + "\n</env>"))
        for f in self.instructions.startup():
            kind = "rules" if f.scope == "rule" else "instructions"
            out.append(Section(f"{kind}:{f.path}", _PRIORITY.get(f.scope, 60), f.scope == "managed", render(f), kind))
        if self.append:
            out.append(Section("append", 98, True, self.append, "custom"))
        # last, as a session part: the wire formats send it after the prefix sessions share (models/caching.py)
        out.append(Section("date", 99, True, session_part(f"Today's date: {date.today().isoformat()}").lstrip("\n")))
        return out

    def _signature(self) -> tuple[object, ...]:
        sig: list[object] = [date.today().isoformat()]
        for p in self.instructions.sources():
            try:
                st = p.stat()
                sig.append((str(p), st.st_mtime_ns, st.st_size))
            except OSError:
                sig.append((str(p), None))
        if self.style.path is not None:
            sig.append(str(self.style.path))
        return tuple(sig)

    def build(self) -> tuple[str, list[Section]]:
        """The prompt and the sections in it; rebuilt only when a source changed."""
        now = time.monotonic()
        if self._memo is not None and now - self._checked < self.check_interval_s:
            return self._memo[1], self._memo[2]
        self._checked = now
        sig = self._signature()
        if self._memo is not None and self._memo[0] == sig:
            return self._memo[1], self._memo[2]
        if self.builds:  # a source changed (or the memo was dropped): read them again
            self.instructions.reload()
        kept = fit(self.sections(), self.budget_tokens, self.dropped)
        text = "\n\n".join(s.text for s in kept)
        self.builds += 1
        self._memo = (self._signature(), text, kept)
        return text, kept

    def text(self) -> str:
        return self.build()[0]

    def invalidate(self) -> None:
        self._memo = None


def fit(sections: list[Section], budget: int, dropped: list[str] | None = None) -> list[Section]:
    """Drop optional sections, lowest priority first (the later of equals first), until the rest
    fits the budget; the order of what is kept does not change."""
    total = sum(s.tokens for s in sections)
    if total <= budget:
        return sections
    out = list(sections)
    victims = sorted((s for s in sections if not s.required), key=lambda s: (s.priority, -sections.index(s)))
    for s in victims:
        if total <= budget:
            break
        out.remove(s)
        total -= s.tokens
        if dropped is not None:
            dropped.append(f"{s.id} ({s.tokens} tokens) left out of the system prompt: over the budget of {budget}")
    return out
