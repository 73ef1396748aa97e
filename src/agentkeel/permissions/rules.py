"""Permission rules in Claude Code's grammar: ``Tool`` or ``Tool(specifier)``.

Kinds: allow, ask, deny. Specifiers: Bash command patterns, gitignore-style paths for the
file tools, ``domain:`` for WebFetch, agent and skill names for Task and Skill; MCP tools
are named ``mcp__server`` / ``mcp__server__tool`` / ``mcp__server__*``.
"""

from __future__ import annotations

import fnmatch
import re
import socket
from functools import lru_cache
from typing import Literal
from urllib.parse import urlsplit

import msgspec

from agentkeel.permissions.paths import PathPattern, compile_path_pattern

RuleKind = Literal["allow", "ask", "deny"]

READ_TOOLS = frozenset({"Read", "Glob", "Grep", "LS", "NotebookRead"})
EDIT_TOOLS = frozenset({"Edit", "Write", "MultiEdit", "NotebookEdit"})
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

    def covers_tool(self, name: str) -> bool:
        """Does this rule talk about tool ``name`` at all (ignoring the specifier)?"""
        if self.tool == name:
            return True
        if self.tool == "Edit" and name in EDIT_TOOLS:
            return True
        if self.tool == "Read" and name in READ_TOOLS:
            return True
        if self.tool.startswith("mcp__") and name.startswith("mcp__"):
            pattern = self.tool
            if pattern.count("__") == 1:  # mcp__server: every tool of that server
                pattern += "__*"
            return fnmatch.fnmatchcase(name, pattern)
        return self.tool == "*"

    def __str__(self) -> str:
        return self.text


def parse_rule(text: str, kind: RuleKind, source: str, scope: str = "user", root: str = "") -> Rule:
    m = _RULE.match(text)
    if m is None or (("(" in text) != text.rstrip().endswith(")")):
        raise RuleError(f"{source}: permission rule {text!r} is not Tool or Tool(specifier)")
    spec = m.group("spec")
    return Rule(text.strip(), m.group("tool"), spec, kind, source, scope, root)


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
    host = host.strip().rstrip(".").lower()
    if not host or ".." in host:
        return None
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
