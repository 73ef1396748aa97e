"""Permission rules in Claude Code's grammar: ``Tool`` or ``Tool(specifier)``.

Kinds: allow, ask, deny. Specifiers: Bash command patterns, gitignore-style paths for the
file tools, ``domain:`` for WebFetch, agent and skill names for Task and Skill; MCP tools
are named ``mcp__server`` / ``mcp__server__tool`` / ``mcp__server__*``.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from functools import lru_cache
from typing import Literal
from urllib.parse import urlsplit

import msgspec

from agentkeel.internal import globs
from agentkeel.policy.permissions.paths import PathPattern, compile_path_pattern
from agentkeel.tools import EDIT, READ, RENAMED, effects_of

RuleKind = Literal["allow", "ask", "deny"]

_RULE = re.compile(r"^\s*(?P<tool>[A-Za-z0-9_.\-*]+)\s*(?:\((?P<spec>.*)\))?\s*$", re.S)


class RuleError(ValueError):
    pass


class Rule(msgspec.Struct, frozen=True):
    text: str
    tool: str
    specifier: str | None
    kind: RuleKind
    source: str  # the settings file, "--allowedTools", "session", ...
    scope: str = "user"  # managed | user | project | local | cli | session
    root: str = ""  # where ``/pattern`` path rules are anchored (the settings file's project)

    @property
    def bare(self) -> bool:
        return self.specifier is None or self.specifier.strip() in ("", "*")

    @property
    def on_paths(self) -> bool:
        """A rule with a path specifier: ``Read(...)``, ``Edit(...)``, or one naming a tool that reads
        or writes files (``Write(...)``). Such deny and ask rules also hold for what a command touches."""
        return not self.bare and (self.tool in (READ, EDIT) or effects_of(self.tool).touches_files)

    def covers_tool(self, name: str, family: str | None = None) -> bool:
        """Does this rule talk about tool ``name`` at all (ignoring the specifier)? A rule naming a
        family (``Edit``) covers every tool whose effects put it there (``family``: its ``effects.rule``;
        the engine passes None where only the tool's own name counts: a bare allow rule and a tool
        that writes files)."""
        if self.tool == name or (family is not None and self.tool == family):
            return True
        if self.tool.startswith("mcp__") and name.startswith("mcp__"):
            return mcp_rule_covers(self.tool, name, broad=self.kind != "allow")
        return self.tool == "*"

    def __str__(self) -> str:
        return self.text


# --- MCP tool names ---------------------------------------------------------------------------

MCP_NAME_MAX = 64  # the model APIs refuse longer tool names: keel cuts them (agentkeel.mcp.tools)
_MCP_NAMES: dict[str, tuple[str, str]] = {}  # a name keel exposes -> (server, tool), as the rules spell them
_MCP_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def mcp_full_name(server: str, tool: str) -> str:
    """``mcp__<server>__<tool>``, characters outside [A-Za-z0-9_-] as '_' (Claude Code's name)."""
    return f"mcp__{_MCP_UNSAFE.sub('_', server)}__{_MCP_UNSAFE.sub('_', tool)}"


def mcp_exposed_name(full: str) -> str:
    """The name keel shows the model: over 64 characters, cut and given a hash of the whole."""
    if len(full) <= MCP_NAME_MAX:
        return full
    import hashlib

    return full[: MCP_NAME_MAX - 9] + "_" + hashlib.sha256(full.encode()).hexdigest()[:8]


def register_mcp_tool(server: str, tool: str) -> str:
    """Record which server and tool an exposed name stands for (a server may itself be named
    ``github__evil``, and a long name is cut): rules are matched against those, not the name."""
    full = mcp_full_name(server, tool)
    name = mcp_exposed_name(full)
    _MCP_NAMES[name] = (_MCP_UNSAFE.sub("_", server), _MCP_UNSAFE.sub("_", tool))
    return name


def _mcp_parts(rule_body: str) -> list[tuple[str, str | None]]:
    """Every reading of a rule's ``server[__tool]``: the server alone (a name, or ``*``), or cut
    at any ``__`` (``mcp__github__*`` is every tool of server github, not servers ``github__…``)."""
    out: list[tuple[str, str | None]] = [(rule_body, None)] if "*" not in rule_body or rule_body == "*" else []
    for m in re.finditer("__", rule_body):
        if m.start() > 0:
            out.append((rule_body[: m.start()], rule_body[m.end() :]))
    return out


_MCP_RULE_UNSAFE = re.compile(r"[^A-Za-z0-9_\-*?\[\]!]")  # as _MCP_UNSAFE, glob characters kept


def _mcp_match(rule: str, server: str, tool: str, broad: bool = False) -> bool:
    body = rule[len("mcp__") :]
    if broad:
        # a deny or ask rule written with the server's configured name (``mcp__my.server``) or
        # another case (``mcp__GitHub``) names the same server keel exposes as my_server/github
        body = _MCP_RULE_UNSAFE.sub("_", body).lower()
        server, tool = server.lower(), tool.lower()
    for s, t in _mcp_parts(body):
        if globs.name_matches(server, s) and (t is None or globs.name_matches(tool, t)):
            return True
    return False


def mcp_rule_covers(rule: str, name: str, *, broad: bool) -> bool:
    """Does MCP rule ``mcp__server``/``mcp__server__tool``/``mcp__server__*`` name tool ``name``?
    The server named must be the tool's server (``mcp__github`` is not server ``github__evil``),
    and a rule giving a tool's full name covers the cut name keel exposes for it. For a name keel
    did not register, deny and ask rules (``broad``) match any reading of it, allow rules only
    when every reading agrees."""
    if rule == name or mcp_exposed_name(rule) == name:
        return True
    if broad and mcp_exposed_name(_MCP_RULE_UNSAFE.sub("_", rule)).lower() == name.lower():
        return True
    known = _MCP_NAMES.get(name)
    if known is not None:
        return _mcp_match(rule, *known, broad=broad)
    body = name[len("mcp__") :]
    readings = [(s, t) for s, t in _mcp_parts(body) if t]
    if not readings:
        return False
    hits = [_mcp_match(rule, s, t, broad) for s, t in readings]
    return any(hits) if broad else all(hits)


def parse_rule(text: str, kind: RuleKind, source: str, scope: str = "user", root: str = "") -> Rule:
    m = _RULE.match(text)
    if m is None or (("(" in text) != text.rstrip().endswith(")")):
        raise RuleError(f"{source}: permission rule {text!r} is not Tool or Tool(specifier)")
    spec = m.group("spec")
    tool = RENAMED.get(m.group("tool"), m.group("tool"))  # Agent is Task, TaskStop is KillShell...
    return Rule(text.strip(), tool, spec, kind, source, scope, root)


def tool_prefix(text: str) -> str | None:
    """For a malformed deny rule, the tool it names (so it can fail closed on the whole tool)."""
    m = re.match(r"^\s*([A-Za-z0-9_.\-]+)", text)
    return m.group(1) if m else None


# --- Bash -----------------------------------------------------------------------------------


@lru_cache(maxsize=4096)
def bash_pattern(spec: str) -> re.Pattern[str]:
    """``npm run test:*`` == ``npm run test *``: the prefix, then nothing or a space and anything.
    ``ls *`` needs the word boundary, ``ls*`` does not; ``*`` elsewhere matches anything."""
    s = " ".join(spec.split())
    if s.endswith(":*"):
        s = s[:-2].rstrip() + " *"
    tail = ""
    if s.endswith(" *"):
        s, tail = s[:-2], "(?: .*)?"
    body = ".*".join(re.escape(part) for part in s.split("*"))
    return re.compile(f"^{body}{tail}$", re.S)


def bash_matches(spec: str, command_text: str) -> bool:
    return bash_pattern(spec).match(command_text) is not None


def literal_words(spec: str) -> set[str]:
    return {w for w in spec.replace(":*", " ").split() if w != "*"}


# --- WebFetch ---------------------------------------------------------------------------------


def url_host(url: str) -> str | None:
    """The normalised host of a URL, or None if keel cannot tell it with confidence."""
    if any(c in url for c in "\\\t\r\n ") or not url.isprintable():
        return None
    try:
        parts = urlsplit(url.strip())
        host = parts.hostname
        _ = parts.port  # raises on a malformed port
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not host:
        return None
    return normalise_host(host)


def normalise_host(host: str) -> str | None:
    """One spelling per host: IP literals in their canonical form (``2130706433``, ``0x7f.1``
    and ``[::ffff:127.0.0.1]`` are all ``127.0.0.1``), names lower-cased, IDNA-encoded."""
    host = host.strip().rstrip(".").lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not host or ".." in host:
        return None
    if ":" in host:
        try:
            addr = ipaddress.IPv6Address(host.split("%", 1)[0])
        except ValueError:
            return None
        mapped = addr.ipv4_mapped or _ipv4_translated(addr)
        return str(mapped) if mapped is not None else str(addr)
    if re.fullmatch(r"[0-9a-fx.]+", host):
        try:  # 2130706433, 0x7f.1, 127.1 -> 127.0.0.1
            return socket.inet_ntoa(socket.inet_aton(host))
        except OSError:
            if host.replace(".", "").isdigit():
                return None
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError:
        return None


def _ipv4_translated(addr: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """``::ffff:0:a.b.c.d`` (SIIT) and ``::a.b.c.d`` (IPv4-compatible) also name an IPv4 host."""
    n = int(addr)
    if n >> 32 in (0, 0xFFFF0000) and n >> 16 not in (0, 1) and n & 0xFFFFFFFF:
        return ipaddress.IPv4Address(n & 0xFFFFFFFF)
    return None


def domain_matches(spec: str, host: str) -> bool:
    """``domain:example.com`` is that host exactly; ``domain:*.example.com`` its subdomains."""
    s = spec.strip()
    if not s.startswith("domain:"):
        return False
    want = s[len("domain:") :].strip().lower().rstrip(".")
    if want == "*":
        return True
    if want.startswith("*."):
        suffix = normalise_host(want[2:])
        return suffix is not None and host.endswith("." + suffix)
    wanted = normalise_host(want)
    return wanted is not None and host == wanted


# --- paths ------------------------------------------------------------------------------------


@lru_cache(maxsize=4096)
def path_pattern(spec: str, cwd: str, home: str, root: str) -> PathPattern:
    return compile_path_pattern(spec, cwd=cwd, home=home, root=root or cwd)
