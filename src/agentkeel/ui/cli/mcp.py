"""``keel mcp list|get|add|add-json|remove|reset-project-choices``: MCP servers, with Claude
Code's ``claude mcp`` flags; and the interactive approval of a project's new ``.mcp.json`` servers
(:func:`approve_new_servers`, called by the interactive UIs before a session starts).

Scopes: ``local`` (default; ``.keel/settings.local.json``, private to you in this project),
``project`` (``.mcp.json``, shared through the repository), ``user`` (``$KEEL_HOME/settings.json``,
every project).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from agentkeel.ui.cli._common import EXIT_OK, EXIT_RUN_ERROR, EXIT_USAGE

SCOPES = ("local", "project", "user")
_SCOPE_TEXT = {
    "local": "Local config (private to you in this project)",
    "project": "Project config (shared via .mcp.json)",
    "user": "User config (available in all your projects)",
    "cli": "--mcp-config",
}


class _Usage(Exception):
    pass


def add_parser(sub: Any) -> None:
    mcp = sub.add_parser("mcp", help="configure and check MCP servers (as `claude mcp`)")
    msub = mcp.add_subparsers(dest="action", required=True)
    ls = msub.add_parser("list", help="every configured MCP server, with a health check")
    ls.add_argument("--cwd", default=None, help=argparse.SUPPRESS)
    get = msub.add_parser("get", help="details of one MCP server")
    get.add_argument("name")
    get.add_argument("--cwd", default=None, help=argparse.SUPPRESS)
    add = msub.add_parser(
        "add", help="add a server: keel mcp add [-s scope] [-t transport] NAME COMMAND_OR_URL [ARGS...]"
    )
    _scope(add, "local")
    add.add_argument("-t", "--transport", choices=["stdio", "http", "sse"], default="stdio")
    add.add_argument("-e", "--env", action="append", default=[], metavar="KEY=VALUE", help="environment (stdio)")
    add.add_argument("-H", "--header", action="append", default=[], metavar="'Name: value'", help="HTTP header")
    add.add_argument("name")
    add.add_argument("command_or_url")
    add.add_argument("args", nargs=argparse.REMAINDER, help="the server's arguments (after -- if they look like flags)")
    add.add_argument("--cwd", default=None, help=argparse.SUPPRESS)
    add_json = msub.add_parser("add-json", help="add a server from its JSON definition")
    _scope(add_json, "local")
    add_json.add_argument("name")
    add_json.add_argument("json")
    add_json.add_argument("--cwd", default=None, help=argparse.SUPPRESS)
    rm = msub.add_parser("remove", help="remove a server (from the one scope that has it, or -s)")
    _scope(rm, None)
    rm.add_argument("name")
    rm.add_argument("--cwd", default=None, help=argparse.SUPPRESS)
    reset = msub.add_parser(
        "reset-project-choices", help="forget which of this project's .mcp.json servers you approved or rejected"
    )
    reset.add_argument("--cwd", default=None, help=argparse.SUPPRESS)


def _scope(p: argparse.ArgumentParser, default: str | None) -> None:
    p.add_argument("-s", "--scope", choices=SCOPES, default=default, help="local (default), project or user")


def run(args: argparse.Namespace) -> int:
    cwd = (Path(args.cwd) if args.cwd else Path.cwd()).resolve()
    try:
        if args.action == "list":
            return _list(cwd)
        if args.action == "get":
            return _get(cwd, args.name)
        if args.action == "add":
            entry = _entry(args)  # first: options after the URL (Claude Code's order) may set the scope
            return _add(cwd, args.scope, args.name, entry)
        if args.action == "add-json":
            return _add(cwd, args.scope, args.name, _json_entry(args.json))
        if args.action == "reset-project-choices":
            return _reset(cwd)
        return _remove(cwd, args.scope, args.name)
    except _Usage as e:
        print(f"keel mcp: {e}", file=sys.stderr)
        return EXIT_USAGE


# --- files -------------------------------------------------------------------------------


def _keel_home() -> Path:
    from agentkeel.session.store import keel_home

    return keel_home()


def scope_file(cwd: Path, scope: str) -> Path:
    if scope == "project":
        return cwd / ".mcp.json"
    if scope == "user":
        return _keel_home() / "settings.json"
    return cwd / ".keel" / "settings.local.json"


def _read(path: Path) -> dict[str, Any]:
    from agentkeel.mcp.approval import read_object

    try:
        return read_object(path)
    except OSError as e:
        raise _Usage(str(e)) from None


def _write(cwd: Path, path: Path, data: dict[str, Any]) -> None:
    """Write atomically; a folder trusted before keeps its trust (the user made this change)."""
    from agentkeel.config.trust import TrustStore

    store = TrustStore(_keel_home())
    was_trusted = store.state(cwd).trusted
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)
    if path.name == "settings.local.json" and path.is_relative_to(cwd):
        from agentkeel.config.localfiles import ignore_local_files

        ignore_local_files(path)
    if was_trusted and path.is_relative_to(cwd):
        store.trust(cwd)
    elif path.is_relative_to(cwd):
        print(f"keel: {cwd} is not trusted: its servers start after `keel trust`", file=sys.stderr)


# --- add / remove ------------------------------------------------------------------------


def _entry(args: argparse.Namespace) -> dict[str, Any]:
    rest = list(args.args)
    if rest and rest[0] == "--":
        rest = rest[1:]
    if args.transport == "stdio":
        env: dict[str, str] = {}
        for item in args.env:
            key, sep, value = item.partition("=")
            if not sep or not key:
                raise _Usage(f"-e {item!r}: use KEY=VALUE")
            env[key] = value
        if args.header:
            raise _Usage("-H is for http and sse servers (add -t http or -t sse)")
        return {"type": "stdio", "command": args.command_or_url, "args": rest, "env": env}
    rest = _trailing_options(args, rest)
    if rest:
        raise _Usage(f"an {args.transport} server takes a URL and no arguments (got {' '.join(rest)})")
    if args.env:
        raise _Usage("-e is for stdio servers; an http or sse server takes headers (-H 'Name: value')")
    headers: dict[str, str] = {}
    for item in args.header:
        key, sep, value = item.partition(":")
        if not sep or not key.strip():
            raise _Usage(f"-H {item!r}: use 'Name: value'")
        headers[key.strip()] = value.strip()
    entry: dict[str, Any] = {"type": args.transport, "url": args.command_or_url}
    if headers:
        entry["headers"] = headers
    return entry


_TRAILING = {"-H": "header", "--header": "header", "-e": "env", "--env": "env", "-s": "scope", "--scope": "scope"}


def _trailing_options(args: argparse.Namespace, rest: list[str]) -> list[str]:
    """Options after an http/sse server's URL, as Claude Code's documented order has them
    (``mcp add --transport http NAME URL --header 'Name: value'``): taken into ``args``; what is left is returned."""
    left: list[str] = []
    i = 0
    while i < len(rest):
        item = rest[i]
        flag, eq, inline = item.partition("=") if item.startswith("--") else (item, "", "")
        if flag not in _TRAILING and item[:2] in _TRAILING and len(item) > 2:
            flag, eq, inline = item[:2], "=", item[2:]  # -H'Name: value'
        dest = _TRAILING.get(flag)
        if dest is None:
            left.append(item)
            i += 1
            continue
        if eq:
            value = inline
        elif i + 1 < len(rest):
            value = rest[i + 1]
            i += 1
        else:
            raise _Usage(f"{flag} needs a value")
        i += 1
        if dest == "scope":
            if value not in SCOPES:
                raise _Usage(f"{flag} {value!r}: use one of {', '.join(SCOPES)}")
            args.scope = value
        else:
            getattr(args, dest).append(value)
    return left


def _json_entry(text: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise _Usage(f"invalid JSON at column {e.colno}: {e.msg}") from None
    if not isinstance(data, dict):
        raise _Usage("the server definition must be a JSON object")
    return data


def _add(cwd: Path, scope: str, name: str, entry: dict[str, Any]) -> int:
    from agentkeel.mcp.config import McpConfigError, parse_server

    try:
        server = parse_server(name, entry, "cli", "keel mcp add", {})
    except McpConfigError as e:
        raise _Usage(str(e).replace("keel mcp add: ", "")) from None
    path = scope_file(cwd, scope)
    data = _read(path)
    servers = data.setdefault("mcpServers", {})
    if not isinstance(servers, dict):
        raise _Usage(f"{path}: 'mcpServers' is not an object; fix it first")
    if name in servers:
        raise _Usage(f"MCP server {name} already exists in {scope} config ({path}); remove it first")
    servers[name] = entry
    _write(cwd, path, data)
    what = f"with command: {server.describe()}" if server.transport == "stdio" else f"with URL: {server.url}"
    print(f"Added {server.transport} MCP server {name} {what} to {scope} config")
    print(f"File modified: {path}")
    return EXIT_OK


def _remove(cwd: Path, scope: str | None, name: str) -> int:
    found = [s for s in SCOPES if name in (_read(scope_file(cwd, s)).get("mcpServers") or {})]
    if scope is not None:
        if scope not in found:
            raise _Usage(f"no MCP server named {name} in {scope} config ({scope_file(cwd, scope)})")
        found = [scope]
    if not found:
        raise _Usage(f"no MCP server named {name} (see keel mcp list)")
    if len(found) > 1:
        raise _Usage(f"MCP server {name} exists in several scopes ({', '.join(found)}): add -s SCOPE")
    path = scope_file(cwd, found[0])
    data = _read(path)
    del data["mcpServers"][name]
    _write(cwd, path, data)
    print(f"Removed MCP server {name} from {found[0]} config")
    print(f"File modified: {path}")
    return EXIT_OK


def _reset(cwd: Path) -> int:
    from agentkeel.mcp.approval import reset_choices

    try:
        changed = reset_choices(cwd)
    except OSError as e:
        raise _Usage(str(e)) from None
    _keep_trust(cwd, bool(changed))
    print(
        "All project-scoped (.mcp.json) server approvals and rejections have been reset.\n"
        "You will be prompted for approval next time you start keel here."
    )
    return EXIT_OK


def _keep_trust(cwd: Path, changed: bool) -> None:
    """keel itself changed this folder's local settings: a folder trusted before stays trusted."""
    from agentkeel.config.trust import TrustStore

    store = TrustStore(_keel_home())
    if changed and store.state(cwd).status == "changed":
        store.trust(cwd)


