"""The shell side of the permission engine: what a Bash command reads and writes, judged
target by target (writes to protected or outside paths, redirects, Read/Edit rules on the
paths it names, trees it reads recursively). Mixed into :class:`PermissionEngine`."""

from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING, Any

from agentkeel.internal.lazy import lazy_module
from agentkeel.policy.permissions.call import Call
from agentkeel.policy.permissions.credentials import credential_verdict
from agentkeel.policy.permissions.paths import PathPattern, candidates, inside
from agentkeel.policy.permissions.rules import Rule, path_pattern
from agentkeel.policy.permissions.verdicts import StageResult, Strength, strongest
from agentkeel.policy.permissions.words import DYNAMIC
from agentkeel.tools import EDIT, READ, SHELL

# The shell analysis loads at the first Bash decision (or ahead, while the first request waits:
# agentkeel.internal.lazy), not before the first request.
if TYPE_CHECKING:
    from collections.abc import Mapping

    from agentkeel.core.tools import Tool
    from agentkeel.policy.permissions import shellpolicy as sp
    from agentkeel.policy.permissions import targets, trees
    from agentkeel.policy.permissions.bashmodel import Redirect, SimpleCommand
    from agentkeel.policy.permissions.rules import RuleKind
    from agentkeel.policy.permissions.verdicts import Decision
else:
    sp = lazy_module("agentkeel.policy.permissions.shellpolicy", globals(), "sp")
    targets = lazy_module("agentkeel.policy.permissions.targets", globals(), "targets")
    trees = lazy_module("agentkeel.policy.permissions.trees", globals(), "trees")

_HARMLESS_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty", "-"})


