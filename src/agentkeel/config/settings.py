"""Settings: layered JSON files, validated (SPEC section 12).

Layers, lowest to highest precedence (lists merge, objects merge, scalars: highest wins):
``~/.claude/settings.json``, ``$KEEL_HOME/settings.json``, ``.claude/settings.json``,
``.keel/settings.json``, ``.claude/settings.local.json``, ``.keel/settings.local.json``,
``--settings`` files, then managed settings (``/etc/keel/managed-settings.json`` or
``$KEEL_MANAGED_SETTINGS``). This module reads files; the library layers below it do not.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

from agentkeel.config.hooks import HookConfig, parse_hooks
from agentkeel.config.sandbox import SandboxConfig, parse_config
from agentkeel.config.sections import McpSection, PluginSection, mcp_section, plugin_section

PermissionMode = Literal["default", "acceptEdits", "plan", "bypassPermissions", "dontAsk"]
Scope = Literal["user", "project", "local", "cli", "managed"]

# keys Claude Code knows that keel accepts without a warning even where it ignores them
KNOWN_COMPAT_KEYS = frozenset(
    {
        "$schema",
        "apiKeyHelper",
        "cleanupPeriodDays",
        "includeCoAuthoredBy",
        "statusLine",
        "outputStyle",
        "enableAllProjectMcpServers",
        "enabledMcpjsonServers",
        "disabledMcpjsonServers",
        "mcpServers",
        "forceLoginMethod",
        "spinnerTipsEnabled",
        "alwaysThinkingEnabled",
        "awsAuthRefresh",
        "awsCredentialExport",
        "companyAnnouncements",
        "feedbackSurveyState",
        "theme",
        "verbose",
        "autoUpdates",
        "preferredNotifChannel",
        "enabledPlugins",
        "extraKnownMarketplaces",
        "sandbox",
        "subagentStatusLine",
    }
)


# Validated with msgspec Structs: on the path of every run, and ~10x cheaper to import and define
# than pydantic models. Unknown keys are allowed at the top level and in ``permissions`` (Claude
# Code's own keys; warned about by :func:`unknown_keys`), refused inside ``memory``.


class ChannelRules(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    allow: list[str] = msgspec.field(default_factory=list)
    ask: list[str] = msgspec.field(default_factory=list)
    deny: list[str] = msgspec.field(default_factory=list)


class PermissionSettings(msgspec.Struct, kw_only=True):
    allow: list[str] = msgspec.field(default_factory=list)
    ask: list[str] = msgspec.field(default_factory=list)
    deny: list[str] = msgspec.field(default_factory=list)
    defaultMode: PermissionMode | None = None
    additionalDirectories: list[str] = msgspec.field(default_factory=list)
    disableBypassPermissionsMode: Literal["disable"] | None = None
    # keel extensions: default verdicts per tool group, and rules per channel
    groups: dict[str, Literal["allow", "ask", "deny"]] = msgspec.field(default_factory=dict)
    channels: dict[str, ChannelRules] = msgspec.field(default_factory=dict)


class MemorySettings(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The ``memory`` key (see agentkeel.memory.plugin)."""

    enabled: bool = True
    store: str | None = None
    embedder: str = "auto"
    project: str | None = None
    excludeTools: list[str] = msgspec.field(default_factory=list)
    maskPatterns: list[str] = msgspec.field(default_factory=list)
    inject: bool = True
    tools: bool = True
    lessons: bool = True
    summary: Literal["extractive", "model"] = "extractive"
    summaryMaxTokens: Annotated[int, msgspec.Meta(ge=50, le=4000)] = 400
    crossProject: bool = False  # MemorySearch/MemoryGet may read other projects' memories


class ProviderSettings(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The ``provider`` key: how keel talks to the model. ``wire`` is keel's own HTTP client (the
    default, no extra needed); ``sdk`` the official anthropic / openai SDKs (their extras)."""

    transport: Literal["wire", "sdk"] | None = None


class ContextSettings(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The ``context`` key: token accounting and compaction (see agentkeel.context)."""

    window: Annotated[int, msgspec.Meta(ge=1000)] | None = None  # overrides the model's context window
    autoCompact: bool = True
    autoCompactThreshold: Annotated[float, msgspec.Meta(gt=0.1, le=1.0)] = 0.9
    # compact sooner, at this share, once 12 requests have gone by since the last compaction (or
    # the start): every request re-reads the whole context, so a smaller one costs less on every
    # later request; the 12 keep compactions rare where steps are big for the window. 0 (or not
    # below autoCompactThreshold): off; also off while the system prompt and tools take half of it
    earlyCompactThreshold: Annotated[float, msgspec.Meta(ge=0.0, le=1.0)] = 0.5
    # a provider's "prompt is too long" is compacted and re-sent; off: session recovery handles it
    compactOnOverflow: bool = True
    # summarize: a model-written summary (clear-tool-results is its fallback when the summary fails)
    strategy: Literal["hybrid", "summarize", "truncate-oldest", "clear-tool-results"] = "summarize"
    keepRecent: Annotated[float, msgspec.Meta(gt=0.0, lt=0.9)] = 0.1  # share of the window kept verbatim
    summaryTimeoutS: Annotated[float, msgspec.Meta(gt=0)] = 120.0
    promptBudget: Annotated[float, msgspec.Meta(gt=0.0, le=1.0)] = 0.25  # share of the window for the system prompt


