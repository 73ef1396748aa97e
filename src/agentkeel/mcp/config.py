"""Which MCP servers a session has: ``.mcp.json``, settings, ``--mcp-config``; ``${VAR}`` expansion.

Light on purpose (json and re only): a session without MCP servers never imports the ``mcp``
package. Scopes follow Claude Code's, lowest to highest precedence for one name: ``user``
(``$KEEL_HOME/settings.json``, ``~/.claude.json``), ``project`` (``.mcp.json``, trust-gated,
per-server approval by ``enableAllProjectMcpServers`` / ``enabledMcpjsonServers`` /
``disabledMcpjsonServers``), ``local`` (``.keel/settings.local.json``, ``~/.claude.json``'s
entry for this folder), then ``cli`` (``--mcp-config``; with ``--strict-mcp-config`` the only one).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from agentkeel.config.sections import McpSection, mcp_section

if TYPE_CHECKING:
    from agentkeel.config.settings import SettingsLayer

Transport = Literal["stdio", "http", "sse"]
McpScope = Literal["user", "project", "local", "plugin", "cli", "sdk"]

DEFAULT_CONNECT_TIMEOUT_S = 30.0  # MCP_TIMEOUT, as Claude Code
DEFAULT_MAX_OUTPUT_TOKENS = 25_000  # MAX_MCP_OUTPUT_TOKENS, as Claude Code
DEFAULT_TOOL_TIMEOUT_S = 100_000.0  # MCP_TOOL_TIMEOUT, as Claude Code (1e8 ms: effectively none)

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_NAME = re.compile(r"^[A-Za-z0-9_-]+$")


class McpConfigError(ValueError):
    """A server definition keel cannot use; the message is one line naming the server and key."""


class ServerConfig(msgspec.Struct, frozen=True):
    name: str
    transport: Transport
    scope: McpScope
    source: str  # the file (or "--mcp-config") it came from
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = msgspec.field(default_factory=dict)
    url: str = ""
    headers: Mapping[str, str] = msgspec.field(default_factory=dict)
    missing: tuple[str, ...] = ()  # ${VAR}s with no value and no default: the server cannot start
    tool_timeout_s: float | None = None  # "timeout" (ms): this server's MCP_TOOL_TIMEOUT
    raw: Mapping[str, Any] = msgspec.field(default_factory=dict)  # as written, before expansion

    def describe(self) -> str:
        if self.transport == "stdio":
            return " ".join([self.command, *self.args])
        return self.url


def expand(text: str, env: Mapping[str, str], missing: list[str]) -> str:
    """``${VAR}`` and ``${VAR:-default}``; an unset VAR without a default is recorded in ``missing``."""

    def sub(m: re.Match[str]) -> str:
        value = env.get(m.group(1))
        if value is not None and (value != "" or m.group(2) is None):
            return value
        if m.group(2) is not None:
            return m.group(2)
        missing.append(m.group(1))
        return m.group(0)

    return _VAR.sub(sub, text)


def parse_server(name: str, raw: Any, scope: McpScope, source: str, env: Mapping[str, str]) -> ServerConfig:
    where = f"{source}: MCP server '{name}'"
    if not _NAME.match(name):
        raise McpConfigError(f"{where}: names may use only letters, digits, '_' and '-'")
    if not isinstance(raw, dict):
        raise McpConfigError(f"{where}: must be an object with 'command' or 'url'")
    kind = raw.get("type", raw.get("transport"))
    if kind is None:
        kind = "stdio" if "command" in raw else ("http" if "url" in raw else None)
    if kind == "streamable-http":
        kind = "http"
    if kind not in ("stdio", "http", "sse"):
        raise McpConfigError(f"{where}: type must be stdio, http or sse (got {kind!r})")
    missing: list[str] = []
    timeout = raw.get("timeout")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int) or timeout <= 0):
        raise McpConfigError(f"{where}: 'timeout' must be a positive number of milliseconds")
    # as Claude Code: below 1000 ms it is ignored (MCP_TOOL_TIMEOUT or the default applies)
    tool_timeout = timeout / 1000 if timeout is not None and timeout >= 1000 else None
    if kind == "stdio":
        command = raw.get("command")
        args = raw.get("args", [])
        envs = raw.get("env", {})
        if not isinstance(command, str) or not command.strip():
            raise McpConfigError(f"{where}: 'command' must be a non-empty string")
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise McpConfigError(f"{where}: 'args' must be a list of strings")
        if not isinstance(envs, dict) or not all(isinstance(v, str) for v in envs.values()):
            raise McpConfigError(f"{where}: 'env' must be an object of strings")
        return ServerConfig(
            name,
            "stdio",
            scope,
            source,
            command=expand(command, env, missing),
            args=tuple(expand(a, env, missing) for a in args),
            env={k: expand(v, env, missing) for k, v in envs.items()},
            missing=tuple(dict.fromkeys(missing)),
            tool_timeout_s=tool_timeout,
            raw=raw,
        )
    url = raw.get("url")
    headers = raw.get("headers", {})
    if not isinstance(url, str) or not url.strip():
        raise McpConfigError(f"{where}: 'url' must be a non-empty string")
    if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
        raise McpConfigError(f"{where}: 'headers' must be an object of strings")
    return ServerConfig(
        name,
        "http" if kind == "http" else "sse",
        scope,
        source,
        url=expand(url, env, missing),
        headers={k: expand(v, env, missing) for k, v in headers.items()},
        missing=tuple(dict.fromkeys(missing)),
        tool_timeout_s=tool_timeout,
        raw=raw,
    )


def servers_in(
    data: Any, scope: McpScope, source: str, env: Mapping[str, str], errors: list[str]
) -> list[ServerConfig]:
    """The servers of one ``{"mcpServers": {...}}`` object; a bad entry is an error line, the rest load."""
    if not isinstance(data, dict):
        errors.append(f"{source}: must be a JSON object with an 'mcpServers' object")
        return []
    servers = data.get("mcpServers", {})
    if not isinstance(servers, dict):
        errors.append(f"{source}: 'mcpServers' must be an object")
        return []
    out = []
    for name, raw in servers.items():
        try:
            out.append(parse_server(str(name), raw, scope, source, env))
        except McpConfigError as e:
            errors.append(str(e))
    return out


def read_json(path: Path, errors: list[str]) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as e:
        errors.append(f"{path}: cannot read: {e}")
    except json.JSONDecodeError as e:
        errors.append(f"{path}: invalid JSON at line {e.lineno} column {e.colno}: {e.msg}")
    return None


def plugin_servers(
    roots: Iterable[Path], env: Mapping[str, str], errors: list[str], *, project: Path, trusted: bool
) -> list[ServerConfig]:
    """The MCP servers plugins bring, as Claude Code reads them: ``<plugin>/.mcp.json`` (an
    ``{"mcpServers": {...}}`` object, or the servers at its top level) and ``mcpServers`` in
    ``.claude-plugin/plugin.json``; ``${CLAUDE_PLUGIN_ROOT}`` is the plugin's folder. Each is named
    ``plugin_<plugin>_<server>`` (tools ``mcp__plugin_<plugin>_<server>__<tool>``). A bad file or
    entry is one warning; a plugin inside an untrusted project starts nothing, as its hooks."""
    from agentkeel.plugins.loader import load_plugin
    from agentkeel.plugins.loader import read_json as read_plugin_json

    out: list[ServerConfig] = []
    for root in roots:
        plugin, error = load_plugin(Path(root))
        if plugin is None:
            continue  # the plugin loader reports it
        sources: list[tuple[str, Any]] = []
        if plugin.mcp_file.is_file():
            data, error = read_plugin_json(plugin.mcp_file)
            if error:
                errors.append(f"{error} (the plugin's MCP servers are not started)")
            elif isinstance(data, dict):
                sources.append((str(plugin.mcp_file), data if "mcpServers" in data else {"mcpServers": data}))
            else:
                errors.append(f"{plugin.mcp_file}: must be a JSON object of MCP servers; not started")
        elif os.path.lexists(plugin.mcp_file):  # a folder, a FIFO, a dangling or looping link: never opened
            errors.append(f"{plugin.mcp_file}: not a readable file (the plugin's MCP servers are not started)")
        inline = plugin.manifest.get("mcpServers")
        if isinstance(inline, dict):
            sources.append((str(plugin.root / ".claude-plugin" / "plugin.json"), {"mcpServers": inline}))
        if not sources:
            continue
        if not trusted and plugin.root.is_relative_to(project.resolve()):
            errors.append(
                f"{plugin.root}: MCP servers of a plugin inside this untrusted project are inert (`keel trust`)"
            )
            continue
        plugin_env = {**env, "CLAUDE_PLUGIN_ROOT": str(plugin.root), "KEEL_PLUGIN_ROOT": str(plugin.root)}
        prefix = "plugin_" + re.sub(r"[^A-Za-z0-9_-]", "_", plugin.name) + "_"
        for source, data in sources:
            named = data["mcpServers"]
            if isinstance(named, dict):
                data = {"mcpServers": {prefix + re.sub(r"[^A-Za-z0-9_-]", "_", str(k)): v for k, v in named.items()}}
            out += servers_in(data, "plugin", source, plugin_env, errors)
    return out


def cli_configs(values: Iterable[str], env: Mapping[str, str], errors: list[str], cwd: Path) -> list[ServerConfig]:
    """``--mcp-config FILE|JSON`` (repeatable): a path to a file, or the JSON itself."""
    out: list[ServerConfig] = []
    for value in values:
        text = value.strip()
        if text.startswith("{"):
            try:
                data = json.loads(text)
            except json.JSONDecodeError as e:
                errors.append(f"--mcp-config: invalid JSON at column {e.colno}: {e.msg}")
                continue
            out += servers_in(data, "cli", "--mcp-config", env, errors)
            continue
        path = Path(text).expanduser()
        path = path if path.is_absolute() else cwd / path
        if not path.is_file():
            errors.append(f"--mcp-config: no such file: {path} (give a file or a JSON object)")
            continue
        data = read_json(path, errors)
        if data is not None:
            out += servers_in(data, "cli", str(path), env, errors)
    return out


class Approval(msgspec.Struct, frozen=True):
    """Claude Code's per-server approval of a project's ``.mcp.json`` servers."""

    enable_all: bool = False
    enabled: frozenset[str] = frozenset()
    disabled: frozenset[str] = frozenset()

    def status(self, name: str) -> Literal["approved", "rejected", "pending"]:
        if name in self.disabled:
            return "rejected"
        return "approved" if self.enable_all or name in self.enabled else "pending"

    def allows(self, name: str) -> bool:
        """Whether a server starts in a session nobody is asked in: a rejected one never; an
        approved or pending one does (interactive mode asks about pending ones before the
        session starts: :mod:`agentkeel.mcp.approval`), as in Claude Code."""
        return self.status(name) != "rejected"

    @classmethod
    def from_layers(cls, layers: Iterable[McpSection | Mapping[str, Any]]) -> Approval:
        """From each layer's ``mcp`` section (a raw settings object is parsed first)."""
        enable_all, enabled, disabled = False, set[str](), set[str]()
        for item in layers:
            section = item if isinstance(item, McpSection) else mcp_section(item)
            if section.enable_all is not None:
                enable_all = section.enable_all
            enabled.update(section.enabled)
            disabled.update(section.disabled)
        return cls(enable_all, frozenset(enabled), frozenset(disabled))


