"""The permission engine: a staged policy pipeline over Claude Code-grammar rules.

``decide(name, input, tool)`` is a pure function of the call, the rules and the mode. The
stages run in order, each leaving a :class:`StageResult` in the trace:

    global-deny, global-allow   managed settings
    user-deny, user-ask, user-allow   every other settings layer, CLI flags, session choices
    channel                     per-channel rules (interactive, headless, sdk, subagent)
    group                       default verdicts per tool group
    tool                        tool-specific checks: paths, protected files, shell analysis
    domain-safety               transactional tools always need approval
    default                     the mode's answer for what no rule decided

``deny`` stops at once. An *always* ask (an ask rule, a protected path, a transactional
tool, a recursive read of a Read-denied file) is applied at the end whatever allowed it, in
every mode; a *hard* ask (a command keel cannot read with confidence, a write outside the
working directories) in every mode but bypassPermissions. Otherwise an allow from any stage
wins; then bypassPermissions allows; then a remembered *soft* ask (a path outside the working
directories, a tool that requires approval); then the default. dontAsk turns every final ask
into deny. Within a stage, verdicts compose by strength (:func:`~.verdicts.strongest`).

What a call does comes from the tool (``Tool.effects``; ``tools.effects_of`` for a name alone):
no tool is named here. Every relative path, a file tool's or a command's, resolves against the
session's working directory, which the caller passes as ``decide(..., shell_cwd=...)`` (where
Bash's last ``cd`` left it, as the tools resolve them); rule anchors and the working directories
stay at the project root.
"""

from __future__ import annotations

import logging
import os
import posixpath
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentkeel.config.settings import PermissionMode
from agentkeel.core.tools import Tool
from agentkeel.internal.lazy import lazy_module
from agentkeel.policy.permissions.call import Call
from agentkeel.policy.permissions.credentials import credential_verdict
from agentkeel.policy.permissions.paths import candidates, inside, protected
from agentkeel.policy.permissions.rules import (
    Rule,
    RuleError,
    RuleKind,
    domain_matches,
    parse_rule,
    path_pattern,
    tool_prefix,
)
from agentkeel.policy.permissions.shellcheck import ShellChecks
from agentkeel.policy.permissions.verdicts import Decision, GroupVerdict, StageResult, Verdict
from agentkeel.policy.permissions.words import DYNAMIC
from agentkeel.tools import EDIT, READ, SHELL, effects_for

if TYPE_CHECKING:
    from agentkeel.policy.permissions import shellpolicy as sp
    from agentkeel.policy.permissions import suggestions
else:  # the shell analysis loads at the first Bash decision (agentkeel.internal.lazy)
    sp = lazy_module("agentkeel.policy.permissions.shellpolicy", globals(), "sp")
    suggestions = lazy_module("agentkeel.policy.permissions.suggestions", globals(), "suggestions")

__all__ = ["Decision", "PermissionEngine", "StageResult", "rule_root"]  # Decision, StageResult: from .verdicts

log = logging.getLogger("agentkeel.policy.permissions")

Stage = Callable[[Call], StageResult]