class ReliabilitySettings(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The ``reliability`` key: knobs of the reliability built-ins (agentkeel.reliability)."""

    autoResume: bool = True  # session recovery re-sends the repaired request itself
    todoCountdownSeconds: Annotated[float, msgspec.Meta(ge=0, le=600)] = 2.0
    todoMaxContinuations: Annotated[int, msgspec.Meta(ge=0, le=100)] = 3
    contextWarnPercent: list[Annotated[int, msgspec.Meta(ge=1, le=100)]] = msgspec.field(
        default_factory=lambda: [70, 85, 95]
    )
    # dynamic context pruning rewrites old messages, which costs the prompt cache its prefix: it
    # starts when the reported context is this full (0: from the first request)
    pruneAtPercent: Annotated[int, msgspec.Meta(ge=0, le=100)] = 50
    pruneProtectTurns: Annotated[int, msgspec.Meta(ge=0)] = 3
    pruneProtectTools: list[str] = msgspec.field(default_factory=list)
    truncateMaxTokens: Annotated[int, msgspec.Meta(ge=100)] = 50_000


class Settings(msgspec.Struct, kw_only=True):
    model: str | None = None
    permissions: PermissionSettings = msgspec.field(default_factory=PermissionSettings)
    env: dict[str, str] = msgspec.field(default_factory=dict)
    # Claude Code's shape, checked entry by entry by agentkeel.config.hooks (SettingsLayer.hooks):
    # a malformed hook is a warning and is skipped, never a settings file keel refuses to start with
    hooks: dict[str, Any] = msgspec.field(default_factory=dict)
    disableAllHooks: bool | None = None
    allowManagedHooksOnly: bool | None = None
    disabled_hooks: list[str] = msgspec.field(default_factory=list)
    maxTokens: Annotated[int, msgspec.Meta(ge=1)] | None = None
    memory: MemorySettings | None = None
    provider: ProviderSettings | None = None
    context: ContextSettings | None = None
    outputStyle: str | None = None
    fallbackModel: str | None = None  # the model-fallback built-in switches to it after repeated overloads
    reliability: ReliabilitySettings | None = None
    # Claude Code's shape, read (and warned about key by key) by agentkeel.config.sandbox: the
    # merged value, parsed once as LoadedSettings.sandbox
    sandbox: dict[str, Any] | None = None
    # the skill listing's share of the context window and the cut of one description (skills/listing.py)
    skillListingBudgetFraction: Annotated[float, msgspec.Meta(gt=0, le=1)] | None = None
    skillListingMaxDescChars: Annotated[int, msgspec.Meta(ge=1)] | None = None


class SettingsError(ValueError):
    """A settings file that cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class SettingsLayer:
    """One settings file as read. Each section is parsed once, here, when the layer is made:
    ``settings`` (the strict keys, validated: a bad value is a :class:`SettingsError` naming the
    file and key), ``hooks`` (lenient: the handlers that parsed, and one warning per skipped
    entry), ``mcp`` and ``plugins``. Readers ask these; ``data`` is the file as written."""

    path: Path
    scope: Scope
    data: dict[str, Any]
    settings: Settings = field(init=False, repr=False, compare=False)
    hooks: HookConfig = field(init=False, repr=False, compare=False)
    mcp: McpSection = field(init=False, repr=False, compare=False)
    plugins: PluginSection = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "settings", validate(self.data, self.path))
        object.__setattr__(self, "hooks", parse_hooks(self.data.get("hooks"), str(self.path), self.scope))
        object.__setattr__(self, "mcp", mcp_section(self.data))
        object.__setattr__(self, "plugins", plugin_section(self.data, self.path))


class LoadedSettings(msgspec.Struct):
    settings: Settings
    layers: list[SettingsLayer]
    warnings: list[str] = msgspec.field(default_factory=list)
    # the merged ``sandbox`` key, parsed once (lenient: its warnings are in ``sandbox.warnings``)
    sandbox: SandboxConfig = msgspec.field(default_factory=SandboxConfig)


def layer_paths(cwd: Path, home: Path, keel_home: Path, claude_dir: Path | None = None) -> list[tuple[Path, Scope]]:
    """``claude_dir``: Claude Code's user folder when ``CLAUDE_CONFIG_DIR`` moves it (else ~/.claude)."""
    return [
        ((claude_dir or home / ".claude") / "settings.json", "user"),
        (keel_home / "settings.json", "user"),
        (cwd / ".claude" / "settings.json", "project"),
        (cwd / ".keel" / "settings.json", "project"),
        (cwd / ".claude" / "settings.local.json", "local"),
        (cwd / ".keel" / "settings.local.json", "local"),
    ]