async def approve_new_servers(cwd: Path, ask: Any, say: Any) -> bool:
    """Interactive mode, before the session starts: ask about each ``.mcp.json`` server of a
    trusted folder that no setting approves or rejects yet, and remember the answers (see
    :mod:`agentkeel.mcp.approval`). False when the answers could not be read or saved:
    the caller then starts no project server this session (fail closed)."""
    from agentkeel.app.runtime import KeelError, project_trust, read_settings
    from agentkeel.mcp.approval import ask_about_servers, pending_servers, record_choices

    home_dir = _keel_home()
    trust = project_trust(cwd, home_dir)
    if not trust.trusted or not (cwd / ".mcp.json").is_file():
        return True
    try:
        loaded = read_settings(cwd, Path.home(), home_dir, [], os.environ, trusted=True)
    except KeelError as e:
        say(f"keel: {e}")
        return False
    errors: list[str] = []
    env = {**loaded.settings.env, **os.environ}
    pending = pending_servers(cwd, [x.mcp for x in loaded.layers], env, errors)
    if not pending:
        return True
    was_trusted = trust.status == "trusted"
    choices = await ask_about_servers(pending, ask, say)
    try:
        record_choices(cwd, choices)
    except OSError as e:
        say(f"keel: your MCP server choices were not saved: {e}")
        return False
    _keep_trust(cwd, was_trusted)
    return True