class ShellChecks:
    """Bash checks of :class:`~agentkeel.policy.permissions.engine.PermissionEngine` (its state below)."""

    cwd: str
    home: str
    keel_home: str | None
    rules: list[Rule]
    working_dirs: tuple[str, ...]
    scratch_dirs: tuple[str, ...] | None

    if TYPE_CHECKING:

        def decide(
            self, name: str, tool_input: Mapping[str, Any], tool: Tool | None = None, *, shell_cwd: str | None = None
        ) -> Decision: ...

        def rules_of(self, kind: RuleKind, *, managed: bool | None = None) -> list[Rule]: ...

        def _protected(self, path: str) -> str | None: ...

    def _bash_path_rules(self, call: Call, rules: list[Rule]) -> tuple[Rule, str] | None:
        """Read/Edit deny and ask rules also hold for what a shell command reads or writes."""
        path_rules = [r for r in rules if r.on_paths]
        if not path_rules or call.bash is None:
            return None
        probes = self._probes(call)
        if probes is None:
            return path_rules[0], "a glob too large to check"
        for lexical, real in probes:
            for rule in path_rules:
                pattern = path_pattern(rule.specifier or "", self.cwd, self.home, rule.root)
                if pattern.matches(lexical, broad=True) or pattern.matches(real, broad=True):
                    return rule, f"Bash touching {lexical}"
        return None

    def _probes(self, call: Call) -> list[tuple[str, str]] | None:
        """Every path the command names, reads or writes, as (lexical, resolved); None when a
        glob names too many files to check. Computed once per call (each path stage uses it)."""
        if "probes" in call.memo:
            found: list[tuple[str, str]] | None = call.memo["probes"]
            return found
        analysis = call.bash
        assert analysis is not None
        words: list[tuple[str, str]] = []  # (path as written, cwd)
        out: list[tuple[str, str]] | None = []
        for cmd in analysis.commands:
            for word in [*sp.path_words(cmd), *targets.read_targets(cmd), *targets.write_targets(cmd)]:
                if DYNAMIC not in word:
                    words.append((word, cmd.cwd))
            for g in cmd.globbed:
                expanded = sp.expand_glob(g, cmd.cwd)
                if expanded is None:
                    out = None
                    break
                words += [(p, cmd.cwd) for p in expanded]
        words += [(r.target, r.cwd) for r in analysis.redirects if DYNAMIC not in r.target]
        if out is not None:
            out = [candidates(word, cwd, self.home) for word, cwd in dict.fromkeys(words)]
        call.memo["probes"] = out
        return out

    def _bash_allow(self, call: Call, rules: list[Rule], stage: str) -> StageResult:
        analysis = call.bash
        bare = next((r for r in rules if r.bare and r.tool in (SHELL, "*")), None)
        if bare is not None:
            return StageResult(stage, "allow", f"allowed by rule {bare.text} ({bare.source})", bare.text)
        bash_rules = [r for r in rules if r.tool == SHELL and not r.bare]
        if analysis is None or not analysis.confident or not analysis.commands or not bash_rules:
            return StageResult(stage, "continue")
        used: list[str] = []
        for cmd in analysis.commands:
            rule = sp.part_allowed(cmd, bash_rules)
            if rule is not None:
                used.append(rule.text)
            elif not self._safe_part(call, cmd):
                return StageResult(stage, "continue", sp.why_not_allowed(cmd))
        if not used:
            return StageResult(stage, "continue")
        rules_text = ", ".join(dict.fromkeys(used))
        return StageResult(stage, "allow", f"every command is allowed ({rules_text})", rules_text)

    def _bash_safe(self, call: Call) -> bool:
        """Read-only commands keel runs without a rule: every path, and every tree they read
        through followed symlinks, inside the working directories."""
        analysis = call.bash
        if analysis is None:
            return False
        return (
            analysis.confident
            and bool(analysis.commands)
            and all(self._safe_part(call, c) for c in analysis.commands)
            and all(r.mode == "read" or r.target in _HARMLESS_TARGETS for r in analysis.redirects)
            and all(
                inside(candidates(r.target, r.cwd, self.home)[1], self.working_dirs)
                for r in analysis.redirects
                if r.mode == "read"
            )
        )

    def _bash_tool(self, call: Call) -> StageResult:
        """Hard asks a shell command earns whatever allowed it: unreadable syntax, writes to
        protected files or outside the working directories, redirects no Edit rule covers.
        Every target of every command is judged and the strongest verdict wins: an earlier,
        weaker one (a write outside, which bypass mode lifts) never hides a protected path."""
        analysis = call.bash
        assert analysis is not None
        verdicts: list[StageResult | None] = []
        if not analysis.confident:
            why = "; ".join(analysis.problems)
            verdicts.append(StageResult("tool", "ask", f"keel cannot check this command: {why}"))
        for cmd in analysis.commands:
            for target in targets.write_targets(cmd):
                verdicts.append(self._write_check(target, cmd.cwd, f"`{sp._show(cmd)}`"))
            verdicts += self._read_checks(call, cmd)
        for redirect in analysis.redirects:
            if redirect.mode == "write" and redirect.target not in _HARMLESS_TARGETS:
                verdicts.append(self._redirect_check(redirect))
        verdicts.append(credential_verdict(call, self.keel_home))  # the one list the sandbox hides too
        return strongest(verdicts)

    def _redirect_check(self, redirect: Redirect) -> StageResult | None:
        shown = redirect.target.replace(DYNAMIC, "…")
        verdict = self._write_check(redirect.target, redirect.cwd, f"redirect {redirect.op} {shown}")
        if verdict is not None or DYNAMIC in redirect.target:
            return verdict
        lexical, real = candidates(redirect.target, redirect.cwd, self.home)
        scratch = self.scratch_dirs or ()
        if inside(lexical, scratch) and inside(real, scratch):
            return None
        edit = self.decide(EDIT, {"file_path": lexical}, None)
        if edit.decision != "allow":
            return StageResult(
                "tool", "ask", f"redirect {redirect.op} {lexical} writes a file: {edit.reason}", strength="hard"
            )
        return None

    def _write_check(self, target: str, cwd: str, what: str) -> StageResult | None:
        if target in _HARMLESS_TARGETS:
            return None
        if DYNAMIC in target:
            # the directory part known now may already be protected: `cp x .git/hooks/$NAME`
            known = posixpath.dirname(target.split(DYNAMIC, 1)[0])
            if known:
                lexical, real = candidates(known, cwd, self.home)
                why = self._protected(lexical) or self._protected(real)
                if why:
                    return StageResult(
                        "tool", "ask", f"{what} writes into {lexical}: {why}; always asks", strength="always"
                    )
            return StageResult("tool", "ask", f"{what} writes to a path known only at run time", strength="hard")
        lexical, real = candidates(target, cwd, self.home)
        why = self._protected(lexical) or self._protected(real)
        if why:
            return StageResult("tool", "ask", f"{what} writes {lexical}: {why}; always asks", strength="always")
        if any(inside(d, (lexical,)) or inside(d, (real,)) for d in self.working_dirs):
            return StageResult(
                "tool", "ask", f"{what} writes {lexical}, which holds the working directory", "", "always"
            )
        within = (*self.working_dirs, *(self.scratch_dirs or ()))
        if not (inside(lexical, within) and inside(real, within)):
            return StageResult(
                "tool", "ask", f"{what} writes {lexical}, outside the working directories", strength="hard"
            )
        return None

    # --- recursive reads -----------------------------------------------------------------------

    def _read_denials(self) -> list[tuple[Rule, PathPattern]]:
        return [
            (r, path_pattern(r.specifier or "", self.cwd, self.home, r.root))
            for r in self.rules
            if r.kind == "deny" and r.tool == READ and not r.bare
        ]

    def _walk(self, call: Call, cmd: SimpleCommand, read: trees.TreeRead) -> trees.WalkResult:
        """One bounded walk per tree and call, shared by the safe-command check and the tool stage."""
        lexical, real = candidates(read.root, cmd.cwd, self.home)
        key = ("walk", lexical, real, read)
        found = call.memo.get(key)
        if not isinstance(found, trees.WalkResult):
            patterns = [p for _, p in self._read_denials()]
            found = trees.walk(lexical, real, read, patterns, self.working_dirs)
            call.memo[key] = found
        return found

    def _inside(self, path: str, cwd: str) -> bool:
        lexical, real = candidates(path, cwd, self.home)
        return inside(lexical, self.working_dirs) and inside(real, self.working_dirs)

    def _safe_part(self, call: Call, cmd: SimpleCommand) -> bool:
        """A built-in read-only command inside the working directories; a recursive read that
        follows symlinks reads their targets too, so a link leading out makes it a read outside."""
        key = ("safe", id(cmd))
        if key not in call.memo:
            call.memo[key] = self._safe_part_uncached(call, cmd)
        return bool(call.memo[key])

    def _safe_part_uncached(self, call: Call, cmd: SimpleCommand) -> bool:
        if not sp.safe_read_only(cmd, self.working_dirs, self.home):
            return False
        for read in trees.tree_reads(cmd):
            if read.follow or self._read_denials():
                result = self._walk(call, cmd, read)
                if result.outside is not None or result.too_large or result.denied is not None:
                    return False
        return self._history_denial(cmd) is None

    def _history_denial(self, cmd: SimpleCommand) -> Rule | None:
        """A deny rule that may cover what a git command prints from history (a walk cannot tell)."""
        denials = self._read_denials()
        for root in trees.history_reads(cmd) if denials else ():
            for rule, pattern in denials:
                if pattern.may_match_under(root):
                    return rule
        return None

    def _read_checks(self, call: Call, cmd: SimpleCommand) -> list[StageResult | None]:
        """A recursive read of a tree that holds a Read-denied file reads that file: it always
        asks (deny rules hold in every mode). Where keel cannot tell (history, a tree too large,
        file names read from a file), it asks without letting an allow rule decide. A followed
        symlink out of the working directories is a read there (a soft ask, as ``cat`` of it)."""
        denials = self._read_denials()
        shown = f"`{sp._show(cmd)}`"
        out: list[StageResult | None] = []
        for read in trees.tree_reads(cmd):
            if not denials and (not read.follow or not self._inside(read.root, cmd.cwd)):
                continue  # a root outside is a read outside as it stands: no walk needed to say so
            result = self._walk(call, cmd, read)
            if result.denied is not None:
                rule = denials[result.denied_by][0]
                strength: Strength = "always" if read.certain else "hard"
                why = f"{shown} reads {result.denied}, which rule {rule.text} denies ({rule.source})"
                out.append(StageResult("tool", "ask", why, rule.text, strength))
            elif result.too_large:
                why = f"{shown} reads a tree too large to check ({trees.WALK_LIMIT} entries)"
                out.append(StageResult("tool", "ask", why, strength="hard" if denials else "soft"))
            if result.outside is not None:
                why = f"{shown} follows {result.outside}, outside the working directories"
                out.append(StageResult("tool", "ask", why))
        if not denials:
            return out
        history = self._history_denial(cmd)
        if history is not None:
            why = f"{shown} may print files from the repository history that rule {history.text} denies"
            out.append(StageResult("tool", "ask", why, history.text, "hard"))
        if trees.listed_reads(cmd):
            why = f"{shown} reads files named in a list (known only at run time) while Read rules deny some"
            out.append(StageResult("tool", "ask", why, strength="hard"))
        return out
