"""What a session is asked for: :class:`RuntimeOptions`, which every front end fills and the builder
reads (``profile`` picks the session's built-ins)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from agentkeel.app.extensions import MAIN
from agentkeel.config.settings import PermissionMode
from agentkeel.core.extensions import Extension
from agentkeel.policy.permissions import AskFn, RequestHook
from agentkeel.policy.safety import AskRepeat


class RuntimeOptions(msgspec.Struct):
    cwd: Path
    model: str | None = None
    permission_mode: PermissionMode | None = None
    allowed_tools: list[str] = msgspec.field(default_factory=list)
    disallowed_tools: list[str] = msgspec.field(default_factory=list)
    max_turns: int | None = None
    max_budget_usd: float | None = None
    append_system_prompt: str | None = None
    add_dirs: list[Path] = msgspec.field(default_factory=list)
    continue_session: bool = False
    resume: str | None = None
    settings_files: list[Path] = msgspec.field(default_factory=list)
    env: Mapping[str, str] = msgspec.field(default_factory=lambda: dict(os.environ))
    home: Path = msgspec.field(default_factory=Path.home)
    ask: AskFn | None = None  # the host callback (the SDK's can_use_tool, or the TTY prompt)
    ask_repeat: AskRepeat | None = None  # "the same call again: go on?"
    permission_hooks: list[RequestHook] = msgspec.field(default_factory=list)  # the PermissionRequest extension point
    channel: str = "headless"  # interactive | headless | sdk | subagent: selects permissions.channels rules
    trust_project: bool | None = None  # None: as recorded by `keel trust`
    # added after the built-ins (before the request validators, which check what every transform made)
    extensions: list[Extension] = msgspec.field(default_factory=list)
    services: dict[type[Any], Any] = msgspec.field(default_factory=dict)  # provided per-session services (Services.put)
    start_timeout_s: float = 30.0  # each extension's start() (MCP connects, SessionStart work)
    # Claude Code-shaped hooks ({"PreToolUse": [{"matcher": "<tool>", "hooks": [...]}]}) added to the
    # settings' hooks; a python handler may hold a callable: {"type": "python", "callable": fn}
    hooks: dict[str, Any] = msgspec.field(default_factory=dict)
    fallback_model: str | None = None  # the model-fallback built-in's model (else settings.fallbackModel)
    system_prompt: str | None = None  # replaces keel's system prompt (--system-prompt); append still applies
    session_id: str | None = None  # the new session's id (--session-id); default a fresh uuid4
    plugin_dirs: tuple[Path, ...] = ()  # --plugin-dir: hooks/hooks.json, commands, agents, skills (this session)
    mcp_config: list[str] = msgspec.field(
        default_factory=list
    )  # --mcp-config values (a file or JSON), SDK servers removed
    strict_mcp_config: bool = False  # --strict-mcp-config: only the servers of mcp_config
    skip_project_mcp: bool = False  # start no server of .mcp.json (its approvals could not be saved)
    fork_session: bool = False  # with resume/continue: go on in a copy under a new id (--fork-session)
    resume_session_at: str | None = None  # with fork_session: the copy keeps events up to this uuid
    resume_drops_turn: str | None = None  # with resume_session_at: the prompt uuid of the one turn dropped
    # subagent types given in code, as the Agent SDK's ``agents``: {"name": {"description", "prompt", "tools", "model"}}
    agents: dict[str, Any] = msgspec.field(default_factory=dict)
    setting_sources: frozenset[str] | None = None  # --setting-sources: user/project/local (None: all three)
    skills: list[str] | None = None  # the Agent SDK's skill allowlist: only these skills are offered (None: all)
    start_source: str | None = None  # SessionStart's source when not startup/resume ("clear": after /clear)
    profile: str = MAIN  # which built-ins (extensions/builtins.PROFILES): main, or batch-task for `keel batch`
