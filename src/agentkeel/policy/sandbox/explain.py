"""Telling the model that the sandbox, not its command, made a call fail.

A program run in the sandbox sees ordinary errors (EROFS, EACCES, ENETUNREACH, a name that does
not resolve); keel reads the output of a failed call for them and adds one paragraph saying
which boundary it met and what the model can do: nothing (the boundary is the point), or ask
to run it outside the sandbox where settings allow that.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentkeel.policy.sandbox.config import SandboxConfig

LEFTOVER_MARK = "[keel sandbox] background processes stopped:"

_WRITE = re.compile(r"Read-only file system|Device or resource busy|EROFS|EBUSY", re.I)
_HIDDEN = re.compile(r"Permission denied|EACCES|PermissionError", re.I)
_SOCKET = re.compile(r"connect\w*\b[^\n]*(Permission denied|EACCES)|(Permission denied|EACCES)[^\n]*\bconnect", re.I)
_PROC = re.compile(r"/proc/\d+/\S*.*No such file or directory|No such process", re.I)
_NETWORK = re.compile(
    r"Network is unreachable|Could not resolve|Temporary failure in name resolution|Name or service not known|"
    r"No address associated|getaddrinfo|Connection refused|Couldn't connect|Failed to connect|ENETUNREACH|"
    r"ECONNREFUSED|gaierror|nodename nor servname|unable to resolve|Could not connect|connection timed out|"
    r"403 Forbidden|blocked by keel's sandbox proxy",
    re.I,
)
# programs whose failure with network off is the sandbox's doing even when they print nothing
# (``getent hosts x`` exits 2 silently; so does a DNS lookup meant to carry data out)
_NET_PROGRAMS = re.compile(
    r"(^|[\s;&|(`$])(curl|wget|nc|ncat|netcat|socat|getent|dig|nslookup|host|ping|ssh|scp|rsync|telnet|ftp|"
    r"git\s+(push|pull|fetch|clone|ls-remote)|pip\s+install|npm\s+(install|ci|publish)|/dev/tcp|/dev/udp)\b"
)


def causes(output: str, code: int | None, command: str, *, network: bool, blocked: tuple[str, ...] = ()) -> list[str]:
    found: list[str] = []
    leftover = re.search(re.escape(LEFTOVER_MARK) + r" (\d+)", output)
    if leftover:
        found.append(
            f"{leftover.group(1)} process(es) it started in the background were stopped when it ended "
            "(nothing started in the sandbox outlives its command; use run_in_background for servers)"
        )
    removed = re.search(r"\[keel sandbox\] removed protected file\(s\) the command created: (.*)", output)
    if removed:
        found.append(f"protected files may not be created ({removed.group(1)}: removed again)")
    if _WRITE.search(output):
        found.append(
            "writing outside the working directories and the session's temp dir, or to a protected path "
            "(.git/hooks, .git/config, .claude/, .keel/, shell rc files, $KEEL_HOME), is blocked"
        )
    if _SOCKET.search(output):
        found.append(
            "the host's Unix sockets are covered (tmux, ssh-agent, docker...): the user can name one in "
            "sandbox.network.allowUnixSockets"
        )
    elif _HIDDEN.search(output):
        found.append("files a Read deny rule covers (and credential stores such as ~/.ssh, ~/.npmrc) are hidden")
    if _PROC.search(output):
        found.append("processes outside the sandbox are not visible in /proc")
    # a pipeline's status is its last command's: the errors are read whatever the status; a
    # program that failed silently counts only when the call failed
    if blocked or _NETWORK.search(output) or (code and _NET_PROGRAMS.search(command)):
        hosts = (
            f"; blocked: {', '.join(blocked[:5])}; the user can allow one with WebFetch(domain:{blocked[0]}) in "
            "permissions.allow or sandbox.network.allowedDomains"
            if blocked
            else ""
        )
        found.append(
            f"only the allowed domains are reachable (sandbox.network.allowedDomains, WebFetch domain rules{hosts})"
            if network
            else "network access is off (no route out, no name lookups, no host services on loopback)"
        )
    return found


def explain(
    output: str, code: int | None, command: str, *, network: bool, config: SandboxConfig, blocked: tuple[str, ...] = ()
) -> str | None:
    found = causes(output, code, command, network=network, blocked=blocked)
    if not found:
        return None
    if config.allow_unsandboxed:
        remedy = (
            "If this command must run outside the sandbox, call Bash again with dangerouslyDisableSandbox: true; "
            "the user will be asked to approve it."
        )
    else:
        remedy = "Running commands outside the sandbox is turned off (sandbox.allowUnsandboxedCommands: false)."
    return f"[Sandbox denial: this command ran in keel's sandbox: {'; '.join(found)}. {remedy}]"
