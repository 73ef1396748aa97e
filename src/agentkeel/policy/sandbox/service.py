"""The per-session sandbox service: which Bash commands run inside bubblewrap, the command line
that runs them there, and what to tell the model when the sandbox stopped one.

Every sandboxed call gets new user, PID, network, IPC, UTS and cgroup namespaces
(``--unshare-all``) and ``--die-with-parent``: when the command's shell exits, the PID
namespace ends and whatever it left running is killed (and reported). The network namespace
has only loopback: no route out, no DNS, no host service on 127.0.0.1, unless the session runs
the domain proxy (``sandbox/proxy.py``), which lets allowed domains through.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import stat
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from agentkeel.policy.sandbox.config import SandboxConfig
from agentkeel.policy.sandbox.explain import LEFTOVER_MARK, explain
from agentkeel.policy.sandbox.mounts import MASKED, build_layout, default_hidden
from agentkeel.policy.sandbox.probe import Probe, probe
from agentkeel.tools import EDIT, FETCH, READ, SHELL

if TYPE_CHECKING:
    from agentkeel.policy.permissions.call import Call
    from agentkeel.policy.permissions.engine import PermissionEngine
    from agentkeel.policy.permissions.rules import RuleKind
    from agentkeel.policy.sandbox.proxy import DomainProxy

# root outside stays root inside, with every capability unless dropped: without them it cannot
# unmount the read-only binds or open the mode-000 stand-ins over hidden files
NAMESPACES = ("--unshare-all", "--die-with-parent", "--cap-drop", "ALL")


# run on exit by the command's shell: what it left running in the PID namespace (1 is
# bubblewrap's init, 2 this shell; the proxy relay's socat processes do not count). Only builtins:
# no process is started. Then the namespace ends, and everything in it with it.
def leftover_check(relay: bool) -> str:
    if not relay:
        count = "set -- /proc/[0-9]*; n=$(($# - 2))"
    else:
        count = (
            # a relay child that exits between the glob and the read is gone, not left over
            'n=-2; for p in /proc/[0-9]*; do c=; read -r c < $p/comm || continue; [ "$c" = socat ] || n=$((n + 1)); '
            "done 2>/dev/null"
        )
    return f'{count}; if [ $n -gt 0 ]; then echo "{LEFTOVER_MARK} $n" >&2; fi'


class DomainAsker(Protocol):
    """Who answers "may a sandboxed command reach this new host?" (the permission gate: its
    PermissionRequest hooks, then the host's prompt or ``can_use_tool``)."""

    def can_ask(self) -> bool: ...

    async def ask_network(self, host: str) -> bool: ...


class SandboxError(ValueError):
    """The sandbox is required (``failIfUnavailable``) and cannot run here."""


@dataclass
class Prepared:
    """One sandboxed call: the command line, and the protected entries that did not exist before it."""

    argv: list[str]
    env: dict[str, str]
    absent: list[str]


class Sandbox:
    # a subagent's calls go through the session's permission gate, which lets an ask-level Bash
    # command run because it is sandboxed: the subagent's Bash must find the same sandbox
    share_with_subagents = True

    def __init__(
        self,
        config: SandboxConfig,
        *,
        cwd: Path,
        home: Path,
        keel_home: Path | None = None,
        additional_dirs: tuple[Path, ...] = (),
        engine: PermissionEngine | None = None,
        found: Probe | None = None,
    ) -> None:
        self.config = config
        self.cwd = cwd
        self.home = home
        self.keel_home = keel_home
        self.additional_dirs = additional_dirs
        self.engine = engine
        self.probe = found if found is not None else probe()
        self.session_enabled: bool | None = None  # /sandbox on|off in this session
        self.proxy: DomainProxy | None = None
        self._root: Path | None = None
        # empty mount points bubblewrap made on the host for missing protected directories (.claude,
        # .keel, .git/hooks): kept while the session may run sandboxed commands, removed by release().
        # Removing one after each call cost ~5 ms (the kernel detaches it from the dying namespace), and
        # removing it under a sandboxed command still running would lift its read-only mount there.
        self._made: dict[str, None] = {}
        self._live = 0  # prepared calls not yet finished
        self._rule_cache: dict[tuple[str, tuple[tuple[str, str], ...]], list[str]] = {}
        self._walked: tuple[float, list[str]] | None = None  # (when, sockets found by the walk)
        self.asker: DomainAsker | None = None  # set by the runtime once the permission gate exists
        self.answers: dict[str, bool] = {}  # the user's answer per new host, for the session
        self._asking: dict[str, asyncio.Future[bool]] = {}  # one question per host at a time

    # --- what runs where -------------------------------------------------------------------

    @property
    def enabled(self) -> bool:
        """Sandbox mode for this session: settings' ``sandbox.enabled``, unless ``/sandbox`` turned it."""
        return self.config.enabled if self.session_enabled is None else self.session_enabled

    @property
    def active(self) -> bool:
        return self.enabled and self.probe.available

    @property
    def why_inactive(self) -> str:
        if self.session_enabled is False:
            return "turned off for this session (/sandbox on turns it back on)"
        if not self.config.enabled:
            return "sandbox.enabled is not true"
        return self.probe.problem

    def excluded(self, command: str, cwd: str | None = None) -> bool:
        """A command ``sandbox.excludedCommands`` names runs outside, under the normal permission flow."""
        if not self.config.excluded_commands:
            return False
        from agentkeel.policy.permissions.bash import analyse
        from agentkeel.policy.permissions.rules import bash_matches
        from agentkeel.policy.permissions.shellpolicy import command_forms

        analysis = analyse(command, cwd or str(self.cwd), str(self.home))
        # a rule pattern (``docker *``), or a bare name or prefix as Claude Code writes them (``docker``)
        specs = [s if "*" in s else f"{s} *" for s in self.config.excluded_commands]
        return any(
            bash_matches(spec, form) for cmd in analysis.commands for form in command_forms(cmd) for spec in specs
        )

    def unsandboxed_requested(self, tool_input: object) -> bool:
        """``dangerouslyDisableSandbox: true``, honoured only where settings allow it."""
        wants = isinstance(tool_input, dict) and tool_input.get("dangerouslyDisableSandbox") is True
        return wants and self.config.allow_unsandboxed

    def sandboxed(self, command: str, tool_input: object = None, cwd: str | None = None) -> bool:
        return self.active and not self.unsandboxed_requested(tool_input) and not self.excluded(command, cwd)

    def auto_allow(self, call: Call) -> str | None:
        """For the permission engine: a Bash call that would only have asked runs sandboxed without
        asking (``autoAllowBashIfSandboxed``). Deny rules, ask rules and protected paths are decided
        before this is consulted."""
        if not (self.active and self.config.auto_allow) or not (call.shell and call.effects.sandboxed):
            return None
        command = call.input.get("command")
        if not isinstance(command, str) or not self.sandboxed(command, dict(call.input), call.shell_cwd):
            return None
        analysis = call.bash
        if analysis is not None and not analysis.confident and self._bash_denials():
            return None  # a deny rule may name what keel could not read: ask, as without a sandbox
        from agentkeel.policy.permissions.credentials import credential_read

        if credential_read(call, str(self.keel_home) if self.keel_home else None) is not None:
            return None  # a credential store (hidden in here anyway): ask, as without a sandbox
        return "runs in keel's sandbox (sandbox.autoAllowBashIfSandboxed)"

    def _bash_denials(self) -> bool:
        if self.engine is None:
            return False
        return any(r.tool == SHELL and not r.bare for r in self.engine.rules_of("deny"))

    # --- the command line ------------------------------------------------------------------

    @property
    def root(self) -> Path:
        """The session's sandbox directory: ``tmp/`` (writable, $TMPDIR inside) and the empty
        stand-ins mounted over hidden and protected paths."""
        if self._root is None:
            root = Path(tempfile.mkdtemp(prefix="keel-sandbox-"))
            (root / "tmp").mkdir()
            (root / "hidden-file").touch()
            (root / "hidden-dir").mkdir()
            (root / "readonly-dir").mkdir()
            os.chmod(root / "hidden-file", 0)
            os.chmod(root / "hidden-dir", 0)
            os.chmod(root / "readonly-dir", stat.S_IRUSR | stat.S_IXUSR)
            self._root = root
        return self._root

    @property
    def tmpdir(self) -> Path:
        return self.root / "tmp"

    def writable(self, *, with_tmp: bool = True) -> list[str]:
        """The working directories, the session temp dir, ``sandbox.filesystem.allowWrite``."""
        roots = [str(self.cwd), *(str(d) for d in self.additional_dirs)] + ([str(self.tmpdir)] if with_tmp else [])
        return roots + [self._expand(p) for p in self.config.allow_write]

    def hidden(self) -> list[str]:
        keel_home = str(self.keel_home) if self.keel_home else None
        paths = default_hidden(str(self.home), keel_home) + [self._expand(p) for p in self.config.deny_read]
        return paths + self._ruled(READ)

    def allowed_sockets(self) -> list[str]:
        """``sandbox.network.allowUnixSockets``: ``/abs`` as written (Claude Code's example is
        ``/var/run/docker.sock``), ``~/x`` in the home, a relative path in the project."""
        out = []
        for spec in self.config.allow_unix_sockets:
            s = spec.strip()
            if s.startswith("/") and not s.startswith("//"):
                out.append(os.path.normpath(s))
            elif s:
                out.append(self._expand(s))
        return out

    def sockets(self, allowed: list[str]) -> list[str]:
        """The host Unix sockets to cover for the next command (none with ``allowAllUnixSockets``)."""
        if self.config.allow_all_unix_sockets:
            return []
        from agentkeel.policy.sandbox import sockets

        own = [str(self._root)] if self._root is not None else []  # the proxy's socket is there
        now = time.monotonic()
        if self._walked is None or now - self._walked[0] > sockets.WALK_TTL:
            roots = sockets.walk_roots(str(self.home), MASKED)
            walked = sockets.scan(roots, skip=[*self.writable(with_tmp=False), *own, *MASKED])
            bound = set(sockets.bound_sockets())
            self._walked = (now, sockets.live(w for w in walked if w not in bound))
        return sockets.host_sockets(walked=self._walked[1], own=own, allowed=allowed, masked=MASKED)

    def deny_write(self) -> list[str]:
        return [self._expand(p) for p in self.config.deny_write] + self._ruled(EDIT)

    def _ruled(self, tool: str) -> list[str]:
        """The paths ``tool`` deny rules name, globs expanded once per session (and again when the
        rules change: one added in the session counts)."""
        if self.engine is None:
            return []
        rules = [r for r in self.engine.rules_of("deny") if r.tool == tool]
        key = (tool, tuple((r.text, r.root) for r in rules))
        found = self._rule_cache.get(key)
        if found is None:
            from agentkeel.policy.sandbox.hidden import rule_paths

            found = rule_paths(rules, tool, cwd=str(self.cwd), home=str(self.home), expand=self._expand)
            self._rule_cache = {k: v for k, v in self._rule_cache.items() if k[0] != tool} | {key: found}
        return found

    def _expand(self, spec: str) -> str:
        """A path as Claude Code's sandbox settings and rules write it: ``//abs``, ``~/x``, ``/x``
        (the project), ``./x`` or bare (the project)."""
        s = spec.strip()
        if s.startswith("//"):
            return s[1:]
        if s == "~" or s.startswith("~/"):
            return str(self.home) + s[1:]
        return os.path.normpath(os.path.join(self.cwd, s.lstrip("/")))

    def prepare(self, command: str, cwd: Path, env: dict[str, str], shell: str, on_exit: str = "") -> Prepared:
        """The bubblewrap command line that runs ``command`` in ``shell``; ``on_exit`` is shell text
        for the EXIT trap (the Bash tool's "where did the shell end up"), kept single-quote free."""
        assert self.probe.bwrap is not None
        allowed = self.allowed_sockets()
        layout = build_layout(
            writable=self.writable(),
            scratch=str(self.tmpdir),
            home=str(self.home),
            keel_home=str(self.keel_home) if self.keel_home else None,
            deny_write=self.deny_write(),
            hidden=self.hidden() + self.sockets(allowed),
            mask_run=not self.config.allow_all_unix_sockets,
            unmask=allowed,
        )
        self._made.update((p, None) for p in layout.all_guard_missing() if not os.path.lexists(p))
        root = self.root
        args = layout.args(str(root / "hidden-file"), str(root / "hidden-dir"), str(root / "readonly-dir"))
        inner_env = {**env, "TMPDIR": str(self.tmpdir)}
        relay = ""
        if self.proxy is not None:
            inner_env.update(self.proxy.env())
            from agentkeel.policy.sandbox.proxy import needs_network

            if needs_network(command, str(cwd), str(self.home)):
                relay = self.proxy.relay(self._idle_fifo())
        trap = "; ".join(t for t in (on_exit, leftover_check(bool(relay))) if t)
        script = f"{relay}trap '{trap}' EXIT\n{command}"
        argv = [self.probe.bwrap, *NAMESPACES, *args, "--chdir", str(cwd), "--", shell, "-c", script]
        self._live += 1
        return Prepared(argv, inner_env, [p for p in layout.all_absent() if not os.path.lexists(p)])

    def finished(self, prepared: Prepared) -> list[str]:
        """Remove the protected entries the command created; returns a note for the model when it
        removed any."""
        self._live = max(0, self._live - 1)
        removed = []
        for path in prepared.absent:
            if not os.path.lexists(path):
                continue
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    os.unlink(path)
            removed.append(os.path.basename(path))
        if not removed:
            return []
        return [f"[keel sandbox] removed protected file(s) the command created: {', '.join(removed)}"]

    def _idle_fifo(self) -> Path:
        """A FIFO nobody writes: the relay's wait pauses on it with ``read -t`` (no ``sleep`` process)."""
        path = self.root / "idle.fifo"
        if not path.exists():
            os.mkfifo(path, 0o600)
        return path

    async def start_proxy(self) -> None:
        """Start the domain proxy on first use, when socat is here and some domain is allowed or
        someone can be asked about a new one."""
        if self.proxy is not None or not self.probe.socat:
            return
        if not self.config.allowed_domains and not self._webfetch("allow") and not self.can_ask():
            return
        from agentkeel.policy.sandbox.proxy import DomainProxy

        proxy = DomainProxy(self.root / "proxy.sock", self.domain_permitted)
        await proxy.start()
        self.proxy = proxy

    def _webfetch(self, kind: RuleKind) -> list[str]:
        if self.engine is None:
            return []
        return [r.specifier or "" for r in self.engine.rules_of(kind) if r.tool == FETCH and not r.bare]

    def domain_allowed(self, host: str) -> bool | None:
        """A WebFetch ``domain:`` deny rule refuses the host (False); ``sandbox.network.allowedDomains``
        or a WebFetch ``domain:`` allow rule (read at each connection: one the user adds in the session
        counts) lets it through (True); hosts match as WebFetch rules match them. None: no rule says."""
        from agentkeel.policy.permissions.rules import domain_matches

        if any(domain_matches(spec, host) for spec in self._webfetch("deny")):
            return False
        specs = [f"domain:{d}" for d in self.config.allowed_domains] + self._webfetch("allow")
        return True if any(domain_matches(spec, host) for spec in specs) else None

    def can_ask(self) -> bool:
        """Someone can answer a question about a new host (see :class:`DomainAsker`)."""
        return self.asker is not None and self.asker.can_ask()

    async def domain_permitted(self, host: str) -> bool:
        """The proxy's question for each connection: the rules, else the user's answer for this host
        this session, else ask once (where someone can answer; with nobody, refused without asking)."""
        ruled = self.domain_allowed(host)
        if ruled is not None:
            return ruled
        if host in self.answers:
            return self.answers[host]
        if self.asker is None or not self.asker.can_ask():
            return False
        pending = self._asking.get(host)
        if pending is None:  # concurrent connections to one new host wait for the one question
            pending = asyncio.ensure_future(self.asker.ask_network(host))
            self._asking[host] = pending
            try:
                self.answers[host] = bool(await asyncio.shield(pending))
            except Exception:
                self.answers[host] = False  # fail closed
            finally:
                self._asking.pop(host, None)
            return self.answers[host]
        try:
            return bool(await asyncio.shield(pending))
        except Exception:
            return False

    def explain(self, output: str, code: int | None, command: str) -> str | None:
        blocked = tuple(dict.fromkeys(self.proxy.denied)) if self.proxy is not None else ()
        if self.proxy is not None:
            self.proxy.denied.clear()
        return explain(output, code, command, network=self.proxy is not None, config=self.config, blocked=blocked)

    # --- lifecycle -------------------------------------------------------------------------

    def release(self) -> None:
        """Remove the empty mount points made for missing protected directories, once no sandboxed
        command runs (one that is not empty any more stays)."""
        if self._live:
            return
        made, self._made = list(self._made), {}
        for path in reversed(made):
            with contextlib.suppress(OSError):
                os.rmdir(path)

    async def aclose(self) -> None:
        self.release()
        if self.proxy is not None:
            await self.proxy.aclose()
        if self._root is not None:
            root, self._root = self._root, None
            for sub in ("hidden-dir", "readonly-dir"):
                try:
                    os.chmod(root / sub, 0o700)
                except OSError:
                    pass
            shutil.rmtree(root, ignore_errors=True)