class Discovered(msgspec.Struct):
    servers: dict[str, ServerConfig]
    errors: list[str]
    skipped: list[str]  # one line each: a project server not loaded, and why


def claude_json_servers(
    home: Path, cwd: Path, env: Mapping[str, str], errors: list[str]
) -> tuple[list[ServerConfig], list[ServerConfig]]:
    """``~/.claude.json`` (where ``claude mcp add`` writes): user servers, and this folder's local ones."""
    path = home / ".claude.json"
    data = read_json(path, errors) if path.is_file() else None
    if not isinstance(data, dict):
        return [], []
    user = servers_in({"mcpServers": data.get("mcpServers", {})}, "user", str(path), env, errors)
    projects = data.get("projects")
    entry = projects.get(str(cwd)) if isinstance(projects, dict) else None
    local = servers_in(entry, "local", str(path), env, errors) if isinstance(entry, dict) else []
    return user, local


def _section(layer: SettingsLayer | tuple[str, str, Mapping[str, Any]]) -> tuple[str, str, McpSection]:
    if isinstance(layer, tuple):
        path, scope, data = layer
        return path, scope, mcp_section(data)
    return str(layer.path), layer.scope, layer.mcp  # parsed once, when the layer was read


def discover(
    *,
    cwd: Path,
    home: Path,
    layers: Iterable[SettingsLayer | tuple[str, str, Mapping[str, Any]]],  # or (path, scope, data)
    env: Mapping[str, str],
    trusted: bool,
    cli: Iterable[str] = (),
    strict: bool = False,
    project: bool = True,
    plugins: Iterable[Path] = (),
) -> Discovered:
    """Every server this session should start, by name (a higher scope replaces a lower one)."""
    errors: list[str] = []
    skipped: list[str] = []
    found: list[ServerConfig] = []
    layer_list = [_section(layer) for layer in layers]
    if not strict:
        user_cc, local_cc = claude_json_servers(home, cwd, env, errors)
        found += user_cc
        for path, scope, section in layer_list:
            if scope == "user" and section.declared:
                found += servers_in({"mcpServers": section.servers}, "user", path, env, errors)
        mcp_json = cwd / ".mcp.json"
        if mcp_json.is_file():
            if not project:
                skipped.append(f"{mcp_json}: no MCP server of this file starts this session")
            elif not trusted:
                skipped.append(f"{mcp_json}: MCP servers not started until you trust this folder (`keel trust`)")
            else:
                approval = Approval.from_layers(section for _, _, section in layer_list)
                data = read_json(mcp_json, errors)
                for server in servers_in(data, "project", str(mcp_json), env, errors) if data is not None else []:
                    if approval.allows(server.name):
                        found.append(server)
                    else:
                        skipped.append(
                            f"MCP server '{server.name}' from .mcp.json is disabled (disabledMcpjsonServers)"
                        )
        for path, scope, section in layer_list:
            if scope in ("project", "local") and section.declared:
                kind: McpScope = "project" if scope == "project" else "local"
                found += servers_in({"mcpServers": section.servers}, kind, path, env, errors)
        found += local_cc
        found += plugin_servers(plugins, env, errors, project=cwd, trusted=trusted)
    found += cli_configs(cli, env, errors, cwd)
    servers: dict[str, ServerConfig] = {}
    for server in found:
        servers[server.name] = server
    return Discovered(servers, errors, skipped)


def env_seconds(env: Mapping[str, str], name: str, default: float) -> float:
    """A Claude Code millisecond variable (``MCP_TIMEOUT=10000``) in seconds; bad values: the default."""
    try:
        value = float(env[name]) / 1000
    except (KeyError, ValueError):
        return default
    return value if value > 0 else default


def env_int(env: Mapping[str, str], name: str, default: int) -> int:
    try:
        value = int(env[name])
    except (KeyError, ValueError):
        return default
    return value if value > 0 else default