# --- list / get --------------------------------------------------------------------------


def _discovered(cwd: Path) -> Any:
    from agentkeel.app.runtime import KeelError, project_trust, read_settings
    from agentkeel.mcp.config import discover

    home_dir = _keel_home()
    trust = project_trust(cwd, home_dir)
    try:
        loaded = read_settings(cwd, Path.home(), home_dir, [], os.environ, trusted=trust.trusted)
    except KeelError as e:
        raise _Usage(str(e)) from None
    env = {**loaded.settings.env, **os.environ}
    found = discover(cwd=cwd, home=Path.home(), layers=loaded.layers, env=env, trusted=trust.trusted)
    for line in [*found.errors, *found.skipped]:
        print(f"keel: {line}", file=sys.stderr)
    return found, env


def _health(servers: dict[str, Any], env: dict[str, str], cwd: Path) -> dict[str, tuple[str, str]]:
    from agentkeel.mcp.config import DEFAULT_CONNECT_TIMEOUT_S, env_seconds
    from agentkeel.mcp.pool import McpPool

    async def check() -> dict[str, tuple[str, str]]:
        pool = McpPool(
            servers,
            env=env,
            cwd=cwd,
            connect_timeout_s=env_seconds(env, "MCP_TIMEOUT", DEFAULT_CONNECT_TIMEOUT_S),
            tool_timeout_s=10,
            max_output_tokens=1,
            log_dir=_keel_home() / "logs",
        )
        try:
            await pool.start(None)
            return {n: (c.status, c.error) for n, c in pool.connections.items()}
        finally:
            await pool.aclose()

    return asyncio.run(check())


