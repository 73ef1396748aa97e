"""Each settings section is parsed once per layer, when the file is read, and every reader asks
that parsed section (hooks, permissions, MCP servers and their approval, plugins)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkeel.config.settings import SettingsLayer, load_settings
from agentkeel.hooks.config import load_hooks, plugin_roots
from agentkeel.mcp.config import Approval, discover
from agentkeel.plugins.loader import find_plugins
from agentkeel.policy.permissions.setup import build_engine
from kit import KeelRun

BAD_HOOK = "hooks.PreToolUse[0].hooks[1]: a command handler needs 'command'"


def _write(path: Path, data: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def _settings(project: Path) -> dict[str, Any]:
    return {
        "permissions": {"allow": ["Bash(make test)"], "deny": ["WebFetch"]},
        "hooks": {
            "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "true"}, {"type": "command"}]}],
            "NoSuchEvent": [],
        },
        "mcpServers": {"docs": {"command": "docs-server", "args": ["--port", "${DOCS_PORT:-7}"]}},
        "enabledMcpjsonServers": ["a", 3],
        "disabledMcpjsonServers": "not a list",
        "enabledPlugins": {"tidy@local": True},
        "extraKnownMarketplaces": {"local": {"source": {"source": "directory", "path": "../market"}}},
    }


def _plugin_market(project: Path) -> Path:
    market = project / "market"  # "../market" from .keel/settings.json
    _write(market / ".claude-plugin" / "marketplace.json", {"plugins": [{"name": "tidy", "source": "./tidy"}]})
    _write(market / "tidy" / ".claude-plugin" / "plugin.json", {"name": "tidy"})
    return market.resolve()


def test_a_layer_carries_its_sections_parsed_once_when_read(project: Path, tmp_path: Path) -> None:
    path = _write(project / ".keel" / "settings.json", _settings(project))
    market = _plugin_market(project)
    loaded = load_settings(project, home=tmp_path / "home", keel_home=tmp_path / "kh")
    (layer,) = loaded.layers
    assert layer.path == path and layer.scope == "project"

    # strict sections: the validated Settings of this file alone
    assert layer.settings.permissions.allow == ["Bash(make test)"]
    assert layer.settings.permissions.deny == ["WebFetch"]
    # hooks, lenient: what parsed, and one warning per skipped entry, naming the file and key
    assert [(h.event, h.matcher, h.handler.command) for h in layer.hooks.hooks] == [("PreToolUse", "Bash", "true")]
    assert len(layer.hooks.warnings) == 2
    assert layer.hooks.warnings[0].startswith(f"{path}: {BAD_HOOK}")
    assert layer.hooks.warnings[1].startswith(f"{path}: unknown hook event 'NoSuchEvent' ignored")
    # MCP: the servers as written (expanded per session), approval lists with bad entries dropped
    assert layer.mcp.declared and layer.mcp.servers == _settings(project)["mcpServers"]
    assert layer.mcp.enabled == ("a",) and layer.mcp.disabled == () and layer.mcp.enable_all is None
    # plugins: a directory marketplace is resolved against the settings file's folder
    assert layer.plugins.enabled == {"tidy@local": True}
    assert layer.plugins.marketplaces == {"local": market}


def test_readers_ask_the_parsed_sections_and_do_not_parse_again(project: Path, tmp_path: Path) -> None:
    _write(project / ".keel" / "settings.json", _settings(project))
    market = _plugin_market(project)
    loaded = load_settings(project, home=tmp_path / "home", keel_home=tmp_path / "kh")
    (layer,) = loaded.layers

    # hooks: the very HookSpec objects parsed with the layer, every time they are asked for
    for _ in range(2):
        config = load_hooks(loaded.layers)
        assert len(config.hooks) == 1 and config.hooks[0] is layer.hooks.hooks[0]
        assert config.warnings == layer.hooks.warnings
    # permissions: this file's rules, with their source and scope
    engine = build_engine(loaded, cwd=project, home=tmp_path / "home")
    rules = {(r.kind, r.text, r.source, r.scope) for r in engine.rules}
    assert ("allow", "Bash(make test)", str(layer.path), "project") in rules
    assert ("deny", "WebFetch", str(layer.path), "project") in rules
    # MCP: the layer's section, expanded against the session's environment
    found = discover(cwd=project, home=tmp_path / "home", layers=loaded.layers, env={}, trusted=True)
    assert found.servers["docs"].args == ("--port", "7") and found.servers["docs"].scope == "project"
    assert Approval.from_layers([layer.mcp]).status("a") == "approved"
    # plugins: enabledPlugins through the marketplace the layer declared
    plugins, warnings = find_plugins([], loaded.layers)
    assert [p.root for p in plugins] == [market / "tidy"] and warnings == []
    assert plugin_roots([], loaded.layers) == [market / "tidy"]


def test_a_layer_built_from_data_is_parsed_the_same_way(tmp_path: Path) -> None:
    layer = SettingsLayer(tmp_path / "s.json", "user", {"hooks": {"Stop": [{"hooks": [{"command": "x"}]}]}})
    assert [h.scope for h in layer.hooks.hooks] == ["user"] and layer.hooks.warnings == []
    assert not layer.mcp.declared and layer.plugins.enabled == {}
    assert layer.settings.permissions.allow == []


def test_an_untrusted_project_layer_has_no_hook_section(project: Path, tmp_path: Path) -> None:
    _write(project / ".keel" / "settings.json", _settings(project))
    loaded = load_settings(project, home=tmp_path / "home", keel_home=tmp_path / "kh", trusted_project=False)
    (layer,) = loaded.layers
    assert layer.hooks.hooks == [] and layer.hooks.warnings == []  # narrowed: nothing of it runs, nothing warns
    assert not layer.mcp.declared and layer.plugins.enabled == {}
    assert layer.settings.permissions.deny == ["WebFetch"] and layer.settings.permissions.allow == []


def test_a_malformed_hook_warns_once_per_session_and_once_per_listing(
    keel: Callable[..., KeelRun], project: Path, fake_llm: Callable[[Any], Any]
) -> None:
    from kit import wire_env

    _write(project / ".keel" / "settings.json", _settings(project))
    server = fake_llm(["done"])
    env = wire_env(server, "anthropic")
    assert keel("trust", env=env).code == 0
    run = keel("-p", "hi", env=env)
    assert run.code == 0 and "done" in run.stdout
    assert run.stderr.count(BAD_HOOK) == 1 and run.stderr.count("'NoSuchEvent'") == 1
    listing = keel("hooks", "list", env=env)
    assert listing.code == 0
    assert (listing.stdout + listing.stderr).count(BAD_HOOK) == 1


def test_the_sandbox_key_is_parsed_once_from_the_merged_settings(project: Path, tmp_path: Path) -> None:
    from agentkeel.policy.sandbox import status

    _write(tmp_path / "kh" / "settings.json", {"sandbox": {"filesystem": {"denyRead": ["~/.aws"]}}})
    _write(project / ".keel" / "settings.json", {"sandbox": {"enabled": "yes", "bogus": 1, "excludedCommands": ["x"]}})
    loaded = load_settings(project, home=tmp_path / "home", keel_home=tmp_path / "kh")
    config = loaded.sandbox
    # lists and objects merge across layers; a wrong value keeps the safe default, with a warning
    assert config.enabled is False and config.excluded_commands == ("x",) and config.deny_read == ("~/.aws",)
    assert config.warnings == (
        "settings: 'sandbox.enabled' must be true or false; ignored",
        "settings: unknown key 'sandbox.bogus' ignored",
    )
    # the sandbox's readers take the parsed config as it is
    report = status(config, cwd=project, home=tmp_path / "home", keel_home=tmp_path / "kh")
    assert report["enabled"] is False and report["warnings"] == list(config.warnings)