def read_layer(path: Path, scope: Scope) -> SettingsLayer | None:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as e:
        raise SettingsError(f"cannot read settings file {path}: {e}") from None
    if not text.strip():
        return SettingsLayer(path, scope, {})
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise SettingsError(f"{path}: invalid JSON at line {e.lineno} column {e.colno}: {e.msg}") from None
    except RecursionError:
        raise SettingsError(f"{path}: JSON nested too deeply to read") from None
    except ValueError as e:  # e.g. an integer with more digits than Python converts
        raise SettingsError(f"{path}: unreadable JSON value: {e}") from None
    if not isinstance(data, dict):
        raise SettingsError(f"{path}: the top level must be a JSON object")
    return SettingsLayer(path, scope, data)  # validated and its sections parsed, once


_AT = re.compile(r"^(?P<msg>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.S)


def validate(data: dict[str, Any], path: Path | str) -> Settings:
    try:
        return msgspec.convert(data, Settings)
    except RecursionError:
        raise SettingsError(f"{path}: a value is nested too deeply") from None
    except msgspec.ValidationError as e:
        m = _AT.match(str(e))
        msg, where = (m.group("msg"), m.group("path") or "") if m else (str(e), "")
        key = where.replace("[...]", "").lstrip(".") or "(top level)"
        key = re.sub(r"\[(\d+)\]", r".\1", key)
        raise SettingsError(f"{path}: key '{key}': {msg}") from None


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        elif isinstance(v, list) and isinstance(out.get(k), list):
            out[k] = out[k] + [x for x in v if x not in out[k]]
        else:
            out[k] = v
    return out


def unknown_keys(layer: SettingsLayer) -> list[str]:
    known = set(Settings.__struct_fields__) | KNOWN_COMPAT_KEYS
    return [f"{layer.path}: unknown key '{k}' ignored" for k in layer.data if k not in known]


# what an untrusted project's settings may still say: only keys that narrow what keel does
_UNTRUSTED_KEEP = frozenset(
    {"$schema", "model", "maxTokens", "theme", "includeCoAuthoredBy", "cleanupPeriodDays", "outputStyle", "verbose"}
)
_UNTRUSTED_MODES = frozenset({"default", "plan", "dontAsk"})


def narrow_untrusted(layer: SettingsLayer) -> tuple[SettingsLayer, list[str]]:
    """Drop everything from a project layer that widens permissions or runs code (allow rules,
    bypass modes, env, hooks, helpers, URLs, MCP servers); keep deny and ask rules and what only
    takes a power away (``disableBypassPermissionsMode``)."""
    kept: dict[str, Any] = {}
    dropped: list[str] = []
    for key, value in layer.data.items():
        if key == "permissions" and isinstance(value, dict):
            perms: dict[str, Any] = {}
            for pk, pv in value.items():
                restricts = pk == "disableBypassPermissionsMode" and pv == "disable"  # takes a mode away
                if pk in ("deny", "ask") or restricts or (pk == "defaultMode" and pv in _UNTRUSTED_MODES):
                    perms[pk] = pv
                else:
                    dropped.append(f"permissions.{pk}")
            kept[key] = perms
        elif key in _UNTRUSTED_KEEP:
            kept[key] = value
        else:
            dropped.append(key)
    return SettingsLayer(layer.path, layer.scope, kept), dropped


def load_settings(
    cwd: Path,
    *,
    home: Path,
    keel_home: Path,
    extra_files: list[Path] | None = None,
    managed: Path | None = None,
    include: frozenset[Scope] = frozenset({"user", "project", "local", "cli", "managed"}),
    trusted_project: bool = True,
    claude_dir: Path | None = None,
) -> LoadedSettings:
    """Read and merge every layer. With ``trusted_project=False`` the project and local layers
    keep only what narrows permissions (see :func:`narrow_untrusted`)."""
    candidates = [(p, s) for p, s in layer_paths(cwd, home, keel_home, claude_dir) if s in include]
    for f in extra_files or []:
        if not f.is_file():
            raise SettingsError(f"--settings file not found: {f}")
        candidates.append((f, "cli"))
    if managed is not None and "managed" in include:
        candidates.append((managed, "managed"))
    layers = [layer for p, s in candidates if (layer := read_layer(p, s)) is not None]
    merged: dict[str, Any] = {}
    warnings: list[str] = []
    narrowed: list[SettingsLayer] = []
    for layer in layers:
        warnings += unknown_keys(layer)
        if not trusted_project and layer.scope in ("project", "local"):
            layer, dropped = narrow_untrusted(layer)
            if dropped:
                warnings.append(
                    f"{layer.path}: ignored until you trust this folder (`keel trust`): {', '.join(dropped)}"
                )
        narrowed.append(layer)
        merged = merge(merged, layer.data)
    settings = validate(merged, "merged settings")
    return LoadedSettings(settings, narrowed, warnings, parse_config(settings.sandbox))