@dataclass
class PermissionEngine(ShellChecks):
    """Decides allow / ask / deny for tool calls. Rules are added with :meth:`add`."""

    cwd: str
    mode: PermissionMode = "default"
    additional_dirs: tuple[str, ...] = ()
    home: str = field(default_factory=lambda: os.path.expanduser("~"))
    keel_home: str | None = None
    channel: str = "interactive"
    groups: dict[str, GroupVerdict] = field(default_factory=dict)
    rules: list[Rule] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    scratch_dirs: tuple[str, ...] | None = None  # where shell commands may write freely (default: the temp dir)
    # the session's sandbox (agentkeel.policy.sandbox): why a Bash call that would ask runs sandboxed instead
    sandbox_auto_allow: Callable[[Call], str | None] | None = None

    def __post_init__(self) -> None:
        self.cwd = posixpath.normpath(os.path.abspath(self.cwd))
        self.additional_dirs = tuple(posixpath.normpath(os.path.abspath(d)) for d in self.additional_dirs)
        real = os.path.realpath(self.cwd)
        dirs = [self.cwd, real, *self.additional_dirs, *(os.path.realpath(d) for d in self.additional_dirs)]
        self.working_dirs: tuple[str, ...] = tuple(dict.fromkeys(dirs))
        if self.scratch_dirs is None:  # shell output may go to the temp dir, unless the project lives in it
            tmp = {posixpath.normpath(tempfile.gettempdir()), "/tmp"}  # noqa: S108 - nothing is created here
            tmp |= {os.path.realpath(t) for t in tmp}
            self.scratch_dirs = tuple(t for t in tmp if not inside(self.cwd, (t,)) and not inside(real, (t,)))
        self.stages: list[tuple[str, Stage]] = [
            ("global-deny", lambda c: self._deny_stage(c, "global-deny", managed=True)),
            ("global-allow", lambda c: self._allow_stage(c, "global-allow", managed=True)),
            ("user-deny", lambda c: self._deny_stage(c, "user-deny", managed=False)),
            ("user-ask", self._ask_stage),
            ("user-allow", lambda c: self._allow_stage(c, "user-allow", managed=False)),
            ("channel", self._channel_stage),
            ("group", self._group_stage),
            ("tool", self._tool_stage),
            ("domain-safety", self._domain_stage),
            ("default", self._default_stage),
        ]
        self.channel_rules: dict[str, list[Rule]] = {}

    # --- building --------------------------------------------------------------------------

    def add(self, texts: Iterable[str], kind: RuleKind, source: str, scope: str = "user", root: str = "") -> None:
        for text in texts:
            if not isinstance(text, str) or not text.strip():
                continue
            try:
                self.rules.append(parse_rule(text, kind, source, scope, root or self.cwd))
            except RuleError as e:
                self.warnings.append(str(e) + ("; denying the whole tool instead" if kind == "deny" else "; ignored"))
                name = tool_prefix(text)
                if kind == "deny" and name:  # fail closed: a deny we cannot read denies more, not less
                    self.rules.append(Rule(name, name, None, "deny", source, scope, root or self.cwd))

    def add_channel(self, channel: str, texts: Iterable[str], kind: RuleKind, source: str) -> None:
        scratch = PermissionEngine(self.cwd, home=self.home)
        scratch.add(texts, kind, source, "channel")
        self.channel_rules.setdefault(channel, []).extend(scratch.rules)
        self.warnings += scratch.warnings

    def rules_of(self, kind: RuleKind, *, managed: bool | None = None) -> list[Rule]:
        return [r for r in self.rules if r.kind == kind and (managed is None or (r.scope == "managed") == managed)]

    def has_read_denials(self) -> bool:
        return any(r.tool == READ and not r.bare for r in self.rules_of("deny"))

    def read_denied(self, path: object) -> bool:
        """Would a Read deny rule catch this file? Directory searches (Grep, Glob) skip such files."""
        lexical, real = candidates(str(path), self.cwd, self.home)
        for rule in self.rules_of("deny"):
            if rule.tool == READ and not rule.bare:
                pattern = path_pattern(rule.specifier or "", self.cwd, self.home, rule.root)
                if pattern.matches(lexical, broad=True) or pattern.matches(real, broad=True):
                    return True
        return False

    def hidden(self, tool: Tool) -> bool:
        """A bare deny rule removes the tool from the model's view."""
        family = effects_for(tool, tool.name).rule
        return any(r.bare and r.covers_tool(tool.name, family) for r in self.rules_of("deny"))

    # --- deciding ----------------------------------------------------------------------------

    def decide(
        self, name: str, tool_input: Mapping[str, Any], tool: Tool | None = None, *, shell_cwd: str | None = None
    ) -> Decision:
        """Never raises: a crash inside the pipeline denies (fail closed) and is logged.

        ``shell_cwd`` is where the shell is now (the Bash tool keeps its directory across
        calls): a Bash command's relative paths and its analysis start there. Relative paths
        of other tools, rule anchors and the working directories stay at ``self.cwd``."""
        try:
            return self._decide(name, tool_input, tool, shell_cwd)
        except Exception as exc:
            log.exception("permission check crashed for %s", name)
            return Decision(
                "deny", f"the permission check failed ({type(exc).__name__}); denied for safety", None, "error"
            )

    def _decide(self, name: str, tool_input: Mapping[str, Any], tool: Tool | None, shell_cwd: str | None) -> Decision:
        shell = self.cwd if not shell_cwd else posixpath.normpath(posixpath.join(self.cwd, shell_cwd))
        call = Call(name, tool_input if isinstance(tool_input, Mapping) else {}, tool, self.cwd, self.home, shell)
        trace: list[StageResult] = []
        for _, stage in self.stages:
            result = stage(call)
            trace.append(result)
            if result.verdict == "deny":
                return Decision("deny", result.reason, result.rule, result.stage, tuple(trace))
        return self._conclude(call, trace)

    def _conclude(self, call: Call, trace: list[StageResult]) -> Decision:
        asks = [r for r in trace if r.verdict == "ask" and r.stage != "default"]
        always = next((r for r in asks if r.strength == "always"), None)
        hard = next((r for r in asks if r.strength == "hard"), None)
        allowed = next((r for r in trace if r.verdict == "allow" and r.stage != "default"), None)
        soft = next((r for r in asks if r.strength == "soft"), None)
        default = trace[-1]
        if always is not None:
            final = Decision("ask", always.reason, always.rule, always.stage, tuple(trace))
        elif self.mode == "bypassPermissions":
            return Decision("allow", "bypassPermissions mode", None, "mode", tuple(trace))
        elif hard is None and allowed is not None:
            return Decision("allow", allowed.reason, allowed.rule, allowed.stage, tuple(trace))
        elif (sandboxed := self._sandboxed(call)) is not None:
            return Decision("allow", sandboxed, None, "sandbox", tuple(trace))
        elif hard is not None:
            final = Decision("ask", hard.reason, hard.rule, hard.stage, tuple(trace))
        elif soft is not None:
            final = Decision("ask", soft.reason, soft.rule, soft.stage, tuple(trace))
        elif default.verdict == "allow":
            return Decision("allow", default.reason, None, "default", tuple(trace))
        else:
            final = Decision("ask", default.reason, None, "default", tuple(trace))
        if self.mode == "dontAsk":
            return Decision(
                "deny", f"{final.reason} (dontAsk mode denies what would ask)", final.rule, "mode", final.trace
            )
        return Decision(final.decision, final.reason, final.rule, final.stage, final.trace, self._suggest(call))

    # --- stages ------------------------------------------------------------------------------

    def _deny_stage(self, call: Call, stage: str, *, managed: bool) -> StageResult:
        rules = self.rules_of("deny", managed=managed)
        hit = self._match(call, rules, broad=True) or self._any_program(call, rules)
        if hit is not None:
            rule, detail = hit
            return StageResult(stage, "deny", f"{detail} is denied by rule {rule.text} ({rule.source})", rule.text)
        return StageResult(stage, "continue")

    def _any_program(self, call: Call, rules: list[Rule]) -> tuple[Rule, str] | None:
        """Deny rules hold for every program a command can run. A part keel cannot name (a program
        known only at run time, a script a shell or interpreter reads, code bash evaluates in a
        word) could be any program, so a Bash deny rule catches it. Where nothing else would stop
        it (bypassPermissions mode, a rule allowing every command, sandbox auto-allow), so does
        any part keel does not model, and a Read or Edit deny rule too (it could touch anything)."""
        analysis = call.bash
        if analysis is None:
            return None
        bash_rules = [r for r in rules if r.tool == SHELL and not r.bare]
        if bash_rules:
            for cmd in [*analysis.commands, *analysis.also_runs]:
                if cmd.argv and DYNAMIC in cmd.argv[0]:
                    return bash_rules[0], f"`{sp._show(cmd)}` (a program known only at run time, which may be any)"
            if analysis.opaque:
                return bash_rules[0], f"a command that may run any program ({analysis.opaque[0]})"
        if not analysis.confident and self._nothing_else_stops(call):
            path_rules = [r for r in rules if r.on_paths]
            catching = bash_rules or path_rules
            if catching:
                why = "; ".join(analysis.problems)
                return catching[0], f"a command keel cannot check, which nothing else would stop ({why})"
        return None

    def _ask_stage(self, call: Call) -> StageResult:
        hit = self._match(call, self.rules_of("ask"), broad=True)
        if hit is not None:
            rule, detail = hit
            return StageResult(
                "user-ask", "ask", f"{detail} requires approval (rule {rule.text})", rule.text, strength="always"
            )
        unknown = self._unknown_program(call)
        if unknown is not None:
            return StageResult("user-ask", "ask", unknown, strength="always")
        return StageResult("user-ask", "continue")

    def _sandboxed(self, call: Call) -> str | None:
        """With ``sandbox.autoAllowBashIfSandboxed``, a Bash call that would ask (not an ask rule or
        a protected path: those ask first) runs in the sandbox instead. Never in plan mode."""
        if self.sandbox_auto_allow is None or not call.shell or self.mode == "plan":
            return None
        return self.sandbox_auto_allow(call)

    def _unknown_program(self, call: Call) -> str | None:
        """A Bash deny or ask rule cannot be checked against a program known only at run time
        (``$(which rm) -rf x``): keel cannot tell, so it asks, in every mode."""
        if not call.shell or call.bash is None:
            return None
        rules = [r for r in (*self.rules_of("deny"), *self.rules_of("ask")) if r.tool == SHELL and not r.bare]
        if not rules:
            return None
        programs = {sp.rule_program(r.specifier or "") for r in rules}
        if call.bash.opaque:
            return f"a command that may run any program ({call.bash.opaque[0]}), which rule {rules[0].text} may name"
        for cmd in [*call.bash.commands, *call.bash.also_runs]:
            if cmd.argv and DYNAMIC in cmd.argv[0]:
                return (
                    f"`{sp._show(cmd)}` runs a program known only at run time, which rule {rules[0].text} "
                    "may name; approval required"
                )
            name = sp.rule_program(" ".join(cmd.argv[:1]))
            if cmd.dynamic and (name in programs or "*" in programs):
                rule = next(r for r in rules if sp.rule_program(r.specifier or "") in (name, "*"))
                return (
                    f"`{sp._show(cmd)}` has arguments known only at run time, and rule {rule.text} names "
                    f"{name}: keel cannot tell whether it matches; approval required"
                )
        return None

    def _nothing_else_stops(self, call: Call) -> bool:
        """Would a Bash command keel cannot check run without a prompt? In bypassPermissions mode,
        under a rule allowing every command, or when the sandbox runs what would ask."""
        if self.mode == "bypassPermissions" or (self.sandbox_auto_allow is not None and self.mode != "plan"):
            return True
        return any(r.bare and r.tool in (SHELL, "*") for r in self.rules_of("allow"))

    def _allow_stage(self, call: Call, stage: str, *, managed: bool) -> StageResult:
        rules = self.rules_of("allow", managed=managed)
        if not rules:
            return StageResult(stage, "continue")
        if call.shell:
            return self._bash_allow(call, rules, stage)
        hit = self._match(call, rules, broad=False)
        if hit is not None:
            rule, _ = hit
            return StageResult(stage, "allow", f"allowed by rule {rule.text} ({rule.source})", rule.text)
        return StageResult(stage, "continue")

    def _channel_stage(self, call: Call) -> StageResult:
        rules = self.channel_rules.get(self.channel, [])
        allow = [r for r in rules if r.kind == "allow"]
        if call.shell and allow and not any(r.kind != "allow" and self._match(call, [r], broad=True) for r in rules):
            result = self._bash_allow(call, allow, "channel")
            if result.verdict == "allow":
                return result
        for kind in ("deny", "ask", "allow"):
            hit = self._match(call, [r for r in rules if r.kind == kind], broad=kind != "allow")
            if hit is not None:
                rule, detail = hit
                verdict: Verdict = "deny" if kind == "deny" else ("ask" if kind == "ask" else "allow")
                return StageResult(
                    "channel", verdict, f"{detail}: {kind} in the {self.channel} channel ({rule.text})", rule.text
                )
        return StageResult("channel", "continue")

    def _group_stage(self, call: Call) -> StageResult:
        group = call.tool.group if call.tool is not None else ("custom" if not call.name.startswith("mcp__") else "")
        verdict = self.groups.get(group) if group else None
        if verdict is None:
            return StageResult("group", "continue")
        return StageResult("group", verdict, f"tool group {group} is set to {verdict}")

    def _tool_stage(self, call: Call) -> StageResult:
        if call.shell:
            return self._bash_tool(call)
        if call.paths is not None and (call.is_edit or call.reads_files):
            lexical, real = call.paths
            if call.is_edit:
                why = self._protected(lexical) or self._protected(real)
                if why:
                    return StageResult("tool", "ask", f"{call.name} {lexical}: {why}; always asks", strength="always")
            if call.reads_files and (cred := credential_verdict(call, self.keel_home)) is not None:
                return cred
            if not (inside(lexical, self.working_dirs) and inside(real, self.working_dirs)):
                where = lexical if lexical == real else f"{lexical} (-> {real})"
                return StageResult("tool", "ask", f"{call.name} {where} is outside the working directories")
            return StageResult("tool", "continue")
        if call.effects.fetches and call.host is None:
            return StageResult(
                "tool", "ask", f"{call.name}: keel cannot tell the URL's host with confidence", strength="hard"
            )
        if call.tool is not None and call.tool.requires_approval:
            return StageResult("tool", "ask", f"{call.name} requires approval")
        return StageResult("tool", "continue")

    def _domain_stage(self, call: Call) -> StageResult:
        if call.tool is not None and call.tool.is_transactional:
            return StageResult(
                "domain-safety", "ask", f"{call.name} is transactional; it always asks", strength="always"
            )
        if call.tool is not None and call.tool.accesses_sensitive_data:
            return StageResult("domain-safety", "continue", f"{call.name} accesses sensitive data")
        return StageResult("domain-safety", "continue")

    def _default_stage(self, call: Call) -> StageResult:
        mode = self.mode
        if not call.shell and call.effects.touches_files and len(call.all_paths) != 1:
            # the working-directory, protected-path and credential checks judge one path: a file
            # tool naming none or several is not modelled exactly, so it is never allowed by default
            why = f"{call.name} names {'no path keel can check' if not call.all_paths else 'several paths'}"
            return StageResult("default", "deny" if mode == "plan" else "ask", why)
        if call.shell:
            analysis = call.bash
            safe = analysis is not None and self._bash_safe(call)
            if safe:
                return StageResult("default", "allow", "read-only commands inside the working directories")
            if mode == "plan":
                return StageResult("default", "deny", "plan mode: only read-only commands run")
            return StageResult("default", "ask", "Bash commands require approval")
        if call.read_only:
            return StageResult("default", "allow", f"{call.name} is read-only")
        if mode == "plan":
            return StageResult("default", "deny", f"{call.name} is not available in plan mode (read-only tools only)")
        if mode == "acceptEdits" and call.is_edit:
            return StageResult("default", "allow", "acceptEdits mode allows file edits in the working directories")
        return StageResult("default", "ask", f"{call.name} requires approval")

    # --- matching ----------------------------------------------------------------------------

    def _match(self, call: Call, rules: list[Rule], *, broad: bool) -> tuple[Rule, str] | None:
        """The first rule that matches the call, with what it matched. ``broad`` is for deny and
        ask: either path of a symlink, case folded, every shell form; allow needs all of them.

        A bare allow rule names one tool: it covers no other tool that writes files, as in Claude
        Code 2.1.328 (``--allowedTools Edit`` runs Edit and asks for Write and NotebookEdit). A
        rule with a path (``Edit(src/**)``) covers the whole family, and deny and ask rules, bare
        or not, cover every tool of their family (keel never lets a Write past ``Edit`` denied).
        A ``Read(path)`` deny rule also stops the tools that write there (Claude Code: "File is
        covered by a Read deny rule in your permission settings and cannot be written")."""
        bare_family = call.effects.rule if broad or not call.is_edit else None
        for rule in rules:
            if rule.bare and rule.covers_tool(call.name, bare_family):
                return rule, call.name
        for rule in rules:
            unreadable = rule.kind == "deny" and rule.tool == READ and call.is_edit
            if rule.bare or not (rule.covers_tool(call.name, call.effects.rule) or unreadable):
                continue
            detail = self._specifier_matches(call, rule, broad=broad)
            if detail is not None:
                return rule, detail
        if broad and call.shell:
            return self._bash_path_rules(call, rules)
        return None

    def _specifier_matches(self, call: Call, rule: Rule, *, broad: bool) -> str | None:
        spec = rule.specifier or ""
        if call.shell:
            analysis = call.bash
            if analysis is None:
                return None
            for cmd in [*analysis.commands, *(analysis.also_runs if broad else ())]:
                if broad and sp.rule_catches(spec, cmd):
                    return f"`{sp._show(cmd)}`"
            return None
        if call.effects.touches_files:
            every = call.all_paths
            if not every:
                return None
            pattern = path_pattern(spec, self.cwd, self.home, rule.root)
            if broad:  # deny and ask: any path it names
                for lexical, real in every:
                    if pattern.matches(lexical, broad=True) or pattern.matches(real, broad=True):
                        return f"{call.name} {lexical}"
                return None
            if all(pattern.matches(lexical) and pattern.matches(real) for lexical, real in every):
                return f"{call.name} {every[0][0]}"  # allow: every path it names
            return None
        if call.effects.fetches:
            host = call.host
            if host is None:
                return f"{call.name} of an unreadable URL" if broad and spec.strip() == "domain:*" else None
            return f"{call.name} {host}" if domain_matches(spec, host) else None
        if call.effects.named_by:
            named = call.named
            if named is None:
                return None
            same = named.casefold() == spec.strip().casefold() if broad else named == spec.strip()
            return f"{call.name}({named})" if same else None  # deny/ask: as the catalog finds it, any case
        return None

    def _protected(self, path: str) -> str | None:
        return protected(path, self.keel_home, self.home)

    # --- suggestions -------------------------------------------------------------------------

    def _suggest(self, call: Call) -> tuple[str, ...]:
        if call.shell:
            analysis = call.bash
            if analysis is None or not analysis.confident:
                return ()
            allow = [r for r in self.rules_of("allow") if r.tool == SHELL]
            out = [
                s
                for c in analysis.commands
                if sp.part_allowed(c, allow) is None and not self._safe_part(call, c)
                if (s := suggestions.uncovered_suggestion(c)) is not None
            ]
            return tuple(dict.fromkeys(out))
        if call.paths is not None and (call.is_edit or call.reads_files):
            lexical, _ = call.paths
            directory = lexical if call.effects.lists else posixpath.dirname(lexical)
            kind = EDIT if call.is_edit else READ
            if inside(directory, (self.cwd,)):
                rel = posixpath.relpath(directory, self.cwd)
                return (f"{kind}(/{'' if rel == '.' else rel + '/'}**)",)
            return (f"{kind}(/{directory}/**)",)
        if call.effects.fetches and call.host:
            return (f"{call.effects.rule or call.name}(domain:{call.host})",)
        return (call.name,)


def rule_root(settings_path: str) -> str:
    """Where ``/pattern`` rules from a settings file are anchored: the project holding .claude/.keel."""
    directory = posixpath.dirname(posixpath.abspath(settings_path))
    if posixpath.basename(directory) in (".claude", ".keel"):
        return posixpath.dirname(directory)
    return directory
