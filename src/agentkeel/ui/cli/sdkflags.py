"""The flags of Claude Code's SDK mode, mapped onto RuntimeOptions (shared by ``keel -p`` and
``keel --input-format stream-json``). A value keel cannot use raises KeelError: one line."""

from __future__ import annotations

import argparse
import atexit
import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from agentkeel import KeelError, Runtime, RuntimeOptions

if TYPE_CHECKING:
    from agentkeel.ui.sdk.structured import StructuredOutput

# protocol/ and sdk/structured load only when --mcp-config or --json-schema asks for them

_ALL_SOURCES = {"user", "project", "local"}


def apply_sdk_flags(args: argparse.Namespace, opts: RuntimeOptions) -> None:
    env = dict(opts.env)
    if args.max_thinking_tokens is not None:
        env["MAX_THINKING_TOKENS"] = str(max(0, args.max_thinking_tokens))
    if args.thinking == "disabled":
        env["MAX_THINKING_TOKENS"] = "0"
    elif args.thinking == "adaptive" and args.max_thinking_tokens is None:
        raise KeelError("--thinking adaptive is not supported by keel yet: give --max-thinking-tokens N")
    opts.env = env
    if args.system_prompt is not None:
        opts.system_prompt = args.system_prompt
    opts.session_id = args.session_id
    if args.fork_session and not (args.resume or args.continue_session):
        raise KeelError("--fork-session needs -r SESSION_ID or -c")
    opts.fork_session = args.fork_session
    opts.resume_session_at, opts.resume_drops_turn = args.resume_session_at, args.resume_drops_turn
    if args.permission_prompt_tool not in (None, "stdio"):
        raise KeelError(
            f"--permission-prompt-tool {args.permission_prompt_tool}: "
            "keel supports only 'stdio' (the SDK's can_use_tool)"
        )
    if args.setting_sources is not None:
        wanted = {s.strip() for s in args.setting_sources.split(",") if s.strip()}
        unknown = sorted(wanted - _ALL_SOURCES)
        if unknown:
            raise KeelError(
                f"--setting-sources: unknown source {', '.join(unknown)} (use a comma-separated list of user, "
                "project, local)"
            )
        opts.setting_sources = frozenset(wanted)
    opts.settings_files = [_settings_file(v) for v in args.settings]
    plugin_dirs = []
    for d in args.plugin_dir:
        path = Path(d).expanduser()
        if not path.is_dir():
            raise KeelError(f"--plugin-dir {d}: not a directory")
        plugin_dirs.append(path.resolve())
    opts.plugin_dirs = tuple(plugin_dirs)
    args.sdk_mcp_servers = []
    if args.mcp_config:
        from agentkeel.protocol.control import ControlError, load_json_arg, sdk_servers
    for value in args.mcp_config:
        try:
            sdk, rest = sdk_servers(load_json_arg(value, "--mcp-config"))
        except ControlError as e:
            raise KeelError(str(e)) from None
        args.sdk_mcp_servers += sdk
        if rest:
            opts.mcp_config.append(json.dumps({"mcpServers": rest}))
    if args.strict_mcp_config and not args.mcp_config:
        raise KeelError("--strict-mcp-config needs --mcp-config")
    opts.strict_mcp_config = args.strict_mcp_config


def _settings_file(value: str) -> Path:
    """``--settings`` takes a file or, as the SDK passes it, inline JSON (kept in a temp file)."""
    if not value.lstrip().startswith("{"):
        return Path(value)
    try:
        json.loads(value)
    except ValueError as e:
        raise KeelError(f"--settings: not valid JSON ({e})") from None
    fd, name = tempfile.mkstemp(prefix="keel-settings-", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(value)
    atexit.register(lambda: Path(name).unlink(missing_ok=True))
    return Path(name)


def structured_output(args: argparse.Namespace) -> StructuredOutput | None:
    if args.json_schema is None:
        return None
    from agentkeel.protocol.control import ControlError, load_json_arg
    from agentkeel.ui.sdk.structured import SchemaError, StructuredOutput

    try:
        return StructuredOutput(load_json_arg(args.json_schema, "--json-schema"))
    except (ControlError, SchemaError) as e:
        raise KeelError(f"--json-schema: {e}" if isinstance(e, SchemaError) else str(e)) from None


def restrict_tools(rt: Runtime, spec: str | None) -> None:
    """``--tools``: "" offers no tool, "default" all of them, "A,B" only those."""
    if spec is None or spec.strip() == "default":
        return
    wanted = {t.strip() for t in spec.split(",") if t.strip()}
    known = {t.name for t in rt.agent.tools.list()}
    unknown = sorted(wanted - known)
    if unknown:
        raise KeelError(f"--tools: no tool named {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    for name in known - wanted:
        rt.agent.tools.unregister(name)