def _mark(status: tuple[str, str]) -> str:
    return "✓ Connected" if status[0] == "connected" else f"✗ Failed to connect ({status[1]})"


def _list(cwd: Path) -> int:
    found, env = _discovered(cwd)
    if not found.servers:
        print("No MCP servers configured. Use `keel mcp add` to add a server.")
        return EXIT_OK
    print("Checking MCP server health...\n")
    health = _health(found.servers, env, cwd)
    for name, server in found.servers.items():
        kind = "" if server.transport == "stdio" else f" ({server.transport})"
        print(f"{name}: {server.describe()}{kind} - {_mark(health[name])}")
    return EXIT_OK if all(h[0] == "connected" for h in health.values()) else EXIT_RUN_ERROR


def _get(cwd: Path, name: str) -> int:
    from agentkeel.policy.redact import redact

    found, env = _discovered(cwd)
    server = found.servers.get(name)
    if server is None:
        raise _Usage(f"no MCP server named {name} (see keel mcp list)")
    health = _health({name: server}, env, cwd)[name]
    print(f"{name}:")
    print(f"  Scope: {_SCOPE_TEXT.get(server.scope, server.scope)}")
    print(f"  Status: {_mark(health)}")
    print(f"  Type: {server.transport}")
    if server.transport == "stdio":
        print(f"  Command: {server.raw.get('command', server.command)}")
        print(f"  Args: {' '.join(server.raw.get('args', []))}")
        if server.raw.get("env"):
            print("  Environment:")
            for key, value in server.raw["env"].items():
                print(f"    {key}={redact(str(value))}")
    else:
        print(f"  URL: {server.raw.get('url', server.url)}")
        if server.raw.get("headers"):
            print("  Headers:")
            for key, value in server.raw["headers"].items():
                print(f"    {key}: {redact(str(value))}")
    print(f'\nTo remove this server, run: keel mcp remove "{name}" -s {server.scope}')
    return EXIT_OK if health[0] == "connected" else EXIT_RUN_ERROR
